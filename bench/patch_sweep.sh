#!/bin/sh
# patch_sweep.sh — `make bench` (called from the end of bench/run.sh): the layer × position
# residual-stream patch sweep of the bench model (llama, 8 layers, hidden 512, 8 heads,
# FFN 1408, vocab 32000, f32) at T = 256, probe --patch-sweep against the same sweep
# written as TransformerLens users write it (bench/patch_sweep_torch.py: PyTorch hooks,
# one full forward per cell), in the same run; prints both and the ratio.
#
#   BIN=bin sh bench/patch_sweep.sh
#
# Prompts: a clean prompt of random ids and a corrupted copy whose "subject" tokens
# 100-104 are resampled (causal tracing's corruption of the subject, ROME), target the
# last token; metric target_prob. probe's time is the whole process (model load, the two
# samples' ordinary passes and the sweep), best of REPEATS (default 1); torch's is its
# per-cell time (measured on 64 cells spread over the grid; every cell is one forward of
# the same shape) × 2048 cells plus the clean and corrupted runs, model load excluded.
# Environment: BIN, OUT (default build/bench), THREADS (default 2), REPEATS, T (256).
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-1}
T=${T:-256}
PY=/usr/bin/python3
L=8 D=512 H=8 F=1408 V=32000
MODEL_ARGS="--type llama --layers $L --hidden $D --heads $H --ffn $F --vocab $V --dtype f32 --seed 1 --max-pos 4096"
MODEL=$OUT/model

die() { echo "patch_sweep: $*" >&2; exit 1; }
[ -x "$BIN/probe" ] || die "$BIN/probe not found (run make all first)"
mkdir -p "$OUT"
if [ ! -f "$MODEL/model.safetensors" ] || [ "$(cat "$MODEL/.args" 2>/dev/null)" != "$MODEL_ARGS" ]; then
    rm -rf "$MODEL"
    # shellcheck disable=SC2086  # MODEL_ARGS is a word list
    $PY tests/ref/make_model.py "$MODEL" $MODEL_ARGS
    echo "$MODEL_ARGS" > "$MODEL/.args"
fi
P=$OUT/patch_sweep_$T.jsonl
$PY - "$P" "$T" "$V" <<'EOF'
import json, sys
import numpy as np
path, T, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(2600 + T)
clean = [0] + [int(t) for t in rng.integers(1, V, T - 1)]  # BOS (id 0) first
corrupt = list(clean)
for p in range(100, 105):
    corrupt[p] = int((clean[p] + 1 + rng.integers(0, V - 1)) % V)
with open(path, "w") as f:
    for name, toks in (("clean", clean), ("corrupt", corrupt)):
        f.write(json.dumps({"id": name, "tokens": toks, "answer": [[100, 105]], "target": [[T - 1, T]]}) + "\n")
EOF

best=""
i=0
while [ "$i" -lt "$REPEATS" ]; do
    s0=$(date +%s.%N)
    "$BIN/probe" --model "$MODEL" --prompts "$P" --out "$OUT/patch_sweep.h5" --force --quiet --threads "$THREADS" \
        --patch-sweep site=resid_pre,source=clean,target=corrupt,metric=target_prob || die "probe failed"
    s1=$(date +%s.%N)
    t=$(echo "$s1 - $s0" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
    i=$((i + 1))
done
line=$(OPENBLAS_NUM_THREADS=$THREADS $PY bench/patch_sweep_torch.py --model "$MODEL" --prompts "$P" \
    --threads "$THREADS" --dump "$OUT/patch_sweep.h5") || die "patch_sweep_torch.py failed or disagrees: $line"
torch_s=$(echo "$line" | sed -n 's/.*sweep_s=\([0-9.]*\).*/\1/p')
agree=$(echo "$line" | sed -n 's/.*agreement=\([0-9.e+-]*\).*/\1/p')
run=$($PY -c "
import h5py, numpy as np
with h5py.File('$OUT/patch_sweep.h5') as f:
    g = f['samples/000001/patch']
    print(int(np.sum(g['patched'][()] != g['corrupted'][()])))")
echo "patch sweep, llama L=$L D=$D T=$T, resid_pre, $((L * T)) cells (cells that change the metric: $run),"
echo "  $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'), $THREADS threads, machine shared:"
printf '  probe --patch-sweep  %8.2f s (whole process, best of %s)\n' "$best" "$REPEATS"
printf '  PyTorch hooks        %8.2f s (one forward per cell, TransformerLens style)\n' "$torch_s"
printf '  ratio                %8.1fx   (patched values agree within %s relative)\n' \
    "$(echo "$torch_s / $best" | bc -l)" "$agree"
