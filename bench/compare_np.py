#!/usr/bin/python3
"""compare_np.py — the same reduction as bin/compare's KLD block in h5py + numpy, for
bench/compare.sh: read both dumps' logits sample by sample (h5py), log-softmax, per-token
KLD, NLLs, Δp and same-top, then llama.cpp's statistics (means and standard errors,
sorted percentiles). DTYPE float64 (the precision bin/compare accumulates in) or float32
(numpy's fastest honest choice).

Usage: compare_np.py BASE.h5 OTHER.h5 REPEATS DTYPE [COMPARE.json]
Prints the best wall time and the best CPU time (s, all threads) over REPEATS; with COMPARE.json (bin/compare --format json)
checks Mean KLD, Mean PPL(Q) and Same top p against it first (exits 1 when they differ).
"""
import json
import sys
import time

import h5py
import numpy as np


def reduce(base, other, dt):
    kld, nq, nb, dp, same = [], [], [], [], []
    with h5py.File(base, "r") as fb, h5py.File(other, "r") as fq:
        for name in sorted(fb["samples"]):
            g, h = fb["samples"][name], fq["samples"][name]
            tok = g["tokens"][()]
            xb = g["logits"][:-1].astype(dt)
            xq = h["logits"][:-1].astype(dt)
            lb = xb - xb.max(axis=1, keepdims=True)
            lb -= np.log(np.exp(lb).sum(axis=1, keepdims=True))
            lq = xq - xq.max(axis=1, keepdims=True)
            lq -= np.log(np.exp(lq).sum(axis=1, keepdims=True))
            kld.append((np.exp(lb) * (lb - lq)).sum(axis=1, dtype=np.float64))
            rows = np.arange(len(tok) - 1)
            b, q = lb[rows, tok[1:]].astype(np.float64), lq[rows, tok[1:]].astype(np.float64)
            nb.append(-b), nq.append(-q)
            dp.append(np.exp(q) - np.exp(b))
            same.append(np.argmax(xb, axis=1) == np.argmax(xq, axis=1))
    kld, nq, nb, dp, same = (np.concatenate(v) for v in (kld, nq, nb, dp, same))
    n = len(kld)

    def se(x):
        v = np.mean(x * x) - np.mean(x) ** 2
        return np.sqrt(v / (n - 1)) if v > 0 and n > 10 else 0.0

    out = {"Mean PPL(Q)": np.exp(nq.mean()), "Mean PPL(base)": np.exp(nb.mean()),
           "Mean KLD": kld.mean(), "Mean KLD ±": se(kld), "Same top p": 100 * same.mean()}
    ks, ds = np.sort(kld), np.sort(dp)
    for f in (0.999, 0.99, 0.95, 0.9, 0.5, 0.1, 0.05, 0.01, 0.001):
        out["%g%% KLD" % (100 * f)] = np.quantile(ks, f)  # linear: llama.cpp's definition
        out["%g%% dp" % (100 * f)] = np.quantile(ds, f)
    out["RMS dp"] = np.sqrt(np.mean(dp * dp))
    return out


def main():
    base, other, repeats, dt = sys.argv[1], sys.argv[2], int(sys.argv[3]), np.dtype(sys.argv[4])
    if len(sys.argv) > 5:
        with open(sys.argv[5]) as f:
            doc = json.load(f)
        t = next(t for t in doc["tables"] if t["name"] == "kld")
        got = {r[0]: r[2] for r in t["data"]}
        want = reduce(base, other, dt)
        for k in ("Mean KLD", "Mean PPL(Q)", "Same top p"):
            if not np.isclose(got[k], want[k], rtol=1e-3 if dt == np.float32 else 1e-5):
                sys.exit("compare_np: %s: bin/compare %r, numpy %r" % (k, got[k], want[k]))
    best = cpu = None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        reduce(base, other, dt)
        t, c = time.perf_counter() - t0, time.process_time() - c0
        best = t if best is None or t < best else best
        cpu = c if cpu is None or c < cpu else cpu
    print("%.3f %.3f" % (best, cpu))


if __name__ == "__main__":
    main()
