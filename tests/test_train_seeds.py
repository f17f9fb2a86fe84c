#!/usr/bin/python3
"""test_train_seeds.py — end-to-end tests of the seed protocol: train --keep-every (the
kept models are the run's models at those steps), --ablate-lambda (lambda computed
from the saved vectors in float64 is 0 at every kept step, the vectors never move,
probe's difference map equals its first softmax map), train --pair --seeds (each seed's
pair is the ordinary pair of that seed; resume; a rerun at --stop-at is a no-op; usage
errors), the summary over seeds
on hand-written train.csv files against numpy, and scripts/mechanisms.py on tiny runs
(the matched-skill step and the means over seeds against the per-seed rows)."""
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

BIN = os.environ.get("BIN", "bin")
TRAIN = os.path.join(BIN, "train")
PROBE = os.path.join(BIN, "probe")
NOISE = os.path.join(BIN, "noise")
HERE = os.path.dirname(os.path.abspath(__file__))
MECH = os.path.join(HERE, "..", "scripts", "mechanisms.py")

TINY = ["--layers", "2", "--hidden", "32", "--heads", "4", "--ffn", "64", "--seq", "64", "--needles", "4",
        "--queries", "4", "--digits", "2", "--batch", "4", "--eval-samples", "8", "--warmup", "3", "--lr", "3e-3",
        "--quiet"]

failures = 0


def check(cond, what):
    global failures
    if cond:
        print("ok   %s" % what)
    else:
        failures += 1
        print("FAIL %s" % what)


def run(args, tool=TRAIN):
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.run([tool] + args, capture_output=True, text=True, timeout=120, env=e)


def read_st(path):
    """{name: float64 array} of an F32 safetensors file (parsed here, not by difflens)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], np.float32).reshape(v["shape"]).astype(np.float64)
    return out


def lambdas(w, layers):
    """The paper's lambda per layer: exp(q1.k1) - exp(q2.k2) + 0.8 - 0.6 exp(-0.3 l)."""
    out = []
    for l in range(layers):
        g = lambda n: w["model.layers.%d.self_attn.lambda_%s" % (l, n)]  # noqa: E731
        out.append(math.exp(g("q1") @ g("k1")) - math.exp(g("q2") @ g("k2")) + 0.8 - 0.6 * math.exp(-0.3 * l))
    return out


def test_keep_and_ablate(tmp):
    d = os.path.join(tmp, "abl")
    r = run(["--out", d, "--type", "diff_transformer"] + TINY +
            ["--heads", "2", "--ablate-lambda", "--steps", "12", "--eval-every", "4", "--keep-every", "4"])
    check(r.returncode == 0, "ablate: exit 0 (%s)" % r.stderr.strip()[-200:])
    kept = sorted(os.listdir(os.path.join(d, "steps")))
    check(kept == ["step-000004", "step-000008", "step-000012"], "keep-every 4: kept %s" % kept)
    last = open(os.path.join(d, "steps", "step-000012", "model.safetensors"), "rb").read()
    check(last == open(os.path.join(d, "model.safetensors"), "rb").read(), "keep: step 12 is the final model")
    check(os.path.isfile(os.path.join(d, "steps", "step-000004", "config.json")), "keep: config.json kept too")
    w4 = read_st(os.path.join(d, "steps", "step-000004", "model.safetensors"))
    w12 = read_st(os.path.join(d, "model.safetensors"))
    lam = lambdas(w12, 2) + lambdas(w4, 2)
    check(max(abs(x) for x in lam) < 1e-6, "ablate: lambda = 0 in float64 at steps 4 and 12 (%s)" % lam)
    frozen = all(np.array_equal(w4[k], w12[k]) for k in w12 if ".lambda_" in k)
    moved = not np.array_equal(w4["model.layers.0.self_attn.q_proj.weight"], w12["model.layers.0.self_attn.q_proj.weight"])
    check(frozen and moved, "ablate: lambda vectors frozen while the projections train")
    # probe: with lambda 0 the difference map is the first softmax map
    prompts = os.path.join(tmp, "p.jsonl")
    r = run(["prompts", "-o", prompts, "--length", "64", "--needles", "4", "--queries", "4", "--digits", "2",
             "--samples", "1", "--depths", "0.5", "--quiet"], tool=NOISE)
    dump = os.path.join(tmp, "abl.h5")
    r = run(["--model", d, "--prompts", prompts, "--out", dump, "--maps", "all", "--map-dtype", "f32", "--quiet"],
            tool=PROBE)
    check(r.returncode == 0, "ablate: probe runs (%s)" % r.stderr.strip()[-200:])
    if r.returncode == 0:
        with h5py.File(dump) as f:
            g = f["samples/000000/attn"]
            names = sorted(g.keys())
            diff = g["diff"][()] if "diff" in g else None
            map1 = g["map1"][()] if "map1" in g else None
            check(np.abs(f["model/lambda"][()]).max() < 1e-6, "ablate: the dump's lambda is 0")
        check(diff is not None and map1 is not None and np.abs(diff - map1).max() < 1e-5,
              "ablate: diff map = map1 (%s)" % names)
    # the full model (same seed) has lambda far from 0: the test above can fail
    full = os.path.join(tmp, "full")
    run(["--out", full, "--type", "diff_transformer"] + TINY + ["--heads", "2", "--steps", "4"])
    check(min(abs(x) for x in lambdas(read_st(os.path.join(full, "model.safetensors")), 2)) > 0.1,
          "full Diff: lambda is not 0")
    # errors: llama has no lambda; a resume must keep the flag
    r = run(["--out", os.path.join(tmp, "ll")] + TINY + ["--ablate-lambda", "--steps", "2"])
    check(r.returncode == 2 and "Diff model" in r.stderr, "ablate on llama: exit 2 (%s)" % r.stderr.strip())
    r = run(["--out", d, "--type", "diff_transformer"] + TINY + ["--heads", "2", "--steps", "16", "--resume"])
    check(r.returncode == 2, "resume without --ablate-lambda: refused, exit 2 (%d)" % r.returncode)
    r = run(["--out", d, "--type", "diff_transformer"] + TINY + ["--heads", "2", "--keep-every", "-1", "--steps", "2"])
    check(r.returncode == 2, "--keep-every -1: exit 2")


