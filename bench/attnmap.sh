#!/bin/sh
# attnmap.sh — `make bench` part for attnmap: a 4096 x 4096 attention map from a dump to a
# 1024 x 1024 heatmap PNG, bin/attnmap against h5py + matplotlib imshow + savefig (Agg) of
# the same array at the same size, in one run; then the same figure as PDF and SVG (time
# and file size).
#
#   BIN=bin sh bench/attnmap.sh
#
# Environment: BIN (default bin), OUT (work folder, default build/bench), REPEATS (default 3),
# T (prompt length, default 4096), SIZE (map pixels, default 1024).
# Inputs, written once and reused: a 1-layer, 1-head llama of hidden 16 (random weights,
# tests/ref/make_model.py) and one prompt of T random tokens, probed with --maps all
# (an f16 map of T x T, chunked and gzip-compressed as probe writes it).
# attnmap runs REPEATS times as separate processes (best wall time counts: process start,
# HDF5 read, pooling, drawing, PNG); matplotlib runs REPEATS times in one process (best of
# read + imshow + savefig; the interpreter and imports are reported apart and not counted).
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
REPEATS=${REPEATS:-3}
T=${T:-4096}
SIZE=${SIZE:-1024}
PY=/usr/bin/python3

die() { echo "bench attnmap: $*" >&2; exit 1; }
[ -x "$BIN/attnmap" ] || die "$BIN/attnmap not found (run make all first)"
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
mkdir -p "$OUT"

# ---------------------------------------------------------------- inputs, once
MODEL=$OUT/attnmap_model
ARGS="--type llama --layers 1 --hidden 16 --heads 1 --ffn 32 --vocab 128 --seed 1 --max-pos $T"
if [ ! -f "$MODEL/model.safetensors" ] || [ "$(cat "$MODEL/.args" 2>/dev/null)" != "$ARGS" ]; then
    rm -rf "$MODEL"
    # shellcheck disable=SC2086  # ARGS is a word list
    $PY tests/ref/make_model.py "$MODEL" $ARGS >/dev/null
    echo "$ARGS" > "$MODEL/.args"
fi
PROMPT=$OUT/attnmap_prompt_$T.jsonl
DUMP=$OUT/attnmap_$T.h5
if [ ! -f "$DUMP" ] || [ "$MODEL/.args" -nt "$DUMP" ]; then
    $PY - "$PROMPT" "$T" <<'PYEOF'
import json, sys
import numpy as np
path, T = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
toks = [0] + [int(t) for t in rng.integers(1, 128, T - 1)]
with open(path, "w") as f:
    f.write(json.dumps({"id": "bench", "tokens": toks, "answer": [[T // 2, T // 2 + 6]],
                        "query": [[T - 8, T - 5]], "target": [[T - 5, T]]}) + "\n")
PYEOF
    echo "bench attnmap: probing a $T-token prompt (maps of 1 layer, 1 head)" >&2
    "$BIN/probe" --model "$MODEL" --prompts "$PROMPT" --out "$DUMP" --maps all --force --quiet ||
        die "probe failed"
fi

now() { date +%s.%N; }
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")

# ------------------------------------------------------------------ timings
best=""
i=0
while [ "$i" -lt "$REPEATS" ]; do
    t0=$(now)
    "$BIN/attnmap" "$DUMP" -o "$OUT/attnmap_c.png" --size "$SIZE" --force --quiet || die "attnmap failed"
    t1=$(now)
    t=$(awk "BEGIN{printf \"%.4f\", $t1 - $t0}")
    echo "bench attnmap:   attnmap $t s" >&2
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    i=$((i + 1))
done
mline=$($PY bench/attnmap_mpl.py "$DUMP" "$OUT/attnmap_mpl.png" --px "$SIZE" --repeats "$REPEATS") ||
    die "attnmap_mpl.py failed"
echo "bench attnmap:   matplotlib $mline" >&2
mpl=$(echo "$mline" | sed -n 's/.*best_s=\([0-9.]*\).*/\1/p')
imp=$(echo "$mline" | sed -n 's/.*import_s=\([0-9.]*\).*/\1/p')
[ -n "$mpl" ] || die "no time in attnmap_mpl.py's output: $mline"

echo
echo "attnmap: ${T} x ${T} f16 map from a dump -> ${SIZE} x ${SIZE} heatmap PNG, best of $REPEATS"
awk -v c="$best" -v m="$mpl" -v i="$imp" 'BEGIN {
    printf "%-34s %10s\n", "", "seconds"
    printf "%-34s %10.3f\n", "difflens attnmap (whole process)", c
    printf "%-34s %10.3f\n", "h5py + matplotlib (read+draw+save)", m
    printf "%-34s %10.3f\n", "  (+ python imports, not counted)", i
    printf "speed-up: %.1fx (target >= 10x)\n", m / c
}'
# the same figure as vector files: one image of the pooled cells inside each (sizes only;
# matplotlib's PDF of a 1024 x 1024 imshow is the comparison a reader would make)
for ext in pdf svg; do
    t0=$(now)
    "$BIN/attnmap" "$DUMP" -o "$OUT/attnmap_c.$ext" --size "$SIZE" --force --quiet || die "attnmap .$ext failed"
    t1=$(now)
    awk -v t="$(awk "BEGIN{print $t1 - $t0}")" -v b="$(wc -c < "$OUT/attnmap_c.$ext")" -v e="$ext" \
        'BEGIN { printf "difflens attnmap -> %s: %.3f s, %.2f MB\n", e, t, b / 1e6 }'
done
echo "load average before the run: $load; now: $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')"
