#!/bin/sh
# mpi.sh — probe under MPI on this machine: 8 prompts of T tokens on the bench model
# with --maps all, as 1 rank x 1 thread, 1 rank x 2 threads and 2 ranks x 1 thread
# (mpirun), whole processes timed (start-up, model load, join included), best of
# REPEATS. The output of the previous repeat is removed before each run (untimed): a
# run that replaces a dump of 560 MB pays the file system for freeing it (about 0.3 s
# here, one process or many), which is not the cost of any layout. Prints the parallel
# efficiency of each against 1 x 1, the ratio of 2 ranks x 1 thread to 1 rank x 2
# threads (target: within 10%), and rank 0's join of the parts (median over the
# repeats, with the lowest and highest) as a share of the best 2-rank run (target:
# < 5%), with all maps and without maps.
#
#   BIN=bin OUT=build/bench sh bench/mpi.sh     (make bench runs it; the model is the
#                                                 one bench/run.sh writes)
set -eu
BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
REPEATS=${REPEATS:-3}
T=${MPI_TOKENS:-1024}
PY=/usr/bin/python3
MODEL=$OUT/model
ROOT=""
[ "$(id -u)" -eq 0 ] && ROOT="--allow-run-as-root"
[ -f "$MODEL/model.safetensors" ] || { echo "bench/mpi.sh: $MODEL missing (run bench/run.sh)" >&2; exit 1; }
P=$OUT/mpi_prompts_$T.jsonl
$PY - "$P" "$T" <<'PYEOF'
import json, sys
import numpy as np
rng = np.random.default_rng(7)
with open(sys.argv[1], "w") as f:
    for i in range(8):
        f.write(json.dumps({"id": "mpi%d" % i, "tokens": [int(t) for t in rng.integers(0, 32000, int(sys.argv[2]))]}) + "\n")
PYEOF

# run LABEL CMD...: best wall seconds, and the median, lowest and highest join time
# over the repeats (the join is short and the file system's background writeback of
# the parts just written makes it vary from run to run)
run() {
    label=$1; shift
    $PY - "$REPEATS" "$@" <<'PYEOF'
import os, re, statistics, subprocess, sys, time
best, joins = None, []
out = sys.argv[sys.argv.index("--out") + 1]
for _ in range(int(sys.argv[1])):
    if os.path.exists(out):
        os.remove(out)
    t = time.perf_counter()
    r = subprocess.run(sys.argv[2:], capture_output=True, text=True)
    t = time.perf_counter() - t
    if r.returncode:
        sys.exit("bench/mpi.sh: probe failed: " + r.stderr)
    m = re.search(r"parts joined in ([0-9.]+) s", r.stderr)
    joins.append(float(m.group(1)) if m else 0.0)
    best = t if best is None else min(best, t)
print("%.3f %.4f %.4f %.4f" % (best, statistics.median(joins), min(joins), max(joins)))
PYEOF
}
COMMON="--model $MODEL --prompts $P --maps all --force"
set -- $(run 1x1 "$BIN/probe" $COMMON --out "$OUT/mpi_1x1.h5" --threads 1); t11=$1
set -- $(run 1x2 "$BIN/probe" $COMMON --out "$OUT/mpi_1x2.h5" --threads 2); t12=$1
set -- $(run 2x1 mpirun -np 2 $ROOT --bind-to none "$BIN/probe" $COMMON --out "$OUT/mpi_2x1.h5" --threads 1)
t21=$1 join=$2 join_lo=$3 join_hi=$4
set -- $(run 2x1-none mpirun -np 2 $ROOT --bind-to none "$BIN/probe" --model "$MODEL" --prompts "$P" --maps none --force \
    --out "$OUT/mpi_2x1_none.h5" --threads 1); t21n=$1 joinn=$2
echo
echo "probe under MPI: 8 prompts x $T tokens, --maps all, bench model, best of $REPEATS (whole processes)"
printf '%-22s %9s %11s\n' layout seconds efficiency
printf '%-22s %9.3f %11s\n' "1 rank x 1 thread" "$t11" "1.00"
awk -v a="$t11" -v b="$t12" 'BEGIN { printf "%-22s %9.3f %11.2f\n", "1 rank x 2 threads", b, a / (2 * b) }'
awk -v a="$t11" -v b="$t21" 'BEGIN { printf "%-22s %9.3f %11.2f\n", "2 ranks x 1 thread", b, a / (2 * b) }'
awk -v b="$t12" -v c="$t21" -v j="$join" -v lo="$join_lo" -v hi="$join_hi" -v n="$REPEATS" 'BEGIN {
    printf "2 ranks x 1 thread / 1 rank x 2 threads: %.3f (target <= 1.10)\n", c / b
    printf "join of the parts on rank 0: %.3f s = %.1f%% of the 2-rank run (target < 5%%), median of %d runs;", j, 100 * j / c, n
    printf " lowest %.3f s (%.1f%%), highest %.3f s (%.1f%%)\n", lo, 100 * lo / c, hi, 100 * hi / c }'
awk -v c="$t21n" -v j="$joinn" 'BEGIN {
    printf "the same without maps (--maps none): join %.4f s = %.2f%% of a %.3f s run\n", j, 100 * j / c, c }'
