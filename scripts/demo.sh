#!/bin/sh
# demo.sh — `make demo` until trained models ship (train issue): a random-weight
# llama / diff_transformer pair of matched size, probed on a few needle-style prompts,
# with a summary of the dumps. The weights are random: the numbers show the tool
# working, not what a trained Diff Transformer does.
set -eu
BIN=${BIN:-bin}
PY=/usr/bin/python3
OUT=out/demo
mkdir -p "$OUT"

echo "difflens demo: RANDOM-WEIGHT models (untrained), to show the pipeline end to end."
# Matched pair: the Diff model has half the heads, each with two maps of head_dim 32.
$PY tests/ref/make_model.py "$OUT/transformer" --type llama --layers 2 --hidden 128 --heads 4 \
    --ffn 256 --vocab 128 --seed 1 --max-pos 512 >/dev/null
$PY tests/ref/make_model.py "$OUT/diff" --type diff_transformer --layers 2 --hidden 128 --heads 2 \
    --ffn 256 --vocab 128 --seed 1 --max-pos 512 >/dev/null
$PY scripts/demo_prompts.py "$OUT/prompts.jsonl"

for m in transformer diff; do
    "$BIN/probe" --model "$OUT/$m" --prompts "$OUT/prompts.jsonl" --out "$OUT/$m.h5" \
        --maps all --force
done
$PY scripts/demo_summary.py "$OUT/transformer.h5" "$OUT/diff.h5"
echo "files: $OUT/transformer.h5 $OUT/diff.h5 (open them with h5py; see docs/format.md)"
