#!/bin/sh
# run.sh — `make bench`: difflens' forward pass against PyTorch eager on the same model,
# and against the machine's sgemm rate measured in the same run: the faster of OpenBLAS's
# (bench/sgemm_rate.c) and difflens' own product (bench/gemm_shapes.c) on the same shapes.
#
#   BIN=bin sh bench/run.sh          (make bench runs it after scripts/deps.sh --bench)
#
# Environment: BIN (probe's folder, default bin), OUT (work folder, default build/bench),
# THREADS (default 2), REPEATS (default 3), LENGTHS (default "1024 4096"), RSS_LENGTHS
# (default "1024 4096 8192"), BUILD (where make put bench/overhead, default build).
# Model: llama, 8 layers, hidden 512, 8 heads, FFN 1408, vocab 32000, f32, seed 1, written
# once by tests/ref/make_model.py into $OUT/model and reused while its arguments are the
# same. Each sequence length gets one prompt of random token ids. Every side runs REPEATS
# times and the best (minimum) time counts: probe as separate processes (its own
# "forward" time, model loading excluded), torch as passes in one process.
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-3}
LENGTHS=${LENGTHS:-"1024 4096"}
RSS_LENGTHS=${RSS_LENGTHS:-"1024 4096 8192"}
BUILD=${BUILD:-build}
PY=/usr/bin/python3
BLAS_DIR=/usr/lib/x86_64-linux-gnu/openblas-openmp

L=8 D=512 H=8 F=1408 V=32000
MODEL_ARGS="--type llama --layers $L --hidden $D --heads $H --ffn $F --vocab $V --dtype f32 --seed 1 --max-pos 4096"
MODEL=$OUT/model

die() { echo "bench: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
[ -x "$BUILD/bench/gemm_shapes" ] || die "$BUILD/bench/gemm_shapes not found (make bench builds it)"
mkdir -p "$OUT"

# ---------------------------------------------------------------- inputs, once
if [ ! -f "$MODEL/model.safetensors" ] || [ "$(cat "$MODEL/.args" 2>/dev/null)" != "$MODEL_ARGS" ]; then
    echo "bench: writing the model to $MODEL" >&2
    rm -rf "$MODEL"
    # shellcheck disable=SC2086  # MODEL_ARGS is a word list
    $PY tests/ref/make_model.py "$MODEL" $MODEL_ARGS
    echo "$MODEL_ARGS" > "$MODEL/.args"
fi
for T in 64 $LENGTHS $RSS_LENGTHS; do
    P=$OUT/prompt_$T.jsonl
    [ -f "$P" ] && continue
    $PY - "$P" "$T" "$V" <<'EOF'
import json, os, sys
import numpy as np
path, T, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(1000 + T)
with open(path + ".tmp", "w") as f:
    f.write(json.dumps({"id": "bench-T%d" % T, "tokens": [int(t) for t in rng.integers(0, V, T)]}) + "\n")
os.replace(path + ".tmp", path)
EOF
done

# The library's compiler flags and OpenBLAS (OpenMP build), as the Makefile gives them.
${CC:-cc} -std=c11 -Wall -Wextra -O2 -fopenmp -I/usr/include/x86_64-linux-gnu/openblas-openmp \
    bench/sgemm_rate.c -o "$OUT/sgemm_rate" -L$BLAS_DIR -Wl,-rpath,$BLAS_DIR -lopenblas -lm

# probe's summary line: "probe: wrote X: 1 samples, T tokens, forward S s (R tok/s, G GFLOP/s)"
probe_run() {  # $1 prompts, $2 dump; prints "seconds gflops"
    "$BIN/probe" --model "$MODEL" --prompts "$1" --out "$2" --force --threads "$THREADS" 2>"$OUT/probe.log" ||
        { cat "$OUT/probe.log" >&2; die "probe failed"; }
    sed -n 's/.*forward \([0-9.]*\) s ([0-9.]* tok\/s, \([0-9.]*\) GFLOP\/s).*/\1 \2/p' "$OUT/probe.log" | tail -n 1
}

# Share of all CPUs busy over one second (/proc/stat), other work included: a load
# average would still count the previous run's processes.
cpu_busy() {
    a=$(head -n 1 /proc/stat 2>/dev/null) || { echo "?"; return; }
    sleep 1
    b=$(head -n 1 /proc/stat)
    printf '%s\n%s\n' "$a" "$b" | awk '{ t = 0; for (i = 2; i <= 9; i++) t += $i; tot[NR] = t; idle[NR] = $5 + $6 }
        END { d = tot[2] - tot[1]; if (d > 0) printf "%.0f%%", 100 * (1 - (idle[2] - idle[1]) / d); else print "?" }'
}
# cpu_mark FILE: "busy_jiffies total_jiffies children_user children_sys CLK_TCK" now, all
# CPUs; `times` must run in this shell (a subshell's children times start at 0).
cpu_mark() {
    times > "$1.times"
    printf '%s %s %s\n' "$(head -n 1 /proc/stat 2>/dev/null || echo cpu 0 0 0 0 0 0 0 0)" \
        "$(tail -n 1 "$1.times")" "$(getconf CLK_TCK 2>/dev/null || echo 100)" |
        awk '{ t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t, $(NF - 2), $(NF - 1), $NF }' > "$1"
}
busy_before=$(cpu_busy)
echo "bench: CPUs busy with other work before the run: $busy_before (the bench wants $THREADS idle cores)" >&2
case "$busy_before" in
    \?|[0-9]%|1[0-9]%) ;;
    *) echo "bench: warning: the machine is busy; timings will be slow and noisy" >&2 ;;
