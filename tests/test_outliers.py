#!/usr/bin/python3
"""outliers end to end: every statistic against brute force from the numpy reference
(tests/ref/reference.py) on dumps that probe writes for tiny random models — pooled
Top-n over layers and samples, medians, per-layer kurtosis and massive counts,
per-head values, LLM.int8 features, the SmoothQuant profile, and the SQNR estimate
against exact SQNR of absmax fake quantization; csv and json round-trips; the plot;
and clear errors for bad inputs."""
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402
import png  # noqa: E402
import reference  # noqa: E402

BIN = os.environ.get("BIN", "bin")
OUTLIERS = os.path.join(BIN, "outliers")
PROBE = os.path.join(BIN, "probe")
WORST = {}


def note(key, value):
    WORST[key] = max(WORST.get(key, 0.0), value)


def run(*args):
    return subprocess.run([OUTLIERS, *args], capture_output=True, text=True)


def run_json(*args):
    r = run(*args, "--format", "json")
    if r.returncode != 0:
        raise AssertionError("outliers failed: " + r.stderr)
    doc = json.loads(r.stdout)
    return {t["name"]: [dict(zip(t["columns"], row)) for row in t["data"]] for t in doc["tables"]}, doc


def hist_median_rel_ok(tool, exact):
    return abs(tool / exact - 1) < 0.01


def qerr(x, delta):
    a = np.abs(x)
    return a - np.floor(a / delta + 0.5) * delta


def check_line_panel(test, panel, colours, top1, median):
    """One panel of the outliers plot (log y, a vertical grid line per layer): every
    marker found on a layer's grid line sits where its value belongs. colours[i] is
    dump i's colour; top1[i][l], median[i][l] the values. The y mapping is pinned by
    the decade grid lines: their spacing is the pixels per decade, and y(1) must be on
    one of them. Every marker must be found."""
    rows, cols = png.grid_lines(panel, 1), png.grid_lines(panel, 0)
    layers = len(top1[0])
    test.assertGreaterEqual(len(rows), 2, "decade grid lines")
    decade = float(np.median(np.diff(rows)))
    found = [(i, x, y) for i, c in enumerate(colours) for x, y in png.blobs(panel, c)]
    # the layers' grid lines are the vertical ones with markers on them (not the frame)
    cols = [cx for cx in cols if any(abs(x - cx) <= 3 for _, x, _ in found)]
    test.assertEqual(len(cols), layers, "a vertical grid line with markers per layer: %s" % cols)
    marks = []  # (dump, layer, y)
    for i, x, y in found:
        near = [l for l, cx in enumerate(cols) if abs(x - cx) <= 3]
        if near:
            marks.append((i, near[0], y))
    test.assertEqual(len(marks), 2 * len(colours) * layers, "markers found: %s" % marks)
    # each marker is top-1 or median: choose by brute force, the intercept by least squares
    best = None
    for pick in range(1 << len(marks)):
        logs = np.array([np.log10((median if pick >> k & 1 else top1)[i][l]) for k, (i, l, _) in enumerate(marks)])
        ys = np.array([m[2] for m in marks])
        a = float(np.mean(ys + decade * logs))
        worst = float(np.max(np.abs(ys - (a - decade * logs))))
        if best is None or worst < best[0]:
            best = (worst, a)
    test.assertLess(best[0], 2.5, "markers off their values by %.1f px" % best[0])
    test.assertLess(min(abs(best[1] - r) for r in rows), 2.5, "y(1) = %.1f is not on a decade line %s" % (best[1], rows))


