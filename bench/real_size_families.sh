#!/bin/sh
# real_size_families.sh — part of `make bench`: probe against the PyTorch eager forward
# (bench/torch_families.py) on the full-size GPT-2 small (124M: 12 layers, hidden 768,
# 12 heads, n_positions 1024, F32 as published) and Pythia-1B (16 layers, hidden 2048,
# 8 heads, rotary_pct 0.25, parallel residual, F16 as published) shapes, random weights,
# the published config key for key (bench/make_big_model.py): logits agreement on a short
# prompt, then forward time, GFLOP/s, their ratio and both sides' peak resident memory.
#
#   BIN=bin OUT=build/bench sh bench/real_size_families.sh
#
# Environment: BIN (default bin), OUT (default build/bench), THREADS (default 2), REPEATS
# (default 1; the best run counts). T is each shape's context: 1024 (GPT-2's n_positions)
# and 2048 (Pythia's max_position_embeddings). Needs about 6 GB free for Pythia's torch side.
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-1}
PY=/usr/bin/python3

die() { echo "real_size_families: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (scripts/deps.sh --bench installs it)"
mkdir -p "$OUT"
rss_mb() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" | awk '{ printf "%.0f", $1 / 1024 }'; }

# shape dtype T vocab
for spec in "gpt2 f32 1024 50257" "pythia-1b f16 2048 50304"; do
    set -- $spec
    shape=$1 dtype=$2 T=$3 V=$4
    model=$OUT/$shape
    if [ ! -f "$model/config.json" ]; then
        echo "real_size_families: writing the $shape-shaped model to $model" >&2
        $PY bench/make_big_model.py "$model" --shape "$shape" --dtype "$dtype" || die "make_big_model.py failed"
    fi
    for n in 64 "$T"; do
        $PY -c "import json, sys; import numpy as np
rng = np.random.default_rng($n)
print(json.dumps({'id': '$shape-T$n', 'tokens': [int(t) for t in rng.integers(0, $V, $n)]}))" \
            > "$OUT/${shape}_prompt_$n.jsonl"
    done
    "$BIN/probe" --model "$model" --prompts "$OUT/${shape}_prompt_64.jsonl" --out "$OUT/${shape}_agree.h5" --force \
        --threads "$THREADS" --save-logits --quiet || die "probe --save-logits failed on $shape"
    agreement=$(OPENBLAS_NUM_THREADS=$THREADS $PY bench/torch_families.py check --model "$model" \
        --prompts "$OUT/${shape}_prompt_64.jsonl" --dump "$OUT/${shape}_agree.h5" --threads "$THREADS") ||
        { echo "$agreement" >&2; die "torch and difflens disagree on $shape"; }
    best_s="" best_g="" best_rss=""
    i=0
    while [ "$i" -lt "$REPEATS" ]; do
        /usr/bin/time -v "$BIN/probe" --model "$model" --prompts "$OUT/${shape}_prompt_$T.jsonl" \
            --out "$OUT/${shape}.h5" --force --threads "$THREADS" --maps none 2>"$OUT/${shape}_probe.log" ||
            { cat "$OUT/${shape}_probe.log" >&2; die "probe failed on $shape"; }
        set -- $(sed -n 's/.*forward \([0-9.]*\) s ([0-9.]* tok\/s, \([0-9.]*\) GFLOP\/s).*/\1 \2/p' \
            "$OUT/${shape}_probe.log")
        [ $# -eq 2 ] || die "no forward time in $OUT/${shape}_probe.log"
        rss=$(rss_mb "$OUT/${shape}_probe.log")
        if [ -z "$best_s" ] || awk "BEGIN{exit !($1 < $best_s)}"; then best_s=$1 best_g=$2; fi
        if [ -z "$best_rss" ] || [ "$rss" -gt "$best_rss" ]; then best_rss=$rss; fi
        i=$((i + 1))
    done
    OPENBLAS_NUM_THREADS=$THREADS /usr/bin/time -v $PY bench/torch_families.py time --model "$model" \
        --prompts "$OUT/${shape}_prompt_$T.jsonl" --repeats "$REPEATS" --threads "$THREADS" \
        >"$OUT/${shape}_torch.out" 2>"$OUT/${shape}_torch.log" ||
        { cat "$OUT/${shape}_torch.log" >&2; die "torch_families.py failed on $shape"; }
    torch_s=$(sed -n 's/.*best_s=\([0-9.]*\).*/\1/p' "$OUT/${shape}_torch.out")
    [ -n "$torch_s" ] || die "no time in $OUT/${shape}_torch.out"
    torch_rss=$(rss_mb "$OUT/${shape}_torch.log")
    echo
    echo "full-size $shape shape, $dtype weights, T=$T, $THREADS threads, best of $REPEATS"
    printf '%-14s %10s %10s %14s\n' side "forward s" "GFLOP/s" "peak RSS MiB"
    printf '%-14s %10.2f %10.1f %14s\n' difflens "$best_s" "$best_g" "$best_rss"
    awk -v s="$best_s" -v g="$best_g" -v t="$torch_s" -v r="$torch_rss" \
        'BEGIN { printf "%-14s %10.2f %10.1f %14s\n", "torch eager", t, g * s / t, r;
                 printf "speed-up of difflens over torch: %.2fx\n", t / s }'
    echo "$agreement"
done
