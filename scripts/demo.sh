#!/bin/sh
# demo.sh — `make demo`: the paper's measurements on the small matched pair that ships in
# demo/models (trained by `make demo-models`, see demo/README.md): needle prompts at
# depths 0-100%, both models probed, and the figures and tables written to out/demo/.
set -eu
BIN=${BIN:-bin}
MODELS=${MODELS:-demo/models}
OUT=out/demo
T=$OUT/transformer.h5
D=$OUT/diff.h5

for m in transformer diff; do
    [ -f "$MODELS/$m/model.safetensors" ] ||
        { echo "demo: $MODELS/$m is missing: run 'make demo-models' to train the pair" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT"
echo "difflens demo: the matched pair in $MODELS ($(sed -n 's/.*"num_attention_heads": *\([0-9]*\).*/\1/p' \
    "$MODELS/transformer/config.json") vs $(sed -n 's/.*"num_attention_heads": *\([0-9]*\).*/\1/p' \
    "$MODELS/diff/config.json") heads), trained on the needle task (demo/README.md)"

# The task the pair was trained on: 64 tokens, 4 needles of 2 digits, 4 queries; a
# different seed from training, 40 prompts per depth.
"$BIN/noise" prompts -o "$OUT/prompts.jsonl" --length 64 --needles 4 --queries 4 --digits 2 \
    --samples 40 --seed 2024 --force --quiet
for m in transformer diff; do
    "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/prompts.jsonl" --out "$OUT/$m.h5" \
        --maps all --force --quiet
done

L="--labels Transformer,Diff"
# Figure 1 and Table 3 (attention to the answer vs noise), Table 5 (outliers). Shares of
# absolute attention (--norm abs): this Diff model's second layer has lambda = 3.35, so
# its rows sum to 1 - lambda < 0 and shares normalised by that total mean nothing.
N="--norm abs"
"$BIN/noise" "$T" "$D" $L $N --format markdown --plot "$OUT/figure1_shares.png" --force --quiet \
    > "$OUT/figure1_shares.md"
"$BIN/noise" "$T" "$D" $L $N --by layer --format markdown --force --quiet > "$OUT/shares_by_layer.md"
"$BIN/noise" "$T" "$D" $L $N --by depth --format markdown --plot-depth "$OUT/table3_depth.png" --force --quiet \
    > "$OUT/table3_depth.md"
"$BIN/outliers" "$T" "$D" $L --format markdown --plot "$OUT/table5_outliers.png" --force \
    > "$OUT/table5_outliers.md"
# The same figures as SVG, for a paper (the format follows the extension)
"$BIN/noise" "$T" "$D" $L $N --plot "$OUT/figure1_shares.svg" --force --quiet > /dev/null
"$BIN/noise" "$T" "$D" $L $N --by depth --plot-depth "$OUT/table3_depth.svg" --force --quiet > /dev/null
"$BIN/outliers" "$T" "$D" $L --plot "$OUT/table5_outliers.svg" --force > /dev/null
# The retrieval row (last query token) of one sample: every head of the last layer,
# and the mean over heads of each layer, Transformer vs Diff; PNG for the screen, SVG
# and PDF laid out for a two-column paper width (--width 7)
"$BIN/attnmap" "$T" --vs "$D" $L --sample d50-s0 --layers all --head mean --rows 56: \
    -o "$OUT/heatmap_retrieval_rows.png" --force --quiet
"$BIN/attnmap" "$T" --vs "$D" $L --sample d50-s0 --layers all --head mean --rows 56: --width 7 \
    -o "$OUT/heatmap_retrieval_rows.svg" --force --quiet
"$BIN/attnmap" "$T" --vs "$D" $L --sample d50-s0 --layer 1 --head mean \
    -o "$OUT/heatmap_layer1_mean.png" --force --quiet
"$BIN/attnmap" "$T" --vs "$D" $L --sample d50-s0 --layer 1 --head mean --width 7 \
    -o "$OUT/heatmap_layer1_mean.pdf" --force --quiet
# The training curves of the pair, from its train.csv files
"$BIN/train" --pair "$MODELS" --plot "$OUT/train_curves.svg" --plot-only --quiet

echo
"$BIN/noise" "$T" "$D" $L $N --quiet
echo
"$BIN/outliers" "$T" "$D" $L
# Over seeds (demo/seeds/, written by `make demo-models`): the curves of every seed, the
# steps to 25/50/90% retrieval and the mechanisms at matched skill and at the end
SEEDS=${SEEDS:-demo/seeds}
if [ -f "$SEEDS/seeds_steps_to.md" ]; then
    cp "$SEEDS/seeds.png" "$OUT/seeds_curves.png"
    cp "$SEEDS/seeds_steps_to.md" "$SEEDS/mechanisms.md" "$OUT/"
    echo
    echo "over seeds ($SEEDS/, the protocol of make demo-models; the pair above is seed 1):"
    sed -n '/^|/p' "$SEEDS/seeds_steps_to.md"
    echo
    awk '/^## answer share/ { exit } /^## / { p = 1 } p' "$SEEDS/mechanisms.md"
fi
echo
echo "files in $OUT/:"
ls "$OUT" | sed 's/^/  /'

# Interventions (docs/probe.md "Interventions"): what λ = 0 does at inference to the Diff
# model (retrieval, and the answer share of its maps with map 2 removed: --apply), and
# each head of either model zero-ablated, one at a time.
"$BIN/probe" --model "$MODELS/diff" --prompts "$OUT/prompts.jsonl" --out "$OUT/diff_lambda0.h5" \
    --apply lambda:layer=all,value=0 --force --quiet
for m in transformer diff; do
    heads=$(sed -n 's/.*"num_attention_heads": *\([0-9]*\).*/\1/p' "$MODELS/$m/config.json")
    layers=$(sed -n 's/.*"num_hidden_layers": *\([0-9]*\).*/\1/p' "$MODELS/$m/config.json")
    set --
    [ "$m" = diff ] && set -- --intervene lambda:layer=all,value=0 --intervene map:layer=all,use=map2
    l=0
    while [ "$l" -lt "$layers" ]; do
        h=0
        while [ "$h" -lt "$heads" ]; do
            set -- "$@" --intervene "ablate:layer=$l,head=$h,mode=zero"
            h=$((h + 1))
        done
        set -- "$@" --intervene "ablate:layer=$l,mode=zero"
        l=$((l + 1))
    done
    "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/prompts.jsonl" --out "$OUT/${m}_iv.h5" "$@" --force --quiet
done
/usr/bin/python3 scripts/demo_effects.py Transformer="$OUT/transformer_iv.h5" Diff="$OUT/diff_iv.h5" \
    > "$OUT/interventions.md"
echo
echo "interventions (out/demo/interventions.md; answer share with λ = 0 below):"
cat "$OUT/interventions.md"
"$BIN/noise" "$D" "$OUT/diff_lambda0.h5" --labels "Diff,Diff λ=0 at inference" $N --format markdown --quiet \
    > "$OUT/lambda0_shares.md"
cat "$OUT/lambda0_shares.md"
