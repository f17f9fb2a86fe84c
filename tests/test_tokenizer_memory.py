#!/usr/bin/python3
"""bin/tokenize's peak memory on a 4 MB text, as one text (--whole) and one text a line:
at most 4 bytes a byte of input above what the tokenizer alone takes (the same run on
an empty text), for the real tokenizer.json files of Llama 2, Llama 3, Qwen 3, Gemma 3
and Gemini (Llama 2, Gemma 3 and Gemini replace every space in the normalizer: they are
encoded in windows, lib/text/tokenizer_window.c). The peak is the child's own
peak resident memory, as GNU time reports it (scripts/deps.sh installs time). The text is bench/tokenizer.sh's: lines drawn with a fixed
seed from tests/test_tokenizer_ref.py's corpus (make_text, which the bench calls). The ids are the reference's: that test
checks them on texts longer than two windows."""
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import test_tokenizer_ref as ref  # noqa: E402

BIN = os.environ.get("BIN", os.path.join(ROOT, "bin"))
NAMES = ("llama2", "llama3", "qwen3", "gemma3", "gemini")
TIME = "/usr/bin/time"
LIMIT = 4.0  # bytes of peak memory a byte of input, above the tokenizer's own


def make_text(path, size):
    """At least size bytes of lines drawn with a fixed seed from the reference corpus
    (bench/tokenizer.sh's text too), written whole or not at all."""
    lines = [t for t in ref.corpus()[:40] if t]
    rng = random.Random(4)
    out, n = [], 0
    while n < size:
        t = rng.choice(lines)
        out.append(t)
        n += len(t.encode()) + 1
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    os.replace(path + ".tmp", path)


def peak_kb(args):
    """Run args (output to /dev/null) under GNU time: the peak resident memory in kB.
    (Not os.wait4's: a child forked from this process counts the parent's pages
    until it execs.)"""
    with tempfile.NamedTemporaryFile("r") as rep, open(os.devnull, "wb") as null:
        r = subprocess.run([TIME, "-o", rep.name, "-f", "%M"] + args, stdout=null, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise SystemExit("failed: %s: %s" % (" ".join(args), r.stderr.decode()))
        return int(rep.read().split()[-1])


def main():
    for need, what in ((ref.MODULES, "the tokenizer.json files"), (TIME, "GNU time")):
        if not os.path.exists(need):
            print("FAIL: %s missing (%s); run scripts/deps.sh" % (what, need))
            return 1
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        text, empty = os.path.join(d, "text.txt"), os.path.join(d, "empty.txt")
        make_text(text, 4 * 1000 * 1000)
        open(empty, "w").close()
        size = os.path.getsize(text)
        for name in NAMES:
            tok = os.path.join(ref.MODULES, ref.TOKENIZERS[name])
            base = [os.path.join(BIN, "tokenize"), "--no-special", "--tokenizer", tok]
            alone = peak_kb(base + ["--whole", empty])
            for mode, flags in (("whole", ["--whole"]), ("lines", [])):
                kb = peak_kb(base + flags + [text])
                per_byte = (kb - alone) * 1024 / size
                ok = per_byte <= LIMIT
                bad += not ok
                print("%-7s %-5s peak %6.1f MB, tokenizer alone %6.1f MB: %.2f bytes a byte of input (limit %.0f)%s" %
                      (name, mode, kb / 1024, alone / 1024, per_byte, LIMIT, "" if ok else "  OVER"))
    if bad:
        print("FAIL")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
