#!/usr/bin/python3
"""view.py — `make bench` part for bin/view on a long map: a 1-layer, 1-head Diff model
(tests/ref/make_model.py, random weights, hidden 32) probed with --maps all on one
prompt of T random tokens (default 16,384), then, in one run:

  first screen  chromium (headless, tests/cdp.py) from navigation to the page ready with
                every tile of the first view loaded, a fresh server each time;
  tiles         time per tile request over HTTP (urllib, one client), cold (rendered from
                the dump) and warm (from the cache), at every zoom level, after the
                background pooling of the map has finished;
  alternative   bin/attnmap drawing the same whole map to a PNG (what one runs without
                the viewer), and the server's peak resident memory.

Ratios are against attnmap measured in the same run. Environment: BIN (default bin), OUT
(work folder, default build/bench), T (default 16384), REPEATS (default 3).
"""
import json
import os
import random
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ref"))
import make_model  # noqa: E402
from cdp import Browser  # noqa: E402

BIN = os.environ.get("BIN", "bin")
OUT = os.environ.get("OUT", "build/bench")
T = int(os.environ.get("T", "16384"))
REPEATS = int(os.environ.get("REPEATS", "3"))


def make_dump():
    os.makedirs(OUT, exist_ok=True)
    dump = os.path.join(OUT, "view_%d.h5" % T)
    if os.path.exists(dump):
        return dump
    model = os.path.join(OUT, "view_model")
    make_model.make_model(model, "diff_transformer", layers=1, hidden=32, heads=1, ffn=48, vocab=64,
                          max_pos=T, seed=1)
    rng = random.Random(0)
    toks = [0] + [rng.randrange(1, 64) for _ in range(T - 1)]
    prompt = os.path.join(OUT, "view_prompt_%d.jsonl" % T)
    with open(prompt, "w") as f:
        f.write(json.dumps({"id": "long", "tokens": toks, "answer": [[T // 2, T // 2 + 4]],
                            "query": [[T - 6, T - 3]]}) + "\n")
    subprocess.run([os.path.join(BIN, "probe"), "--model", model, "--prompts", prompt, "--out", dump,
                    "--maps", "all", "--quiet", "--force"], check=True)
    return dump


def serve(dump):
    p = subprocess.Popen([os.path.join(BIN, "view"), dump, "--port", "0", "--quiet"], stdout=subprocess.PIPE,
                         text=True)
    return p, p.stdout.readline().strip()


def fetch(url):
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        r.read()
        code = r.status
    return time.perf_counter() - t, code


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    dump = make_dump()
    # the alternative: attnmap draws the whole map
    alt = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        subprocess.run([os.path.join(BIN, "attnmap"), dump, "--map", "diff", "-o", os.path.join(OUT, "view_alt.png"),
                        "--force", "--quiet"], check=True)
        alt.append(time.perf_counter() - t)
    # first screen in the browser, a fresh server (nothing cached) each time
    first, first_cpu = [], []
    for _ in range(REPEATS):
        p, url = serve(dump)
        b = Browser(1500, 1000)
        try:
            t = time.perf_counter()
            b.navigate(url)
            b.wait("document.body && document.body.dataset.ready === '1' && dlv.tilesLoaded()", timeout=600)
            first.append(time.perf_counter() - t)
            first_cpu.append(cpu_seconds(p.pid))  # the background pooling may have begun: an upper bound
            if b.errors:
                raise SystemExit("page errors: %s" % b.errors)
        finally:
            b.close()
            p.terminate()
            p.wait()
    # tiles, after the background pooling is done
    p, url = serve(dump)
    try:
        limits = url + "api/limits?d=0&s=0&l=0&h=0&m=diff"
        fetch(limits)
        while not json.load(urllib.request.urlopen(limits))["complete"]:
            time.sleep(0.2)
        zmax = json.load(urllib.request.urlopen(url + "api/dumps"))["dumps"][0]["samples"][0]["zmax"]
        rng = random.Random(1)
        rows = []
        for z in range(zmax + 1):
            n = -(-T // (256 << z))
            cold, warm = [], []
            picks = [(x, y) for y in range(n) for x in range(y + 1)]  # tiles that hold causal cells
            rng.shuffle(picks)
            for x, y in picks[:12]:
                q = url + "api/tile?d=0&s=0&l=0&h=0&m=diff&z=%d&x=%d&y=%d&vmin=-0.001&vmax=0.001" % (z, x, y)
                dt, code = fetch(q)
                assert code == 200
                cold.append(dt)
                warm.append(fetch(q)[0])
            cold.sort()
            warm.sort()
            rows.append((z, len(cold), cold[len(cold) // 2], cold[-1], warm[len(warm) // 2]))
        rss = peak_rss_mb(p.pid)
    finally:
        p.terminate()
        p.wait()
    best_alt, best_first = min(alt), min(first)
    print("view, %d-token map (1 layer, 1 head, f16, %d MB dump), best of %d; the machine may be loaded"
          % (T, os.path.getsize(dump) >> 20, REPEATS))
    print("  attnmap, the whole map to a PNG:      %.3f s" % best_alt)
    print("  view, first screen in chromium:       %.3f s   (attnmap / view: %.2f; all runs: %s)"
          % (best_first, best_alt / best_first, " ".join("%.3f" % x for x in first)))
    print("  view server's CPU time until the first screen was up: %.3f s (best; the background pooling"
          " may have started)" % min(first_cpu))
    print("  tiles per zoom level (12 each; cold = rendered from the dump or the pooled grid, warm = cached):")
    print("    z  cells/px  cold median  cold max  warm median")
    for z, n, med, mx, wm in rows:
        print("    %d  %8d  %8.1f ms  %6.1f ms  %8.2f ms" % (z, 4 ** z, med * 1e3, mx * 1e3, wm * 1e3))
    print("  server peak RSS: %.0f MB" % rss)


if __name__ == "__main__":
    main()
