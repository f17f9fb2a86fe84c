#!/usr/bin/python3
"""Small hand-built tokenizer.json files, one per component setting (each normalizer,
each pre-tokenizer with each behaviour and invert, Metaspace prepend schemes, ByteLevel
options, added-token flags, post-processors, BPE options), encoded by bin/tokenize and by
Hugging Face tokenizers (node reference, tests/tokenizer_ref.js): ids and offsets must be
identical on every text. The real checkpoints' files are in test_tokenizer_ref.py."""
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_tokenizer_ref as ref  # noqa: E402

BIN = ref.BIN

TEXTS = [
    "", "hello world", "  Hello,   World!  ", "the thing is in the ring", "tab\there\nnew line",
    "a1b22c333d4444", "x = 3.14; y = -2e10", "café", "cafe\u0301", "ﬁne ½ ² Ⅻ", "ÅNGSTRÖM Straße",
    "日本語 text", "emoji 😀 here", "<s>start", "end</s>", "mid<s>dle", " <s> spaced <s> ", "<S>upper",
    "word<mask>word", "a <mask> b", "wordsep", "it's don't we'll", "...!!??", "--__--", "a  b   c",
    "\u00a0nbsp\u2003em", "mixed 12 and ١٢ digits", "ends with space ", " starts with space",
    "a <new> b<new2>c <x>hello<mask> <mask>",
]

# ---------------------------------------------------------------- models ----

BYTE_TOKENS = ["<0x%02X>" % b for b in range(256)]


