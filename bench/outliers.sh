#!/bin/sh
# outliers.sh — `make bench` part for outliers: bin/outliers pooling dumps of 2,000 and
# 20,000 prompts against the time of reading the same datasets — a minimal HDF5 loop
# (bench/outliers_read.c: one H5Dopen + H5Dread per dataset, no checks, no pooling) and
# h5py (bench/outliers_np.py read) — and against h5py + numpy computing the same Table 5
# (bench/outliers_np.py table5, whose numbers are checked equal to bin/outliers').
#
#   BIN=bin sh bench/outliers.sh
#
# Environment: BIN (default bin), OUT (work folder, default build/bench), REPEATS (default
# 3), SAMPLES (dump sizes, default "2000 20000"; multiples of 5), THREADS (probe's, default 2).
# Inputs, written once and reused: a 4-layer llama of hidden 64 and 4 heads (random weights,
# tests/ref/make_model.py), SAMPLES needle prompts of 64 tokens (bin/noise prompts, 5 depths),
# probed with --maps none (each sample: 11 datasets under outliers/ plus tokens; the
# histograms shuffle + deflate). bin/outliers and the C loop run REPEATS times as separate
# processes, h5py REPEATS times in one process (imports not counted); the best wall time
# counts, with a warm page cache (the first run reads the file in).
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
REPEATS=${REPEATS:-3}
SAMPLES=${SAMPLES:-"2000 20000"}
THREADS=${THREADS:-2}
PY=/usr/bin/python3

die() { echo "bench outliers: $*" >&2; exit 1; }
for t in outliers probe noise; do [ -x "$BIN/$t" ] || die "$BIN/$t not found (run make all first)"; done
mkdir -p "$OUT"

# ---------------------------------------------------------------- inputs, once
MODEL=$OUT/outliers_model
ARGS="--type llama --layers 4 --hidden 64 --heads 4 --ffn 128 --vocab 128 --seed 1 --max-pos 256"
if [ ! -f "$MODEL/model.safetensors" ] || [ "$(cat "$MODEL/.args" 2>/dev/null)" != "$ARGS" ]; then
    rm -rf "$MODEL"
    # shellcheck disable=SC2086  # ARGS is a word list
    $PY tests/ref/make_model.py "$MODEL" $ARGS >/dev/null
    echo "$ARGS" > "$MODEL/.args"
    rm -f "$OUT"/outliers_*.h5
fi
for S in $SAMPLES; do
    D=$OUT/outliers_$S.h5
    [ -f "$D" ] && continue
    echo "bench outliers: probing $S prompts into $D" >&2
    "$BIN/noise" prompts -o "$OUT/outliers_$S.jsonl" --length 64 --samples $((S / 5)) --force --quiet ||
        die "noise prompts failed"
    "$BIN/probe" --model "$MODEL" --prompts "$OUT/outliers_$S.jsonl" --out "$D.tmp" --maps none --force --quiet \
        --threads "$THREADS" || die "probe failed"
    mv "$D.tmp" "$D"
done
${CC:-cc} -std=c11 -Wall -Wextra -O2 bench/outliers_read.c -o "$OUT/outliers_read" \
    $(pkg-config --cflags --libs hdf5) || die "cannot build bench/outliers_read.c"

# best wall time of a command over REPEATS runs, as separate processes
best_of() {
    $PY - "$REPEATS" "$@" <<'EOF'
import subprocess, sys, time
best = None
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    r = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit(r.stderr.decode())
    t = time.perf_counter() - t0
    best = t if best is None or t < best else best
print("%.4f" % best)
EOF
}

echo
echo "outliers: pool a dump (llama 4L/64/4H, 64 tokens per prompt, K = 100), best of $REPEATS, wall s"
printf '%-8s %8s %11s %11s %8s %11s %14s %9s %11s\n' samples "dump MB" outliers "read (C)" ratio \
    "h5py read" "h5py + numpy" "speed-up" "--quant"
for S in $SAMPLES; do
    D=$OUT/outliers_$S.h5
    ours=$(best_of "$BIN/outliers" "$D") || die "bin/outliers failed on $D"
    quant=$(best_of "$BIN/outliers" "$D" --quant) || die "bin/outliers --quant failed on $D"
    set -- $("$OUT/outliers_read" "$D" "$REPEATS") || die "outliers_read failed on $D"
    cread=$1
    [ "$2" = "$S" ] || die "$D has $2 samples, not $S"
    "$BIN/outliers" "$D" --format csv > "$OUT/outliers_$S.csv"
    set -- $($PY bench/outliers_np.py "$D" read "$REPEATS") || die "h5py read failed"
    pyread=$1
    set -- $($PY bench/outliers_np.py "$D" table5 "$REPEATS" "$OUT/outliers_$S.csv") ||
        die "h5py + numpy disagree with bin/outliers on $D"
    pyt5=$1
    printf '%-8s %8s %11s %11s %7.2fx %11s %14s %8.1fx %11s\n' "$S" "$(du -m "$D" | cut -f1)" "$ours" "$cread" \
        "$(awk "BEGIN{print $ours / $cread}")" "$pyread" "$pyt5" "$(awk "BEGIN{print $pyt5 / $ours}")" "$quant"
done
echo "notes: ratio = outliers / read (C), the time of reading the same datasets with nothing else (1 = reading"
echo "is all it costs); speed-up = h5py + numpy / outliers on the same Table 5 (numbers checked equal);"
echo "--quant adds LLM.int8 features, the SmoothQuant profile and the SQNR estimate at 8, 6 and 4 bits."
