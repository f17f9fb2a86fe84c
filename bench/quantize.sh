#!/bin/sh
# quantize.sh — `make bench` part for probe --quantize: the forward pass with fake-quantized
# weights, linear inputs, K/V and the QuaRot rotation against the same forward without
# them, on the bench model (bench/run.sh: llama, 8 layers, hidden 512, FFN 1408 = 44·32,
# vocab 32000, f32), one prompt of T tokens. Targets (issue 28): weight fake-quant adds at
# most 10% to the forward (it is done once, at load: its cost is in the load column),
# activation and KV quantization at most 1.3×.
#
#   BIN=bin sh bench/quantize.sh
#
# Environment: BIN (default bin), OUT (work folder, default build/bench, where run.sh keeps
# the model), THREADS (default 2), REPEATS (default 3), T (default 1024).
# Each configuration runs REPEATS times as separate processes, the configurations in turn
# in each round; the best forward time (probe's own "forward" figure) and the best load
# time (wall time of the process minus its forward: reading the model, the weight pass, the
# dump) count. Ratios are against the unquantized runs of the same invocation.
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-3}
T=${T:-1024}
PY=/usr/bin/python3

die() { echo "bench quantize: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
mkdir -p "$OUT"
MODEL=$OUT/model
MODEL_ARGS="--type llama --layers 8 --hidden 512 --heads 8 --ffn 1408 --vocab 32000 --dtype f32 --seed 1 --max-pos 4096"
if [ ! -f "$MODEL/model.safetensors" ] || [ "$(cat "$MODEL/.args" 2>/dev/null)" != "$MODEL_ARGS" ]; then
    rm -rf "$MODEL"
    # shellcheck disable=SC2086  # MODEL_ARGS is a word list
    $PY tests/ref/make_model.py "$MODEL" $MODEL_ARGS >/dev/null
    echo "$MODEL_ARGS" > "$MODEL/.args"
fi
P=$OUT/quantize_prompt_$T.jsonl
[ -f "$P" ] || $PY -c "
import json, sys
import numpy as np
T = int(sys.argv[2])
toks = [int(t) for t in np.random.default_rng(1000 + T).integers(0, 32000, T)]
open(sys.argv[1], 'w').write(json.dumps({'id': 'bench-q', 'tokens': toks}) + '\n')" "$P" "$T"

# one run of one configuration: prints "forward load" (seconds)
run_once() {
    t0=$($PY -c 'import time; print(time.time())')
    # shellcheck disable=SC2086  # $1 is empty or "--quantize SPEC"
    line=$("$BIN/probe" --model "$MODEL" --prompts "$P" --out "$OUT/quantize.h5" --force --threads "$THREADS" \
        $1 2>&1 | grep 'forward') || die "probe $1 failed"
    t1=$($PY -c 'import time; print(time.time())')
    f=$(echo "$line" | sed -n 's/.*forward \([0-9.]*\) s.*/\1/p')
    echo "$f $($PY -c "print('%.3f' % ($t1 - $t0 - $f))")"
}

SPECS="none weights=8 weights=4:group=128:asym weights=4:head:embed rotate acts=8 acts=8:tensor kv=8 kv=4:hadamard
rotate,weights=4,acts=8,kv=8:hadamard"
target() {
    case $1 in
    none) echo "—" ;; weights*) echo "forward ≤ 1.10×" ;; acts*|kv*) echo "≤ 1.3×" ;; *) echo "(no target)" ;;
    esac
}
# the configurations in turn, REPEATS rounds (the machine's load drifts: each round sees
# every configuration); the best of each counts
TIMES=$OUT/quantize_times.txt
: > "$TIMES"
i=0
while [ $i -lt "$REPEATS" ]; do
    for spec in $SPECS; do
        if [ "$spec" = none ]; then r=$(run_once ""); else r=$(run_once "--quantize $spec"); fi
        echo "$spec $r" >> "$TIMES"
    done
    i=$((i + 1))
done

echo "## probe --quantize on the bench model (T = $T, $THREADS threads, best of $REPEATS; $(lscpu | sed -n 's/^Model name: *//p'), machine shared)"
echo
echo "| --quantize | forward s | forward ratio | load s (wall − forward) | load ratio | target |"
echo "|---|---|---|---|---|---|"
for spec in $SPECS; do
    $PY - "$TIMES" "$spec" "$(target "$spec")" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1])]
def best(name, col):
    return min(float(r[col]) for r in rows if r[0] == name)
spec, tgt = sys.argv[2], sys.argv[3]
f, l = best(spec, 1), best(spec, 2)
print("| %s | %.3f | %.3f× | %.3f | %.2f× | %s |" % (spec, f, f / best("none", 1), l, l / best("none", 2), tgt))
EOF
done
rm -f "$OUT/quantize.h5"
