#!/usr/bin/python3
"""mechanisms.py — the paper's mechanisms over seeds, at matched skill and at the end.

For a protocol trained by `train --pair RUNS --seeds LIST --keep-every N` (plus, if
present, the lambda ablation in RUNS/seed-S/diff_lambda0), this probes each model of
each seed at two checkpoints:

  match  the first kept step whose held-out retrieval reaches --level (the same skill
         for every model: the paper's comparisons at equal accuracy)
  end    the last step

on needle prompts of each --lengths (4 needles, 4 queries, 2 digits, depths 0-100%,
a seed never used in training), then reads `noise` (answer share, context noise,
answer/noise, retrieval accuracy; shares of |attention|, --norm abs), `outliers` (the
largest attention logit and hidden activation, their medians) and the dump's lambda
per layer, and writes the means over seeds with their range (min-max):

  RUNS/mechanisms.csv   one row per (checkpoint, length, model, seed) and per mean
  RUNS/mechanisms.md    the tables (Figure 1, Table 3, Table 5 in miniature)

Usage: /usr/bin/python3 scripts/mechanisms.py --runs RUNS --seeds 1,2,3 [--level 0.5]
       [--lengths 64,256] [--samples 40] [--bin bin] [--threads 1]
Exit status: 0 done, 1 a tool failed or a run is missing, 2 usage error.
"""
import argparse
import csv
import io
import json
import math
import os
import subprocess
import sys

import h5py

MODELS = [("transformer", "Transformer"), ("diff", "Diff"), ("diff_lambda0", "Diff, lambda=0")]
RATIO_MAX = 1000.0   # as noise prints it: above, the noise is ~0 and the quotient is rounding


def fail(msg, code=1):
    print("mechanisms: " + msg, file=sys.stderr)
    sys.exit(code)


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


def read_curve(path):
    with open(path) as f:
        return [(int(r["step"]), float(r["eval_acc"])) for r in csv.DictReader(f)]


def checkpoints(run_dir, level):
    """{"match": (step, dir) or None, "end": (step, dir)} of one run."""
    curve = read_curve(os.path.join(run_dir, "train.csv"))
    if not curve:
        fail("%s/train.csv has no rows" % run_dir)
    out = {"end": (curve[-1][0], run_dir), "match": None}
    for step, acc in curve:
        if acc >= level:
            d = os.path.join(run_dir, "steps", "step-%06d" % step)
            if not os.path.isfile(os.path.join(d, "model.safetensors")):
                fail("%s: no kept model at step %d (train with --keep-every dividing --eval-every)" % (run_dir, step))
            out["match"] = (step, d)
            break
    return out


def query_accuracy(dump, prompts):
    """Per query position: the share of prompts whose digits after that query's <sep> are
    all the argmax prediction (teacher-forced; token p is predicted by row p - 1), from
    the logits probe saved. The last query is the one the trainer scores (eval_acc);
    the earlier ones cannot be answered by elimination (the last answer is the needle no
    earlier query asked for), so they show whether the model matches keys."""
    with open(prompts) as f:
        ps = [json.loads(line) for line in f if line.strip()]
    right = None
    with h5py.File(dump, "r") as f:
        for i, p in enumerate(ps):
            lg = f["samples/%06d/logits" % i][()]
            pred = lg.argmax(axis=1)
            ok = [all(pred[t - 1] == p["tokens"][t] for t in range(a, b)) for a, b in p["target"]]
            right = [0] * len(ok) if right is None else right
            right = [r + int(o) for r, o in zip(right, ok)]
    return [r / len(ps) for r in right]


def fresh(dump, *inputs):
    """The dump exists and is newer than every input (a rerun reuses it)."""
    return os.path.isfile(dump) and all(os.path.getmtime(dump) > os.path.getmtime(i) for i in inputs)


def measure(binp, model_dir, prompts, dump, threads):
    if not fresh(dump, prompts, os.path.join(model_dir, "model.safetensors")):
        run([os.path.join(binp, "probe"), "--model", model_dir, "--prompts", prompts, "--out", dump,
             "--save-logits", "--force", "--quiet", "--threads", str(threads)])
    nz = json.loads(run([os.path.join(binp, "noise"), dump, "--norm", "abs", "--format", "json", "--quiet"]))
    shares = {r[0]: r[1] for r in nz["tables"][0]["data"]}
    by_depth = json.loads(run([os.path.join(binp, "noise"), dump, "--norm", "abs", "--by", "depth",
                               "--format", "json", "--quiet"]))["tables"][0]["data"]
    ol = json.loads(run([os.path.join(binp, "outliers"), dump, "--format", "json"]))
    t5 = {r[0]: r for r in ol["tables"][0]["data"]}
    cols = ol["tables"][0]["columns"]
    top1, med = cols.index("top1"), cols.index("median")
    with h5py.File(dump, "r") as f:
        lam = [float(x) for x in f["model/lambda"][()]] if "model/lambda" in f else []
    qa = query_accuracy(dump, prompts)
    return {
        "acc_first": qa[0], "acc_last": qa[-1],
        "accuracy": shares["accuracy"], "answer": shares["answer"], "noise": shares["noise"],
        "logit_top1": t5["attention logits"][top1], "logit_median": t5["attention logits"][med],
        "hidden_top1": t5["hidden states"][top1], "hidden_median": t5["hidden states"][med],
        "lambda": lam,
        # depth -> (answer, noise, accuracy)
        "depth": {r[0]: (r[2], r[3], r[5]) for r in by_depth},
    }


