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
# Readouts (docs/probe.md): the logit lens of every layer and the direct logit attribution
# of the answer's first digit at the retrieval row (the last query's <sep>), per head, on
# one colour scale for the pair; the lens table of one prompt's last two queries
for m in transformer diff; do
    "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/prompts.jsonl" --out "$OUT/${m}_readouts.h5" \
        --logit-lens 3 --dla --force --quiet
done
TR="$OUT/transformer_readouts.h5" DR="$OUT/diff_readouts.h5"
"$BIN/effects" heads "$TR" "$DR" $L --out "$OUT/dla_heads.png" --force \
    --title "Direct logit attribution of the answer per head (mean over the prompts)"
"$BIN/effects" heads "$TR" "$DR" $L --format markdown > "$OUT/dla_heads.md"
"$BIN/effects" lens "$DR" --labels Diff --sample d50-s0 --positions 52-63 --out "$OUT/lens_diff.png" --force \
    --title "Logit lens, Diff model, prompt d50-s0"
"$BIN/effects" lens "$TR" --labels Transformer --sample d50-s0 --positions 52-63 --out "$OUT/lens_transformer.png" \
    --force --title "Logit lens, Transformer, prompt d50-s0"

# DIFF Transformer V2 (per-token lambda on map 2), trained by the same protocol (seed 1,
# 3000 of 6000 steps; demo/README.md): beside the pair, on the same prompts
V2=$OUT/diff_v2.h5
if [ -f "$MODELS/diff_v2/model.safetensors" ]; then
    "$BIN/probe" --model "$MODELS/diff_v2" --prompts "$OUT/prompts.jsonl" --out "$V2" --maps all --force --quiet
    L3="--labels Transformer,Diff,DiffV2"
    "$BIN/noise" "$T" "$D" "$V2" $L3 $N --format markdown --plot "$OUT/v1_v2_shares.png" --force --quiet \
        > "$OUT/v1_v2_shares.md"
    "$BIN/outliers" "$T" "$D" "$V2" $L3 --format markdown > "$OUT/v1_v2_outliers.md"
    "$BIN/attnmap" "$V2" --sample d50-s0 --layer 1 --head mean --maps all -o "$OUT/heatmap_v2_maps.png" --force --quiet
fi

echo
"$BIN/noise" "$T" "$D" $L $N --quiet
echo
"$BIN/outliers" "$T" "$D" $L
if [ -f "$V2" ]; then
    echo
    echo "with DIFF V2 (demo/models/diff_v2):"
    "$BIN/noise" "$T" "$D" "$V2" $L3 $N --quiet
