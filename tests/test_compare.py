#!/usr/bin/python3
"""test_compare.py — bin/compare against numpy on the same dumps.

Two tiny models (llama, diff_transformer), each probed twice over the same prompts: a base
with --save-logits (f32) and an other with --save-logits f16 --quantize-logits 4, both with
--save-hidden and --maps all. Every number of the KL-divergence block (docs/compare.md) is
recomputed here in float64 from the logits h5py reads, written from llama.cpp's published
definitions (llama-perplexity --kl-divergence: the standard errors sqrt((E[x²] − E[x]²) /
(n − 1)), the covariance of the two means, the percentile at fraction·(n − 1) with linear
interpolation, the median of the two middle values); the per-layer hidden-state cosine,
relative L2 and Pearson and the attention rows' Jensen-Shannon divergence likewise from the
stored hidden states and maps. Also: --format llama prints llama.cpp's labels, --from drops
positions, and the refusals (different prompts, logits in one dump only, a wrong count of
dumps) exit 1 or 2 with a message.

Run from the repo root:  /usr/bin/python3 tests/test_compare.py   (BIN=bin by default)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
COMPARE = os.path.join(BIN, "compare")
VOCAB = 211


def run(*args, ok=True):
    p = subprocess.run(list(args), capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (args[0], p.returncode, p.stderr))
    return p


# ------------------------------------------------------------ numpy reference

def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def per_token(base, other, start=0, target=False):
    """kld, nll_q, nll_base, dp, same_top of every scored position of every sample (with
    target: only the positions whose next token is in a target span, segment 5)."""
    out = {k: [] for k in ("kld", "nll_q", "nll_b", "dp", "same")}
    with h5py.File(base, "r") as fb, h5py.File(other, "r") as fq:
        for name in sorted(fb["samples"]):
            tok = fb["samples"][name]["tokens"][()]
            xb = fb["samples"][name]["logits"][()].astype(np.float64)
            xq = fq["samples"][name]["logits"][()].astype(np.float64)
            T = len(tok)
            seg = fb["samples"][name]["segments"][()]
            for t in range(start, T - 1):
                if target and seg[t + 1] != 5:
                    continue
                lb, lq = log_softmax(xb[t]), log_softmax(xq[t])
                pb = np.exp(lb)
                out["kld"].append(float(np.sum(pb * (lb - lq))))
                out["nll_b"].append(-lb[tok[t + 1]])
                out["nll_q"].append(-lq[tok[t + 1]])
                out["dp"].append(np.exp(lq[tok[t + 1]]) - np.exp(lb[tok[t + 1]]))
                out["same"].append(int(np.argmax(xb[t]) == np.argmax(xq[t])))
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


def stderr_of_mean(x):
    """llama.cpp: sqrt((mean(x²) − mean(x)²) / (n − 1)), 0 unless positive and n > 10."""
    n = len(x)
    var = np.mean(x * x) - np.mean(x) ** 2
    return np.sqrt(var / (n - 1)) if var > 0 and n > 10 else 0.0


def llama_percentile(sorted_v, f):
    """Linear interpolation at position f·(n − 1) of the sorted values."""
    if f <= 0:
        return sorted_v[0]
    if f >= 1:
        return sorted_v[-1]
    pos = f * (len(sorted_v) - 1)
    i = int(np.floor(pos))
    w = pos - i
    j = min(i + 1, len(sorted_v) - 1)
    return (1 - w) * sorted_v[i] + w * sorted_v[j]


def block(v):
    """The statistics of the block, keyed by llama.cpp's labels: (value, error or None)."""
    n = len(v["kld"])
    a, b = v["nll_q"], v["nll_b"]
    ma, mb = a.mean(), b.mean()
    ea, eb = stderr_of_mean(a), stderr_of_mean(b)
    cov = (np.mean(a * b) - ma * mb) / (n - 1)
    ppl_q, ppl_b = np.exp(ma), np.exp(mb)
    lr_e = np.sqrt(ea ** 2 + eb ** 2 - 2 * cov)
    r = {"Mean PPL(Q)": (ppl_q, ppl_q * ea), "Mean PPL(base)": (ppl_b, ppl_b * eb),
         "Cor(ln(PPL(Q)), ln(PPL(base)))": (100 * cov / (ea * eb), None),
         "Mean ln(PPL(Q)/PPL(base))": (ma - mb, lr_e),
         "Mean PPL(Q)/PPL(base)": (np.exp(ma - mb), np.exp(ma - mb) * lr_e),
         "Mean PPL(Q)-PPL(base)": (ppl_q - ppl_b, np.sqrt((ppl_q * ea) ** 2 + (ppl_b * eb) ** 2
                                                          - 2 * ppl_q * ppl_b * cov))}
    k = np.sort(v["kld"])
    r["Mean KLD"] = (k.mean(), stderr_of_mean(v["kld"]))
    r["Maximum KLD"], r["Minimum KLD"] = (k[-1], None), (k[0], None)
    r["Median KLD"] = (np.median(k), None)
    for f in (0.999, 0.99, 0.95, 0.90, 0.10, 0.05, 0.01, 0.001):
        r["%.1f%% KLD" % (100 * f)] = (llama_percentile(k, f), None)
    d = np.sort(v["dp"])
    r["Mean Δp"] = (100 * d.mean(), 100 * stderr_of_mean(v["dp"]))
    r["Maximum Δp"], r["Minimum Δp"] = (100 * d[-1], None), (100 * d[0], None)
    r["Median Δp"] = (100 * np.median(d), None)
    for f in (0.999, 0.99, 0.95, 0.90, 0.75, 0.25, 0.10, 0.05, 0.01, 0.001):
        r["%.1f%% Δp" % (100 * f)] = (100 * llama_percentile(d, f), None)
    d2 = v["dp"] ** 2
    rms = np.sqrt(d2.mean())
    r["RMS Δp"] = (100 * rms, 100 * 0.5 / rms * stderr_of_mean(d2))
    same = v["same"].mean()
    r["Same top p"] = (100 * same, 100 * np.sqrt(same * (1 - same) / (n - 1)))
    return r, n


