#!/bin/sh
# maps.sh — `make bench` part for map writing: what `probe --maps all` costs over
# `--maps none`, and the dump's map writer against h5py writing the same maps.
#
#   BIN=bin BUILD=build MODEL=build/bench/model sh bench/maps.sh
#
# Environment: BIN (default bin), BUILD (where make put bench/map_write, default build),
# OUT (work folder, default build/bench), MODEL (the bench model bench/run.sh writes:
# llama 8L/512/8H, vocab 32000), THREADS (default 2), REPEATS (default 3), MAP_T (prompt
# length, default 2048), MAP_LAYERS (layers of the map used for the writer timings,
# default 2), MAP_LEVEL (gzip level of the writer-vs-h5py race, default 1: probe's),
# LEVELS (the size/speed table's levels, default "none 0 1 2 3 4 5 6 7 8 9"; empty: no
# table).
# 1. probe --maps none and --maps all on one prompt of MAP_T random tokens, each REPEATS
#    times as separate processes; best forward time (probe's own, which includes writing
#    and storing every map chunk) and best process wall time.
# 2. The f16 map1 of that --maps all dump (first MAP_LAYERS layers, all heads), in
#    memory, written at gzip level MAP_LEVEL by bench/map_write (the direct stream probe
#    uses: tiles 32 x 512, shuffle + deflate, THREADS threads) and by h5py (same chunks,
#    shuffle, same gzip level, only the causal tiles, each written whole): best of
#    REPEATS, dump create to close, both in this run.
# 3. The size/speed table: bench/map_write at each of LEVELS on the same maps.
set -eu

BIN=${BIN:-bin}
BUILD=${BUILD:-build}
OUT=${OUT:-build/bench}
MODEL=${MODEL:-$OUT/model}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-3}
MAP_T=${MAP_T:-2048}
MAP_LAYERS=${MAP_LAYERS:-2}
MAP_LEVEL=${MAP_LEVEL:-1}
LEVELS=${LEVELS-"none 0 1 2 3 4 5 6 7 8 9"}
PY=/usr/bin/python3

