#!/usr/bin/python3
"""test_outliers_quant.py — `outliers --quant-stats` against brute force in float64 numpy.

A tiny llama probed with --quant-stats --save-hidden --maps all. The linear layers'
inputs (attention input, heads' output before o_proj, MLP input, down_proj input) and q/k
after RoPE are recomputed here from the checkpoint with tests/ref/reference.py's pieces
(rmsnorm, RoPE, the causal softmax), and every statistic is taken from them directly:
mean, std, skewness, kurtosis (Pearson = m4/m2², excess = Pearson − 3), max |x|, the
normalised entropy of the channel energies, ΣE[A²]; the Q/K map (mean |q|, |k| per layer,
head, dimension) and the share of each head's mass in the lower-frequency RoPE pairs.
Sink_k (ε = 0.3 and a low ε that some heads pass) and the per-key importance from the
stored maps; the residual stream's gain, cosine and Pearson from the stored hidden states.

Run from the repo root:  /usr/bin/python3 tests/test_outliers_quant.py   (BIN=bin by default)
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
import reference as ref  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
OUTLIERS = os.path.join(BIN, "outliers")
SITES = ["attn_in", "attn_out", "mlp_in", "down_in"]


def run(*args, ok=True):
    p = subprocess.run(list(args), capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (args[0], p.returncode, p.stderr))
    return p


def capture(m, tokens):
    """Per layer: the four linear inputs and q, k after RoPE, float64, for a llama model."""
    t = m.t
    x = t["model.embed_tokens.weight"][np.asarray(tokens)].copy()
    T, H, Hkv, hd = len(tokens), m.H, m.Hkv, m.hd
    out = []
    for l in range(m.L):
        p = "model.layers.%d." % l
        a = p + "self_attn."
        hn = ref.rmsnorm(x, t[p + "input_layernorm.weight"], m.eps)
        q = (hn @ t[a + "q_proj.weight"].T).reshape(T, H, hd)
        k = (hn @ t[a + "k_proj.weight"].T).reshape(T, Hkv, hd)
        v = (hn @ t[a + "v_proj.weight"].T).reshape(T, Hkv, hd)
        fr = ref.inv_freq(m, hd)
        q, k = ref.rope(q, fr, m.interleaved), ref.rope(k, fr, m.interleaved)
        o = np.zeros((T, H, hd))
        for i in range(H):
            mp, _ = ref.causal_softmax(q[:, i], k[:, i // (H // Hkv)], hd ** -0.5)
            o[:, i] = mp @ v[:, i // (H // Hkv)]
        o = o.reshape(T, H * hd)
        x = x + o @ t[a + "o_proj.weight"].T
        hh = ref.rmsnorm(x, t[p + "post_attention_layernorm.weight"], m.eps)
        g = ref.silu(hh @ t[p + "mlp.gate_proj.weight"].T) * (hh @ t[p + "mlp.up_proj.weight"].T)
        x = x + g @ t[p + "mlp.down_proj.weight"].T
        out.append({"attn_in": hn, "attn_out": o, "mlp_in": hh, "down_in": g, "q": q, "k": k})
    return out


def table(doc, name):
    return next(t for t in doc["tables"] if t["name"] == name)


def rows(doc, name):
    t = table(doc, name)
    return [dict(zip(t["columns"], r)) for r in t["data"]]


class QuantStatsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for t in (PROBE, OUTLIERS):
            if not os.access(t, os.X_OK):
                raise AssertionError("%s not built (make all)" % t)
        cls.tmp = tempfile.mkdtemp(prefix="dfl-oq-")
        cls.mdir = os.path.join(cls.tmp, "m")
        make_model.make_model(cls.mdir, "llama", layers=2, hidden=32, heads=4, vocab=61, seed=3)
        rng = np.random.default_rng(2)
        cls.toks = [[0] + [int(x) for x in rng.integers(1, 61, T - 1)] for T in (19, 26)]
        pp = os.path.join(cls.tmp, "p.jsonl")
        with open(pp, "w") as f:
            for i, tk in enumerate(cls.toks):
                f.write(json.dumps({"id": "q%d" % i, "tokens": tk}) + "\n")
        cls.dump = os.path.join(cls.tmp, "d.h5")
        run(PROBE, "--model", cls.mdir, "--prompts", pp, "--out", cls.dump, "--quant-stats", "--save-hidden", "f32",
            "--maps", "all", "--map-dtype", "f32", "--quiet", "--force")
        cls.doc = json.loads(run(OUTLIERS, cls.dump, "--quant-stats", "--format", "json").stdout)
        m = ref.load_model(cls.mdir)
        cls.model = m
        cls.cap = [capture(m, tk) for tk in cls.toks]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_tensor_statistics(self):
        got = {(r["layer"], r["site"]): r for r in rows(self.doc, "tensors")}
        ntok = sum(len(t) for t in self.toks)
        for l in range(2):
            for site in SITES:
                x = np.concatenate([c[l][site] for c in self.cap])  # [tokens, C]
                v = x.ravel()
                mu, sd = v.mean(), v.std()
                z = (v - mu) / sd
                e = (x * x).sum(axis=0) / ntok
                p = e / e.sum()
                want = {"mean": mu, "std": sd, "skewness": np.mean(z ** 3), "kurtosis (Pearson)": np.mean(z ** 4),
                        "kurtosis (excess)": np.mean(z ** 4) - 3, "max |x|": np.abs(v).max(),
                        "entropy (norm)": -(p * np.log(p)).sum() / np.log(len(p)), "energy": e.sum()}
                for k, w in want.items():
                    with self.subTest(layer=l, site=site, stat=k):
                        self.assertTrue(np.isclose(got[(l, site)][k], w, rtol=2e-4, atol=1e-6),
                                        "%s: outliers %r, numpy %r" % (k, got[(l, site)][k], w))

    def test_qk_map(self):
        got = {(r["layer"], r["tensor"], r["head"], r["dim"]): r["mean |x|"] for r in rows(self.doc, "qk_map")}
        heads = {(r["layer"], r["tensor"], r["head"]): r for r in rows(self.doc, "qk")}
        hd = self.model.hd
        for l in range(2):
            for w in ("q", "k"):
                a = np.abs(np.concatenate([c[l][w] for c in self.cap]))  # [tokens, heads, hd]
                mean = a.mean(axis=0)
                for h in range(mean.shape[0]):
                    for j in range(hd):
                        self.assertTrue(np.isclose(got[(l, w, h, j)], mean[h, j], rtol=1e-4, atol=1e-6))
                    pair = np.arange(hd) % (hd // 2)  # rotate-half: dims j and j + hd/2
                    row = heads[(l, w, h)]
                    self.assertEqual(row["dim"], int(np.argmax(mean[h])))
                    self.assertTrue(np.isclose(row["low-frequency share"],
                                               mean[h][pair >= hd // 4].sum() / mean[h].sum(), rtol=1e-4))

    def sink_reference(self, eps):
        with h5py.File(self.dump, "r") as f:
            per = {}
            for name in sorted(f["samples"]):
                A = f["samples"][name]["attn/map1"][()].astype(np.float64)  # [L, H, R, T]
                rws = f["samples"][name]["attn/rows"][()]
                for l in range(A.shape[0]):
                    for h in range(A.shape[1]):
                        for k in range(4):
                            sel = rws >= k
                            alpha = A[l, h, sel, k].mean()
                            per.setdefault(k, []).append(alpha)
        return {k: (np.mean(np.array(v) > eps), np.mean(v), len(v)) for k, v in per.items()}

    def test_sink(self):
        alphas = self.sink_reference(0.3)
        with h5py.File(self.dump, "r") as f:  # an ε between the heads' α_0: some pass, some not
            a0 = sorted(f["samples/000000/attn/map1"][()].astype(np.float64)[:, :, :, 0].mean(axis=2).ravel())
        mid = float(0.5 * (a0[3] + a0[4]))
        for eps in (0.3, mid):
            doc = self.doc if eps == 0.3 else json.loads(
                run(OUTLIERS, self.dump, "--quant-stats", "--sink-eps", repr(eps), "--format", "json").stdout)
            got = {r["key"]: r for r in rows(doc, "sink") if r["map"] == "map1"}
            want = self.sink_reference(eps)
            for k, (share, imp, n) in want.items():
                with self.subTest(eps=eps, key=k):
                    self.assertTrue(np.isclose(got[k]["sink"], share, rtol=1e-12, atol=1e-12))
                    self.assertTrue(np.isclose(got[k]["importance"], imp, rtol=1e-9))
                    self.assertEqual(got[k]["count"], n)
        low = self.sink_reference(mid)
        self.assertTrue(0 < low[0][0] < 1, "the low eps should split the heads: %r" % (low[0],))
        self.assertGreater(alphas[0][1], 0)

    def test_importance_is_column_mean(self):
        # every row stored: α_k = Σ_{q >= k} A[q, k] / (T − k)
        with h5py.File(self.dump, "r") as f:
            A = f["samples/000000/attn/map1"][()]
            T = A.shape[-1]
            a = A[:, :, 1:, 1].sum(axis=2) / (T - 1)
            b = A[:, :, :, 1][:, :, 1:].mean(axis=2)
            self.assertTrue(np.allclose(a, b))

    def test_residual(self):
        got = {r["layer"]: r for r in rows(self.doc, "residual")}
        with h5py.File(self.dump, "r") as f:
            g, c, p = [], [], []
            for name in sorted(f["samples"]):
                hs = f["samples"][name]["hidden"][()].astype(np.float64)
                for a, b in zip(hs[0], hs[1]):
                    g.append(np.linalg.norm(b) / np.linalg.norm(a))
                    c.append(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
                    p.append(np.corrcoef(a, b)[0, 1])
        self.assertTrue(np.isclose(got[1]["gain"], np.mean(g), rtol=1e-9))
        self.assertTrue(np.isclose(got[1]["cosine"], np.mean(c), rtol=1e-9))
        self.assertTrue(np.isclose(got[1]["pearson"], np.mean(p), rtol=1e-9))

    def test_plot_and_refusal(self):
        png = os.path.join(self.tmp, "q.png")
        run(OUTLIERS, self.dump, "--quant-stats", "--plot", png, "--force")
        with open(png, "rb") as f:
            self.assertEqual(f.read(4), b"\x89PNG")
        plain = os.path.join(self.tmp, "plain.h5")
        run(PROBE, "--model", self.mdir, "--prompts", os.path.join(self.tmp, "p.jsonl"), "--out", plain, "--quiet",
            "--force")
        r = run(OUTLIERS, plain, "--quant-stats", ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--quant-stats", r.stderr)
        self.assertEqual(run(OUTLIERS, self.dump, "--quant-stats", "--sink-eps", "2", ok=False).returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
