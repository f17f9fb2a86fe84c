#!/bin/sh
# real_size.sh — part of `make bench`: probe against the PyTorch eager forward on the
# full-size Llama-3.2-1B shape (16 layers, hidden 2048, 32 heads / 8 kv heads, FFN 8192,
# vocab 128256, tied embeddings, llama3 RoPE), bf16 weights as published, one prompt of
# T tokens: forward time, GFLOP/s, their ratio, and both sides' peak resident memory.
#
#   BIN=bin OUT=build/bench sh bench/real_size.sh
#
# Environment: BIN (default bin), OUT (default build/bench), THREADS (default 2), T_BIG
# (default 2048), BIG_REPEATS (default 1; the best run counts). The 2.5 GB model is
# written once, streaming, into $OUT/llama-3.2-1b by bench/make_big_model.py (random
# weights, the published config key for key). probe runs with --maps none; torch
# (bench/torch_llama.py) loads the weights as f32, as a user of torch on CPU would.
# Peak RSS comes from /usr/bin/time -v. Needs about 8 GB of free memory for the torch side.
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
T=${T_BIG:-2048}
REPEATS=${BIG_REPEATS:-1}
PY=/usr/bin/python3
MODEL=$OUT/llama-3.2-1b

die() { echo "real_size: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (scripts/deps.sh --bench installs it)"
mkdir -p "$OUT"
if [ ! -f "$MODEL/config.json" ]; then
    echo "real_size: writing the Llama-3.2-1B-shaped model (2.5 GB) to $MODEL" >&2
    $PY bench/make_big_model.py "$MODEL" --shape Llama-3.2-1B --dtype bf16 || die "make_big_model.py failed"
fi
for n in 64 "$T"; do
    $PY - "$OUT/big_prompt_$n.jsonl" "$n" <<'PYEOF'
import json, sys
import numpy as np
path, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(n)
toks = [128000] + [int(t) for t in rng.integers(0, 128256, n - 1)]   # BOS first
with open(path, "w") as f:
    f.write(json.dumps({"id": "big-T%d" % n, "tokens": toks}) + "\n")
PYEOF
done

# peak RSS in MiB from a /usr/bin/time -v log
rss_mb() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" | awk '{ printf "%.0f", $1 / 1024 }'; }

# the two sides compute the same thing: logits on a short prompt
"$BIN/probe" --model "$MODEL" --prompts "$OUT/big_prompt_64.jsonl" --out "$OUT/big_agree.h5" --force \
    --threads "$THREADS" --save-logits --quiet || die "probe --save-logits failed"
agreement=$(OPENBLAS_NUM_THREADS=$THREADS $PY bench/torch_llama.py check --model "$MODEL" \
    --prompts "$OUT/big_prompt_64.jsonl" --dump "$OUT/big_agree.h5" --threads "$THREADS") ||
    { echo "$agreement" >&2; die "torch and difflens disagree on the 1B model"; }

best_s="" best_g="" best_rss=""
i=0
while [ "$i" -lt "$REPEATS" ]; do
    /usr/bin/time -v "$BIN/probe" --model "$MODEL" --prompts "$OUT/big_prompt_$T.jsonl" --out "$OUT/big.h5" \
        --force --threads "$THREADS" --maps none 2>"$OUT/big_probe.log" || { cat "$OUT/big_probe.log" >&2; die "probe failed"; }
    set -- $(sed -n 's/.*forward \([0-9.]*\) s ([0-9.]* tok\/s, \([0-9.]*\) GFLOP\/s).*/\1 \2/p' "$OUT/big_probe.log")
    [ $# -eq 2 ] || die "no forward time in $OUT/big_probe.log"
    rss=$(rss_mb "$OUT/big_probe.log")
    echo "real_size: probe T=$T forward $1 s, $2 GFLOP/s, peak RSS $rss MiB" >&2
    if [ -z "$best_s" ] || awk "BEGIN{exit !($1 < $best_s)}"; then best_s=$1 best_g=$2; fi
    if [ -z "$best_rss" ] || [ "$rss" -gt "$best_rss" ]; then best_rss=$rss; fi
    i=$((i + 1))
done
OPENBLAS_NUM_THREADS=$THREADS /usr/bin/time -v $PY bench/torch_llama.py time --model "$MODEL" \
    --prompts "$OUT/big_prompt_$T.jsonl" --repeats "$REPEATS" --threads "$THREADS" \
    >"$OUT/big_torch.out" 2>"$OUT/big_torch.log" || { cat "$OUT/big_torch.log" >&2; die "torch_llama.py failed"; }
torch_s=$(sed -n 's/.*best_s=\([0-9.]*\).*/\1/p' "$OUT/big_torch.out")
[ -n "$torch_s" ] || die "no time in $OUT/big_torch.out"
torch_rss=$(rss_mb "$OUT/big_torch.log")

echo
echo "full-size Llama-3.2-1B shape, bf16 file $(du -m "$MODEL/model.safetensors" | cut -f1) MB, T=$T, $THREADS threads, best of $REPEATS"
printf '%-14s %10s %10s %14s\n' side "forward s" "GFLOP/s" "peak RSS MiB"
printf '%-14s %10.2f %10.1f %14s\n' difflens "$best_s" "$best_g" "$best_rss"
awk -v s="$best_s" -v g="$best_g" -v t="$torch_s" -v r="$torch_rss" \
    'BEGIN { printf "%-14s %10.2f %10.1f %14s\n", "torch eager", t, g * s / t, r;
             printf "speed-up of difflens over torch: %.2fx\n", t / s }'
# issue 34's target, and the share of the machine's sgemm rate on this shape's projections:
# the faster of OpenBLAS's (bench/sgemm_rate.c, which bench/run.sh builds) and difflens' own
# product (bench/gemm_shapes.c, which make bench builds); 2 repeats: the LM head is 1 TFLOP
sg="" dg=""
[ -x "$OUT/sgemm_rate" ] && sg=$("$OUT/sgemm_rate" "$T" 2048 8192 128256 16 "$THREADS" 2 2>"$OUT/big_sgemm.log")
[ -x "${BUILD:-build}/bench/gemm_shapes" ] &&
    dg=$("${BUILD:-build}/bench/gemm_shapes" "$T" 2048 8192 128256 16 "$THREADS" 2 2>"$OUT/big_gemm.log")
awk -v s="$best_s" -v t="$torch_s" -v g="$best_g" -v sg="$sg" -v dg="$dg" 'BEGIN {
    printf "target: difflens >= 2x torch eager on this shape: %.2fx, %s\n", t / s, (t / s >= 2 ? "met" : "NOT met");
    if (sg != "") printf "OpenBLAS sgemm on its projection shapes: %.1f GFLOP/s\n", sg;
    if (dg != "") printf "difflens'"'"' own product (dfl_gemm) on them: %.1f GFLOP/s\n", dg;
    best = (sg + 0 > dg + 0) ? sg : dg;
    if (best != "") printf "difflens at %.0f%% of the faster, the machine'"'"'s sgemm rate\n", 100 * g / best }'
echo "$agreement"
echo "notes: GFLOP/s use difflens' FLOP count for both sides; difflens keeps the bf16 weights"
echo "mapped and converts panels as the matmuls need them, torch holds f32 copies."