class Outliers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="dfl_outliers_")
        rng = np.random.default_rng(3)
        cls.prompts = []
        for i, T in enumerate((40, 33, 47)):
            cls.prompts.append({"id": "s%d" % i, "tokens": [0] + [int(x) for x in rng.integers(1, 97, T - 1)]})
        cls.pfile = os.path.join(cls.root, "p.jsonl")
        with open(cls.pfile, "w") as f:
            for p in cls.prompts:
                f.write(json.dumps(p) + "\n")
        cls.dumps, cls.ref = {}, {}
        specs = {"llama": dict(heads=4, kv_heads=2), "diff_transformer": dict(heads=2, kv_heads=1)}
        for mtype, kw in specs.items():
            d = os.path.join(cls.root, mtype)
            make_model.make_model(d, mtype, layers=3, hidden=32, ffn=48, vocab=97, seed=7, max_pos=512, **kw)
            out = os.path.join(cls.root, mtype + ".h5")
            extra = ["--alpha", "1.5"] if mtype == "diff_transformer" else ["--topk", "30", "--alpha", "2.5"]
            r = subprocess.run([PROBE, "--model", d, "--prompts", cls.pfile, "--out", out, "--quiet", *extra],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            cls.dumps[mtype] = out
            m = reference.load_model(d)
            cls.ref[mtype] = (m, [reference.forward(m, p["tokens"]) for p in cls.prompts])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)
        print("\n  largest errors: " + " ".join("%s %.2e" % kv for kv in sorted(WORST.items())))

    # brute-force views of the reference
    def logits(self, mtype, l=None):
        """abs-free signed causal logits per sample: list over samples of [maps, entries]."""
        m, rs = self.ref[mtype]
        out = []
        for p, r in zip(self.prompts, rs):
            T = len(p["tokens"])
            causal = np.tril(np.ones((T, T), bool))
            layers = range(m.L) if l is None else [l]
            out.append(np.concatenate([r["scores"][j][:, causal].ravel() for j in layers]))
        return out

    def hidden(self, mtype, l=None):
        m, rs = self.ref[mtype]
        layers = range(m.L) if l is None else [l]
        return [np.concatenate([r["hidden"][j].ravel() for j in layers]) for r in rs]

    # ------------------------------------------------------------ Table 5
    def test_table5_pooled_against_brute_force(self):
        t, doc = run_json(self.dumps["diff_transformer"], self.dumps["llama"])
        rows = t["table5"]
        self.assertEqual([(r["activation"], r["model"]) for r in rows],
                         [("attention logits", "diff_transformer"), ("attention logits", "llama"),
                          ("hidden states", "diff_transformer"), ("hidden states", "llama")])
        for r in rows:
            mtype = r["model"]
            x = np.concatenate((self.logits if r["activation"] == "attention logits" else self.hidden)(mtype))
            a = np.sort(np.abs(x))[::-1]
            K = 100 if mtype == "diff_transformer" else 30
            for n in (1, 2, 3, 10, 100):
                if n <= K:
                    note("pooled top-n (rel)", abs(r["top%d" % n] - a[n - 1]) / a[0])
                    self.assertLess(abs(r["top%d" % n] - a[n - 1]) / a[0], 1e-5)
                else:
                    self.assertIsNone(r["top%d" % n])            # n/a, not a fake number
            med = float(np.median(a))
            note("pooled median (rel)", abs(r["median"] / med - 1))
            self.assertTrue(hist_median_rel_ok(r["median"], med))
        self.assertTrue(any("top100 of llama is n/a" in s for s in doc["notes"]))
        txt = run(self.dumps["llama"]).stdout
        self.assertIn("n/a", txt)

    def test_top_flag_and_labels(self):
        t, _ = run_json(self.dumps["llama"], self.dumps["diff_transformer"], "--top", "1,5,30", "--labels",
                        "Transformer,DIFF Transformer")
        self.assertEqual(list(t["table5"][0])[2:], ["top1", "top5", "top30", "median"])
        self.assertEqual(t["table5"][1]["model"], "DIFF Transformer")
        a = np.sort(np.abs(np.concatenate(self.hidden("llama"))))[::-1]
        self.assertAlmostEqual(t["table5"][2]["top30"], a[29], delta=1e-5 * a[0])

    # ----------------------------------------------------------- per layer
    def test_per_layer_against_brute_force(self):
        t, _ = run_json(self.dumps["llama"], self.dumps["diff_transformer"], "--per-layer", "--massive-abs", "4.5",
                        "--massive-ratio", "4")
        rows = t["per_layer"]
        self.assertEqual(len(rows), 2 * 2 * 3)
        for r in rows:
            mtype, l = r["model"], r["layer"]
            logit = r["activation"] == "attention logits"
            per_sample = (self.logits if logit else self.hidden)(mtype, l)
            x = np.concatenate(per_sample)
            a = np.sort(np.abs(x))[::-1]
            for j in (1, 2, 3):
                self.assertLess(abs(r["top%d" % j] - a[j - 1]) / a[0], 1e-5)
            self.assertTrue(hist_median_rel_ok(r["median"], float(np.median(a))))
            self.assertAlmostEqual(r["max_median"], r["top1"] / r["median"], places=9)
            mu = x.mean()
            kurt = ((x - mu) ** 4).mean() / ((x - mu) ** 2).mean() ** 2
            note("kurtosis (rel)", abs(r["kurtosis"] / kurt - 1))
            self.assertLess(abs(r["kurtosis"] / kurt - 1), 1e-4)
            # massive: stored top-K entries > 4.5 and >= 4 x the (histogram) layer median
            K = 100 if mtype == "diff_transformer" else 30
            want = sum(int(((s := np.sort(np.abs(v))[::-1][:K]) > 4.5).__and__(s >= 4 * r["median"]).sum())
                       for v in per_sample)
            self.assertEqual(r["massive"], want, (mtype, l, r["activation"]))
        self.assertTrue(any(r["massive"] > 0 for r in rows))
        self.assertTrue(any(r["massive"] == 0 for r in rows))

    def test_per_head_exact_values_match(self):
        t, _ = run_json(self.dumps["llama"], "--per-head")
        m, rs = self.ref["llama"]
        rows = t["per_head"]
        self.assertEqual(len(rows), m.L * 4)
        exact_seen = 0
        for r in rows:
            l, h = r["layer"], r["head"]
            vals = []
            stored = 0
            for p, rr in zip(self.prompts, rs):
                T = len(p["tokens"])
                causal = np.tril(np.ones((T, T), bool))
                S = np.abs(rr["scores"][l][:, causal])               # [heads, entries]
                cut = np.sort(S.ravel())[::-1][29]
                stored += int((S[h] >= cut).sum())
                vals.append(S[h])
            v = np.sort(np.concatenate(vals))[::-1]
            self.assertEqual(r["stored"], stored)
            for j in (1, 2, 3):
                if r["top%d" % j] is not None:
                    exact_seen += 1
                    self.assertGreaterEqual(r["top%d" % j], r["cutoff"])
                    self.assertLess(abs(r["top%d" % j] - v[j - 1]), 1e-5 * v[0])
                else:
                    # not exact: the true j-th value lies below the cutoff or above a stored lower bound
                    self.assertTrue(v[j - 1] < r["cutoff"] * (1 + 1e-6) or j > 1)
        self.assertGreater(exact_seen, 0)

    # -------------------------------------------------------- quantization
    def test_int8_features_and_smoothquant(self):
        t, _ = run_json(self.dumps["diff_transformer"], self.dumps["llama"], "--quant", "--int8-tokens", "0.2",
                        "--int8-layers", "0.6")
        for mtype, alpha in (("diff_transformer", 1.5), ("llama", 2.5)):
            m, rs = self.ref[mtype]
            ntok = sum(len(p["tokens"]) for p in self.prompts)
            share = np.zeros((m.L, 32))
            absmax = np.zeros((m.L, 32))
            for r in rs:
                for l in range(m.L):
                    share[l] += (np.abs(r["hidden"][l]) >= alpha).sum(axis=0)
                    absmax[l] = np.maximum(absmax[l], np.abs(r["hidden"][l]).max(axis=0))
            share /= ntok
            layers = (share >= 0.2).sum(axis=0)
            want = sorted(int(c) for c in np.nonzero(layers >= np.ceil(0.6 * m.L))[0])
            got = [r for r in t["int8_features"] if r["model"] == mtype]
            self.assertEqual(sorted(r["channel"] for r in got), want, mtype)
            for r in got:
                c = r["channel"]
                self.assertEqual(r["layers"], layers[c])
                self.assertEqual(r["alpha"], alpha)
                self.assertAlmostEqual(r["token_share_max"], share[:, c].max(), places=9)
                self.assertLess(abs(r["absmax"] - absmax[:, c].max()), 1e-5 * absmax.max())
            sq = [r for r in t["smoothquant"] if r["model"] == mtype]
            for r in sq:
                l = r["layer"]
                self.assertLess(abs(r["channel_max"] - absmax[l].max()), 1e-5 * absmax.max())
                self.assertLess(abs(r["channel_median"] - np.median(absmax[l])), 1e-5 * absmax.max())
                self.assertTrue(r["top_channels"].startswith("c%d=" % int(np.argmax(absmax[l]))))
        self.assertTrue(any(r["model"] == "diff_transformer" for r in t["int8_features"]))

    def test_sqnr_estimate_against_exact(self):
        t, _ = run_json(self.dumps["llama"], self.dumps["diff_transformer"], "--bits", "8,6,4,3")
        for mtype in ("llama", "diff_transformer"):
            m, _ = self.ref[mtype]
            for bits in (8, 6, 4, 3):
                sig_all = noise_all = 0.0
                for l in list(range(m.L)) + [None]:
                    row = [r for r in t["sqnr"] if r["model"] == mtype and r["bits"] == bits and r["layer"] == l]
                    self.assertEqual(len(row), 1)
                    row = row[0]
                    if l is None:
                        sig, noise = sig_all, noise_all
                    else:
                        sig = noise = 0.0
                        for x in self.logits(mtype, l):
                            x = x.astype(np.float32).astype(np.float64)          # probe works in f32
                            delta = np.abs(x).max() / (2 ** (bits - 1) - 1)
                            sig += (x ** 2).sum()
                            noise += (qerr(x, delta) ** 2).sum()
                        sig_all += sig
                        noise_all += noise
                    exact = 10 * np.log10(sig / noise)
                    err = abs(row["sqnr_db"] - exact)
                    note("sqnr %d-bit (dB)" % bits, err)
                    note("sqnr err / typ", err / row["typ_err_db"])
                    self.assertLessEqual(row["lo_db"] - 1e-6, exact, (mtype, bits, l))
                    self.assertGreaterEqual(row["hi_db"] + 1e-6, exact, (mtype, bits, l))
                    self.assertLess(err, 4 * row["typ_err_db"] + 0.01, (mtype, bits, l, row, exact))

    # ------------------------------------------------------------ formats
    def test_csv_and_json_round_trip(self):
        args = (self.dumps["llama"], self.dumps["diff_transformer"], "--per-layer", "--quant")
        t, doc = run_json(*args)
        r = run(*args, "--format", "csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.DictReader(io.StringIO(r.stdout, newline="")))
        self.assertEqual(sorted({row["table"] for row in rows}),
                         sorted(["table5", "per_layer", "int8_features", "smoothquant", "sqnr"]))
        for name, jrows in t.items():
            crow = [row for row in rows if row["table"] == name]
            self.assertEqual(len(crow), len(jrows), name)
            for c, j in zip(crow, jrows):
                for k, v in j.items():
                    if v is None:
                        self.assertEqual(c[k], "")
                    elif isinstance(v, str):
                        self.assertEqual(c[k], v)
                    else:
                        self.assertEqual(float(c[k]), float(v), (name, k))   # bit-exact both ways
        # pandas reads one table back with one call
        import pandas as pd
        df = pd.read_csv(io.StringIO(r.stdout))
        t5 = df[df.table == "table5"].dropna(axis=1, how="all")
        self.assertEqual(len(t5), 4)
        self.assertEqual(float(t5.iloc[0]["top1"]), t["table5"][0]["top1"])
        # json numbers are the library's doubles at full precision
        self.assertIn('"top1": ', json.dumps(t["table5"][0]))
        raw = run(*args, "--format", "json").stdout
        self.assertNotIn("NaN", raw)
        self.assertEqual(json.loads(raw), doc)
        md = run(self.dumps["llama"], "--format", "markdown").stdout
        self.assertIn("| activation", md)
        self.assertIn("|---", md.replace(" ", ""))

    # --------------------------------------------------------------- plot
    def test_plot(self):
        png_path = os.path.join(self.root, "o.png")
        r = run(self.dumps["llama"], self.dumps["diff_transformer"], "--plot", png_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(png_path, "rb") as f:
            head = f.read(24)
        self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(int.from_bytes(head[16:20], "big"), 1800)
        # content, one dump per plot so that no marker hides another: markers measured
        # from the pixels against the per-layer table
        for m in ("llama", "diff_transformer"):
            one = os.path.join(self.root, "one.png")
            self.assertEqual(run(self.dumps[m], "--plot", one, "--force").returncode, 0)
            doc = json.loads(run(self.dumps[m], "--per-layer", "--format", "json").stdout)
            t = [x for x in doc["tables"] if x["name"] == "per_layer"][0]
            c = {n: t["columns"].index(n) for n in ("activation", "layer", "top1", "median")}
            img = png.read_png(one)
            rgb = [tuple(v) for v in img[png.saturated(img)][:, :3]]
            colour = max(set(rgb), key=rgb.count)
            for k, act in enumerate(("attention logits", "hidden states")):
                rows = sorted((r[c["layer"]], r[c["top1"]], r[c["median"]]) for r in t["data"]
                              if r[c["activation"]] == act)
                check_line_panel(self, img[:, k * 900:(k + 1) * 900], [colour], [[r[1] for r in rows]],
                                 [[r[2] for r in rows]])
        r = run(self.dumps["llama"], "--plot", png_path)
        self.assertEqual(r.returncode, 1)
        self.assertIn("exists", r.stderr)
        self.assertEqual(run(self.dumps["llama"], "--plot", png_path, "--force").returncode, 0)

    # ------------------------------------------------------------- errors
    def test_bad_inputs(self):
        txt = os.path.join(self.root, "not.h5")
        with open(txt, "w") as f:
            f.write("hello\n")
        r = run(txt)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not.h5", r.stderr)
        plain = os.path.join(self.root, "plain.h5")
        with h5py.File(plain, "w") as f:
            f["x"] = np.zeros(3)
        r = run(plain)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a difflens dump", r.stderr)
        # a dump without outlier statistics
        bare = os.path.join(self.root, "bare.h5")
        shutil.copy(self.dumps["llama"], bare)
        with h5py.File(bare, "a") as f:
            for s in f["samples"]:
                del f["samples/%s/outliers" % s]
        r = run(bare)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no outlier statistics", r.stderr)
        with h5py.File(bare, "a") as f:
            del f.attrs["topk"]
        r = run(bare)
        self.assertIn("no outlier statistics", r.stderr)
        # mismatched K: top lists of 30 under a root topk of 50
        mis = os.path.join(self.root, "mis.h5")
        shutil.copy(self.dumps["llama"], mis)
        with h5py.File(mis, "a") as f:
            f.attrs["topk"] = 50
        r = run(mis)
        self.assertEqual(r.returncode, 1)
        self.assertIn("mismatched K", r.stderr)
        self.assertIn("samples/000000/outliers/logits/top", r.stderr)
        # a later sample read through its open group, not as probe writes it: the errors
        # still name it and say what is wrong
        def broken(name, edit):
            path = os.path.join(self.root, name + ".h5")
            shutil.copy(self.dumps["llama"], path)
            with h5py.File(path, "a") as f:
                edit(f["samples/000002/outliers"])
            r = run(path)
            self.assertEqual(r.returncode, 1, (name, r.stdout))
            return r.stderr

        def replace(g, name, data):
            del g[name]
            g[name] = data

        err = broken("short_k", lambda o: replace(o, "hidden/top", o["hidden/top"][:, :29]))
        self.assertIn("samples/000002/outliers/hidden/top is [3, 29], expected [3, 30] (mismatched K", err)
        err = broken("no_absmax", lambda o: o.__delitem__("hidden/channel_absmax"))
        self.assertIn("samples/000002/outliers/hidden/channel_absmax: no such dataset", err)
        err = broken("wide", lambda o: replace(o, "hidden/channel_absmax", np.zeros((3, 33), np.float32)))
        self.assertIn("samples/000002/outliers/hidden/channel_absmax is [3, 33], expected [3, 32] (hidden size "
                      "differs between samples)", err)
        err = broken("hist_rule", lambda o: replace(o, "logits/hist", o["logits/hist"][:, :100]))
        self.assertIn("samples/000002/outliers/logits/hist is [3, 100], expected [3, 3074] (a histogram of another "
                      "bin rule", err)
        # ... and one stored in other element types is read (converted) to the same numbers
        wide = os.path.join(self.root, "f64.h5")
        shutil.copy(self.dumps["llama"], wide)
        with h5py.File(wide, "a") as f:
            for s in ("000001", "000002"):
                o = f["samples/%s/outliers" % s]
                replace(o, "logits/top", o["logits/top"][()].astype(np.float64))
                replace(o, "hidden/channel_count", o["hidden/channel_count"][()].astype(np.uint64))
                replace(o, "hidden/top_index", o["hidden/top_index"][()].astype(np.int64))
        args = ("--per-layer", "--per-head", "--quant", "--channels", "--format", "json")
        want, got = run(self.dumps["llama"], *args), run(wide, *args)
        self.assertEqual(got.returncode, 0, got.stderr)
        self.assertEqual(got.stdout.replace(wide, self.dumps["llama"]), want.stdout)
        # usage errors
        for args in (["--format", "xml", self.dumps["llama"]], ["--bits", "1", self.dumps["llama"]],
                     ["--top", "0", self.dumps["llama"]], ["--top", "1,x", self.dumps["llama"]], [],
                     ["--labels", "a,b", self.dumps["llama"]], ["--int8-tokens", "2", self.dumps["llama"]],
                     ["--nope", self.dumps["llama"]]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertTrue(r.stderr.startswith("outliers: ") or "usage" in r.stderr, (args, r.stderr))
        h = run("--help")
        self.assertEqual(h.returncode, 0)
        for flag in ("--per-layer", "--per-head", "--quant", "--bits", "--format", "--plot", "default: 8,6,4",
                     "default: 0.25", "default: 0.06", "default: 1,2,3,10,100", "default: table"):
            self.assertIn(flag, h.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=1)
