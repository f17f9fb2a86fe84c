#!/usr/bin/python3
"""test_diff_v2.py — DIFF Transformer V2 (model_type diff_transformer_v2, the layout of
microsoft/unilm Diff-Transformer-V2/multihead_flashdiffv2.py) against the float64
reference: logits, maps, noise shares, outliers and the per-token σ(λ) dataset; the
reference's own checks (lambda_proj = 0 gives A1 − 0.5·A2; rows sum to 1 − σ(λ)).

Run from the repo root:  /usr/bin/python3 tests/test_diff_v2.py   (BIN=bin by default)
"""
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402
import reference  # noqa: E402
import test_reference as tr  # noqa: E402

V2 = "diff_transformer_v2"

# name, make_model keywords, dtype, shards, prompt lengths
CASES = [
    ("v2-mha-f32", dict(heads=4), "f32", 1, (19, 13)),
    ("v2-gqa-bf16-sharded", dict(heads=4, kv_heads=2), "bf16", 2, (23, 14)),
    ("v2-mqa-hd12-f16", dict(heads=4, kv_heads=1, head_dim=12), "f16", 1, (21, 15)),
    ("v2-gqa-multiblock-f32", dict(heads=8, kv_heads=2), "f32", 1, (150, 20)),
    ("v2-rotate-half-f32", dict(heads=2, rope_interleaved=False), "f32", 1, (17, 12)),
]


class DiffV2ReferenceSelfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-v2-self-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def model(self, name, zero_lambda=False, **kw):
        d = os.path.join(self.tmp, name)
        cfg = make_model.make_config(V2, 2, tr.HIDDEN, kw.pop("heads", 4), ffn=tr.FFN, vocab=tr.VOCAB, **kw)
        t = make_model.make_weights(cfg, seed=9)
        if zero_lambda:
            t = [(n, np.zeros_like(a) if n.endswith("lambda_proj.weight") else a) for n, a in t]
        make_model.write_model(d, cfg, t)
        return reference.load_model(d)

    def test_zero_lambda_proj_is_half(self):
        m = self.model("zero", zero_lambda=True, kv_heads=2)
        r = reference.forward(m, np.random.default_rng(2).integers(0, tr.VOCAB, 16))
        np.testing.assert_array_equal(r["sigma"], 0.5)
        np.testing.assert_allclose(r["diff"], r["map1"] - 0.5 * r["map2"], atol=1e-15)
        np.testing.assert_allclose(r["diff"].sum(-1), 0.5, atol=1e-12)

    def test_rows_sum_to_one_minus_sigma(self):
        m = self.model("rows", kv_heads=2)
        T = 18
        r = reference.forward(m, np.random.default_rng(3).integers(0, tr.VOCAB, T))
        sig = r["sigma"]                                          # [L, T, H]
        self.assertEqual(sig.shape, (2, T, 4))
        self.assertGreater(float(sig.std()), 0.05)                # per token and head, not constant
        np.testing.assert_allclose(r["diff"].sum(-1), 1 - sig.transpose(0, 2, 1), atol=1e-12)
        # the pair (2i, 2i+1) reads one kv head: both maps of head i see the same keys
        self.assertEqual(r["map1"].shape, (2, 4, T, T))

    def test_shapes_follow_design_table(self):
        cfg = make_model.make_config(V2, 1, 64, 4, kv_heads=2, ffn=96)
        t = dict((n, a.shape) for n, a in make_model.make_weights(cfg))
        a = "model.layers.0.self_attn."
        hd = 16
        self.assertEqual(t[a + "q_proj.weight"], (2 * 4 * hd, 64))
        self.assertEqual(t[a + "k_proj.weight"], (2 * hd, 64))
        self.assertEqual(t[a + "v_proj.weight"], (2 * hd, 64))
        self.assertEqual(t[a + "o_proj.weight"], (64, 4 * hd))
        self.assertEqual(t[a + "lambda_proj.weight"], (4, 64))
        self.assertEqual(cfg["head_dim"], hd)


class DiffV2ProbeAgainstReference(unittest.TestCase):
    check_case = tr.ProbeAgainstReference.check_case
    compare_extras = tr.ProbeAgainstReference.compare_extras

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-v2-probe-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)


def _add_case(i, case):
    name, kw, dtype, shards, lengths = case

    def test(self):
        self.check_case(70 + i, name, V2, kw, dtype, shards, lengths)
    test.__name__ = "test_%02d_%s" % (i, name.replace("-", "_"))
    setattr(DiffV2ProbeAgainstReference, test.__name__, test)


for _i, _c in enumerate(CASES):
    _add_case(_i, _c)


class DiffV2Dump(unittest.TestCase):
    """The dump of a DIFF V2 model: σ(λ) per layer, token and head (the sample's lambda)
    against the reference, no per-layer /model/lambda, and every entry the schema
    header declares (test_dump_schema's check of real dumps)."""

    def test_lambda_dataset(self):
        import h5py
        import test_dump_schema as ts
        tmp = tempfile.mkdtemp(prefix="dfl-v2-dump-")
        try:
            mdir = os.path.join(tmp, "m")
            make_model.make_model(mdir, V2, layers=2, hidden=tr.HIDDEN, heads=4, kv_heads=2, ffn=tr.FFN,
                                  vocab=tr.VOCAB, seed=12)
            prompts = tr.write_prompts(os.path.join(tmp, "p.jsonl"), (22, 9), 4)
            out = os.path.join(tmp, "o.h5")
            tr.run_probe(mdir, os.path.join(tmp, "p.jsonl"), out, "--maps", "all", "--map-dtype", "f32", "--quiet")
            m = reference.load_model(mdir)
            with h5py.File(out, "r") as f:
                self.assertEqual(f.attrs["model_type"], V2)
                self.assertNotIn("model", f)
                for si, p in enumerate(prompts):
                    want = reference.forward(m, p["tokens"])["sigma"]           # [L, T, H]
                    got = f["samples/%06d/lambda" % si][()]
                    self.assertEqual(got.dtype, np.float32)
                    self.assertEqual(got.shape, want.shape)
                    self.assertLess(float(np.abs(got - want).max()), 1e-6)
                    # each stored diff row sums to 1 − σ(λ) of its row and head
                    dsum = f["samples/%06d/attn/diff" % si][()].astype(np.float64).sum(-1)  # [L, H, T]
                    np.testing.assert_allclose(dsum, 1 - got.transpose(0, 2, 1), atol=1e-5)
            ts.DumpChecks.check_dump(self, out, True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=1)
    for line in tr.SUMMARY:
        print(line)
    sys.exit(not prog.result.wasSuccessful())
