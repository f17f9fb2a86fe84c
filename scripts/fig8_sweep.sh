#!/bin/sh
# fig8_sweep.sh — the Figure-8 sweep: the demo pair (demo/models/{transformer,diff})
# probed at weight bits {16, 8, 6, 4, 3}, KV-cache bits {16, 8, 4} and attention-logit bits
# {16, 8, 6, 4} (16 = not quantized) with --save-logits, on the needle prompts the pair was
# trained on (as scripts/demo.sh makes them); each setting against the unquantized dump
# through bin/compare (llama.cpp's Mean KLD over the answer predictions, --score target),
# and the retrieval accuracy read from the logits. Writes the dumps, sweep.csv and
# fig8.png (KLD and accuracy against bits, one panel per quantized part, Transformer and
# Diff side by side).
#
#   sh scripts/fig8_sweep.sh                      (BIN=bin OUT=out/fig8 by default)
#
# Environment: BIN (default bin), OUT (default out/fig8), MODELS (default demo/models),
# SAMPLES (prompts per depth, default 40), SWEEP (grid: every combination, 60 settings
# per model; axes: one part quantized at a time, the others at 16, 10 settings — what the
# figure plots either way), WBITS, KVBITS, LBITS (the bit lists above), WOPTS (weight
# options appended to weights=B, default "" = per output channel, symmetric; e.g.
# ":group=32:asym"), KVOPTS (e.g. ":hadamard"), LGRAN (the --quantize-logits granularity,
# default tensor), THREADS (default 2).
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-out/fig8}
MODELS=${MODELS:-demo/models}
SAMPLES=${SAMPLES:-40}
SWEEP=${SWEEP:-grid}
WBITS=${WBITS:-"16 8 6 4 3"}
KVBITS=${KVBITS:-"16 8 4"}
LBITS=${LBITS:-"16 8 6 4"}
WOPTS=${WOPTS:-}
KVOPTS=${KVOPTS:-}
LGRAN=${LGRAN:-tensor}
THREADS=${THREADS:-2}
PY=/usr/bin/python3

die() { echo "fig8_sweep: $*" >&2; exit 1; }
for t in probe noise compare; do [ -x "$BIN/$t" ] || die "$BIN/$t not found (run make all first)"; done
for m in transformer diff; do [ -f "$MODELS/$m/config.json" ] || die "$MODELS/$m: no model (demo/README.md)"; done
case $SWEEP in grid | axes) ;; *) die "SWEEP=$SWEEP: grid or axes" ;; esac
mkdir -p "$OUT"

# the task the pair was trained on (scripts/demo.sh): 64 tokens, 4 needles of 2 digits,
# 4 queries, a different seed from training
"$BIN/noise" prompts -o "$OUT/prompts.jsonl" --length 64 --needles 4 --queries 4 --digits 2 \
    --samples "$SAMPLES" --seed 2024 --force --quiet

# the --quantize / --quantize-logits flags of one setting (16 = off)
flags() {
    w=$1 kv=$2 lq=$3 spec=""
    [ "$w" = 16 ] || spec="weights=$w$WOPTS"
    [ "$kv" = 16 ] || spec="${spec:+$spec,}kv=$kv$KVOPTS"
    printf '%s' "${spec:+--quantize $spec}"
    [ "$lq" = 16 ] || printf ' --quantize-logits %s:%s' "$lq" "$LGRAN"
}
# the settings: every combination, or one part at a time (the unquantized one first)
settings() {
    for w in $WBITS; do for kv in $KVBITS; do for lq in $LBITS; do
        n16=0
        [ "$w" = 16 ] || n16=$((n16 + 1))
        [ "$kv" = 16 ] || n16=$((n16 + 1))
        [ "$lq" = 16 ] || n16=$((n16 + 1))
        [ "$SWEEP" = grid ] || [ "$n16" -le 1 ] && echo "$n16 $w $kv $lq"
    done; done; done | sort -n -k1,1 -s | cut -d' ' -f2-
}

