#!/bin/sh
# doc_figures.sh — the SVG figures of docs/ (one of each kind), from the demo pair's dumps
# that `make demo` leaves in out/demo/. Run after `make demo`:
#
#   sh scripts/doc_figures.sh            (BIN=bin, IMG=docs/img)
#
# Paper sizes: --width 3.3 (one column) or 7 (two columns) for attnmap; the charts keep
# their tools' layouts. Each SVG is rasterised once with rsvg-convert as a check.
set -eu
BIN=${BIN:-bin}
IMG=${IMG:-docs/img}
OUT=out/demo
T=$OUT/transformer.h5
D=$OUT/diff.h5
[ -f "$T" ] && [ -f "$D" ] || { echo "doc_figures: run 'make demo' first ($T, $D)" >&2; exit 1; }
mkdir -p "$IMG"
L="--labels Transformer,Diff"
A="$BIN/attnmap"
S="--sample d50-s0"

# attnmap: one map, map1 | map2 | diff, every head, Transformer vs Diff, their delta
"$A" "$D" $S --layer 1 --head 0 --width 3.3 -o "$IMG/attnmap_single.svg" --force --quiet
"$A" "$D" $S --layer 1 --head 0 --maps all --width 7 -o "$IMG/attnmap_maps_all.svg" --force --quiet
"$A" "$T" $S --layer 1 --heads all --cmap magma --scale sqrt --width 7 -o "$IMG/attnmap_heads.svg" \
    --force --quiet
"$A" "$T" --vs "$D" $L $S --layers all --head mean --width 7 -o "$IMG/attnmap_vs.svg" --force --quiet
"$A" "$T" --vs "$D" $L $S --layer 1 --head mean --delta --width 3.3 -o "$IMG/attnmap_delta.svg" --force --quiet
# demo/README.md's: the retrieval rows (last query) of both layers, Transformer vs Diff
"$A" "$T" --vs "$D" $L $S --layers all --head mean --rows 56: -o "$IMG/demo_retrieval_rows.png" --force --quiet

# token labels: the last query rows of one sample, each token's text on the axes; the
# prompt's text is swapped for Unicode strings (same token ids) to show real glyphs and
# fallback: CJK from Noto CJK when installed, a box with the code point otherwise
TOK=$OUT/doc_tokens
mkdir -p "$TOK"
/usr/bin/python3 - "$OUT/prompts.jsonl" "$TOK/prompt.jsonl" <<'PYEOF'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src) as f:
    rows = [json.loads(line) for line in f]
p = next(r for r in rows if r["id"] == "d50-s0")
swap = {"<needle>": "\u2192needle", "<query>": "query\u2265", "<sep>": "\u00b7", "<bos>": "<bos>"}
text = [swap.get(t, t) for t in p["text"]]
text[30:34] = [" Paris", "\u6771\u4eac", "\u03bb", "\U0001f642"]
p["text"] = text
with open(dst, "w") as f:
    f.write(json.dumps(p, ensure_ascii=False) + "\n")
PYEOF
"$BIN/probe" --model demo/models/diff --prompts "$TOK/prompt.jsonl" --out "$TOK/diff.h5" --maps all --force --quiet
"$A" "$TOK/diff.h5" --layer 1 --head 0 --rows 44:64 --cols 30:64 --width 7 -o "$IMG/attnmap_tokens.svg" \
    --force --quiet

# strips: a dump that stored only the analysis rows (probe --maps 'rows=analysis')
"$BIN/probe" --model demo/models/diff --prompts "$OUT/prompts.jsonl" --out "$TOK/rows.h5" \
    --maps 'layers=all;heads=all;rows=analysis' --force --quiet
"$A" "$TOK/rows.h5" $S --layers all --head mean --width 7 -o "$IMG/attnmap_strips.svg" --force --quiet

# noise: Figure 1 bars and the depth plot; outliers: per-layer plot; train: the pair's curves
"$BIN/noise" "$T" "$D" $L --norm abs --plot "$IMG/noise_shares.svg" --force --quiet > /dev/null
"$BIN/noise" "$T" "$D" $L --norm abs --by depth --plot-depth "$IMG/noise_depth.svg" --force --quiet > /dev/null
"$BIN/outliers" "$T" "$D" $L --plot "$IMG/outliers_layers.svg" --force > /dev/null
"$BIN/train" --pair demo/models --plot "$IMG/demo_train.svg" --plot-only --quiet

# effects: the pair's readouts (make demo writes the *_readouts.h5 dumps)
"$BIN/effects" heads "$OUT/transformer_readouts.h5" "$OUT/diff_readouts.h5" $L --out "$IMG/demo_dla_heads.png" \
    --force --title "Direct logit attribution of the answer per head (mean over the prompts)"
"$BIN/effects" lens "$OUT/diff_readouts.h5" --labels Diff $S --positions 52-63 --out "$IMG/demo_lens_diff.png" \
    --force --title "Logit lens, Diff model, prompt d50-s0"

for f in attnmap_single attnmap_maps_all attnmap_heads attnmap_vs attnmap_delta attnmap_tokens attnmap_strips \
         noise_shares noise_depth outliers_layers demo_train; do
    rsvg-convert "$IMG/$f.svg" -o "$TOK/$f.png" || { echo "doc_figures: rsvg-convert failed on $f.svg" >&2; exit 1; }
    echo "$IMG/$f.svg: $(wc -c < "$IMG/$f.svg") bytes"
done
