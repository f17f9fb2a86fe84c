#!/usr/bin/python3
"""Non-finite values (issue 18): a NaN or Inf in the forward pass is found per layer and
capture site, warned about once naming sample, layer and site, recorded in the dump
(sample attributes nonfinite_layer / nonfinite_site, root nonfinite_samples) and made an
error by --strict; the statistics over such values are NaN (never a finite number made
of them) in the dump, in `outliers` and in `noise` under every --norm."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE, OUTLIERS, NOISE = (os.path.join(BIN, t) for t in ("probe", "outliers", "noise"))


def poison(model_dir, tensor, value):
    """Set element [0, 0] of a tensor of model.safetensors to value, in place."""
    path = os.path.join(model_dir, "model.safetensors")
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    assert h[tensor]["dtype"] == "F32"
    off = 8 + n + h[tensor]["data_offsets"][0]
    raw[off:off + 4] = struct.pack("<f", value)
    with open(path, "wb") as f:
        f.write(raw)


class NonFinite(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="dfl_nan_")
        cls.clean = os.path.join(cls.root, "clean")
        make_model.make_model(cls.clean, "diff_transformer", layers=3, hidden=16, heads=2, ffn=24, vocab=30,
                              max_pos=64, seed=5)
        cls.nan = os.path.join(cls.root, "nan")
        shutil.copytree(cls.clean, cls.nan)
        poison(cls.nan, "model.layers.1.self_attn.q_proj.weight", float("nan"))
        cls.inf = os.path.join(cls.root, "inf")
        shutil.copytree(cls.clean, cls.inf)
        poison(cls.inf, "model.layers.2.mlp.down_proj.weight", float("inf"))
        cls.head = os.path.join(cls.root, "head")  # finite through every layer, not in the logits
        shutil.copytree(cls.clean, cls.head)
        poison(cls.head, "lm_head.weight", float("-inf"))
        cls.prompts = os.path.join(cls.root, "p.jsonl")
        with open(cls.prompts, "w") as f:
            for i in range(3):
                f.write(json.dumps({"id": "p%d" % i, "tokens": [0, 5 + i, 6, 7, 8, 9], "answer": [[1, 3]],
                                    "query": [[4, 5]], "target": [[5, 6]]}) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def probe(self, model, name, *extra):
        out = os.path.join(self.root, name)
        r = subprocess.run([PROBE, "--model", model, "--prompts", self.prompts, "--out", out, "--force",
                            "--threads", "2", *extra], capture_output=True, text=True)
        return r, out

    def test_probe_finds_and_records(self):
        r, out = self.probe(self.clean, "clean.h5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("non-finite", r.stderr)
        with h5py.File(out) as f:
            self.assertEqual(f.attrs["nonfinite_samples"], 0)
            self.assertNotIn("nonfinite_layer", f["samples/000000"].attrs)
        for model, layer, site in ((self.nan, 1, "attention logits"), (self.inf, 2, "hidden states")):
            r, out = self.probe(model, "bad.h5")
            self.assertEqual(r.returncode, 0, r.stderr)
            warn = [l for l in r.stderr.splitlines() if "first non-finite" in l]
            self.assertEqual(len(warn), 1, r.stderr)
            self.assertIn("sample p0", warn[0])
            self.assertIn("%s of layer %d" % (site, layer), warn[0])
            with h5py.File(out) as f:
                self.assertEqual(f.attrs["nonfinite_samples"], 3)
                for s in f["samples"].values():
                    self.assertEqual(s.attrs["nonfinite_layer"], layer)
                    self.assertEqual(s.attrs["nonfinite_site"], site)
                    # what the probe derives from them is NaN, layer by layer, never 0 or finite
                    nll = s["nll"][:-1]
                    self.assertTrue(np.isnan(nll).all(), nll)
                    if site == "attention logits":
                        for name in ("shares", "shares_abs"):
                            v = s["noise/" + name][:]   # [M, L, H, 7]
                            # the poisoned q_proj row feeds one head; later layers all
                            self.assertTrue(np.isfinite(v[:, :layer]).all())
                            self.assertTrue(np.isnan(v[:, layer]).any(), name)
                            self.assertTrue(np.isnan(v[:, layer + 1:]).all(), name)
                    mom = s["outliers/hidden/moments"][:]
                    self.assertTrue(np.isfinite(mom[:layer, 1]).all())
                    self.assertFalse(np.isfinite(mom[layer:, 1]).any())
            r2, out2 = self.probe(model, "strict.h5", "--strict")
            self.assertEqual(r2.returncode, 1, r2.stderr)
            lines = r2.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r2.stderr)
            self.assertIn("non-finite value (NaN or Inf) in the %s of layer %d" % (site, layer), lines[0])
            self.assertFalse(os.path.exists(out2))

    def test_output_logits(self):
        """-Inf in the LM head: only the logits are non-finite (found in the log-sum-exp's
        own pass over them), recorded as layer L's "output logits"."""
        r, out = self.probe(self.head, "head.h5")
        self.assertEqual(r.returncode, 0, r.stderr)
        warn = [l for l in r.stderr.splitlines() if "first non-finite" in l]
        self.assertEqual(len(warn), 1, r.stderr)
        self.assertIn("output logits of layer 3", warn[0])
        with h5py.File(out) as f:
            self.assertEqual(f.attrs["nonfinite_samples"], 3)
            for s in f["samples"].values():
                self.assertEqual(s.attrs["nonfinite_layer"], 3)
                self.assertEqual(s.attrs["nonfinite_site"], "output logits")
                self.assertTrue(np.isfinite(s["outliers/hidden/moments"][:]).all())
        r2, out2 = self.probe(self.head, "head_strict.h5", "--strict")
        self.assertEqual(r2.returncode, 1, r2.stderr)
        self.assertIn("non-finite value (NaN or Inf) in the output logits of layer 3", r2.stderr)
        self.assertFalse(os.path.exists(out2))

    def test_outliers_and_noise_say_nan(self):
        r, out = self.probe(self.nan, "nan.h5")
        self.assertEqual(r.returncode, 0, r.stderr)
        o = subprocess.run([OUTLIERS, out, "--format", "json", "--per-layer"], capture_output=True, text=True)
        self.assertEqual(o.returncode, 0, o.stderr)
        rep = json.loads(o.stdout)
        t5 = [t for t in rep["tables"] if t["name"] == "table5"][0]
        for row in t5["data"]:
            self.assertEqual(row[2:], [None] * (len(row) - 2), row)   # NaN, not a number made of NaNs
        self.assertTrue(any("NaN or Inf from layer 1" in n for n in rep["notes"]), rep["notes"])
        # per layer: layer 0 is finite and matches numpy's view of the stored top lists
        pl = [t for t in rep["tables"] if t["name"] == "per_layer"][0]
        cols = pl["columns"]
        with h5py.File(out) as f:
            top0 = max(float(np.nanmax(s["outliers/logits/top"][0])) for s in f["samples"].values())
        for row in pl["data"]:
            d = dict(zip(cols, row))
            if d["activation"] != "attention logits":
                continue
            if d["layer"] == 0:
                self.assertAlmostEqual(d["top1"], top0, places=3)
                self.assertIsNotNone(d["median"])
            else:
                self.assertIsNone(d["top1"])
                self.assertIsNone(d["median"])
        for norm in ("total", "abs"):
            n = subprocess.run([NOISE, out, "--norm", norm, "--format", "json"], capture_output=True, text=True)
            self.assertEqual(n.returncode, 0, n.stderr)
            shares = json.loads(n.stdout)["tables"][0]
            answer = [row for row in shares["data"] if row[0] == "answer"][0]
            self.assertIsNone(answer[1], norm)
            self.assertIn("NaN or Inf", n.stderr)
            self.assertNotIn("--norm abs is not", n.stderr)   # no mode hides NaN


if __name__ == "__main__":
    unittest.main(verbosity=1)
