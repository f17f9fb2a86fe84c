#!/usr/bin/python3
"""Prints a short side-by-side summary of dumps written with `probe --maps all`:
λ, mean NLL, and where the last query token's attention goes (averaged over layers,
heads and samples), from the stored maps."""
import sys

import h5py
import numpy as np

SEG = {1: "bos", 2: "answer", 3: "query", 0: "context"}


def summarize(path):
    with h5py.File(path, "r") as f:
        kind = f.attrs["model_type"]
        name = "diff" if kind != "llama" else "map1"
        shares, nll = {k: [] for k in SEG.values()}, []
        for key in f["samples"]:
            s = f["samples"][key]
            seg = s["segments"][:]
            q = np.flatnonzero(seg == 3)
            row = q[-1] if len(q) else len(seg) - 1
            a = s["attn/" + name][:, :, row, :].astype(np.float64)   # [L, H, T]
            total = a.sum(axis=-1)
            for code, label in SEG.items():
                shares[label].append((a[..., seg == code].sum(axis=-1) / total).mean())
            nll.append(np.nanmean(s["nll"][:]))
        lam = f["model/lambda"][:] if "model" in f else None
        return kind, {k: float(np.mean(v)) for k, v in shares.items()}, float(np.mean(nll)), lam


rows = [summarize(p) for p in sys.argv[1:]]
print("\n%-22s" % "" + "".join("%18s" % r[0] for r in rows))
print("%-22s" % "mean NLL (nats)" + "".join("%18.3f" % r[2] for r in rows))
for label in SEG.values():
    print("%-22s" % ("share on " + label) + "".join("%18.3f" % r[1][label] for r in rows))
for r in rows:
    if r[3] is not None:
        print("lambda per layer (%s): %s" % (r[0], np.array2string(r[3], precision=3)))
print("(last query token's attention, averaged over layers, heads and samples; Diff: map1 - lambda*map2,")
print(" normalised by each row's total. Random weights: expect no retrieval, only plumbing.)")