def sp_model(**opts):
    """A SentencePiece-style BPE: <unk>, the 256 byte tokens, printable ASCII, ▁ and a
    few merges."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<mask>": 3}
    for t in BYTE_TOKENS:
        vocab[t] = len(vocab)
    for c in [chr(i) for i in range(32, 127)] + ["▁", "é", "ß"]:
        vocab.setdefault(c, len(vocab))
    merges = [("t", "h"), ("th", "e"), ("▁", "t"), ("▁t", "he"), ("i", "n"), ("in", "g"), ("▁", "the"),
              ("e", "r"), ("l", "l"), ("h", "e"), ("he", "ll"), ("hell", "o"), ("▁", "w"), ("o", "r"), ("▁w", "or"),
              ("▁wor", "l"), ("▁worl", "d"), ("2", "2"), ("3", "3"), ("▁", "▁")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
             "merges": ["%s %s" % m for m in merges]}
    model.update(opts)
    return model


def bl_char(b):
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra = [i for i in range(256) if i not in keep]
    return chr(b) if b in keep else chr(256 + extra.index(b))


def bl_model(**opts):
    """A byte-level BPE: the 256 byte characters and a few merges (on their mapped form)."""
    vocab = {"<s>": 0, "</s>": 1, "<mask>": 2}
    for b in range(256):
        vocab[bl_char(b)] = len(vocab)
    sp = bl_char(32)
    merges = [(sp, "t"), ("h", "e"), (sp + "t", "he"), ("i", "n"), ("in", "g"), (sp, "w"), ("o", "r"),
              (sp + "w", "or"), ("l", "d"), (sp + "wor", "ld"), (sp, sp), ("e", "l"), ("el", "l"), ("h", "ell"),
              ("hell", "o")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
             "merges": [[a, b] for a, b in merges]}
    model.update(opts)
    return model


def added(content, id_, special=True, **flags):
    d = {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": special}
    d.update(flags)
    return d


def tok(model, normalizer=None, pre=None, post=None, added_tokens=None, decoder=None):
    if added_tokens is None:
        added_tokens = [added("<s>", model["vocab"]["<s>"]), added("</s>", model["vocab"]["</s>"])]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post, "decoder": decoder,
            "model": model}


def split(pattern, behavior, invert=False, regex=True):
    return {"type": "Split", "pattern": {"Regex" if regex else "String": pattern}, "behavior": behavior,
            "invert": invert}


def cases():
    c = {}
    meta_norm = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    c["sp-plain"] = tok(sp_model(), meta_norm)
    c["sp-no-fallback"] = tok(sp_model(byte_fallback=False), meta_norm)
    c["sp-no-fuse"] = tok(sp_model(byte_fallback=False, fuse_unk=False), meta_norm)
    c["sp-suffix"] = None  # placeholder removed below (end_of_word_suffix needs suffixed vocab)
    for n in ["NFC", "NFD", "NFKC", "NFKD", "Lowercase"]:
        c["norm-" + n] = tok(sp_model(), {"type": "Sequence", "normalizers": [{"type": n}, meta_norm]})
    c["norm-strip"] = tok(sp_model(), {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True}, meta_norm]})
    c["norm-strip-left"] = tok(sp_model(), {"type": "Strip", "strip_left": True, "strip_right": False})
    c["norm-replace-regex"] = tok(sp_model(), {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, meta_norm]})
    c["norm-replace-grow"] = tok(sp_model(), {"type": "Replace", "pattern": {"String": "e"}, "content": "EE"})
    c["norm-replace-delete"] = tok(sp_model(), {"type": "Replace", "pattern": {"Regex": "[aeiou]"}, "content": ""})
    for b in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        for inv in (False, True):
            c["split-%s-%s" % (b, inv)] = tok(sp_model(), None, split("\\s+|\\d", b, inv))
        c["split-string-" + b] = tok(sp_model(), None, split(" ", b, regex=False))
        c["punct-" + b] = tok(sp_model(), None, {"type": "Punctuation", "behavior": b})
    c["digits"] = tok(sp_model(), None, {"type": "Digits", "individual_digits": False})
    c["digits-individual"] = tok(sp_model(), None, {"type": "Digits", "individual_digits": True})
    c["whitespace"] = tok(sp_model(), None, {"type": "Whitespace"})
    c["whitespace-split"] = tok(sp_model(), None, {"type": "WhitespaceSplit"})
    for scheme in ["always", "never", "first"]:
        for sp in (True, False):
            c["metaspace-%s-%s" % (scheme, sp)] = tok(sp_model(), None, {
                "type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": sp})
    c["pre-sequence"] = tok(sp_model(), None, {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": True}, {"type": "Punctuation"}]})
    for aps in (True, False):
        for rx in (True, False):
            c["bytelevel-%s-%s" % (aps, rx)] = tok(bl_model(), None, {
                "type": "ByteLevel", "add_prefix_space": aps, "trim_offsets": True, "use_regex": rx})
    c["bytelevel-ignore-merges"] = tok(bl_model(ignore_merges=True), None, {
        "type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True})
    for aps in (True, False):
        c["post-bytelevel-trim-%s" % aps] = tok(bl_model(), None, {
            "type": "ByteLevel", "add_prefix_space": aps, "trim_offsets": True, "use_regex": True},
            {"type": "ByteLevel", "add_prefix_space": aps, "trim_offsets": True, "use_regex": True})
    tmpl = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
    c["post-template"] = tok(sp_model(), meta_norm, None, tmpl)
    c["post-sequence"] = tok(bl_model(), None, {"type": "ByteLevel", "add_prefix_space": False,
                                                 "trim_offsets": True, "use_regex": True},
                             {"type": "Sequence", "processors": [
                                 {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
                                 dict(tmpl, special_tokens={"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                                                            "</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}})]})
    m = sp_model()
    for flags, name in [({}, "plain"), ({"lstrip": True}, "lstrip"), ({"rstrip": True}, "rstrip"),
                        ({"lstrip": True, "rstrip": True}, "both"), ({"single_word": True}, "single-word"),
                        ({"normalized": True}, "normalized"), ({"special": False}, "not-special")]:
        special = flags.pop("special", True)
        c["added-" + name] = tok(m, meta_norm, added_tokens=[
            added("<s>", 1), added("</s>", 2), added("<mask>", 3, special=special, **flags)])
    c["added-normalized-lower"] = tok(m, {"type": "Lowercase"}, added_tokens=[
        added("<s>", 1), added("<S>", len(m["vocab"]), normalized=True), added("</s>", 2)])
    # added tokens get Hugging Face's ids, not the file's "id": a content in the
    # vocabulary has its id, a new one the next id past the vocabulary in file order
    n = len(m["vocab"])
    base = [added("<s>", 1), added("</s>", 2)]
    c["added-id-in-vocab"] = tok(m, meta_norm, added_tokens=base + [added("hello", 7), added("<mask>", n + 5)])
    c["added-id-new-gap"] = tok(m, meta_norm, added_tokens=base + [added("<new>", n + 10), added("<new2>", n + 3,
                                                                                                  special=False)])
    c["added-id-collides"] = tok(m, meta_norm, added_tokens=base + [added("<x>", 5), added("<new>", 1)])
    c["added-id-twice"] = tok(m, meta_norm, added_tokens=base + [added("<new>", n), added("<new>", n + 1,
                                                                                          special=False, lstrip=True)])
    del c["sp-suffix"]
    c.update(duplicate_key_cases(meta_norm))
    return c


def duplicate_key_cases(meta_norm):
    """tokenizer.json texts whose objects repeat keys (json.dumps cannot write them):
    Hugging Face (serde_json) keeps the last value at the top level, in the BPE model
    and in the vocabulary; so must we. The first values would give other ids."""
    c = {}
    sp = sp_model()
    adds = [added("<s>", 1), added("</s>", 2)]
    dumps = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    # the top level: a first normalizer and a first (byte-level) model, both replaced
    c["dup-top-level"] = (
        '{"version": "1.0", "truncation": null, "padding": null, "added_tokens": %s, '
        '"normalizer": {"type": "Lowercase"}, "pre_tokenizer": null, "post_processor": null, '
        '"decoder": null, "model": %s, "normalizer": %s, "model": %s}'
        % (dumps(adds), dumps(bl_model()), dumps(meta_norm), dumps(sp)))
    # the model's own keys and the vocabulary: "he" moves to a new id at the end, and
    # byte_fallback / unk_token are given twice (the last: true, "<unk>")
    vocab = dumps(sp["vocab"])[:-1] + ', "he": %d}' % len(sp["vocab"])
    rest = dict(sp)
    del rest["vocab"]
    model = '{"byte_fallback": false, "unk_token": "<s>", ' + dumps(rest)[1:-1] + ', "vocab": ' + vocab + '}'
    t = tok(sp, meta_norm, added_tokens=adds)
    t["model"] = "@MODEL@"
    c["dup-model-and-vocab"] = dumps(t).replace('"@MODEL@"', model)
    return c


def main():
    if not os.path.isdir(os.path.join(ref.MODULES, "@anush008", "tokenizers")):
        print("FAIL: the reference is missing; run scripts/deps.sh (installs .npm-deps/)")
        return 1
    failed = 0
    total = 0
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, t in cases().items():
            paths[name] = os.path.join(d, name + ".json")
            with open(paths[name], "w", encoding="utf-8") as f:
                if isinstance(t, str):
                    f.write(t)  # raw JSON text (repeated keys)
                else:
                    json.dump(t, f, ensure_ascii=False)
        # one node process for every fixture
        items = [(x, True, paths[name]) for name in paths for x in TEXTS]
        all_refs = ref.run_ref(None, items)
        for k, name in enumerate(paths):
            path = paths[name]
            refs = all_refs[k * len(TEXTS):(k + 1) * len(TEXTS)]
            if "error" in refs[0]:
                print("%-32s the reference refuses it: %s" % (name, refs[0]["error"]))
                failed += 1
                continue
            ours = ref.run_ours(path, TEXTS, True)
            bad = 0
            for i, (a, b) in enumerate(zip(ours, refs)):
                if a["ids"] != b["ids"] or [list(o) for o in a["offsets"]] != b["offsets"]:
                    bad += 1
                    if bad <= 2:
                        print("  %s text %r\n    ours %s %s\n    ref  %s %s" % (name, TEXTS[i], a["ids"], a["offsets"],
                                                                           b["ids"], b["offsets"]))
            total += len(TEXTS)
            if bad:
                print("%-32s %d of %d texts differ" % (name, bad, len(TEXTS)))
            failed += bad
    print("fixtures: %d tokenizers, %d encodings, %d mismatches" % (len(cases()), total, failed))
    if failed:
        print("FAIL")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