CAPPED = []   # set when a ratio was shown as "> 1000" (the footnote is printed then)


def ratio_text(answer, noise):
    if answer is None or noise is None or (answer == 0 and noise == 0):
        return "\u2014"
    if not answer <= RATIO_MAX * noise:
        CAPPED.append(1)
        return "> 1000\u00b9"
    return "%.3g" % (answer / noise)


def spread(xs, fmt="%.3g"):
    """'mean [min–max]' of the values (or the one value)."""
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return "\u2014"
    m = sum(xs) / len(xs)
    if len(xs) == 1:
        return fmt % m
    return (fmt + " [" + fmt + "\u2013" + fmt + "]") % (m, min(xs), max(xs))


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--level", type=float, default=0.5)
    ap.add_argument("--lengths", default="64,256")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    try:
        seeds = [int(s) for s in a.seeds.split(",")]
        lengths = [int(t) for t in a.lengths.split(",")]
    except ValueError:
        fail("--seeds and --lengths take comma-separated integers", 2)
    if not 0 < a.level <= 1:
        fail("--level must be in (0, 1]", 2)
    work = os.path.join(a.runs, "mechanisms")
    os.makedirs(work, exist_ok=True)

    prompts = {}
    for T in lengths:
        prompts[T] = os.path.join(work, "prompts-%d-%d.jsonl" % (T, a.samples))
        if os.path.isfile(prompts[T]):
            continue   # a pure function of its flags: kept, so the dumps made from it stay valid
        run([os.path.join(a.bin, "noise"), "prompts", "-o", prompts[T], "--length", str(T), "--needles", "4",
             "--queries", "4", "--digits", "2", "--samples", str(a.samples), "--seed", "2024", "--force", "--quiet"])

    # rec[(ck, T, model)][seed] = measurements (+ "step")
    rec = {}
    present = []
    for name, label in MODELS:
        dirs = [os.path.join(a.runs, "seed-%d" % s, name) for s in seeds]
        have = [os.path.isfile(os.path.join(d, "train.csv")) for d in dirs]
        if not any(have):
            continue
        if not all(have):   # reported as "k of n" seeds in the tables
            print("mechanisms: %s: no run for %s" % (name, ", ".join(d for d, h in zip(dirs, have) if not h)),
                  file=sys.stderr)
        present.append((name, label))
        for s, d, h in zip(seeds, dirs, have):
            if not h:
                continue
            cks = checkpoints(d, a.level)
            for ck, v in cks.items():
                for T in lengths:
                    key = (ck, T, name)
                    rec.setdefault(key, {})
                    if v is None:
                        rec[key][s] = None
                        continue
                    dump = os.path.join(work, "seed-%d-%s-%s-%d.h5" % (s, name, ck, T))
                    m = measure(a.bin, v[1], prompts[T], dump, a.threads)
                    m["step"] = v[0]
                    rec[key][s] = m
                    print("mechanisms: seed %d %s %s (step %d) T=%d: accuracy %.3f answer %.3f noise %.4f"
                          % (s, name, ck, v[0], T, m["accuracy"], m["answer"], m["noise"]), file=sys.stderr)

    # the CSV: every (checkpoint, length, model, seed)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["checkpoint", "length", "model", "seed", "step", "acc_first", "acc_last", "accuracy", "answer",
                "noise", "answer_noise",
                "logit_top1", "logit_median", "hidden_top1", "hidden_median", "lambda"])
    for (ck, T, name), per in sorted(rec.items(), key=lambda kv: (kv[0][0] != "match", kv[0][1], kv[0][2])):
        for s in seeds:
            m = per.get(s)
            if m is None:
                w.writerow([ck, T, name, s] + [""] * 12)
                continue
            r = m["answer"] / m["noise"] if m["noise"] else ""
            w.writerow([ck, T, name, s, m["step"], m["acc_first"], m["acc_last"], m["accuracy"], m["answer"],
                        m["noise"], r, m["logit_top1"],
                        m["logit_median"], m["hidden_top1"], m["hidden_median"],
                        " ".join("%.6g" % x for x in m["lambda"])])
    with open(os.path.join(a.runs, "mechanisms.csv.tmp"), "w") as f:
        f.write(out.getvalue())
    os.replace(os.path.join(a.runs, "mechanisms.csv.tmp"), os.path.join(a.runs, "mechanisms.csv"))

    # the tables
    md = io.StringIO()
    p = lambda *x: print(*x, file=md)  # noqa: E731
    p("# Mechanisms over seeds %s" % ",".join(map(str, seeds)))
    p()
    p("Each cell: mean over seeds [lowest\u2013highest seed]. *match*: the first kept step with held-out "
      "retrieval \u2265 %d%% (each model its own step); *end*: the last step. Prompts: 4 needles, 4 queries, "
      "2 digits, depths 0, 25, 50, 75, 100%%, %d per depth and length, generator seed 2024 (not a training "
      "seed). Shares of |attention| of the last query token (`noise --norm abs`), averaged over layers and "
      "heads; noise = context before + after the answer. Outliers pooled over layers and prompts "
      "(`outliers`). answer/noise is mean answer / mean noise over seeds. Retrieval (teacher-forced argmax, "
      "every digit right): *last query* is the trainer's held-out measure; it can be solved by elimination "
      "(the last query asks for the one needle no earlier query asked for), *first query* cannot; *all 4* is "
      "probe's accuracy (every query right)." % (round(100 * a.level), a.samples))
    p()
    for ck in ("match", "end"):
        for T in lengths:
            p("## %s, T = %d%s" % ("matched skill (\u2265 %d%%)" % round(100 * a.level) if ck == "match" else "end of training",
                                   T, " (trained at 64: positions beyond 63 are RoPE extrapolation)" if T > 64 else ""))
            p()
            p("| model | seeds | step | last query | first query | all 4 | answer share | noise | answer/noise "
              "| top attention logit | top hidden | \u03bb per layer |")
            p("|---|---|---|---|---|---|---|---|---|---|---|---|")
            for name, label in present:
                per = rec.get((ck, T, name), {})
                ms = [per.get(s) for s in seeds]
                got = [m for m in ms if m is not None]
                if not got:
                    p("| %s | 0 of %d reached |" % (label, len(seeds)) + " \u2014 |" * 10)
                    continue
                L = len(got[0]["lambda"])
                lam = ", ".join(spread([m["lambda"][l] for m in got], "%.2f") for l in range(L)) if L else "\u2014"
                p("| %s | %d of %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    label, len(got), len(seeds), spread([m["step"] for m in got], "%.0f"),
                    spread([m["acc_last"] for m in got], "%.2f"), spread([m["acc_first"] for m in got], "%.2f"),
                    spread([m["accuracy"] for m in got], "%.2f"), spread([m["answer"] for m in got]),
                    spread([m["noise"] for m in got]),
                    ratio_text(mean([m["answer"] for m in got]), mean([m["noise"] for m in got])),
                    spread([m["logit_top1"] for m in got], "%.1f"), spread([m["hidden_top1"] for m in got], "%.1f"),
                    lam))
            p()
    # Table 3 in miniature: by depth, the longest prompts, both checkpoints
    T = max(lengths)
    for ck in ("match", "end"):
        p("## answer share / noise by depth, T = %d, %s (Table 3)" % (T, "matched skill" if ck == "match" else "end"))
        p()
        p("| depth | " + " | ".join("%s answer | %s noise | %s retrieval" % (l, l, l) for _, l in present) + " |")
        p("|---|" + "---|---|---|" * len(present))
        depths = sorted({d for (c, t, n), per in rec.items() if c == ck and t == T
                         for m in per.values() if m for d in m["depth"]})
        for d in depths:
            cells = []
            for name, _ in present:
                got = [m for m in rec.get((ck, T, name), {}).values() if m is not None and d in m["depth"]]
                cells += [spread([m["depth"][d][0] for m in got]), spread([m["depth"][d][1] for m in got]),
                          spread([m["depth"][d][2] for m in got], "%.2f")]
            p("| %g | %s |" % (d, " | ".join(cells)))
        p()
    if CAPPED:
        p("\u00b9 answer/noise \"> 1000\": the noise share is below 1/1000 of the answer share; the quotient of "
          "a near-zero noise is not a measurement.")
    with open(os.path.join(a.runs, "mechanisms.md.tmp"), "w") as f:
        f.write(md.getvalue())
    os.replace(os.path.join(a.runs, "mechanisms.md.tmp"), os.path.join(a.runs, "mechanisms.md"))
    sys.stdout.write(md.getvalue())


if __name__ == "__main__":
    main()
