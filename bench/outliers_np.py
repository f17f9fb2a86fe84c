#!/usr/bin/python3
"""h5py + numpy doing what `bin/outliers DUMP` does by default, on the same dump: read every
sample's outlier datasets (samples/*/tokens' length; outliers/{logits,hidden}/{top, top_index,
hist, moments}; outliers/hidden/{channel_absmax, channel_count}: the datasets bin/outliers
reads) and pool Table 5 — the n largest of the merged top lists and the median of the summed
histograms (docs/format.md's bin rule: the midpoint of the bin holding the element of rank
floor((n - 1) / 2)).

    bench/outliers_np.py DUMP MODE REPEATS [CSV]

MODE read: only read the datasets (the time of reading them); MODE table5: read and pool.
Prints "best_seconds samples", the best over REPEATS runs in one process (the file is opened
and closed inside each timed run; the interpreter and imports are not counted). With CSV
(`bin/outliers DUMP --format csv` of the same dump), table5 also checks that every Top-n and
median equals bin/outliers' (exactly: both are the stored f32 values and the same bin
midpoint) and exits 1 naming the first that does not."""
import csv
import sys
import time

import h5py
import numpy as np

KINDS = ("logits", "hidden")
NAMES = ("top", "top_index", "hist", "moments")
RANKS = (1, 2, 3, 10, 100)


def read_all(path, pool):
    """Every sample's datasets; with pool, the per-kind pooled top lists and histograms."""
    tops = {k: [] for k in KINDS}
    hist = {k: None for k in KINDS}
    tokens = samples = 0
    with h5py.File(path, "r") as f:
        grp = f["samples"]
        for name in grp:
            s = grp[name]
            tokens += s["tokens"].shape[0]
            o = s["outliers"]
            for k in KINDS:
                g = o[k]
                a = [g[n][()] for n in NAMES]
                if pool:
                    tops[k].append(a[0].ravel())
                    hist[k] = a[2].sum(axis=0) if hist[k] is None else hist[k] + a[2].sum(axis=0)
            o["hidden/channel_absmax"][()]
            o["hidden/channel_count"][()]
            samples += 1
    return samples, tokens, tops, hist


def hist_median(count, min_exp, sub):
    n = int(count.sum())
    rank = (n - 1) // 2
    b = int(np.searchsorted(np.cumsum(count), rank, side="right"))
    if b == 0:
        return 0.0
    if b == len(count) - 1:
        return float(2.0 ** (min_exp + (len(count) - 2) // sub))
    e, k = (b - 1) // sub + min_exp, (b - 1) % sub
    return float(np.ldexp(1.0 + (k + 0.5) / sub, e))


def table5(path, tops, hist):
    with h5py.File(path, "r") as f:
        a = f["samples"][next(iter(f["samples"]))]["outliers/logits/hist"].attrs
        min_exp, sub = int(a["min_exponent"]), int(a["sub_bins"])
    rows = []
    for k in KINDS:
        v = np.concatenate(tops[k])
        v = -np.sort(-v[~np.isnan(v)].astype(np.float64))
        rows.append((k, [float(v[n - 1]) if n <= len(v) else None for n in RANKS], hist_median(hist[k], min_exp, sub)))
    return rows


def main():
    path, mode, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode not in ("read", "table5"):
        sys.exit("outliers_np.py: MODE is read or table5")
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        samples, tokens, tops, hist = read_all(path, mode == "table5")
        rows = table5(path, tops, hist) if mode == "table5" else []
        best = min(best, time.perf_counter() - t0)
        out = (samples, rows)
    print("%.4f %d" % (best, out[0]))
    if mode == "table5" and len(sys.argv) > 4:
        with open(sys.argv[4], newline="") as f:
            tool = {r["activation"].split()[0]: r for r in csv.DictReader(f)}
        names = {"logits": "attention", "hidden": "hidden"}
        for k, top, med in out[1]:
            r = tool[names[k]]
            for n, v in zip(RANKS, top):
                got = r["top%d" % n]
                if (v is None) != (got == "") or (v is not None and float(got) != v):
                    sys.exit("outliers_np.py: %s top%d: numpy %s, bin/outliers %s" % (k, n, v, got or "n/a"))
            if float(r["median"]) != med:
                sys.exit("outliers_np.py: %s median: numpy %r, bin/outliers %s" % (k, med, r["median"]))


if __name__ == "__main__":
    main()
