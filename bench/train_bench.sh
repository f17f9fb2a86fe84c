#!/bin/sh
# train_bench.sh — training throughput of bin/train against PyTorch eager on the same work:
# a llama model (the calibration size of docs/format.md "Needle task" by default: 2 layers, hidden 128, 4 heads, FFN 512,
# vocab 128), batch 16 x 256 tokens, one step = forward + cross-entropy over every token +
# backward + gradient clipping + AdamW, f32, $THREADS threads on both sides.
#
#   BIN=bin sh bench/train_bench.sh        (the lead calls it from bench/run.sh)
#
# Environment: BIN (default bin), OUT (work folder, default build/bench), THREADS (default 2),
# STEPS (timed steps per side, default 10), REPEATS (runs per side, best counts, default 2),
# and the shape: LAYERS HIDDEN HEADS FFN VOCAB SEQ BATCH.
# difflens: bin/train's "steady" rate (training steps only, the first step excluded: it
# touches fresh memory). torch: bench/torch_train.py (2 untimed warm-up steps, then STEPS).
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
REPEATS=${REPEATS:-2}
LAYERS=${LAYERS:-2} HIDDEN=${HIDDEN:-128} HEADS=${HEADS:-4} FFN=${FFN:-512} VOCAB=${VOCAB:-128}
SEQ=${SEQ:-256} BATCH=${BATCH:-16}
PY=/usr/bin/python3

die() { echo "train_bench: $*" >&2; exit 1; }
[ -x "$BIN/train" ] || die "$BIN/train not found (run make all first)"
mkdir -p "$OUT"
load_before=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")

best_c=0 best_t=0
i=0
while [ "$i" -lt "$REPEATS" ]; do
    i=$((i + 1))
    # difflens: the summary line ends in "... steady R tok/s), ..."
    OMP_NUM_THREADS=$THREADS "$BIN/train" --out "$OUT/train_bench" --force --type llama --layers "$LAYERS" \
        --hidden "$HIDDEN" --heads "$HEADS" --ffn "$FFN" --vocab "$VOCAB" --seq "$SEQ" --batch "$BATCH" \
        --steps $((STEPS + 1)) --loss all --eval-every 0 --eval-samples 1 --warmup 1 --threads "$THREADS" \
        2>"$OUT/train_bench.log" || { cat "$OUT/train_bench.log" >&2; die "bin/train failed"; }
    c=$(sed -n 's/.*steady \([0-9.]*\) tok\/s.*/\1/p' "$OUT/train_bench.log" | tail -n 1)
    [ -n "$c" ] || die "no rate in $OUT/train_bench.log"
    t=$(OPENBLAS_NUM_THREADS=$THREADS $PY bench/torch_train.py --layers "$LAYERS" --hidden "$HIDDEN" --heads "$HEADS" \
        --ffn "$FFN" --vocab "$VOCAB" --seq "$SEQ" --batch "$BATCH" --steps "$STEPS" --threads "$THREADS" |
        sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')
    [ -n "$t" ] || die "bench/torch_train.py failed"
    best_c=$(awk -v a="$best_c" -v b="$c" 'BEGIN { print (b > a ? b : a) }')
    best_t=$(awk -v a="$best_t" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
done
load_after=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")

echo
echo "training throughput: llama L=$LAYERS D=$HIDDEN H=$HEADS F=$FFN V=$VOCAB, batch $BATCH x $SEQ tokens,"
echo "forward + backward + AdamW, f32, $THREADS threads (best of $REPEATS runs of $STEPS steps)"
printf '%-22s %14s\n' "side" "tokens/s"
printf '%-22s %14.0f\n' "difflens bin/train" "$best_c"
printf '%-22s %14.0f\n' "torch eager" "$best_t"
awk -v c="$best_c" -v t="$best_t" 'BEGIN { printf "speed-up: %.2fx (difflens / torch)\n", c / t }'
echo "load average: $load_before before, $load_after after (other work on the machine slows both sides)"
