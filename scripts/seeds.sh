#!/bin/sh
# seeds.sh — the demo protocol over seeds (`make demo-models`; demo/README.md):
#   1. per seed, the matched Transformer / Diff pair (train --pair OUT --seeds S), keeping
#      the model of every evaluated step (--keep-every), and the Diff model with lambda
#      held at 0 (--ablate-lambda) in OUT/seed-S/diff_lambda0;
#   2. the summary over seeds: OUT/seeds_curves.csv, seeds_steps_to.csv/.md, seeds.png;
#   3. the mechanisms at matched skill and at the end: OUT/mechanisms.md/.csv
#      (scripts/mechanisms.py).
# Resumable: run it again after an interruption and every run continues where its last
# checkpoint left it (finished runs are skipped).
#
# usage: scripts/seeds.sh OUT [SEEDS]        (SEEDS default 1,2,3)
# env:   BIN (bin), JOBS (2: seeds trained at once), THREADS (1 per run), LEVEL (0.5),
#        STOP (3000: steps trained of the 6000-step schedule; 6000 finishes it),
#        ABL_STOP (1500: steps of the lambda ablation, same schedule),
#        EXTRA (train flags appended to the protocol's, e.g. "--steps 600" for a quick look)
set -eu
BIN=${BIN:-bin}
[ $# -ge 1 ] || { echo "usage: scripts/seeds.sh OUT [SEEDS]" >&2; exit 2; }
OUT=$1
SEEDS=${2:-1,2,3}
JOBS=${JOBS:-2}
THREADS=${THREADS:-1}
LEVEL=${LEVEL:-0.5}
STOP=${STOP:-3000}
ABL_STOP=${ABL_STOP:-1500}
EXTRA=${EXTRA:-}

# The protocol: 64-token samples, 4 needles of 2 digits, 4 queries, lr 1e-3 for both
# models (at 3e-3 the Transformer stays at chance; demo/README.md), a cosine schedule
# over 6000 steps of which the first STOP are trained (the budget: 3000 shows both
# plateaus; a later run with STOP=6000 continues the same runs to the end). The lambda
# ablation trains ABL_STOP steps of the same schedule (the budget ran out; the full Diff
# model passes 90% within 700 steps in every seed).
TASK="--seq 64 --needles 4 --queries 4 --digits 2"
OPT="--lr 1e-3 --steps 6000 --warmup 200 --batch 16"
RUN="--eval-every 100 --keep-every 100 --ckpt-every 500 --threads $THREADS --quiet"
ABL="$RUN"
[ "$STOP" -lt 6000 ] && RUN="$RUN --stop-at $STOP"
[ "$ABL_STOP" -lt 6000 ] && ABL="$ABL --stop-at $ABL_STOP"
RUN="$RUN $EXTRA"
ABL="$ABL $EXTRA"

mkdir -p "$OUT"
seed_runs() {   # the pair and the ablation of one seed
    s=$1
    "$BIN/train" --pair "$OUT" --seeds "$s" $TASK $OPT $RUN --resume > "$OUT/seed-$s.log" 2>&1
    a="$OUT/seed-$s/diff_lambda0"
    if [ -f "$a/checkpoint.safetensors" ]; then r=--resume; else r=--force; fi
    "$BIN/train" --out "$a" --type diff_transformer --heads 2 --ablate-lambda --seed "$s" $TASK $OPT $ABL $r \
        >> "$OUT/seed-$s.log" 2>&1
}

# JOBS lanes, each training its share of the seeds one after the other
start=$(date +%s)
lanes=""
for j in $(seq 0 $((JOBS - 1))); do
    mine=$(echo "$SEEDS" | tr ',' '\n' | awk -v j="$j" -v n="$JOBS" 'NR % n == j % n')
    [ -n "$mine" ] || continue
    ( for s in $mine; do echo "seeds: seed $s ($(date -u +%H:%M:%S))"; seed_runs "$s"; done ) &
    lanes="$lanes $!"
done
status=0
for pid in $lanes; do wait "$pid" || status=1; done
[ $status -eq 0 ] || { echo "seeds: a training run failed (see $OUT/seed-*.log)" >&2; exit 1; }
echo "seeds: training done in $(( $(date +%s) - start )) s ($JOBS runs at once, $THREADS thread(s) each)"

"$BIN/train" --pair "$OUT" --seeds "$SEEDS" --summarize $TASK $OPT --quiet $EXTRA
/usr/bin/python3 "$(dirname "$0")/mechanisms.py" --runs "$OUT" --seeds "$SEEDS" --level "$LEVEL" --bin "$BIN" \
    --threads "$THREADS" > /dev/null
echo "seeds: wrote $OUT/seeds_steps_to.md, seeds_curves.csv, seeds.png, mechanisms.md"
