#!/usr/bin/python3
"""test_motif.py — Motif Technologies' differential attention (Motif-2.6B: V1 pairs;
Motif-2-12.7B: grouped differential attention) against the float64 reference
(tests/ref/reference.py, written from the ports' maths), from the published configs
shrunk key for key and sharded as the hub shards them; the reference's own
self-checks; and the refusals of what is not implemented.

Run from the repo root:  /usr/bin/python3 tests/test_motif.py   (BIN=bin by default)
"""
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402
import reference  # noqa: E402
import test_reference as tr  # noqa: E402  (its case runner; its classes stay in its namespace)

LAYERS = tr.LAYERS
VOCAB = tr.VOCAB

# name, published config, sizes, weight dtype, shards (at least the hub's), prompt lengths
CASES = [
    ("pub-Motif-2.6B", "Motif-2.6B", dict(heads=4, head_dim=8), "bf16", 1, (21, 13)),
    ("Motif-2.6B-gqa-f32", "Motif-2.6B", dict(heads=8, kv_heads=4, head_dim=8), "f32", 1, (25, 14)),
    ("Motif-2.6B-gqa2-multiblock-f32", "Motif-2.6B", dict(heads=8, kv_heads=2, head_dim=8), "f32", 1,
     (150, 20)),
    ("pub-Motif-2-12.7B", "Motif-2-12.7B-Base", dict(heads=10, head_dim=8), "bf16", 6, (23, 13)),
    # one kv pair shared by both noise heads (kv_repeat 2)
    ("Motif-2-12.7B-kvrepeat-f16", "Motif-2-12.7B-Base", dict(heads=10, kv_heads=2, head_dim=8), "f16", 1,
     (19, 15)),
    ("Motif-2-12.7B-multiblock-f32", "Motif-2-12.7B-Base", dict(heads=10, head_dim=8), "f32", 1, (140, 20)),
]


def motif_model(d, name, sizes, dtype="f32", shards=1, seed=5, edit=None, hub=True):
    cfg, hub_shards = make_model.published_config(name, layers=LAYERS, vocab=VOCAB, **sizes)
    cfg.update(edit or {})
    make_model.write_model(d, cfg, make_model.make_weights(cfg, seed=seed), dtype, max(shards, hub_shards),
                           hub=hub)
    return cfg


class MotifReferenceSelfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-motif-self-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_gda_with_one_to_one_groups_is_v1(self):
        """GDA with gr = 1 (H = 2·Gn) is V1's stripe pairing: same weights, same model."""
        toks = np.random.default_rng(3).integers(0, VOCAB, 17)
        d1, d2 = os.path.join(self.tmp, "v1"), os.path.join(self.tmp, "gda11")
        cfg = motif_model(d1, "Motif-2.6B", dict(heads=8, kv_heads=4, head_dim=8))
        cfg2 = dict(cfg, num_noise_heads=4, k_ratio=1)
        make_model.write_model(d2, cfg2, make_model.make_weights(cfg, seed=5), "f32", 2, hub=True)
        r1 = reference.forward(reference.load_model(d1), toks)
        m2 = reference.load_model(d2)
        self.assertEqual(m2.Gn, 4)
        r2 = reference.forward(m2, toks)
        for k in ("logits", "map1", "map2", "diff", "lambda"):
            np.testing.assert_allclose(r2[k], r1[k], rtol=0, atol=1e-12, err_msg=k)

    def test_gda_noise_map_shared_by_its_group(self):
        toks = np.random.default_rng(4).integers(0, VOCAB, 15)
        d = os.path.join(self.tmp, "gda")
        motif_model(d, "Motif-2-12.7B-Base", dict(heads=10, head_dim=8))
        m = reference.load_model(d)
        r = reference.forward(m, toks)
        Gn, gr = m.Gn, (m.H - m.Gn) // m.Gn
        self.assertEqual((Gn, gr, m.diff_heads()), (2, 4, 8))
        self.assertEqual(r["noise"].shape, (LAYERS, Gn, 15, 15))
        for s in range(m.diff_heads()):
            np.testing.assert_array_equal(r["map2"][:, s], r["noise"][:, s // gr])
        # signal maps differ within a group (each its own q head)
        self.assertGreater(float(np.abs(r["map1"][:, 0] - r["map1"][:, 1]).max()), 1e-3)
        np.testing.assert_allclose(r["diff"].sum(-1), (1 - r["lambda"])[:, None, None] *
                                   np.ones(r["diff"].shape[1:3]), atol=1e-12)

    def test_lambda_init_of_layer_zero(self):
        """0.8 − 0.6·exp(−0.3·(layer − 1)): layer 0 ≈ −0.0099, not unilm's 0.2."""
        d = os.path.join(self.tmp, "li")
        motif_model(d, "Motif-2.6B", dict(heads=4, head_dim=8))
        m = reference.load_model(d)
        self.assertAlmostEqual(m.lambda_init(0), 0.8 - 0.6 * math.exp(0.3), places=15)
        self.assertAlmostEqual(m.lambda_init(0), -0.00990, places=4)
        self.assertAlmostEqual(m.lambda_init(1), 0.2, places=15)

    def test_polynorm_terms(self):
        """Each PolyNorm term alone is the RMS normalisation of x^p (no gain)."""
        x = np.random.default_rng(0).standard_normal((5, 12))
        for p, w in ((3, [1, 0, 0]), (2, [0, 1, 0]), (1, [0, 0, 1])):
            z = x ** p
            want = z / np.sqrt((z * z).mean(1, keepdims=True) + 1e-6)
            np.testing.assert_allclose(reference.polynorm(x, w, [0.0]), want, rtol=1e-13)
        np.testing.assert_allclose(reference.polynorm(x, [0, 0, 0], [0.25]), 0.25)

    def test_published_shapes(self):
        """Tensor shapes as the ports give them (MLX motif.py docstrings)."""
        cfg, shards = make_model.published_config("Motif-2-12.7B-Base", layers=1, heads=40, head_dim=128,
                                                  hidden=4096, kv_heads=16)
        self.assertEqual((cfg["num_noise_heads"], shards), (8, 6))
        hd = 128
        t = dict((n, a.shape) for n, a in make_model.make_weights(dict(cfg, intermediate_size=8, vocab_size=4)))
        a = "model.layers.0.self_attn."
        self.assertEqual(t[a + "q_proj.weight"], (40 * hd, 4096))
        self.assertEqual(t[a + "k_proj.weight"], (16 * hd, 4096))
        self.assertEqual(t[a + "v_proj.weight"], (16 * hd, 4096))
        self.assertEqual(t[a + "o_proj.weight"], (4096, 2 * 4 * 8 * hd))
        self.assertEqual(t[a + "subln.weight"], (2 * hd,))
        self.assertEqual(t["model.layers.0.mlp.act_fn.weight"], (3,))
        self.assertEqual(t["model.layers.0.mlp.act_fn.bias"], (1,))


class MotifProbeAgainstReference(unittest.TestCase):
    check_case = tr.ProbeAgainstReference.check_case
    compare_extras = tr.ProbeAgainstReference.compare_extras

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-motif-probe-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)


def _add_case(i, case):
    name, pub, sizes, dtype, shards, lengths = case

    def test(self):
        self.check_case(50 + i, name, "published", dict(name=pub, sizes=sizes), dtype, shards, lengths)
    test.__name__ = "test_%02d_%s" % (i, name.replace("-", "_").replace(".", "_"))
    setattr(MotifProbeAgainstReference, test.__name__, test)


for _i, _c in enumerate(CASES):
    _add_case(_i, _c)


class MotifDump(unittest.TestCase):
    """Motif dumps: the GDA noise groups, and every entry the schema header declares."""

    def test_dumps(self):
        import h5py
        import test_dump_schema as ts
        tmp = tempfile.mkdtemp(prefix="dfl-motif-dump-")
        try:
            for name, sizes, groups in (("Motif-2.6B", dict(heads=4, head_dim=8), None),
                                        ("Motif-2-12.7B-Base", dict(heads=10, head_dim=8), [0] * 4 + [1] * 4)):
                d = os.path.join(tmp, name)
                motif_model(os.path.join(d, "m"), name, sizes)
                tr.write_prompts(os.path.join(d, "p.jsonl"), (15, 9), 3)
                out = os.path.join(d, "o.h5")
                tr.run_probe(os.path.join(d, "m"), os.path.join(d, "p.jsonl"), out, "--maps", "all", "--quiet")
                with h5py.File(out, "r") as f:
                    self.assertEqual(f.attrs["model_type"], "motif")
                    if groups is None:
                        self.assertNotIn("noise_group", f["model"])
                    else:
                        self.assertEqual(f["model/noise_group"].dtype, np.int32)
                        np.testing.assert_array_equal(f["model/noise_group"][()], groups)
                        # the group's one noise map, stored once (the signal heads' map1 differ)
                        a = f["samples/000000/attn"]
                        np.testing.assert_array_equal(a["noise_groups"][()], [0, 1])
                        self.assertEqual(a["map2"].shape[1], 2)
                        self.assertEqual(a["map1"].shape[1], 8)
                ts.DumpChecks.check_dump(self, out, True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class MotifProbeEdits(unittest.TestCase):
    """Published configs with one key changed: logits against the reference."""

    def test_edited_configs(self):
        if not os.access(tr.PROBE, os.X_OK):
            self.fail("%s not found or not executable (build it, or set BIN)" % tr.PROBE)
        import h5py
        tmp = tempfile.mkdtemp(prefix="dfl-motif-edit-")
        try:
            cases = (("Motif-2.6B", dict(heads=4, head_dim=8), {"attn_rms_norm_eps": 0.3}),
                     ("Motif-2.6B", dict(heads=4, head_dim=8), {"model_type": "motif"}),
                     ("Motif-2-12.7B-Base", dict(heads=10, head_dim=8), {"attn_rms_norm_eps": 0.3}),
                     # keys every port ignores (vLLM: no sliding window; fused_rope a kernel choice)
                     ("Motif-2.6B", dict(heads=4, head_dim=8), {"use_sliding_window": True, "sliding_window": 4,
                                                                "fused_rope": False, "expanded": True}))
            for i, (name, sizes, edit) in enumerate(cases):
                d = os.path.join(tmp, str(i))
                motif_model(os.path.join(d, "m"), name, sizes, edit=edit, seed=20 + i)
                prompts = tr.write_prompts(os.path.join(d, "p.jsonl"), (17, 12), 2 + i)
                tr.run_probe(os.path.join(d, "m"), os.path.join(d, "p.jsonl"), os.path.join(d, "o.h5"),
                             "--save-logits", "--quiet")
                m = reference.load_model(os.path.join(d, "m"))
                with h5py.File(os.path.join(d, "o.h5"), "r") as f:
                    for si, p in enumerate(prompts):
                        want = reference.forward(m, p["tokens"])["logits"]
                        got = f["samples/%06d/logits" % si][()]
                        e = float(np.abs(got - want).max() / np.abs(want).max())
                        self.assertLess(e, tr.TOL_LOGITS_REL, "%s %s sample %d" % (name, edit, si))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class MotifProbeRefuses(unittest.TestCase):
    """What the ports compute and difflens does not is refused by name (exit 1, no output)."""

    def test_refusals(self):
        if not os.access(tr.PROBE, os.X_OK):
            self.fail("%s not found or not executable (build it, or set BIN)" % tr.PROBE)
        tmp = tempfile.mkdtemp(prefix="dfl-motif-refuse-")
        try:
            gda = ("Motif-2-12.7B-Base", dict(heads=10, head_dim=8))
            v1 = ("Motif-2.6B", dict(heads=4, head_dim=8))
            cases = (("use_bias", v1, {"use_bias": True}),
                     ("k_ratio", gda, {"k_ratio": 2}),
                     ("num_noise_heads", gda, {"num_noise_heads": 3}),
                     ("num_noise_heads", gda, {"num_noise_heads": 10}),
                     ("hidden_act", v1, {"hidden_act": "silu"}),
                     ("quantization", v1, {"quantization": {"bits": 4, "group_size": 64}}),
                     ("diff_lambda_init", v1, {"diff_lambda_init": 0.5}),
                     ("num_key_value_heads", v1, {"num_key_value_heads": 1}))
            for i, (word, (name, sizes), edit) in enumerate(cases):
                d = os.path.join(tmp, str(i))
                motif_model(os.path.join(d, "m"), name, sizes, edit=edit)
                tr.write_prompts(os.path.join(d, "p.jsonl"), (13, 13), 1)
                r = subprocess.run([tr.PROBE, "--model", os.path.join(d, "m"), "--prompts",
                                    os.path.join(d, "p.jsonl"), "--out", os.path.join(d, "o.h5"),
                                    "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
                err = r.stderr.decode(errors="replace")
                self.assertEqual(r.returncode, 1, "%s: exit %d (%s)" % (edit, r.returncode, err))
                self.assertIn(word, err, "%s: message does not name it: %s" % (edit, err))
                self.assertEqual(sorted(os.listdir(d)), ["m", "p.jsonl"], "%s: output left" % edit)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=1)
    for line in tr.SUMMARY:
        print(line)
    sys.exit(not prog.result.wasSuccessful())
