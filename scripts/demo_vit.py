#!/usr/bin/python3
"""demo_vit.py — the ViT / Diff-ViT part of `make demo` (scripts/demo.sh): the
object-vs-background shares of the class token's attention over seeds, from probe dumps
of the held-out shapes images, with each model's held-out accuracy (its train.csv) and
its zero-shot accuracy on those images (the dump's scores).

usage: demo_vit.py RUNS SEEDS   RUNS/seed-S/{vit,diff_vit}/train.csv and RUNS/seed-S/{vit,diff_vit}.h5

Writes markdown to stdout. The share of a map is probe's vision/noise/shares (class-token
row, normalised by the row's total: 1 for softmax maps, 1 − λ for the diff map) and
shares_abs (absolute mass); the object's fair share is the fraction of patches whose
centre is in the box (vision/segments), the share a map that ignores position would get.
"""
import csv
import sys

import h5py
import numpy as np

MODELS = (("vit", "ViT"), ("diff_vit", "Diff-ViT"))
CLASSES = ["square", "circle", "triangle", "cross"]  # train_vit.h DFL_SHAPES_NAMES, class k = caption [[k]]


def last_acc(path):
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["eval_acc"]]
    return float(rows[-1]["eval_acc"]), int(rows[-1]["step"])


def dump_stats(path):
    """per map name: [L, H, 3] mean shares and abs shares over samples; fair object share;
    zero-shot accuracy; λ per layer"""
    with h5py.File(path, "r") as f:
        out, fair, right, n = {}, [], 0, 0
        lam = f["model/lambda"][:] if "model/lambda" in f else None
        for k in f["samples"]:
            s = f["samples"][k]
            seg = s["vision/segments"][:]
            fair.append(float((seg[1:] == 2).mean()))
            sid = s.attrs.get("id", "")
            sid = sid.decode() if isinstance(sid, bytes) else str(sid)
            label = CLASSES.index(sid.split("-")[0]) if sid.split("-")[0] in CLASSES else None
            sh, sa = s["vision/noise/shares"][:], s["vision/noise/shares_abs"][:]
            names = ["map1"] if sh.shape[0] == 1 else ["map1", "map2", "diff"]
            for i, m in enumerate(names):
                out.setdefault(m, ([], []))
                out[m][0].append(sh[i])
                out[m][1].append(sa[i])
            if label is not None:
                right += int(np.argmax(s["scores/zero_shot"][:]) == label)
                n += 1
        res = {m: (np.mean(v[0], 0), np.mean(v[1], 0)) for m, v in out.items()}
        return res, float(np.mean(fair)), (right / n if n else float("nan")), lam, len(fair)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    runs, seeds = argv[1], [int(s) for s in argv[2].split(",")]
    rows, per = [], {}
    for s in seeds:
        for key, label in MODELS:
            acc, step = last_acc("%s/seed-%d/%s/train.csv" % (runs, s, key))
            st, fair, zs, lam, n = dump_stats("%s/seed-%d/%s.h5" % (runs, s, key))
            per.setdefault(key, []).append((acc, st, fair, zs, lam))
            for m, (sh, sa) in st.items():
                L = sh.shape[0]
                rows.append((s, label, m, acc, zs, n, fair, sh[L - 1, :, 1].mean(), sh[L - 1, :, 2].mean(),
                             sa[L - 1, :, 1].mean(), sh[0, :, 1].mean(),
                             "" if lam is None else ", ".join("%.2f" % x for x in lam)))
    print("| seed | model | map | held-out acc | zero-shot acc (demo images) | images | object's fair share | "
          "object share, last layer | background share, last layer | object share (abs), last layer | "
          "object share, layer 0 | λ per layer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %s | %s | %.3f | %.3f | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %s |" % r)
    print()
    print("Mean ± sd over seeds of the class-token row's share of absolute attention on the object's patches "
          "(shares_abs, mean over heads and images; ViT map1 against Diff-ViT diff is the comparison):")
    print()
    print("| model | map | held-out acc | object share (abs), last layer | object share (abs), layer 0 | fair share |")
    print("|---|---|---|---|---|---|")
    for key, label in MODELS:
        for m in per[key][0][1]:
            obj = [p[1][m][1][-1, :, 1].mean() for p in per[key]]
            obj0 = [p[1][m][1][0, :, 1].mean() for p in per[key]]
            acc = [p[0] for p in per[key]]
            fair = [p[2] for p in per[key]]
            print("| %s | %s | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.3f |" % (
                label, m, np.mean(acc), np.std(acc), np.mean(obj), np.std(obj), np.mean(obj0), np.std(obj0),
                np.mean(fair)))
    print()
    print("Per head, last layer, per seed (mean over the images; heads are not matched across seeds). Share of "
          "absolute attention on the object of map1 / map2 / diff, and for Diff-ViT the diff map's signed mass "
          "on the object (its normalised share × (1 − λ)):")
    print()
    print("| model | seed | " + " | ".join("head %d" % h for h in range(4)) + " |")
    print("|---|---|" + "---|" * 4)
    for key, label in MODELS:
        for s_i, p in zip(seeds, per[key]):
            st = p[1]
            H = st["map1"][1].shape[1]
            cells = []
            for h in range(H):
                if "diff" in st:
                    cells.append("%.2f / %.2f / %.2f, signed %+.3f" % (
                        st["map1"][1][-1, h, 1], st["map2"][1][-1, h, 1], st["diff"][1][-1, h, 1],
                        st["diff"][0][-1, h, 1] * (1 - p[4][-1])))
                else:
                    cells.append("%.2f" % st["map1"][1][-1, h, 1])
            cells += [""] * (4 - H)
            print("| %s | %d | %s |" % (label, s_i, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