fi
# Free-form multi-needle retrieval (probe --generate): the prompts end before the last
# query's answer, which each model must generate; exact match, and the lookback ratio
# of right and wrong answers. N needles, R queries: the trained setting (4, 4) and a
# harder one (6, 2).
for NR in 4x4 6x2; do
    n=${NR%x*} r=${NR#*x}
    "$BIN/noise" prompts -o "$OUT/free_$NR.jsonl" --length 64 --needles "$n" --queries "$r" --digits 2 \
        --samples 40 --seed 2024 --free-form --force --quiet
    for m in transformer diff; do
        "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/free_$NR.jsonl" --out "$OUT/free_${NR}_$m.h5" \
            --force --quiet
    done
    "$BIN/noise" --lookback "$OUT/free_${NR}_transformer.h5" "$OUT/free_${NR}_diff.h5" $L --format markdown \
        --plot-lookback "$OUT/lookback_steps_$NR.png" --plot-lookback-heads "$OUT/lookback_heads_$NR.png" \
        > "$OUT/lookback_$NR.md"
    echo
    echo "free-form retrieval, $n needles, $r queries (generated answers, exact match; lookback ratios):"
    sed -n '/^| model/,/^$/p' "$OUT/lookback_$NR.md"
done
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

# The head-ablation grid of both models on one scale (effects heads --source ablation:
# each head's target NLL with it zeroed, minus the unmodified run's)
"$BIN/effects" heads "$OUT/transformer_iv.h5" "$OUT/diff_iv.h5" $L --source ablation \
    --out "$OUT/ablation_heads.png" --force
# Causal tracing on the needle task: one prompt (d50-s0) and its corrupted copy, whose last
# query asks for a distractor's key (scripts/demo_corrupt.py); every (layer, position) of
# the residual stream and every (layer, head) output patched alone from the clean run,
# read as the clean answer's probability (ROME Figure 1)
/usr/bin/python3 scripts/demo_corrupt.py "$OUT/prompts.jsonl" d50-s0 "$OUT/patch_prompts.jsonl"
for m in transformer diff; do
    "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/patch_prompts.jsonl" --out "$OUT/${m}_trace.h5" \
        --patch-sweep site=resid_pre,source=clean --force --quiet
    "$BIN/probe" --model "$MODELS/$m" --prompts "$OUT/patch_prompts.jsonl" --out "$OUT/${m}_trace_heads.h5" \
        --patch-sweep site=head,source=clean --force --quiet
    "$BIN/effects" trace "$OUT/${m}_trace.h5" --sample corrupt --out "$OUT/trace_$m.png" --force
done
"$BIN/effects" heads "$OUT/transformer_trace_heads.h5" "$OUT/diff_trace_heads.h5" $L --source patch \
    --out "$OUT/trace_heads.png" --force
echo
echo "causal tracing (clean and corrupted value of the clean answer's probability):"
for m in transformer diff; do
    "$BIN/effects" trace "$OUT/${m}_trace.h5" --sample corrupt --format table | sed -n 2p
done

# Figure 8 (scripts/fig8_sweep.sh): weights, KV cache and attention logits quantized one at
# a time (SWEEP=axes; the full grid is the script's default), each setting's mean KLD to
# the unquantized model over the answer predictions (bin/compare) and its retrieval
SWEEP=axes SAMPLES=20 OUT="$OUT/fig8" MODELS="$MODELS" BIN="$BIN" sh scripts/fig8_sweep.sh 2> /dev/null
cp "$OUT/fig8/fig8.png" "$OUT/fig8.png"
echo
echo "Figure 8 sweep (out/demo/fig8/sweep.csv: model, weight/KV/logit bits, last-query retrieval, mean KLD):"
awk -F, 'NR > 1 { printf "  %-11s w%-2s kv%-2s l%-2s  retrieval %s  KLD %s\n", $1, $2, $3, $4, $6, $8 }' \
    "$OUT/fig8/sweep.csv"
# Images (docs/train.md "Images: ViT vs Diff-ViT"): a tiny ViT and Diff-ViT trained per
# seed on the synthetic shapes task (two runs at once, one thread each: about 25 s of CPU
# per model), probed on 16 held-out images with the object's box; the class token's map
# over the image (last layer: the mean over heads, ViT vs Diff-ViT on one scale, and each
# differential head's map1 | map2 | diff) and the object-vs-background shares over seeds
# (out/demo/vit_shares.md)
VO=$OUT/vit
VIT_SEEDS=${VIT_SEEDS:-1,2,3}
VF="--steps 500 --lr 3e-3 --eval-every 100 --eval-samples 256 --threads 1 --quiet --force"
"$BIN/train" --task shapes --samples "$VO/images" --count 16 --quiet --force
for s in $(echo "$VIT_SEEDS" | tr , ' '); do
    # shellcheck disable=SC2086
    "$BIN/train" --task shapes --out "$VO/seed-$s/vit" --seed "$s" $VF &
    p1=$!
    # shellcheck disable=SC2086
    "$BIN/train" --task shapes --out "$VO/seed-$s/diff_vit" --diff --seed "$s" $VF &
    p2=$!
    wait "$p1"
    wait "$p2"
    for m in vit diff_vit; do
        "$BIN/probe" --model "$VO/seed-$s/$m" --prompts "$VO/images/prompts.jsonl" --out "$VO/seed-$s/$m.h5" \
            --force --quiet
    done
done
/usr/bin/python3 scripts/demo_vit.py "$VO" "$VIT_SEEDS" > "$OUT/vit_shares.md"
s1=${VIT_SEEDS%%,*}
for i in 0 1 2 3; do
    "$BIN/attnmap" "$VO/seed-$s1/diff_vit.h5" --vs "$VO/seed-$s1/vit.h5" --labels Diff-ViT,ViT --sample "$i" \
        --head mean --size 256 -o "$OUT/vit_overlay_vs_$i.png" --force --quiet
    for h in 0 1; do # each differential head: map1 | map2 | diff (the mean over heads can cancel)
        "$BIN/attnmap" "$VO/seed-$s1/diff_vit.h5" --map all --sample "$i" --head "$h" --size 256 \
            -o "$OUT/vit_overlay_maps_${i}_h$h.png" --force --quiet
    done
done
echo
echo "images: ViT vs Diff-ViT on the shapes task, over seeds $VIT_SEEDS (out/demo/vit_shares.md):"
sed -n '/^Mean/,$p' "$OUT/vit_shares.md"

echo
echo "files in $OUT/:"
ls "$OUT" | sed 's/^/  /'
