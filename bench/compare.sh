#!/bin/sh
# compare.sh — `make bench` part for compare: bin/compare's KLD block on two dumps of
# PROMPTS prompts x TOKENS tokens of bench/run.sh's model (llama 8L/512/8H, vocab 32000),
# both with --save-logits f16 (the other also --quantize-logits 4), against the same
# reduction in h5py + numpy (bench/compare_np.py; in float64, the precision bin/compare
# accumulates in, and in float32), after checking that they agree.
#
#   BIN=bin sh bench/compare.sh
#
# Environment: BIN (default bin), OUT (work folder, default build/bench), REPEATS (default
# 3), PROMPTS (default 100), TOKENS (default 512), THREADS (default 2). The dumps (2 x
# PROMPTS x TOKENS x 32000 x 2 bytes: 6.6 GB at the defaults) are written once and reused.
# bin/compare runs REPEATS times as separate processes, numpy REPEATS times in one
# process (imports not counted); the best wall time counts, with a warm page cache when
# the dumps fit in memory.
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
REPEATS=${REPEATS:-3}
PROMPTS=${PROMPTS:-100}
TOKENS=${TOKENS:-512}
THREADS=${THREADS:-2}
PY=/usr/bin/python3

die() { echo "bench compare: $*" >&2; exit 1; }
for t in compare probe; do [ -x "$BIN/$t" ] || die "$BIN/$t not found (run make all first)"; done
mkdir -p "$OUT"

# ---------------------------------------------------------------- inputs, once
MODEL=$OUT/model
ARGS="--type llama --layers 8 --hidden 512 --heads 8 --ffn 1408 --vocab 32000 --dtype f32 --seed 1 --max-pos 4096"
if [ ! -f "$MODEL/model.safetensors" ] || [ "$(cat "$MODEL/.args" 2>/dev/null)" != "$ARGS" ]; then
    rm -rf "$MODEL"
    # shellcheck disable=SC2086  # ARGS is a word list
    $PY tests/ref/make_model.py "$MODEL" $ARGS >/dev/null
    echo "$ARGS" > "$MODEL/.args"
fi
TAG=${PROMPTS}x$TOKENS
P=$OUT/compare_$TAG.jsonl
if [ ! -f "$P" ]; then
    $PY - "$P" "$PROMPTS" "$TOKENS" <<'PYEOF'
import json, os, sys
import numpy as np
path, n, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(7)
with open(path + ".tmp", "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": "c%d" % i, "tokens": [0] + [int(t) for t in rng.integers(1, 32000, T - 1)]}) + "\n")
os.replace(path + ".tmp", path)
PYEOF
fi
for side in base q4; do
    D=$OUT/compare_${TAG}_$side.h5
    [ -f "$D" ] && continue
    extra=""
    [ $side = q4 ] && extra="--quantize-logits 4"
    echo "bench compare: probing $PROMPTS x $TOKENS tokens into $D" >&2
    # shellcheck disable=SC2086  # extra is a word list
    "$BIN/probe" --model "$MODEL" --prompts "$P" --out "$D.tmp.h5" --maps none --save-logits f16 $extra \
        --threads "$THREADS" --force --quiet || die "probe failed"
    mv "$D.tmp.h5" "$D"
done
B=$OUT/compare_${TAG}_base.h5
Q=$OUT/compare_${TAG}_q4.h5

# best wall time and best CPU time (user + system) of a command over REPEATS runs
best_of() {
    $PY - "$REPEATS" "$@" <<'PYEOF'
import resource, subprocess, sys, time
best = cpu = None
for _ in range(int(sys.argv[1])):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit(r.stderr.decode())
    t = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    c = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    best = t if best is None or t < best else best
    cpu = c if cpu is None or c < cpu else cpu
print("%.3f %.3f" % (best, cpu))
PYEOF
}

"$BIN/compare" "$B" "$Q" --format json > "$OUT/compare_$TAG.json" || die "bin/compare failed"
set -- $(OMP_NUM_THREADS=$THREADS best_of "$BIN/compare" "$B" "$Q") || die "bin/compare failed"
ours=$1 ours_cpu=$2
set -- $($PY bench/compare_np.py "$B" "$Q" "$REPEATS" float64 "$OUT/compare_$TAG.json") || die "numpy disagrees"
np64=$1 np64_cpu=$2
set -- $($PY bench/compare_np.py "$B" "$Q" "$REPEATS" float32 "$OUT/compare_$TAG.json") || die "numpy disagrees"
np32=$1 np32_cpu=$2
r() { awk "BEGIN{printf \"%.2fx\", $1 / $2}"; }
echo
echo "compare: KLD block of $PROMPTS prompts x $TOKENS tokens, vocab 32000, f16 logits ($(du -m "$B" | cut -f1) MB per dump),"
echo "best of $REPEATS, seconds (wall / CPU = user + system), $THREADS threads for compare"
printf '%-22s %10s %10s %12s %12s\n' "" wall CPU "wall ratio" "CPU ratio"
printf '%-22s %10s %10s %12s %12s\n' "bin/compare" "$ours" "$ours_cpu" "" ""
printf '%-22s %10s %10s %12s %12s\n' "h5py + numpy float64" "$np64" "$np64_cpu" "$(r "$np64" "$ours")" \
    "$(r "$np64_cpu" "$ours_cpu")"
printf '%-22s %10s %10s %12s %12s\n' "h5py + numpy float32" "$np32" "$np32_cpu" "$(r "$np32" "$ours")" \
    "$(r "$np32_cpu" "$ours_cpu")"
echo "notes: ratio = numpy / compare on the same two dumps (> 1: compare is faster); numbers checked equal first"
echo "(Mean KLD, Mean PPL(Q), Same top p); CPU times count every thread (compare's OpenMP threads wait"
echo "spinning, which counts); on a shared machine the CPU ratio is the steadier one."
