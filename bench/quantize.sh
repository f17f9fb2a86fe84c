#!/bin/sh
# quantize.sh — `make bench` part for probe --quantize: the forward pass with fake-quantized
# weights, linear inputs, K/V and the QuaRot rotation against the same model's plain
# forward, on the bench model (bench/run.sh: llama, 8 layers, hidden 512, FFN 1408 = 44·32,
# vocab 32000, f32), one prompt of T tokens. Targets (issue 28): weight fake-quant adds at
# most 10% to the forward (it is done once, at load: its cost is the "weight pass" column,
# which also reads the mapped file in), activation and KV quantization at most 1.3×.
#
#   BIN=bin sh bench/quantize.sh
#
# Environment: OUT (work folder, default build/bench, where run.sh keeps the model),
# BUILD (default build), THREADS (default 2), REPEATS (default 5), T (default 1024).
# How: bench/quantize_forward.c (built by make) loads the model once plain and once per
# SPEC with dfl_quant_model applied, then alternates a plain and a quantized pass REPEATS
# times in one process (the load of a shared machine drifts: each pair sees about the
# same); the best of each counts, and the ratios are quantized / plain of the same run, of
# wall time and of CPU time (all threads, OMP_WAIT_POLICY=passive so that idle threads
# sleep instead of spinning: steadier than wall time when the machine is shared).
set -eu

OUT=${OUT:-build/bench}
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-5}
T=${T:-1024}
PY=/usr/bin/python3

die() { echo "bench quantize: $*" >&2; exit 1; }
make -s "$BUILD/bench/quantize_forward" || die "cannot build $BUILD/bench/quantize_forward"
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

echo "## probe --quantize on the bench model (T = $T, $THREADS threads, best of $REPEATS alternating passes; $(lscpu | sed -n 's/^Model name: *//p'), machine shared)"
echo
echo "| --quantize | plain forward s | quantized forward s | ratio (wall) | CPU s plain → quantized | ratio (CPU) | target | weight pass s (CPU s) |"
echo "|---|---|---|---|---|---|---|---|"
OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive "$BUILD/bench/quantize_forward" "$MODEL" "$P" "$REPEATS" \
    weights=8 weights=4:group=128:asym weights=4:head:embed acts=8 acts=8:tensor kv=8 kv=4:hadamard rotate \
    rotate,weights=4,acts=8,kv=8:hadamard |
    while read -r spec plain quant ratio cpu _load wpass wcpu cplain cquant; do
        case $spec in
        rotate*) target="(none)" ;; weights*) target="≤ 1.10×" ;; *) target="≤ 1.3×" ;;
        esac
        echo "| $spec | $plain | $quant | ${ratio}× | $cplain → $cquant | ${cpu}× | $target | $wpass ($wcpu) |"
    done
