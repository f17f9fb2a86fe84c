#!/usr/bin/python3
"""test_lens.py — probe's readouts (--logit-lens K, --dla, --logit-diff A,B) against the
float64 reference of tests/ref/lens.py on tiny random models of five types (llama with
GQA, diff_transformer, gpt2, gemma2 with its final soft-cap, olmo2), and the identities
that hold exactly: the DLA terms plus the bias term sum to the logit (frozen final-norm
scale), the lens of the last layer is the model's own output, and the flags' refusals.

Run from the repo root:  /usr/bin/python3 tests/test_lens.py   (BIN=bin by default)
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
import lens  # noqa: E402
import make_model  # noqa: E402
import reference  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")

TOL_PROB = 1e-5       # probabilities (absolute)
TOL_TERM_REL = 1e-4   # DLA terms, relative to the row's largest term
TOL_IDENTITY = 1e-4   # Σ terms vs the logit, relative
VOCAB, K = 97, 5
CASES = [("llama", dict(kv_heads=2)), ("diff_transformer", {}), ("gpt2", {}), ("gemma2", {}), ("olmo2", {})]


def run_probe(*args, check=True):
    r = subprocess.run([PROBE, "--quiet"] + list(args), capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError("probe %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


class LensTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(PROBE, os.X_OK):
            raise AssertionError("%s not found or not executable (build it, or set BIN)" % PROBE)
        cls.tmp = tempfile.mkdtemp(prefix="difflens-lens-")
        rng = np.random.default_rng(7)
        cls.prompts = []
        for n, q in ((18, 10), (13, 6)):
            toks = [int(x) for x in rng.integers(0, VOCAB, n)]
            cls.prompts.append({"id": "p%d" % n, "tokens": toks, "query": [[q - 2, q]], "target": [[q, q + 3]]})
        cls.prompt_path = os.path.join(cls.tmp, "p.jsonl")
        with open(cls.prompt_path, "w") as f:
            for p in cls.prompts:
                f.write(json.dumps(p) + "\n")
        cls.dumps = {}
        for mtype, kw in CASES:
            d = os.path.join(cls.tmp, mtype)
            make_model.make_model(d, mtype, layers=2, hidden=64, heads=4, vocab=VOCAB, seed=3, **kw)
            out = os.path.join(cls.tmp, mtype + ".h5")
            # rows "all": every row, the last one (no next token) included
            run_probe("--model", d, "--prompts", cls.prompt_path, "--out", out, "--logit-lens", str(K), "--dla",
                      "--rows", "all", "--save-logits")
            cls.dumps[mtype] = (d, out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_logit_lens_matches_reference(self):
        for mtype, _ in CASES:
            d, out = self.dumps[mtype]
            m = reference.load_model(d)
            with h5py.File(out) as f:
                for i, p in enumerate(self.prompts):
                    with self.subTest(model=mtype, sample=i):
                        g = f["samples/%06d" % i]
                        want, _ = lens.logit_lens(m, p["tokens"], K)
                        L1, T = m.L + 1, len(p["tokens"])
                        self.assertEqual(g["lens/top_ids"].shape, (L1, T, K))
                        self.assertEqual(list(g["lens/layers"][()]), list(range(-1, m.L)))
                        np.testing.assert_allclose(g["lens/top_prob"][()], want["top_prob"], atol=TOL_PROB)
                        np.testing.assert_allclose(g["lens/target_prob"][()], want["target_prob"], atol=TOL_PROB)
                        # ids and ranks: equal wherever the reference's neighbours are apart
                        ids = g["lens/top_ids"][()]
                        gap = np.abs(np.diff(np.log(want["top_prob"]), axis=2))   # logit gaps
                        clear = np.concatenate([gap[..., :1], np.minimum(gap[..., 1:], gap[..., :-1]), gap[..., -1:]],
                                               axis=2) > 1e-4
                        np.testing.assert_array_equal(ids[clear], want["top_ids"][clear])
                        self.assertGreater(clear.mean(), 0.9)
                        np.testing.assert_array_equal(g["lens/target_rank"][()], want["target_rank"])
                        self.assertTrue(np.all(g["lens/target_rank"][:, T - 1] == -1))
                        self.assertTrue(np.all(np.isnan(g["lens/target_prob"][:, T - 1])))

    def test_last_layer_lens_is_the_output(self):
        for mtype, _ in CASES:
            _, out = self.dumps[mtype]
            with h5py.File(out) as f:
                g = f["samples/000000"]
                z = g["logits"][()].astype(np.float64)
                p = np.exp(z - z.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                ids = g["lens/top_ids"][-1]
                with self.subTest(model=mtype):
                    np.testing.assert_allclose(g["lens/top_prob"][-1], np.take_along_axis(p, ids, 1), atol=1e-6)
                    np.testing.assert_array_equal(ids[:, 0], g["argmax"][()])

    def test_dla_matches_reference(self):
        for mtype, _ in CASES:
            d, out = self.dumps[mtype]
            m = reference.load_model(d)
            with h5py.File(out) as f:
                for i, p in enumerate(self.prompts):
                    with self.subTest(model=mtype, sample=i):
                        g = f["samples/%06d" % i]
                        rows = list(g["dla/rows"][()])
                        self.assertEqual(rows, list(range(len(p["tokens"]))))
                        want = lens.dla(m, p["tokens"], rows)
                        scale = np.nanmax(np.abs(want["heads"])) + np.nanmax(np.abs(want["mlp"])) + 1.0
                        for k in ("heads", "mlp", "embed", "bias", "logit"):
                            got = g["dla/" + k][()]
                            self.assertEqual(got.shape, want[k].shape, k)
                            np.testing.assert_array_equal(np.isnan(got), np.isnan(want[k]), k)
                            np.testing.assert_allclose(got, want[k], atol=TOL_TERM_REL * scale, rtol=0, err_msg=k)
                        self.assertEqual(g["dla"].attrs["direction"], "target")

    def test_dla_terms_sum_to_the_logit(self):
        for mtype, _ in CASES:
            _, out = self.dumps[mtype]
            with h5py.File(out) as f:
                for i in range(len(self.prompts)):
                    g = f["samples/%06d" % i]
                    total = (g["dla/heads"][()].sum(axis=(1, 2)) + g["dla/mlp"][()].sum(axis=1) + g["dla/embed"][()]
                             + g["dla/bias"][()])
                    logit = g["dla/logit"][()]
                    ok = ~np.isnan(logit)
                    with self.subTest(model=mtype, sample=i):
                        self.assertEqual(int((~ok).sum()), 1)          # the last row: no next token
                        err = np.abs(total[ok] - logit[ok]) / np.maximum(np.abs(logit[ok]), 1.0)
                        self.assertLess(err.max(), TOL_IDENTITY, "Σ terms vs logit %s" % err.max())
                        # and the logit is the model's own (before Gemma 2's final soft-cap)
                        z = g["logits"][()].astype(np.float64)
                        toks = g["tokens"][()]
                        own = z[np.arange(len(toks) - 1), toks[1:]]
                        cap = 30.0 if mtype == "gemma2" else None
                        if cap:
                            own = cap * np.arctanh(own / cap)
                        np.testing.assert_allclose(logit[:-1], own, rtol=1e-4, atol=1e-4)

    def test_logit_diff(self):
        d, _ = self.dumps["gpt2"]
        out = os.path.join(self.tmp, "diff.h5")
        run_probe("--model", d, "--prompts", self.prompt_path, "--out", out, "--dla", "--logit-diff", "5,7")
        m = reference.load_model(d)
        with h5py.File(out) as f:
            g = f["samples/000000"]
            self.assertEqual(g["dla"].attrs["direction"], "logit_diff:5,7")
            rows = list(g["dla/rows"][()])
            want = lens.dla(m, self.prompts[0]["tokens"], rows, diff=(5, 7))
            for k in ("heads", "mlp", "embed", "bias", "logit"):
                np.testing.assert_allclose(g["dla/" + k][()], want[k], atol=1e-4 * 10, rtol=0, err_msg=k)
            self.assertNotIn("lens", g)

    def test_refusals(self):
        d, _ = self.dumps["llama"]
        out = os.path.join(self.tmp, "bad.h5")
        base = ["--model", d, "--prompts", self.prompt_path, "--out", out]
        for extra, what in ((["--logit-lens", "0"], "--logit-lens"), (["--logit-lens", "x"], "--logit-lens"),
                            (["--logit-diff", "5"], "--logit-diff"), (["--dla", "--logit-diff", "5,x"], "--logit-diff"),
                            (["--logit-diff", "-1,2"], "--logit-diff")):
            r = run_probe(*(base + extra), check=False)
            self.assertEqual(r.returncode, 2, (extra, r.stderr))
            self.assertIn(what, r.stderr)
        # without --dla a token string is the interventions' (it needs the model's tokenizer)
        r = run_probe(*(base + ["--logit-diff", "5,x"]), check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("needs a tokenizer", r.stderr)
        for extra, what in ((["--logit-lens", str(VOCAB + 1)], "vocabulary"),
                            (["--dla", "--logit-diff", "5,%d" % VOCAB], "--logit-diff")):
            r = run_probe(*(base + extra), check=False)
            self.assertEqual(r.returncode, 2, (extra, r.stderr))
            self.assertIn(what, r.stderr)
            self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main(verbosity=2)
