#!/usr/bin/python3
"""Every code point (U+0000..U+10FFFF but the surrogates) through bin/tokenize and
through Hugging Face tokenizers (tests/tokenizer_ref.js): ids and offsets identical.

Synthetic tokenizer.json files make each difference visible: a BPE over the 256
byte-level symbols with no merges, so every byte of the normalized text is a token
(its id says the byte, its offsets the original character) —
  - the normalizers NFC, NFD, NFKC, NFKD over all code points (Unicode 9.0.0's data,
    as the reference's unicode-normalization-alignments crate has them), their output
    then rid of what needs no comparing (Split "Removed": unassigned and private-use
    code points, which no normal form produces, and the CJK Unified Ideographs);
  - the regex classes as Split(pattern, "Removed"): removing every character outside
    the class leaves exactly the class's members as tokens (\\s, \\S, \\p{L}, \\P{N},
    \\p{P}, \\p{S}, \\p{M}, \\p{Lu}, \\W in and outside a class, \\D: Oniguruma's
    definitions over Unicode 16.0.0, as the reference's regex engine has them).
The code points go in texts of 8192 (keeping both processes' time small)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_tokenizer_ref as tref  # noqa: E402
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("BIN", os.path.join(ROOT, "bin"))
MODULES = os.path.join(ROOT, ".npm-deps", "node_modules")
# the CJK Unified Ideographs blocks of Unicode 14 and before (all letters, no normal form
# touches them; Extension I, new in 15.1, stays in), and with them what no normal form
# can produce: unassigned and private-use code points
CJK = "\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{20000}-\\x{2EBEF}\\x{2EE60}-\\x{3134F}"
BORING = "[\\p{Cn}\\p{Co}" + CJK + "]"
CLASSES = ["[^\\s]", "\\S", "[^\\p{L}]|[" + CJK + "]", "\\P{N}", "[^\\p{P}]", "[^\\p{S}]", "[^\\p{M}]",
           "[^\\p{Lu}]", "[\\W\\p{L}]", "\\W|\\p{L}", "\\D"]
NORMALIZERS = ["NFC", "NFD", "NFKC", "NFKD"]
CHUNK = 8192


def byte_symbols():
    """GPT-2's byte → printable character map (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def tokenizer(normalizer, split):
    pre = [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]
    if split:
        pre.insert(0, {"type": "Split", "pattern": {"Regex": split}, "behavior": "Removed", "invert": False})
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": {"type": normalizer} if normalizer else None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": pre}, "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": {s: i for i, s in enumerate(byte_symbols())}, "merges": []}}


def ids_offsets(line):
    """{"ids", "offsets"} of one bin/tokenize line, without parsing its "tokens" and "text"
    (half the line, never compared here): inside a JSON string a quote is escaped, so
    '],"tokens":[' first ends the ids and the last '],"offsets":[' starts the offsets."""
    a = line.index('],"tokens":[')
    b = line.rindex('],"offsets":[')
    if not line.startswith('{"ids":[') or not line.endswith("]}"):
        raise ValueError("not a bin/tokenize line: %r" % line[:80])
    return {"ids": json.loads(line[7:a + 1]), "offsets": json.loads(line[b + 12:-1])}


def main():
    if not os.path.isdir(os.path.join(MODULES, "@anush008", "tokenizers")):
        print("FAIL: the reference is missing; run scripts/deps.sh (installs .npm-deps/)")
        return 1
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(map(chr, cps[i:i + CHUNK])) for i in range(0, len(cps), CHUNK)]
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        configs = [(n, BORING) for n in NORMALIZERS] + [(None, c) for c in CLASSES]
        paths, items = [], []
        for k, (norm, split) in enumerate(configs):
            paths.append(os.path.join(d, "tok%d.json" % k))
            with open(paths[-1], "w", encoding="utf-8") as f:
                json.dump(tokenizer(norm, split), f, ensure_ascii=False)
            items += [(t, False, paths[-1]) for t in texts]
        # the reference in two node processes, running while bin/tokenize does its side
        runs, where = tref.run_ref_split(items)
        txt = os.path.join(d, "texts.jsonl")
        with open(txt, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps(t) + "\n")
        outs = []
        for k in range(len(configs)):
            r = subprocess.run([os.path.join(BIN, "tokenize"), "--tokenizer", paths[k], "--json", "--no-special", txt],
                               capture_output=True, text=True)
            # not splitlines: U+0085 is text
            outs.append((r.returncode, r.stderr, [ids_offsets(l) for l in r.stdout.split("\n") if l]))
        refs = tref.collect_split(runs, where)
        for k, (norm, split) in enumerate(configs):
            rc, stderr, ours = outs[k]
            name = norm or "Split %s Removed" % split
            if rc != 0:
                print("FAIL %s: bin/tokenize: %s" % (name, stderr.strip()))
                failed += 1
                continue
            ref = refs[k * len(texts):(k + 1) * len(texts)]
            bad, ntok, shown = 0, 0, 0
            for t, a, b in zip(texts, ours, ref):
                ntok += len(b["ids"])
                if a["ids"] == b["ids"] and a["offsets"] == b["offsets"]:
                    continue
                bad += 1
                # the first character where the two part
                sa = {tuple(o) for o in a["offsets"]}
                sb = {tuple(o) for o in b["offsets"]}
                diff = sorted(sa ^ sb) or [(i, i) for i, (x, y) in enumerate(zip(a["ids"], b["ids"])) if x != y][:1]
                if shown < 3 and diff:
                    shown += 1
                    s, e = diff[0][0], max(diff[0][1], diff[0][0] + 1)
                    print("  %s: first difference at U+%04X (%s)" % (name, ord(t[s]) if s < len(t) else 0,
                                                                      "ours" if tuple(diff[0]) in sa else "reference"))
            if len(ours) != len(ref):
                bad += 1
            print("%-26s %d texts, %d tokens: %d texts differ" % (name, len(texts), ntok, bad))
            failed += bad
    print("code points: %d (all but the surrogates)" % len(cps))
    if failed:
        print("FAIL")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
