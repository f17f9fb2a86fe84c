#!/bin/sh
# bench_motif.sh — `make bench-motif DIR=...`: the published Motif shapes in bf16 through
# probe with --maps none (docs/format.md "Motif"): Motif-2.6B (5.2 GB, V1 pairs) on a
# 2048-token prompt and Motif-2-12.7B (25.4 GB, grouped differential attention, more
# than this machine's memory) on a 1024-token prompt. Each model is written once,
# streaming (bench/make_big_model.py), into DIR and reused; delete DIR when done.
# Reports peak RSS (/usr/bin/time -v) against the weight files, time and GFLOP/s.
#
# Environment: BIN (default bin), DIR (required), THREADS (default 2), MODELS (default
# "Motif-2.6B:2048 Motif-2-12.7B-Base:1024": shape:tokens pairs).
set -eu

BIN=${BIN:-bin}
THREADS=${THREADS:-2}
MODELS=${MODELS:-"Motif-2.6B:2048 Motif-2-12.7B-Base:1024"}
PY=/usr/bin/python3
[ -n "${DIR:-}" ] || { echo "bench_motif: DIR is required" >&2; exit 2; }
[ -x "$BIN/probe" ] || { echo "bench_motif: $BIN/probe not found (run make all first)" >&2; exit 1; }
mkdir -p "$DIR"
for pair in $MODELS; do
    shape=${pair%%:*}
    T=${pair##*:}
    MODEL=$DIR/$shape
    if [ ! -f "$MODEL/config.json" ]; then
        echo "bench_motif: writing $shape to $MODEL (once)" >&2
        $PY bench/make_big_model.py "$MODEL" --shape "$shape" --dtype bf16 || exit 1
    fi
    $PY - "$DIR/prompt_$T.jsonl" "$T" <<'PYEOF'
import json, sys
import numpy as np
path, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(25)
toks = [int(t) for t in rng.integers(0, 219520, n)]
with open(path, "w") as f:
    f.write(json.dumps({"id": "motif-T%d" % n, "tokens": toks}) + "\n")
PYEOF
    free -m >&2
    /usr/bin/time -v "$BIN/probe" --model "$MODEL" --prompts "$DIR/prompt_$T.jsonl" --out "$DIR/$shape.h5" \
        --force --threads "$THREADS" --maps none 2>"$DIR/$shape.log" || { cat "$DIR/$shape.log" >&2; exit 1; }
    line=$(grep 'probe: wrote' "$DIR/$shape.log" | tail -n 1)
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$DIR/$shape.log")
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$DIR/$shape.log")
    cpu=$(sed -n 's/.*User time (seconds): //p' "$DIR/$shape.log")
    mb=$(du -cm "$MODEL"/*.safetensors | tail -n 1 | cut -f1)
    echo
    echo "$shape, bf16 ($mb MB of weights), T=$T, $THREADS threads, --maps none"
    echo "$line"
    echo "peak RSS: $((rss / 1024)) MiB ($(awk "BEGIN { printf \"%.2f\", $rss / 1024 / $mb }") x the weights);" \
         "wall clock (load + forward + dump): $wall; user CPU: $cpu s"
done
echo "(the models stay in $DIR for another run: delete them when done)"
