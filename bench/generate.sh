#!/bin/sh
# generate.sh — part of `make bench`: KV-cached greedy decoding on the Llama-3.2-1B shape
# in bf16 (the model bench/real_size.sh writes: 16 layers, hidden 2048, 32 / 8 kv heads,
# FFN 8192, vocab 128256), difflens against a KV-cached PyTorch loop over the same
# weights (bench/torch_generate.py: bf16, DynamicCache-style concatenation), same run:
#   - decode tokens/s of difflens' plain decoding (bench/decode_plain.c: the KV cache,
#     logits only) and of PyTorch, and their ratio;
#   - the capture cost: probe --generate (lookback ratio, shares, outliers of every
#     generated row; --maps none) against the plain decoding;
#   - the KV cache's bytes per token, and each side's peak RSS (/usr/bin/time -v).
#
#   BIN=bin BUILD=build OUT=build/bench sh bench/generate.sh
#
# Environment: BIN, BUILD, OUT, THREADS (default 2), GEN_NEW (tokens generated, default
# 16), GEN_REPEATS (default 1; the best run counts). Needs about 8 GB of free memory for
# the torch side (it reads the weights as f32 before casting them to bf16).
set -eu

BIN=${BIN:-bin}
BUILD=${BUILD:-build}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
N=${GEN_NEW:-16}
REPEATS=${GEN_REPEATS:-1}
PY=/usr/bin/python3
MODEL=$OUT/llama-3.2-1b

die() { echo "generate: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
[ -x "$BUILD/bench/decode_plain" ] || make -s "$BUILD/bench/decode_plain" || die "cannot build bench/decode_plain"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (scripts/deps.sh --bench installs it)"
mkdir -p "$OUT"
if [ ! -f "$MODEL/config.json" ]; then
    echo "generate: writing the Llama-3.2-1B-shaped model (2.5 GB) to $MODEL" >&2
    $PY bench/make_big_model.py "$MODEL" --shape Llama-3.2-1B --dtype bf16 || die "make_big_model.py failed"
fi
P=$OUT/gen_prompt_64.jsonl
$PY - "$P" <<'PYEOF'
import json, sys
import numpy as np
rng = np.random.default_rng(64)
toks = [128000] + [int(t) for t in rng.integers(0, 128256, 63)]   # BOS first
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"id": "gen-T64", "tokens": toks}) + "\n")
PYEOF
rss_mb() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" | awk '{ printf "%.0f", $1 / 1024 }'; }
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

plain=$(OMP_NUM_THREADS=$THREADS /usr/bin/time -v "$BUILD/bench/decode_plain" "$MODEL" "$P" "$N" "$REPEATS" \
    2>"$OUT/gen_plain.log") || { cat "$OUT/gen_plain.log" >&2; die "decode_plain failed"; }
best_probe=0
i=0
while [ "$i" -lt "$REPEATS" ]; do
    /usr/bin/time -v "$BIN/probe" --model "$MODEL" --prompts "$P" --out "$OUT/gen.h5" --generate "$N" --force \
        --threads "$THREADS" 2>"$OUT/gen_probe.log" || { cat "$OUT/gen_probe.log" >&2; die "probe --generate failed"; }
    r=$(sed -n 's/.*generated [0-9]* tokens (\([0-9.e+]*\) tok\/s decoding).*/\1/p' "$OUT/gen_probe.log")
    best_probe=$(echo "$r $best_probe" | awk '{ print ($1 > $2) ? $1 : $2 }')
    i=$((i + 1))
done
torch=$(OMP_NUM_THREADS=$THREADS /usr/bin/time -v $PY bench/torch_generate.py --model "$MODEL" --prompts "$P" \
    --new "$N" --repeats "$REPEATS" --threads "$THREADS" --dtype bf16 2>"$OUT/gen_torch.log") ||
    { cat "$OUT/gen_torch.log" >&2; die "torch_generate.py failed"; }
rp=$(field "$plain" best_tok_s) rt=$(field "$torch" best_tok_s)
echo "decoding (KV-cached, greedy, Llama-3.2-1B shape, bf16 weights, prompt 64, $N new tokens, $THREADS threads," \
    "best of $REPEATS; $(lscpu | sed -n 's/^Model name: *//p'), a shared machine: ratios only)"
echo "  difflens plain decoding   $rp tok/s   peak RSS $(rss_mb "$OUT/gen_plain.log") MiB"
echo "  PyTorch KV-cached loop    $rt tok/s   peak RSS $(rss_mb "$OUT/gen_torch.log") MiB"
echo "  difflens / PyTorch        $(echo "$rp $rt" | awk '{ printf "%.2fx", $1 / $2 }') (target >= 1.5x)"
echo "  probe --generate (lookback, shares, outliers of every row)  $best_probe tok/s   peak RSS" \
    "$(rss_mb "$OUT/gen_probe.log") MiB"
echo "  capture cost: plain / probe --generate  $(echo "$rp $best_probe" | awk '{ printf "%.2fx", $1 / $2 }')" \
    "(target <= 1.2x)"
echo "  KV cache: $(field "$plain" kv_bytes_per_token) bytes per token (f32 keys and values of 16 layers)"
echo "  first tokens: difflens $(field "$plain" first_ids), PyTorch $(field "$torch" first_ids)"
