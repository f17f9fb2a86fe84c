#!/bin/sh
# fig8_sweep.sh — the Figure-8 sweep (issue 28 item 4): the demo pair (demo/models/
# {transformer,diff}) probed at every combination of weight bits {16, 8, 6, 4, 3}, KV-cache
# bits {16, 8, 4} and attention-logit bits {16, 8, 6, 4} (16 = not quantized) with
# --save-logits, on the needle prompts the pair was trained on (as scripts/demo.sh makes
# them). Writes the dumps and sweep.csv: per model and setting, the retrieval accuracy
# (share of prompts whose target_correct is 1) and the mean target NLL, read from the dumps.
#
#   sh scripts/fig8_sweep.sh                      (BIN=bin OUT=out/fig8 by default)
#
# Environment: BIN (default bin), OUT (default out/fig8), MODELS (default demo/models),
# SAMPLES (prompts per depth, default 40), WBITS, KVBITS, LBITS (the bit lists above),
# WOPTS (weight options appended to weights=B, default "" = per output channel,
# symmetric; e.g. ":group=32:asym"), KVOPTS (e.g. ":hadamard"), LGRAN (the
# --quantize-logits granularity, default tensor), THREADS (default 2).
set -eu

BIN=${BIN:-bin}
OUT=${OUT:-out/fig8}
MODELS=${MODELS:-demo/models}
SAMPLES=${SAMPLES:-40}
WBITS=${WBITS:-"16 8 6 4 3"}
KVBITS=${KVBITS:-"16 8 4"}
LBITS=${LBITS:-"16 8 6 4"}
WOPTS=${WOPTS:-}
KVOPTS=${KVOPTS:-}
LGRAN=${LGRAN:-tensor}
THREADS=${THREADS:-2}
PY=/usr/bin/python3

die() { echo "fig8_sweep: $*" >&2; exit 1; }
for t in probe noise; do [ -x "$BIN/$t" ] || die "$BIN/$t not found (run make all first)"; done
for m in transformer diff; do [ -f "$MODELS/$m/config.json" ] || die "$MODELS/$m: no model (demo/README.md)"; done
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

CSV=$OUT/sweep.csv
echo "model,weight_bits,kv_bits,logit_bits,accuracy,targets,target_nll,dump,kld" > "$CSV"
for m in transformer diff; do
    BASE=$OUT/${m}_w16_kv16_l16.h5
    for w in $WBITS; do
        for kv in $KVBITS; do
            for lq in $LBITS; do
                D=$OUT/${m}_w${w}_kv${kv}_l${lq}.h5
                # shellcheck disable=SC2046  # flags() is a word list
                "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/prompts.jsonl" --out "$D" --save-logits \
                    --threads "$THREADS" --force --quiet $(flags "$w" "$kv" "$lq")
                # ---- KLD against the unquantized dump: the compare tool (bin/compare, being
                # built beside this script, not yet on main). When it exists its JSON goes
                # beside the dump and the kld column names it; fill the column from that
                # JSON's mean KLD once its field names are fixed. ----
                K=""
                if [ -x "$BIN/compare" ] && [ -f "$BASE" ] && [ "$D" != "$BASE" ]; then
                    K=${D%.h5}.compare.json
                    "$BIN/compare" "$BASE" "$D" --format json > "$K" || K=""
                fi
                $PY - "$D" "$m" "$w" "$kv" "$lq" "$K" >> "$CSV" <<'EOF'
import sys
import h5py
import numpy as np
path, m, w, kv, lq, kld = sys.argv[1:]
with h5py.File(path, "r") as f:
    s = [f["samples"][k] for k in sorted(f["samples"])]
    ok = [int(g["target_correct"][()]) for g in s if "target_correct" in g]
    nll = [float(g["target_nll"][()]) for g in s if "target_nll" in g]
print("%s,%s,%s,%s,%.4f,%d,%.4f,%s,%s" % (m, w, kv, lq, np.mean(ok) if ok else float("nan"), len(ok),
                                          np.mean(nll) if nll else float("nan"), path, kld))
EOF
            done
        done
    done
done
echo "fig8_sweep: wrote $CSV and $(($(wc -l < "$CSV") - 1)) dumps in $OUT" >&2
