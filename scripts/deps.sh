#!/bin/sh
# deps.sh — make sure the Debian packages difflens needs are installed.
#   scripts/deps.sh          install what is missing (as root), or print the command
#   scripts/deps.sh --check  exit 0 when everything is there, 1 otherwise (prints nothing)
#   scripts/deps.sh --bench  also the packages `make bench` needs (PyTorch, matplotlib)
set -eu

BUILD="gcc make pkg-config libhdf5-dev libpng-dev libcmocka-dev libopenblas-dev libopenblas-openmp-dev libcjson-dev zlib1g-dev libdeflate-dev"
TEST="python3 python3-numpy python3-h5py python3-xarray python3-h5netcdf"
FUZZ="clang libclang-rt-14-dev"
BENCH="python3-torch python3-matplotlib time"

mode=${1:-install}
want="$BUILD $TEST"
case "$mode" in
    --check|install) ;;
    --bench) want="$want $BENCH" ;;
    --fuzz) want="$want $FUZZ" ;;
    *) echo "usage: scripts/deps.sh [--check|--bench|--fuzz]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0
[ "$mode" = "--check" ] && exit 1

if [ "$(id -u)" -ne 0 ]; then
    echo "difflens needs these Debian packages:$missing" >&2
    echo "run as root:  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2 || true
apt-get install -y -q --no-install-recommends $missing >&2
