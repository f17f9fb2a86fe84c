#!/bin/sh
# maps.sh — `make bench` part for map writing: what `probe --maps all` costs over
# `--maps none`, and the dump's map writer against h5py writing the same maps.
#
#   BIN=bin BUILD=build MODEL=build/bench/model sh bench/maps.sh
#
# Environment: BIN (default bin), BUILD (where make put bench/map_write, default build),
# OUT (work folder, default build/bench), MODEL (the bench model bench/run.sh writes:
# llama 8L/512/8H, vocab 32000), THREADS (default 2), REPEATS (default 3), MAP_T (prompt
# length of the map the writer timings use, default 2048), RATIO_LENGTHS (prompt lengths
# of the --maps all / --maps none ratio, default "1024 $MAP_T"), MAP_LAYERS (layers of the map used for the writer timings,
# default 2), MAP_LEVEL (gzip level of the writer-vs-h5py race, default 1: probe's),
# LEVELS (the size/speed table's levels, default "none 0 1 2 3 4 5 6 7 8 9"; empty: no
# table).
# 1. probe --maps none and --maps all on one prompt of T random tokens for each T of
#    RATIO_LENGTHS, each REPEATS times as separate processes, interleaved; best forward
#    time (probe's own, which includes writing and storing every map chunk) and best
#    process wall time, and their ratio.
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
RATIO_LENGTHS=${RATIO_LENGTHS:-"1024 $MAP_T"}
MAP_LAYERS=${MAP_LAYERS:-2}
MAP_LEVEL=${MAP_LEVEL:-1}
LEVELS=${LEVELS-"none 0 1 2 3 4 5 6 7 8 9"}
PY=/usr/bin/python3

die() { echo "bench maps: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
[ -x "$BUILD/bench/map_write" ] || die "$BUILD/bench/map_write not found (make bench builds it)"
[ -f "$MODEL/model.safetensors" ] || die "no bench model at $MODEL (bench/run.sh writes it)"
mkdir -p "$OUT"
for T in $RATIO_LENGTHS $MAP_T; do
    P=$OUT/prompt_$T.jsonl
    [ -f "$P" ] && continue
    $PY - "$P" "$T" <<'PYEOF'
import json, os, sys
import numpy as np
path, T = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(1000 + T)
with open(path + ".tmp", "w") as f:
    f.write(json.dumps({"id": "bench-T%d" % T, "tokens": [int(t) for t in rng.integers(0, 32000, T)]}) + "\n")
os.replace(path + ".tmp", path)
PYEOF
done

now() { $PY -c 'import time; print("%.4f" % time.monotonic())'; }
# probe_once SEL T: "forward_s wall_s" of one run; the dump is $OUT/maps_SEL.h5 (T = MAP_T)
# or $OUT/maps_SEL_T.h5
probe_once() {
    out=$OUT/maps_$1_$2.h5
    [ "$2" = "$MAP_T" ] && out=$OUT/maps_$1.h5
    t0=$(now)
    "$BIN/probe" --model "$MODEL" --prompts "$OUT/prompt_$2.jsonl" --out "$out" --force --threads "$THREADS" \
        --maps "$1" 2>"$OUT/maps_probe.log" || { cat "$OUT/maps_probe.log" >&2; die "probe --maps $1 failed"; }
    t1=$(now)
    f=$(sed -n 's/.*forward \([0-9.]*\) s.*/\1/p' "$OUT/maps_probe.log" | tail -n 1)
    [ -n "$f" ] || die "no forward time in probe's output ($OUT/maps_probe.log)"
    echo "bench:   probe --maps $1, T=$2: forward $f s, wall $(awk "BEGIN{print $t1 - $t0}") s" >&2
    echo "$f $(awk "BEGIN{print $t1 - $t0}")"
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }

# ratio T: "none_forward all_forward none_wall all_wall", bests of REPEATS interleaved runs
ratio() {
    nf="" af="" nw="" aw=""
    i=0
    while [ "$i" -lt "$REPEATS" ]; do
        set -- $(probe_once none "$1") "$1"
        nf=$(min "$1" "$nf") nw=$(min "$2" "$nw")
        set -- $(probe_once all "$3") "$3"
        af=$(min "$1" "$af") aw=$(min "$2" "$aw")
        set -- "$3"
        i=$((i + 1))
    done
    echo "$nf $af $nw $aw"
}

echo "bench: maps: probe --maps none / all at T=$RATIO_LENGTHS x$REPEATS" >&2
ratios=""
for T in $RATIO_LENGTHS; do
    ratios="$ratios$T $(ratio "$T");"
done
# the writer timings' map: the --maps all dump at MAP_T
echo " $RATIO_LENGTHS " | grep -q " $MAP_T " || probe_once all "$MAP_T" > /dev/null
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
    echo "attention maps, llama 8L/512/8H, $THREADS threads, best of $REPEATS, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "$ratios" | tr ';' '\n' | awk -v mb="$dump_mb" -v mt="$MAP_T" 'NF == 5 {
        if (!head++) printf "%-6s %-22s %10s %10s %9s\n", "T", "", "--maps none", "--maps all", "ratio"
        printf "%-6d %-22s %10.3f %10.3f %8.2fx   (--maps all / --maps none; target <= 1.3x at T=1024)\n", $1,
            "probe forward s", $2, $3, $3 / $2
        printf "%-6d %-22s %10.3f %10.3f %8.2fx\n", $1, "probe process wall s", $4, $5, $5 / $4 }
        END { printf "dump with maps at T=%d: %d MB (default --map-compression gzip:1)\n", mt, mb }'
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
