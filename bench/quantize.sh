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
# Each configuration runs REPEATS times as separate processes; the best forward time
# (probe's own "forward" figure) and the best load time (wall time of the process minus its
# forward: reading the model, the weight pass, the dump) count. Ratios are against the
# unquantized run of the same invocation.
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

# one configuration: prints "forward load" (best of REPEATS, seconds)
run() {
    best_f="" best_l=""
    i=0
    while [ $i -lt "$REPEATS" ]; do
        t0=$($PY -c 'import time; print(time.time())')
        # shellcheck disable=SC2086  # $1 is empty or "--quantize SPEC"
        line=$("$BIN/probe" --model "$MODEL" --prompts "$P" --out "$OUT/quantize.h5" --force --threads "$THREADS" \
            $1 2>&1 | grep 'forward') || die "probe $1 failed"
        t1=$($PY -c 'import time; print(time.time())')
        f=$(echo "$line" | sed -n 's/.*forward \([0-9.]*\) s.*/\1/p')
        l=$($PY -c "print('%.3f' % ($t1 - $t0 - $f))")
        best_f=$($PY -c "print(min([x for x in ('$best_f', '$f') if x], key=float))")
        best_l=$($PY -c "print(min([x for x in ('$best_l', '$l') if x], key=float))")
        i=$((i + 1))
    done
    echo "$best_f $best_l"
}

echo "## probe --quantize on the bench model (T = $T, $THREADS threads, best of $REPEATS; $(lscpu | sed -n 's/^Model name: *//p'), machine shared)"
echo
echo "| --quantize | forward s | forward ratio | load s | target |"
echo "|---|---|---|---|---|"
set -- "" "none" \
    "weights=8" "weights ≤ 1.10×" \
    "weights=4:group=128:asym" "weights ≤ 1.10×" \
    "weights=4:head:embed" "weights ≤ 1.10×" \
    "rotate" "(rotation)" \
    "acts=8" "acts ≤ 1.3×" \
    "acts=8:tensor" "acts ≤ 1.3×" \
    "kv=8" "KV ≤ 1.3×" \
    "kv=4:hadamard" "KV ≤ 1.3×" \
    "rotate,weights=4,acts=8,kv=8:hadamard" "(all)"
base=""
while [ $# -gt 1 ]; do
    spec=$1 target=$2
    shift 2
    if [ -n "$spec" ]; then r=$(run "--quantize $spec"); else r=$(run ""); fi
    f=${r% *} l=${r#* }
    [ -n "$base" ] || base=$f
    ratio=$($PY -c "print('%.3f' % ($f / $base))")
    echo "| ${spec:-(none)} | $f | ${ratio}× | $l | $target |"
done
rm -f "$OUT/quantize.h5"
