#!/bin/sh
# same_outputs.sh REPO OUT — one fixed pipeline run with REPO's binaries (bin/ built): three
# random models (llama, diff_transformer, diffllama with GQA), noise prompts, probe with all
# maps and logits (h5dump text without object addresses), noise, outliers and attnmap in
# several formats, answers of the view API, and 10 training steps of two models (train.csv
# without its timing columns, checkpoints as tensor hashes without the elapsed time and the
# checksum that covers it). Writes OUT/SHA256SUMS: a refactor that changes no behaviour
# gives the same file for the old and the new tree.
#   sh scripts/same_outputs.sh OLD_TREE /tmp/a; sh scripts/same_outputs.sh . /tmp/b
#   diff /tmp/a/SHA256SUMS /tmp/b/SHA256SUMS
set -eu
R=$(cd "$1" && pwd); O=$2; B=$R/bin; PY=/usr/bin/python3
rm -rf "$O"; mkdir -p "$O"; cd "$O"; O=.
export OMP_NUM_THREADS=2
for t in llama diff_transformer diffllama; do
  $PY "$R/tests/ref/make_model.py" "$O/m_$t" --type $t --layers 2 --hidden 64 --heads 4 --kv-heads 2 --vocab 128 --seed 3 >/dev/null
done
$B/noise prompts -o "$O/prompts.jsonl" --length 64 --needles 4 --queries 2 --digits 2 --samples 6 --seed 7 --quiet
for t in llama diff_transformer diffllama; do
  $B/probe --model "$O/m_$t" --prompts "$O/prompts.jsonl" --out "$O/$t.h5" --maps all --save-logits --quiet
  h5dump "$O/$t.h5" | sed "s/DATASET [0-9]* /DATASET /" > "$O/$t.h5dump.txt"
done
L="--labels A,B,C"
$B/noise "$O/llama.h5" "$O/diff_transformer.h5" "$O/diffllama.h5" $L --format markdown --plot "$O/noise.png" --quiet > "$O/noise.md"
$B/noise "$O/llama.h5" "$O/diff_transformer.h5" "$O/diffllama.h5" $L --format json --by layer --quiet > "$O/noise_layer.json"
$B/noise "$O/llama.h5" "$O/diff_transformer.h5" --labels A,B --norm abs --by depth --format csv --plot-depth "$O/depth.svg" --quiet > "$O/noise_depth.csv"
$B/outliers "$O/llama.h5" "$O/diff_transformer.h5" "$O/diffllama.h5" $L --format markdown --plot "$O/outliers.png" > "$O/outliers.md"
$B/outliers "$O/llama.h5" "$O/diff_transformer.h5" --labels A,B --format json --plot "$O/outliers.svg" > "$O/outliers.json"
S=$(sed -n '1s/.*"id": *"\([^"]*\)".*/\1/p' "$O/prompts.jsonl")
$B/attnmap "$O/llama.h5" --vs "$O/diff_transformer.h5" --labels A,B --sample "$S" --layers all --head mean -o "$O/vs.png" --quiet
$B/attnmap "$O/diff_transformer.h5" --sample "$S" --layer 1 --head 0 -o "$O/d.svg" --quiet
$B/attnmap "$O/diffllama.h5" --sample "$S" --layer 0 --head all -o "$O/dl.png" --quiet
# view API
PORT=$((20000 + $$ % 20000))
$B/view "$O/llama.h5" "$O/diff_transformer.h5" --port $PORT --quiet > "$O/view.url" 2>/dev/null &
VP=$!
sleep 1.5
U=http://127.0.0.1:$PORT
for q in "/api/dumps" "/api/sample?d=1&s=0" "/api/limits?d=1&s=0&l=1&h=0&m=diff" \
         "/api/cell?d=1&s=0&l=1&h=0&q=30&k=5" "/api/row?d=1&s=0&l=1&h=0&m=diff&q=40" "/api/colormap?cmap=viridis" \
         "/api/thumb?d=0&s=1&l=0&h=0&m=map1"; do
  n=$(echo "$q" | tr '/?&=' '____')
  curl -s "$U$q" > "$O/view$n" || true
done
kill $VP; wait $VP 2>/dev/null || true
rm -f "$O/view.url"
$B/train --out "$O/train_d" --type diff_transformer --layers 1 --hidden 32 --heads 2 --ffn 64 --seq 32 --needles 2 --digits 2 --batch 4 --steps 10 --eval-every 5 --seed 2 --threads 1 --quiet
$B/train --out "$O/train_l" --type llama --layers 1 --hidden 32 --heads 2 --ffn 64 --seq 32 --needles 2 --digits 2 --batch 4 --steps 10 --eval-every 5 --seed 2 --threads 1 --quiet
for t in llama diff_transformer diffllama; do rm -f "$O/$t.h5"; done
for d in train_d train_l; do
  cut -d, -f1-5 $d/train.csv > $d/train.csv.t && mv $d/train.csv.t $d/train.csv
  $PY - $d/checkpoint.safetensors <<'PYEOF'
# canonical listing: every tensor's name, dtype, shape and data hash, without the run's
# elapsed time and the checksum that covers it
import hashlib, json, struct, sys
p = sys.argv[1]; b = open(p, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
out = []
for k in sorted(h):
    if k in ('__metadata__', 'train.elapsed_s', 'train.checksum'):
        continue
    a, e = h[k]['data_offsets']
    out.append('%s %s %s %s' % (k, h[k]['dtype'], h[k]['shape'], hashlib.sha256(b[8 + n + a:8 + n + e]).hexdigest()))
open(p + '.list', 'w').write('\n'.join(out) + '\n')
PYEOF
  rm $d/checkpoint.safetensors
done
(find . -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS)
wc -l < "$O/SHA256SUMS"