esac

# ----------------------------------------------- agreement on a short prompt
"$BIN/probe" --model "$MODEL" --prompts "$OUT/prompt_64.jsonl" --out "$OUT/agree.h5" --force \
    --threads "$THREADS" --save-logits --quiet || die "probe --save-logits failed"
agreement=$(OPENBLAS_NUM_THREADS=$THREADS $PY bench/torch_llama.py check --model "$MODEL" \
    --prompts "$OUT/prompt_64.jsonl" --dump "$OUT/agree.h5" --threads "$THREADS") ||
    { echo "$agreement" >&2; die "torch and difflens disagree: the timings would not compare the same computation"; }

# ------------------------------------------------------------------ timings
rows=$OUT/results.txt
: > "$rows"
cpu_mark "$OUT/cpu_start"
for T in $LENGTHS; do
    P=$OUT/prompt_$T.jsonl
    echo "bench: T=$T: probe x$REPEATS" >&2
    best_s="" best_g=""
    i=0
    while [ "$i" -lt "$REPEATS" ]; do
        r=$(probe_run "$P" "$OUT/probe_$T.h5")
        [ -n "$r" ] || die "no forward time in probe's output ($OUT/probe.log)"
        set -- $r
        echo "bench:   probe forward $1 s, $2 GFLOP/s" >&2
        if [ -z "$best_s" ] || awk "BEGIN{exit !($1 < $best_s)}"; then best_s=$1 best_g=$2; fi
        i=$((i + 1))
    done
    echo "bench: T=$T: torch x$REPEATS" >&2
    tline=$(OPENBLAS_NUM_THREADS=$THREADS $PY bench/torch_llama.py time --model "$MODEL" --prompts "$P" \
        --repeats "$REPEATS" --threads "$THREADS") || die "torch_llama.py failed"
    echo "bench:   $tline" >&2
    torch_s=$(echo "$tline" | sed -n 's/.*best_s=\([0-9.]*\).*/\1/p')
    [ -n "$torch_s" ] || die "no time in torch_llama.py's output: $tline"
    echo "bench: T=$T: sgemm" >&2
    sg=$("$OUT/sgemm_rate" "$T" $D $F $V $L "$THREADS" 5 2>"$OUT/sgemm_$T.log") || die "sgemm_rate failed"
    sed 's/^/bench:   /' "$OUT/sgemm_$T.log" >&2
    # difflens' own product on the same shapes: the machine's sgemm rate is the faster one
    dg=$("$BUILD/bench/gemm_shapes" "$T" $D $F $V $L "$THREADS" 5 2>"$OUT/gemm_$T.log") || die "gemm_shapes failed"
    sed 's/^/bench:   /' "$OUT/gemm_$T.log" >&2
    echo "$T $best_s $torch_s $best_g $sg $dg" >> "$rows"
