#!/bin/sh
# bench_8b.sh — `make bench-8b DIR=...`: a Llama-3-8B-shaped model (hidden 4096, 32
# layers, 32 heads, 8 kv heads, FFN 14336, vocab 128256) in bf16, 16 GB in 4 shards as
# the hub has them, through probe on a 1024-token prompt with --maps none. Reports
# peak RSS (/usr/bin/time -v), time and GFLOP/s. The model is written once, streaming
# (bench/make_big_model.py), into DIR and reused; delete DIR when done.
#
# Environment: BIN (default bin), DIR (required), THREADS (default 2), T (default 1024).
set -eu

BIN=${BIN:-bin}
THREADS=${THREADS:-2}
T=${T:-1024}
PY=/usr/bin/python3
[ -n "${DIR:-}" ] || { echo "bench_8b: DIR is required" >&2; exit 2; }
[ -x "$BIN/probe" ] || { echo "bench_8b: $BIN/probe not found (run make all first)" >&2; exit 1; }
mkdir -p "$DIR"
MODEL=$DIR/llama-3-8b
if [ ! -f "$MODEL/config.json" ]; then
    echo "bench_8b: writing the 16 GB model to $MODEL (once)" >&2
    $PY bench/make_big_model.py "$MODEL" --shape Meta-Llama-3-8B --dtype bf16 || exit 1
fi
$PY - "$DIR/prompt_$T.jsonl" "$T" <<'PYEOF'
import json, sys
import numpy as np
path, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(8)
toks = [128000] + [int(t) for t in rng.integers(0, 128256, n - 1)]
with open(path, "w") as f:
    f.write(json.dumps({"id": "8b-T%d" % n, "tokens": toks}) + "\n")
PYEOF
echo "bench_8b: free memory before the run:" >&2
free -m >&2
/usr/bin/time -v "$BIN/probe" --model "$MODEL" --prompts "$DIR/prompt_$T.jsonl" --out "$DIR/8b.h5" --force \
    --threads "$THREADS" --maps none 2>"$DIR/probe.log" || { cat "$DIR/probe.log" >&2; exit 1; }
line=$(grep 'probe: wrote' "$DIR/probe.log" | tail -n 1)
rss=$(sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$DIR/probe.log")
wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$DIR/probe.log")
cpu=$(sed -n 's/.*User time (seconds): //p' "$DIR/probe.log")
echo
echo "Llama-3-8B shape, bf16 ($(du -cm "$MODEL"/*.safetensors | tail -n 1 | cut -f1) MB), T=$T, $THREADS threads, --maps none"
echo "$line"
echo "peak RSS: $((rss / 1024)) MiB; wall clock (load + forward + dump): $wall; user CPU: $cpu s"
echo "(the model stays in $MODEL for another run: delete it when done)"