CSV=$OUT/sweep.csv
echo "model,weight_bits,kv_bits,logit_bits,accuracy,last_query_accuracy,target_nll,mean_kld,mean_kld_err,dump" > "$CSV"
for m in transformer diff; do
    BASE=$OUT/${m}_w16_kv16_l16.h5
    settings | while read -r w kv lq; do
        D=$OUT/${m}_w${w}_kv${kv}_l${lq}.h5
        # shellcheck disable=SC2046  # flags() is a word list
        "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/prompts.jsonl" --out "$D" --save-logits f16 \
            --threads "$THREADS" --force --quiet $(flags "$w" "$kv" "$lq")
        K=${D%.h5}.compare.json
        if [ "$D" = "$BASE" ]; then echo '{}' > "$K"; else
            "$BIN/compare" "$BASE" "$D" --score target --format json > "$K"
        fi
        $PY - "$D" "$m" "$w" "$kv" "$lq" "$K" "$OUT/prompts.jsonl" >> "$CSV" <<'PYEOF'
import json, sys
import h5py
import numpy as np
path, m, w, kv, lq, kpath, ppath = sys.argv[1:]
with open(ppath) as f:
    prompts = [json.loads(line) for line in f if line.strip()]
with open(kpath) as f:
    k = json.load(f)
kld = err = 0.0                        # the base against itself
for t in k.get("tables", []):
    for row in t["data"] if t["name"] == "kld" else []:
        if row[0] == "Mean KLD":
            kld, err = row[2], row[3]
ok, last, nll = [], [], []
with h5py.File(path, "r") as f:
    for i, p in enumerate(prompts):
        g = f["samples/%06d" % i]
        ok.append(int(g["target_correct"][()]))
        nll.append(float(g["target_nll"][()]))
        pred = g["logits"][()].argmax(axis=1)       # token t is predicted by row t - 1
        a, b = p["target"][-1]
        last.append(all(pred[t - 1] == p["tokens"][t] for t in range(a, b)))
print("%s,%s,%s,%s,%.4f,%.4f,%.4f,%.6g,%.3g,%s" % (m, w, kv, lq, np.mean(ok), np.mean(last), np.mean(nll), kld,
                                                  err, path))
PYEOF
    done
done

# the figure: per quantized part (the others at 16), mean KLD (log) and last-query accuracy
$PY - "$CSV" "$OUT/fig8.png" <<'PYEOF'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
parts = [("weight_bits", "weights"), ("kv_bits", "KV cache"), ("logit_bits", "attention logits")]
fig, ax = plt.subplots(2, 3, figsize=(11, 5.6), sharex="col")
for j, (key, label) in enumerate(parts):
    others = [k for k, _ in parts if k != key]
    for m, style in (("transformer", "o-"), ("diff", "s-")):
        pts = sorted((int(r[key]), r) for r in rows if r["model"] == m and all(r[o] == "16" for o in others))
        bits = [b for b, _ in pts]
        ax[0][j].plot(bits, [max(float(r["mean_kld"]), 1e-7) for _, r in pts], style, label=m.capitalize())
        ax[1][j].plot(bits, [float(r["last_query_accuracy"]) for _, r in pts], style, label=m.capitalize())
    ax[1][j].set_xticks(sorted({int(r[key]) for r in rows}))
    ax[0][j].set_yscale("log")
    ax[0][j].set_title(label + " quantized")
    ax[1][j].set_xlabel("bits (16 = not quantized)")
    ax[1][j].set_ylim(-0.02, 1.02)
    ax[1][j].invert_xaxis()
ax[0][0].set_ylabel("mean KLD to 16 bits (nats)")
ax[1][0].set_ylabel("last-query retrieval")
ax[0][0].legend()
fig.suptitle("Figure 8 on the demo pair: quantization error against bits (answer predictions; "
             "a KLD of 0 is drawn at 1e-7)")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=150)
PYEOF
echo "fig8_sweep: wrote $CSV ($(($(wc -l < "$CSV") - 1)) settings) and $OUT/fig8.png" >&2