done
cpu_mark "$OUT/cpu_end"
others=$(cat "$OUT/cpu_start" "$OUT/cpu_end" | awk '
    function secs(x, a) { sub(/s$/, "", x); split(x, a, "m"); return a[1] * 60 + a[2] }
    { busy[NR] = $1; total[NR] = $2; ours[NR] = (secs($3) + secs($4)) * $5 }
    END { d = total[2] - total[1]; if (d > 0) printf "%.0f%%", 100 * (busy[2] - busy[1] - (ours[2] - ours[1])) / d; else print "?" }')

# -------------------------------------------------------------------- table
{
    echo
    echo "forward pass, llama ${L}L/$D/${H}H, FFN $F, vocab $V, f32, $THREADS threads, best of $REPEATS"
    awk '
    BEGIN { printf "%-6s %11s %14s %9s %17s %14s %17s %9s %14s\n", "T", "difflens s", "torch eager s", "speed-up",
                   "difflens GFLOP/s", "sgemm GFLOP/s", "dfl_gemm GFLOP/s", "fraction", "torch GFLOP/s" }
    { best = $5 > $6 ? $5 : $6
      printf "%-6d %11.3f %14.3f %8.2fx %17.1f %14.1f %17.1f %8.0f%% %14.1f\n", $1, $2, $3, $3 / $2, $4, $5, $6,
             100 * $4 / best, $4 * $2 / $3 }' "$rows"
    awk '$1 == 1024 { printf "target: difflens >= 3x torch eager at T = 1024: %.2fx, %s\n", $3 / $2,
                      ($3 / $2 >= 3 ? "met" : "NOT met") }' "$rows"
    echo "$agreement"
    echo
    echo "notes:"
    echo "- difflens s: probe's forward time, no maps, but with what probe always computes: NLL/argmax"
    echo "  over the vocabulary and the outlier statistics (attention-logit and hidden top-k, histograms);"
    echo "  torch eager s: Hugging Face-style eager Llama (full T x T scores + additive mask, logits [T, V])."
    echo "- GFLOP/s use difflens' FLOP count (causal attention: (T+1)/2 keys per row) for both sides."
    echo "- sgemm GFLOP/s: OpenBLAS sgemm (same build as the library) on the forward's projection shapes"
    echo "  with M = T, weighted by FLOPs (bench/sgemm_rate.c; per-shape rates in $OUT/sgemm_T.log);"
    echo "  dfl_gemm GFLOP/s: difflens' own product on the same shapes (bench/gemm_shapes.c, $OUT/gemm_T.log);"
    echo "  fraction: difflens' forward against the faster of the two, the machine's measured sgemm rate."
    echo "- OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset: OpenBLAS autodetects>} for both sides, as the environment sets it."
    echo "  difflens' kernels: DFL_CPU=${DFL_CPU:-<unset: the CPU's best>} (on AVX-512 CPUs whose OpenBLAS core"
    echo "  has no AVX-512 kernels, difflens multiplies with its own AVX-512 sgemm, dfl_gemm above)."
    if [ -e /usr/lib/x86_64-linux-gnu/libblas.so.3 ]; then
        echo "- torch's BLAS: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3) (OPENBLAS_NUM_THREADS=$THREADS);"
        echo "  difflens: $BLAS_DIR/libopenblas.so.0"
    fi
    echo "- CPU time taken by other processes while the timings ran: $others of all CPUs (${busy_before} just before)"
    echo "  (other work slows both sides, difflens' OpenMP barriers most; compare runs on an idle machine)"
    case "$others" in
        \?|-*|[0-9]%) ;;
        *) echo "- WARNING: the machine was busy during the run; these timings are not representative" ;;
    esac
} | tee "$OUT/table.txt"