def table(doc, name):
    for t in doc["tables"]:
        if t["name"] == name:
            return t
    raise AssertionError("no table %s in %s" % (name, [t["name"] for t in doc["tables"]]))


def js(p, q):
    m = 0.5 * (p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p > 0, p * np.log(p / m), 0.0)
        b = np.where(q > 0, q * np.log(q / m), 0.0)
    return 0.5 * a.sum() + 0.5 * b.sum()


class CompareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for t in (PROBE, COMPARE):
            if not os.access(t, os.X_OK):
                raise AssertionError("%s not built (make all)" % t)
        cls.tmp = tempfile.mkdtemp(prefix="dfl-compare-")
        rng = np.random.default_rng(11)
        cls.prompts = os.path.join(cls.tmp, "p.jsonl")
        with open(cls.prompts, "w") as f:
            for i, T in enumerate((33, 48, 57)):
                p = {"id": "c%d" % i, "tokens": [0] + [int(x) for x in rng.integers(1, VOCAB, T - 1)]}
                if i != 1:
                    p["target"] = [[10, 14]] if i == 0 else [[30, 40], [50, 57]]
                f.write(json.dumps(p) + "\n")
        cls.dumps = {}
        for mtype, heads in (("llama", 4), ("diff_transformer", 2)):
            mdir = os.path.join(cls.tmp, mtype)
            make_model.make_model(mdir, mtype, layers=3, hidden=32, heads=heads, vocab=VOCAB, seed=4)
            base, other = os.path.join(cls.tmp, mtype + ".h5"), os.path.join(cls.tmp, mtype + "_q.h5")
            common = ["--model", mdir, "--prompts", cls.prompts, "--maps", "all", "--quiet", "--force"]
            run(PROBE, *common, "--out", base, "--save-logits", "--save-hidden")
            run(PROBE, *common, "--out", other, "--save-logits", "f16", "--save-hidden", "f32",
                "--quantize-logits", "4")
            cls.dumps[mtype] = (base, other)
        base, other = cls.dumps["llama"]
        cls.doc = json.loads(run(COMPARE, base, other, "--format", "json").stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_dump_types(self):
        base, other = self.dumps["llama"]
        with h5py.File(base, "r") as fb, h5py.File(other, "r") as fq:
            s = "samples/000000/"
            self.assertEqual(fb[s + "logits"].dtype, np.float32)
            self.assertEqual(fq[s + "logits"].dtype, np.float16)
            self.assertEqual(fb[s + "hidden"].dtype, np.float16)  # --save-hidden: f16 by default
            self.assertEqual(fq[s + "hidden"].dtype, np.float32)
            self.assertEqual(fb[s + "hidden"].shape, (3, 33, 32))

    def check_block(self, doc, base, other, start=0, col=2, target=False):
        want, n = block(per_token(base, other, start, target))
        t = table(doc, "kld")
        got = {row[0]: (row[col], row[col + 1]) for row in t["data"]}
        self.assertEqual(set(got), set(want), "labels differ from llama.cpp's")
        for label, (v, e) in want.items():
            with self.subTest(label=label):
                # compare works in f32 (exp within 2 ulp, block sums in double): a token's KLD
                # near 1e-3 carries ~1e-7 absolute error, and the sanitizer build's other
                # rounding moved a percentile by 1.3e-7 — hence atol 1e-6
                self.assertTrue(np.isclose(got[label][0], v, rtol=2e-5, atol=1e-6),
                                "%s: compare %r, numpy %r" % (label, got[label][0], v))
                if e is None:
                    self.assertIsNone(got[label][1])
                else:
                    self.assertTrue(np.isclose(got[label][1], e, rtol=2e-4, atol=1e-7),
                                    "%s ±: compare %r, numpy %r" % (label, got[label][1], e))
        return n

    def test_kld_block_against_numpy(self):
        n = self.check_block(self.doc, *self.dumps["llama"])
        self.assertEqual(n, 32 + 47 + 56)

    def test_kld_block_from(self):
        base, other = self.dumps["llama"]
        doc = json.loads(run(COMPARE, base, other, "--format", "json", "--from", "20").stdout)
        self.assertEqual(self.check_block(doc, base, other, start=20), 12 + 27 + 36)

    def test_kld_block_target(self):
        base, other = self.dumps["llama"]
        doc = json.loads(run(COMPARE, base, other, "--format", "json", "--score", "target").stdout)
        self.assertEqual(self.check_block(doc, base, other, target=True), 4 + 10 + 7)

    def test_two_pairs_side_by_side(self):
        a, aq = self.dumps["llama"]
        b, bq = self.dumps["diff_transformer"]
        doc = json.loads(run(COMPARE, a, aq, b, bq, "--labels", "T,D", "--format", "json").stdout)
        self.assertEqual(table(doc, "kld")["columns"], ["statistic", "unit", "T", "T ±", "D", "D ±"])
        self.check_block(doc, b, bq, col=4)

    def test_hidden_against_numpy(self):
        base, other = self.dumps["llama"]
        rows = table(self.doc, "hidden")
        cols = rows["columns"]
        with h5py.File(base, "r") as fb, h5py.File(other, "r") as fq:
            for layer in range(3):
                cs, rl, pe = [], [], []
                for name in sorted(fb["samples"]):
                    hb = fb["samples"][name]["hidden"][layer].astype(np.float64)
                    hq = fq["samples"][name]["hidden"][layer].astype(np.float64)
                    for x, y in zip(hb, hq):
                        cs.append(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
                        rl.append(np.linalg.norm(y - x) / np.linalg.norm(x))
                        pe.append(np.corrcoef(x, y)[0, 1])
                row = dict(zip(cols, rows["data"][layer]))
                self.assertEqual(row["layer"], layer)
                self.assertTrue(np.isclose(row["cosine"], np.mean(cs), rtol=1e-9, atol=1e-12))
                self.assertTrue(np.isclose(row["relative L2"], np.mean(rl), rtol=1e-7))
                self.assertTrue(np.isclose(row["pearson"], np.mean(pe), rtol=1e-9, atol=1e-12))

    def test_attention_js_against_numpy(self):
        base, other = self.dumps["diff_transformer"]
        doc = json.loads(run(COMPARE, base, other, "--format", "json").stdout)
        t = table(doc, "attention")
        got = {(r[1], r[2], r[3]): r[4] for r in t["data"]}
        with h5py.File(base, "r") as fb, h5py.File(other, "r") as fq:
            for m in ("map1", "map2", "diff"):
                s = {}
                for name in sorted(fb["samples"]):
                    a = fb["samples"][name]["attn"][m][()].astype(np.float64)
                    b = fq["samples"][name]["attn"][m][()].astype(np.float64)
                    rows = fb["samples"][name]["attn/rows"][()]
                    for li in range(a.shape[0]):
                        for h in range(a.shape[1]):
                            for ri, q in enumerate(rows):
                                p, r = a[li, h, ri, :q + 1], b[li, h, ri, :q + 1]
                                if m == "diff":
                                    p, r = np.abs(p), np.abs(r)
                                s.setdefault((li, h), []).append(js(p / p.sum(), r / r.sum()))
                for (li, h), v in s.items():
                    with self.subTest(map=m, layer=li, head=h):
                        self.assertTrue(np.isclose(got[(m, li, h)], np.mean(v), rtol=1e-9, atol=1e-12))
        self.assertGreater(got[("diff", 2, 0)], 0)

    def test_llama_text(self):
        base, other = self.dumps["llama"]
        out = run(COMPARE, base, other, "--format", "llama").stdout
        for label in ("====== Perplexity statistics ======", "Mean PPL(Q)                   :",
                      "Cor(ln(PPL(Q)), ln(PPL(base))):", "Mean    KLD:", "99.9%   KLD:", " 0.1%   KLD:",
                      "====== Token probability statistics ======", "Mean    Δp:", "RMS Δp    :", "Same top p:"):
            self.assertIn(label, out)
        want, _ = block(per_token(base, other))
        self.assertIn("Mean    KLD: %10.6f" % want["Mean KLD"][0], out)

    def test_plot(self):
        a, aq = self.dumps["llama"]
        b, bq = self.dumps["diff_transformer"]
        png = os.path.join(self.tmp, "fig.png")
        run(COMPARE, a, aq, b, bq, "--plot", png, "--force")
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_refusals(self):
        base, other = self.dumps["llama"]
        self.assertEqual(run(COMPARE, base, ok=False).returncode, 2)
        self.assertEqual(run(COMPARE, base, other, "--from", "-1", ok=False).returncode, 2)
        self.assertEqual(run(COMPARE, base, other, "--format", "xml", ok=False).returncode, 2)
        p = run(COMPARE, base, self.dumps["diff_transformer"][0], ok=False)
        self.assertEqual(p.returncode, 1)  # same prompts, maps of other heads: refused, not misread
        self.assertIn("maps of different shapes", p.stderr)
        # other prompts
        alt = os.path.join(self.tmp, "alt.jsonl")
        with open(alt, "w") as f:
            f.write(json.dumps({"id": "x", "tokens": list(range(1, 30))}) + "\n")
        d = os.path.join(self.tmp, "alt.h5")
        run(PROBE, "--model", os.path.join(self.tmp, "llama"), "--prompts", alt, "--out", d, "--quiet", "--force",
            "--save-logits")
        p = run(COMPARE, base, d, ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("same prompts", p.stderr)
        # logits in one dump only
        nol = os.path.join(self.tmp, "nologits.h5")
        run(PROBE, "--model", os.path.join(self.tmp, "llama"), "--prompts", self.prompts, "--out", nol,
            "--quiet", "--force")
        p = run(COMPARE, base, nol, ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("--save-logits", p.stderr)
        self.assertEqual(run(PROBE, "--model", os.path.join(self.tmp, "llama"), "--prompts", self.prompts,
                             "--out", nol, "--force", "--save-logits=f8", ok=False).returncode, 2)

    def test_help_version(self):
        self.assertIn("usage: compare", run(COMPARE, "--help").stdout)
        self.assertIn("compare (difflens)", run(COMPARE, "--version").stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