die() { echo "bench maps: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
[ -x "$BUILD/bench/map_write" ] || die "$BUILD/bench/map_write not found (make bench builds it)"
[ -f "$MODEL/model.safetensors" ] || die "no bench model at $MODEL (bench/run.sh writes it)"
mkdir -p "$OUT"
P=$OUT/prompt_$MAP_T.jsonl
if [ ! -f "$P" ]; then
    $PY - "$P" "$MAP_T" <<'PYEOF'
import json, os, sys
import numpy as np
path, T = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(1000 + T)
with open(path + ".tmp", "w") as f:
    f.write(json.dumps({"id": "bench-T%d" % T, "tokens": [int(t) for t in rng.integers(0, 32000, T)]}) + "\n")
os.replace(path + ".tmp", path)
PYEOF
fi

now() { $PY -c 'import time; print("%.4f" % time.monotonic())'; }
# probe_maps SEL: "forward_s wall_s", best of REPEATS
probe_maps() {
    bf="" bw=""
    i=0
    while [ "$i" -lt "$REPEATS" ]; do
        t0=$(now)
        "$BIN/probe" --model "$MODEL" --prompts "$P" --out "$OUT/maps_$1.h5" --force --threads "$THREADS" \
            --maps "$1" 2>"$OUT/maps_probe.log" || { cat "$OUT/maps_probe.log" >&2; die "probe --maps $1 failed"; }
        t1=$(now)
        f=$(sed -n 's/.*forward \([0-9.]*\) s.*/\1/p' "$OUT/maps_probe.log" | tail -n 1)
        [ -n "$f" ] || die "no forward time in probe's output ($OUT/maps_probe.log)"
        w=$(awk "BEGIN{print $t1 - $t0}")
        echo "bench:   probe --maps $1: forward $f s, wall $w s" >&2
        if [ -z "$bf" ] || awk "BEGIN{exit !($f < $bf)}"; then bf=$f; fi
        if [ -z "$bw" ] || awk "BEGIN{exit !($w < $bw)}"; then bw=$w; fi
        i=$((i + 1))
    done
    echo "$bf $bw"
}

echo "bench: maps: probe --maps none / all at T=$MAP_T x$REPEATS" >&2
set -- $(probe_maps none)
none_f=$1 none_w=$2
set -- $(probe_maps all)
all_f=$1 all_w=$2
dump_mb=$(du -m "$OUT/maps_all.h5" | cut -f1)

# race LEVEL: "ours_s ours_bytes map_bytes h5py_s h5py_bytes"
race() {
    set -- "$1" $(OMP_NUM_THREADS=$THREADS "$BUILD/bench/map_write" "$MODEL" "$OUT/maps_all.h5" "$MAP_LAYERS" \
        "$REPEATS" "$OUT/maps_ours.h5" "$1") || die "map_write failed"
    h=$($PY bench/map_write_h5py.py "$OUT/maps_all.h5" "$MAP_LAYERS" "$REPEATS" "$OUT/maps_h5py.h5" "$1") ||
        die "map_write_h5py.py failed"
    echo "$3 $4 $5 $h"
}
echo "bench: maps: writer vs h5py, gzip $MAP_LEVEL and 2, $MAP_LAYERS layers x$REPEATS" >&2
race_main=$(race "$MAP_LEVEL")
race_two=$(race 2)

{
    echo
    echo "attention maps, llama 8L/512/8H, T=$MAP_T, $THREADS threads, best of $REPEATS"
    awk -v nf="$none_f" -v af="$all_f" -v nw="$none_w" -v aw="$all_w" -v mb="$dump_mb" 'BEGIN {
        printf "%-22s %10s %10s %9s\n", "", "--maps none", "--maps all", "ratio"
        printf "%-22s %10.3f %10.3f %8.2fx   (target <= 1.5x, moonshot 1.2x)\n", "probe forward s", nf, af, af / nf
        printf "%-22s %10.3f %10.3f %8.2fx\n", "probe process wall s", nw, aw, aw / nw
        printf "dump with maps: %d MB (default --map-compression gzip:1)\n", mb }'
    echo
    echo "map writing, f16 map1 of $MAP_LAYERS layers x 8 heads (causal tiles 32x512), shuffle + gzip, same level both sides"
    printf '%-8s %-26s %9s %9s %10s\n' level writer seconds MB/s "file MB"
    for r in "$MAP_LEVEL $race_main" "2 $race_two"; do
        echo "$r"
    done | awk '{ printf "%-8s %-26s %9.3f %9.1f %10.1f\n", $1, "difflens direct writer", $2, $4 / $2 / 1e6, $3 / 1e6
                  printf "%-8s %-26s %9.3f %9.1f %10.1f\n", $1, "h5py (HDF5 zlib filter)", $5, $4 / $5 / 1e6, $6 / 1e6
                  printf "%-8s speed-up over h5py: %.2fx   (target >= 3x)\n", $1, $5 / $2 }'
    echo "(level 1: difflens deflates the high byte planes only, h5py all of them; level 2: both deflate whole tiles)"
} | tee "$OUT/maps_table.txt"

if [ -n "$LEVELS" ]; then
    echo "bench: maps: levels $LEVELS" >&2
    # shellcheck disable=SC2086  # LEVELS is a word list
    OMP_NUM_THREADS=$THREADS "$BUILD/bench/map_write" "$MODEL" "$OUT/maps_all.h5" "$MAP_LAYERS" "$REPEATS" \
        "$OUT/maps_level.h5" $LEVELS > "$OUT/maps_levels.txt" || die "map_write failed"
    {
        echo
        echo "--map-compression on that map ($THREADS threads, best of $REPEATS; raw f16 tiles = 1.00 size)"
        awk 'BEGIN { printf "%-10s %10s %9s %9s\n", "choice", "file MB", "size", "MB/s" }
             { name = $1 == "none" ? "none" : "gzip:" $1
               printf "%-10s %10.1f %9.2f %9.1f\n", name, $3 / 1e6, $3 / $4, $4 / $2 / 1e6 }' "$OUT/maps_levels.txt"
    } | tee -a "$OUT/maps_table.txt"
fi
