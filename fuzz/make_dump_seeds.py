#!/usr/bin/python3
"""Writes seed dumps for fuzz_dump_read (built with h5py, kept out of git): valid
difflens dumps with random shapes, dtypes, chunking, filters and attributes, plus a few
edited ones. Usage: make_dump_seeds.py CORPUS_DIR [COUNT]"""
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 24
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(18)
DTYPES = [np.float16, np.float32, np.float64, np.int32, np.uint8, np.uint64, np.uint32]


def dset(g, name, shape, dtype, chunked):
    kw = {}
    if chunked and all(s > 0 for s in shape):
        kw["chunks"] = tuple(int(rng.integers(1, s + 1)) for s in shape)
        if rng.random() < 0.5:
            kw["compression"] = "gzip"
            kw["shuffle"] = bool(rng.random() < 0.7)
    data = (rng.normal(size=shape) * 10).astype(dtype) if np.dtype(dtype).kind == "f" else \
        rng.integers(0, 200, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "f" and data.size and rng.random() < 0.3:
        data.flat[0] = np.nan
    g.create_dataset(name, data=data, **kw)


for k in range(count):
    path = os.path.join(out, "dump%02d.h5" % k)
    L, H, T = (int(x) for x in rng.integers(1, 5, size=3))
    with h5py.File(path, "w", libver=("earliest", "latest")[k % 2]) as f:
        f.attrs["format"] = "difflens-dump" if k % 7 else "something-else"
        f.attrs["format_version"] = np.int32(1 if k % 5 else 2)
        f.attrs["model_type"] = ["llama", "diff_transformer", "diffllama"][k % 3]
        for a in ("num_layers", "num_heads", "head_dim", "topk"):
            f.attrs[a] = np.int64(rng.integers(-1, 9))
        for s in range(int(rng.integers(0, 4))):
            g = f.create_group("samples/%06d" % (s * int(rng.integers(1, 3))))
            g.attrs["id"] = "s%d" % s
            g.attrs["depth"] = float(rng.random())
            dset(g, "tokens", (T,), DTYPES[int(rng.integers(0, 7))], False)
            dset(g, "segments", (T,), np.uint8, False)
            g.create_dataset("token_text", data=np.array(["t%d" % i for i in range(T)], dtype=h5py.string_dtype()))
            shape = (L, H, T, T) if rng.random() < 0.8 else tuple(int(x) for x in rng.integers(0, 4, size=int(rng.integers(1, 5))))
            dset(g, "attn/map1", shape, [np.float16, np.float32, np.float64][int(rng.integers(0, 3))], True)
            dset(g, "attn/layers", (L,), np.int32, False)
            dset(g, "noise/shares", (L, H, 7), np.float32, bool(rng.random() < 0.5))
            dset(g, "outliers/logits/hist", (L, 8), np.uint64, bool(rng.random() < 0.5))
            g["outliers/logits/hist"].attrs["edges"] = np.linspace(-3, 3, 9)
            dset(g, "outliers/hidden/top_values", (L, 4), np.float32, False)
