#!/usr/bin/python3
"""triage.py — which of a fuzzer's findings are ours. Runs the fuzz binary on each
artifact (crash-*, timeout-*, oom-*) and reads the first stack frame that lies either in
difflens' own code (lib/, tools/, fuzz/) or in a shared library: a finding whose first such
frame is in libhdf5 (or another system library) is that library's, not ours.

    fuzz/triage.py BINARY ARTIFACT...     exit 1 when any finding is ours

HDF5 1.10 crashes and loops on corrupt files in many places (H5HG_read, compact datasets,
B-tree walks); the dump reader cannot screen a file before handing it to HDF5, so those
findings are counted, not fixed here."""
import collections
import os
import re
import subprocess
import sys

FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ (?:in (\S+) )?(.*)")
OURS = re.compile(r"/(lib|tools|fuzz)/[a-z_]+(/[a-z_]+)?\.c:\d+")
SANITIZER = ("__interceptor_", "__asan", "__sanitizer", "__ubsan", "fuzzer::", "__lsan", "malloc", "calloc",
             "realloc", "free", "operator new", "__libc_start", "pread", "read", "memcpy", "memmove", "memset")


def owner(stack):
    """'ours', a library name, or 'unknown' for the first frame that is not the
    sanitizer's or libFuzzer's own."""
    for fn, where in stack:
        if fn and (fn.startswith(SANITIZER) or fn in SANITIZER):
            continue
        if fn == "LLVMFuzzerTestOneInput" or OURS.search(where):
            return "ours"
        m = re.search(r"\(([^()+]+\.so[.0-9]*)\+", where)
        if m and "/libc.so" not in m.group(1):  # libc's frames (memcpy, a signal trampoline): its caller decides
            return m.group(1).rsplit("/", 1)[-1]
    return "unknown"


def split_stacks(report):
    """The stacks of a sanitizer report: where it failed, and for a bad heap access also
    where that memory was allocated or freed — a buffer of ours that HDF5 overran is our
    bug, though HDF5's frames are on top."""
    stacks, cur = [], []
    for line in report.splitlines():
        m = FRAME.match(line)
        if m:
            cur.append((m.group(1) or "", m.group(2)))
        elif cur:
            stacks.append(cur)
            cur = []
    if cur:
        stacks.append(cur)
    return stacks


def main():
    binary = sys.argv[1]
    artifacts = [a for a in sys.argv[2:] if os.path.isfile(a)]  # an empty folder's glob stays as typed
    if not artifacts:
        print("no findings")
        return
    counts, ours = collections.Counter(), []
    for a in artifacts:
        r = subprocess.run([binary, "-timeout=5", "-rss_limit_mb=2048", "-detect_leaks=0", a], capture_output=True,
                           text=True, errors="replace", timeout=600)
        stacks = split_stacks(r.stderr)
        whos = [owner(st) for st in stacks]
        who = ("ours" if "ours" in whos else whos[0]) if stacks else \
            ("none (it no longer fails)" if r.returncode == 0 else "unknown")
        counts[who] += 1
        if who in ("ours", "unknown"):
            ours.append((a, r.stderr[-3000:]))
    for who, n in counts.most_common():
        print("%5d  %s" % (n, who))
    for a, err in ours:
        print("\n== %s\n%s" % (a, err))
    sys.exit(1 if ours else 0)


if __name__ == "__main__":
    main()