def write_csv(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("step,lr,loss,eval_loss,eval_acc,tokens_per_s,elapsed_s\n")
        for s, loss, el, acc in rows:
            f.write("%d,0.001,%r,%r,%r,1000,1\n" % (s, loss, el, acc))


def test_summary_constructed(tmp):
    root = os.path.join(tmp, "sum")
    rng = np.random.default_rng(7)
    steps = [100, 200, 300, 400]
    truth = {}
    for model in ("transformer", "diff"):
        for seed in (1, 2, 3):
            acc = np.sort(rng.uniform(0, 1, len(steps)))
            if model == "transformer" and seed == 2:
                acc = np.minimum(acc, 0.6)      # never reaches 90%
            el, loss = rng.uniform(0, 2, len(steps)), rng.uniform(0, 2, len(steps))
            truth[model, seed] = (acc, el, loss)
            write_csv(os.path.join(root, "seed-%d" % seed, model, "train.csv"),
                      [(s, float(loss[i]), float(el[i]), float(acc[i])) for i, s in enumerate(steps)])
    r = run(["--pair", root, "--seeds", "1-3", "--summarize", "--quiet"])
    check(r.returncode == 0, "summarize: exit 0 (%s)" % r.stderr.strip()[-200:])
    if r.returncode != 0:
        return
    rows = list(csv.DictReader(open(os.path.join(root, "seeds_curves.csv"))))
    check(len(rows) == 8, "summarize: 2 models x 4 steps rows (%d)" % len(rows))
    ok = True
    for row in rows:
        model = {"Transformer": "transformer", "Diff": "diff"}[row["model"]]
        i = steps.index(int(row["step"]))
        a = np.array([truth[model, s][0][i] for s in (1, 2, 3)])
        e = np.array([truth[model, s][1][i] for s in (1, 2, 3)])
        for k, v in (("acc_mean", a.mean()), ("acc_sd", a.std(ddof=1)), ("acc_min", a.min()), ("acc_max", a.max()),
                     ("eval_loss_mean", e.mean()), ("eval_loss_max", e.max())):
            ok &= abs(float(row[k]) - v) < 1e-6
        ok &= int(row["seeds"]) == 3
    check(ok, "summarize: mean / sd / min / max over seeds match numpy")
    st = list(csv.DictReader(open(os.path.join(root, "seeds_steps_to.csv"))))
    ok = True
    for row in st:
        if not row["seed"].isdigit():
            continue
        model = {"Transformer": "transformer", "Diff": "diff"}[row["model"]]
        acc = truth[model, int(row["seed"])][0]
        for lv in (25, 50, 90):
            hit = [s for s, a in zip(steps, acc) if a >= lv / 100]
            ok &= row["steps_to_%d" % lv] == (str(hit[0]) if hit else "")
    check(ok and len(st) == 8, "summarize: steps to 25/50/90%% match a scan of the CSVs (%d rows)" % len(st))
    md = open(os.path.join(root, "seeds_steps_to.md")).read()
    check("> 400" in md and "of 3 reached" in md, "summarize: not reached shows '> 400' and 'k of 3 reached'")
    check(os.path.getsize(os.path.join(root, "seeds.png")) > 1000, "summarize: seeds.png written")
    r = run(["--pair", os.path.join(tmp, "none"), "--seeds", "1", "--summarize", "--quiet"])
    check(r.returncode == 1 and "no runs" in r.stderr, "summarize with no runs: exit 1 (%s)" % r.stderr.strip())


def test_seeds_train(tmp):
    root = os.path.join(tmp, "seeds")
    args = ["--steps", "6", "--eval-every", "3", "--keep-every", "3"] + TINY
    r = run(["--pair", root, "--seeds", "1,2"] + args)
    check(r.returncode == 0, "seeds: exit 0 (%s)" % r.stderr.strip()[-200:])
    one = os.path.join(tmp, "one")
    run(["--pair", one, "--seed", "2"] + args)
    for m in ("transformer", "diff"):
        a = open(os.path.join(root, "seed-2", m, "model.safetensors"), "rb").read()
        check(a == open(os.path.join(one, m, "model.safetensors"), "rb").read(),
              "seeds: seed-2/%s is the pair of --seed 2" % m)
    check(all(os.path.isfile(os.path.join(root, f)) for f in ("seeds_curves.csv", "seeds_steps_to.csv", "seeds.png")),
          "seeds: summary written")
    r = run(["--pair", root, "--seeds", "1,2", "--resume"] + args)
    check(r.returncode == 0, "seeds: --resume of finished runs exits 0 (%s)" % r.stderr.strip()[-200:])
    r = run(["--pair", root, "--seeds", "1,2,3", "--resume"] + args)
    check(r.returncode == 0 and os.path.isfile(os.path.join(root, "seed-3", "diff", "model.safetensors")),
          "seeds: --resume starts a seed not begun")
    # --stop-at: a rerun of the same command at the stop trains nothing
    st = os.path.join(tmp, "stop")
    run(["--out", st, "--steps", "10", "--stop-at", "4"] + TINY)
    before = open(os.path.join(st, "model.safetensors"), "rb").read()
    r = run(["--out", st, "--steps", "10", "--stop-at", "4", "--resume"] + TINY)
    check(r.returncode == 0 and open(os.path.join(st, "model.safetensors"), "rb").read() == before,
          "stop-at: a resume at the stop is a no-op (%s)" % r.stderr.strip()[-200:])
    for bad, what in ((["--out", root, "--seeds", "1"], "--seeds without --pair"),
                      (["--pair", root, "--summarize"], "--summarize without --seeds"),
                      (["--pair", root, "--seeds", "1,,2"], "--seeds 1,,2")):
        r = run(bad + TINY)
        check(r.returncode == 2, "%s: exit 2 (%s)" % (what, r.stderr.strip()))
    return root


def test_mechanisms(tmp, root):
    # the ablation for both seeds, then the mechanisms at a level every run reaches
    for s in (1, 2, 3):
        run(["--out", os.path.join(root, "seed-%d" % s, "diff_lambda0"), "--type", "diff_transformer", "--seed", str(s),
             "--steps", "6", "--eval-every", "3", "--keep-every", "3"] + TINY + ["--heads", "2", "--ablate-lambda"])
    r = subprocess.run(["/usr/bin/python3", MECH, "--runs", root, "--seeds", "1,2,3", "--level", "0.001",
                        "--samples", "1", "--lengths", "64", "--bin", BIN], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "mechanisms: exit 0 (%s)" % r.stderr.strip()[-300:])
    if r.returncode != 0:
        return
    rows = list(csv.DictReader(open(os.path.join(root, "mechanisms.csv"))))
    check(len(rows) == 2 * 3 * 3, "mechanisms: 2 checkpoints x 3 models x 3 seeds rows (%d)" % len(rows))
    ok = True
    for row in rows:
        curve = list(csv.DictReader(open(os.path.join(root, "seed-%s" % row["seed"], row["model"], "train.csv"))))
        if row["checkpoint"] == "end":
            ok &= int(row["step"]) == int(curve[-1]["step"])
        else:
            hit = [int(c["step"]) for c in curve if float(c["eval_acc"]) >= 0.001]
            ok &= (row["step"] == "" and not hit) or (hit and int(row["step"]) == hit[0])
    check(ok, "mechanisms: match = first step at the level, end = last step")
    done = [r for r in rows if r["step"]]
    check(done and all(float(r["accuracy"]) <= min(float(r["acc_first"]), float(r["acc_last"])) + 1e-12 for r in done),
          "mechanisms: all-4 accuracy (probe) <= first- and last-query accuracy (from the logits)")
    md = open(os.path.join(root, "mechanisms.md")).read()
    end = [r for r in rows if r["checkpoint"] == "end" and r["model"] == "diff"]
    a = [float(r["answer"]) for r in end]
    cell = "%.3g [%.3g\u2013%.3g]" % (np.mean(a), min(a), max(a))
    check(cell in md, "mechanisms: the Diff end answer share is the mean [min-max] of its seeds (%s)" % cell)
    lam = [float(x) for r in rows if r["model"] == "diff_lambda0" for x in r["lambda"].split()]
    check(max(abs(x) for x in lam) < 1e-6, "mechanisms: the ablation's lambda is 0 at every checkpoint")


def main():
    for t in (TRAIN, PROBE, NOISE):
        if not os.access(t, os.X_OK):
            print("test_train_seeds.py: %s not built" % t, file=sys.stderr)
            return 1
    tmp = tempfile.mkdtemp(prefix="dfl_seeds_")
    t0 = time.time()
    try:
        test_keep_and_ablate(tmp)
        test_summary_constructed(tmp)
        root = test_seeds_train(tmp)
        test_mechanisms(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_train_seeds.py: %d failures, %.1f s" % (failures, time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
