#!/usr/bin/python3
"""h5py writing the same f16 maps as bench/map_write.c: the first LAYERS layers of
samples/000000/attn/map1 of DUMP, chunks (1, 1, 32, 512), shuffle + gzip LEVEL, only the
causal tiles (each written whole, one tile row of one head at a time: no chunk is ever
read back). Prints "best_seconds file_bytes" over REPEATS runs, create to close."""
import os
import sys
import time

import h5py
import numpy as np


def main():
    dump, layers, repeats, out, level = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    with h5py.File(dump, "r") as f:
        ds = f["samples/000000/attn/map1"]
        layers = min(layers, ds.shape[0]) if layers > 0 else ds.shape[0]
        maps = ds[:layers].astype(np.float16)
    L, H, T, _ = maps.shape
    rows, keys = min(T, 32), min(T, 512)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        with h5py.File(out, "w") as g:
            d = g.create_dataset("map1", shape=maps.shape, dtype=np.float16, chunks=(1, 1, rows, keys),
                                 compression="gzip", compression_opts=level, shuffle=True, fillvalue=0)
            for l in range(L):
                for h in range(H):
                    for r in range(0, T, rows):
                        last = min(r + rows, T) - 1
                        kend = min(T, (last // keys + 1) * keys)
                        d[l, h, r:r + rows, :kend] = maps[l, h, r:r + rows, :kend]
        best = min(best, time.perf_counter() - t0)
    print("%.4f %d" % (best, os.path.getsize(out)))


if __name__ == "__main__":
    main()