# ------------------------------------------- the statistics' cost, peak memory
# probe always computes noise shares, outlier statistics and NLL/argmax: their cost on
# top of a forward pass that only computes the logits (bench/overhead.c), and probe's
# peak resident memory (no maps) as the sequence grows.
{
    echo
    echo "probe statistics overhead (probe forward / plain forward, best of $REPEATS, $THREADS threads)"
    printf '%-6s %9s %9s %9s\n' T plain_s probe_s ratio
    for T in $LENGTHS; do
        set -- $(OMP_NUM_THREADS=$THREADS "$BUILD/bench/overhead" "$MODEL" "$OUT/prompt_$T.jsonl" "$REPEATS") ||
            die "overhead failed"
        printf '%-6d %9.3f %9.3f %8.3fx\n' "$T" "$1" "$2" "$3"
    done
    echo
    echo "probe peak resident memory, --maps none (weights: $(du -m "$MODEL/model.safetensors" | cut -f1) MB as f32)"
    printf '%-6s %12s\n' T "peak RSS MB"
    for T in $RSS_LENGTHS; do
        rss=$($PY -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if r.returncode == 0 else "failed")' \
            "$BIN/probe" --model "$MODEL" --prompts "$OUT/prompt_$T.jsonl" --out "$OUT/rss_$T.h5" --force \
            --threads "$THREADS" --quiet)
        printf '%-6d %12s\n' "$T" "$rss"
    done
} | tee -a "$OUT/table.txt"

# probe --maps all against --maps none, the map writer against h5py (bench/maps.sh)
if [ -f bench/maps.sh ]; then
    BIN=$BIN BUILD=$BUILD OUT=$OUT MODEL=$MODEL THREADS=$THREADS REPEATS=$REPEATS sh bench/maps.sh |
        tee -a "$OUT/table.txt"
fi
# the full-size Llama-3.2-1B shape in bf16 against PyTorch (bench/real_size.sh)
BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/real_size.sh | tee -a "$OUT/table.txt"
# GPT-2 small and Pythia-1B at full size against PyTorch (bench/real_size_families.sh)
BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/real_size_families.sh | tee -a "$OUT/table.txt"

# training throughput against PyTorch (bench/train_bench.sh)
if [ -f bench/train_bench.sh ]; then
    BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/train_bench.sh | tee -a "$OUT/table.txt"
fi

# probe under MPI (bench/mpi.sh)
BIN=$BIN OUT=$OUT sh bench/mpi.sh | tee -a "$OUT/table.txt"

# attnmap against matplotlib (bench/attnmap.sh), when present
if [ -f bench/attnmap.sh ]; then
    BIN=$BIN OUT=$OUT sh bench/attnmap.sh | tee -a "$OUT/table.txt"
fi

# outliers against the time of reading its datasets and h5py + numpy (bench/outliers.sh)
if [ -f bench/outliers.sh ]; then
    BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/outliers.sh | tee -a "$OUT/table.txt"
fi

# bin/view on a 16,384-token map: first screen in chromium and tile latency, against
# attnmap drawing the whole map (bench/view.py)
BIN=$BIN OUT=$OUT $PY bench/view.py | tee -a "$OUT/table.txt"
# the tokenizer against Hugging Face tokenizers (bench/tokenizer.sh)
if [ -f bench/tokenizer.sh ]; then
    BUILD=$BUILD OUT=$OUT sh bench/tokenizer.sh | tee -a "$OUT/table.txt"
fi

# a Llama-3.2-1B-shaped Q4_K GGUF against the same shape in bf16: forward time ratio and
# peak RSS (bench/gguf.sh)
BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/gguf.sh | tee -a "$OUT/table.txt"
# compare's KLD block on 100 prompts x 512 tokens against h5py + numpy (bench/compare.sh)
BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/compare.sh | tee -a "$OUT/table.txt"
# KV-cached decoding against a KV-cached PyTorch loop, and the capture cost (bench/generate.sh)
BIN=$BIN BUILD=$BUILD OUT=$OUT THREADS=$THREADS sh bench/generate.sh | tee -a "$OUT/table.txt"
# probe --quantize (weights, activations, KV, rotation) against the unquantized forward (bench/quantize.sh)
BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/quantize.sh | tee -a "$OUT/table.txt"
# the layer × position patch sweep against PyTorch hooks, TransformerLens style (bench/patch_sweep.sh)
BIN=$BIN OUT=$OUT THREADS=$THREADS sh bench/patch_sweep.sh | tee -a "$OUT/table.txt"
