#!/bin/sh
# gguf.sh — GGUF memory and speed: a Llama-3.2-1B-shaped model (16 layers, hidden 2048,
# 32/8 heads, FFN 8192, vocab 128256, tied) in Q4_K (bench/make_big_gguf.py) against the
# same shape in bf16 safetensors (bench/make_big_model.py, without rope scaling), one
# prompt of T tokens, --maps none: forward time of each, their ratio, and peak RSS.
#
#   BIN=bin OUT=build/bench sh bench/gguf.sh        (THREADS default 2, T_BIG default 2048)
set -eu
BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
T=${T_BIG:-2048}
PY=/usr/bin/python3
die() { echo "gguf bench: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || die "/usr/bin/time not found (scripts/deps.sh --bench installs it)"
mkdir -p "$OUT"
Q=$OUT/llama-3.2-1b-q4_k.gguf
B=$OUT/llama-3.2-1b-norope
[ -f "$Q" ] || $PY bench/make_big_gguf.py "$Q" --shape Llama-3.2-1B --type Q4_K || die "make_big_gguf.py failed"
if [ ! -f "$B/config.json" ]; then
    $PY bench/make_big_model.py "$B" --shape Llama-3.2-1B --dtype bf16 || die "make_big_model.py failed"
    $PY - "$B/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); c.pop("rope_scaling", None)
json.dump(c, open(sys.argv[1], "w"), indent=2)
PYEOF
fi
$PY - "$OUT/gguf_prompt.jsonl" "$T" <<'PYEOF'
import json, sys
import numpy as np
rng = np.random.default_rng(7)
toks = [128000] + [int(t) for t in rng.integers(0, 128256, int(sys.argv[2]) - 1)]
open(sys.argv[1], "w").write(json.dumps({"id": "gguf-bench", "tokens": toks}) + "\n")
PYEOF
rss_mb() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" | awk '{ printf "%.0f", $1 / 1024 }'; }
run() {
    /usr/bin/time -v "$BIN/probe" --model "$1" --prompts "$OUT/gguf_prompt.jsonl" --out "$OUT/gguf_$2.h5" --force \
        --threads "$THREADS" --maps none 2>"$OUT/gguf_$2.log" || { cat "$OUT/gguf_$2.log" >&2; die "probe failed on $1"; }
    sed -n 's/.*forward \([0-9.]*\) s.*/\1/p' "$OUT/gguf_$2.log" | head -n 1
}
tq=$(run "$Q" q4k); rq=$(rss_mb "$OUT/gguf_q4k.log")
tb=$(run "$B" bf16); rb=$(rss_mb "$OUT/gguf_bf16.log")
sq=$(du -m "$Q" | cut -f1); sb=$(du -sm "$B" | cut -f1)
echo "gguf: Llama-3.2-1B shape, T=$T, $THREADS threads"
echo "  Q4_K GGUF ($sq MB): forward $tq s, peak RSS $rq MB"
echo "  bf16 safetensors ($sb MB): forward $tb s, peak RSS $rb MB"
awk -v a="$tq" -v b="$tb" 'BEGIN { printf "  forward time Q4_K / bf16 = %.2f\n", a / b }'
