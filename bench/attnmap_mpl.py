#!/usr/bin/python3
"""attnmap_mpl.py — the matplotlib side of bench/attnmap.sh: read one attention map
from a difflens dump with h5py and draw it with imshow + colorbar + savefig (Agg) at
the pixel size bin/attnmap uses, REPEATS times in one process.

    attnmap_mpl.py DUMP.h5 OUT.png --sample 000000 --layer 0 --head 0 --map map1 \
        --px 1024 --repeats 3

Prints "best_s=S import_s=I" (S: the best read + draw + save time; I: interpreter-side
import of numpy, h5py and matplotlib, paid once per process)."""
import argparse
import time

t_import = time.perf_counter()
import h5py  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

t_import = time.perf_counter() - t_import


def once(args):
    with h5py.File(args.dump, "r") as f:
        a = f["samples/%s/attn/%s" % (args.sample, args.map)][args.layer, args.head, :, :].astype(np.float32)
    T = a.shape[1]
    masked = np.triu(np.ones((a.shape[0], T), dtype=bool), 1)
    a = np.ma.masked_array(a, masked)
    vmax = np.percentile(a.compressed(), 99.5)
    # A figure whose map area is about px x px, with a title and a colour bar, as attnmap draws.
    dpi = 100
    fig = plt.figure(figsize=((args.px + 260) / dpi, (args.px + 160) / dpi), dpi=dpi)
    ax = fig.add_axes([60 / (args.px + 260), 80 / (args.px + 160), args.px / (args.px + 260), args.px / (args.px + 160)])
    im = ax.imshow(a, cmap="viridis", vmin=0, vmax=vmax, interpolation="antialiased")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title("sample %s, layer %d, head %d, %s" % (args.sample, args.layer, args.head, args.map))
    fig.colorbar(im, ax=ax)
    fig.savefig(args.out, dpi=dpi)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("out")
    ap.add_argument("--sample", default="000000")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--head", type=int, default=0)
    ap.add_argument("--map", default="map1")
    ap.add_argument("--px", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    best = None
    for _ in range(args.repeats):
        t = time.perf_counter()
        once(args)
        t = time.perf_counter() - t
        best = t if best is None else min(best, t)
    print("best_s=%.4f import_s=%.4f" % (best, t_import))


if __name__ == "__main__":
    main()
