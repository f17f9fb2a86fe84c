#!/usr/bin/python3
"""demo_effects.py — the interventions table of `make demo`: for each probe dump given
(LABEL=FILE.h5), every effects/ entry (docs/probe.md "Interventions") with its retrieval
accuracy (mean target_correct over samples), mean target probability and mean target
NLL, as a markdown table.

    demo_effects.py Transformer=out/demo/transformer_iv.h5 Diff=out/demo/diff_iv.h5
"""
import sys

import h5py
import numpy as np


def rows(path):
    with h5py.File(path, "r") as f:
        groups = [f["samples"][k] for k in sorted(f["samples"])]
        names = [n.decode() if isinstance(n, bytes) else n for n in groups[0]["effects/names"][()]]
        acc = np.mean([g["effects/target_correct"][()] for g in groups], axis=0)
        prob = np.mean([g["effects/target_prob"][()] for g in groups], axis=0)
        nll = np.mean([g["effects/target_nll"][()] for g in groups], axis=0)
    return names, acc, prob, nll, len(groups)


def main(argv):
    print("| model | intervention | retrieval accuracy | mean p(target) | mean target NLL |")
    print("|---|---|---|---|---|")
    for arg in argv:
        label, path = arg.split("=", 1)
        names, acc, prob, nll, n = rows(path)
        for k, name in enumerate(names):
            print("| %s | `%s` | %.3f | %.3f | %.3f |" % (label, name, acc[k], prob[k], nll[k]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
