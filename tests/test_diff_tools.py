#!/usr/bin/python3
"""test_diff_tools.py — the tools on dumps of the newer differential layouts, checked
against the float64 reference (tests/ref/reference.py):

- Motif GDA (Motif-2-12.7B, shrunk): map2 holds each noise group's map once
  (attn/noise_groups, /model/noise_group), also under a --maps head selection; bin/view's
  cells and rows give every signal head its group's map, and bin/attnmap draws map2 of
  any signal head.
- DIFF V2: bin/view's hover gives the row's σ(λ) (the sample's lambda).

Run from the repo root:  /usr/bin/python3 tests/test_diff_tools.py   (BIN=bin by default)
"""
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
import test_reference as tr  # noqa: E402
import test_view as tv  # noqa: E402

import h5py  # noqa: E402

ATTNMAP = os.path.join(tr.BIN, "attnmap")


class GroupedAndV2Dumps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in (tr.PROBE, tv.VIEW, ATTNMAP):
            if not os.access(tool, os.X_OK):
                raise AssertionError("%s not found or not executable (build it, or set BIN)" % tool)
        cls.tmp = tempfile.mkdtemp(prefix="dfl-difftools-")
        t = cls.tmp
        cfg, _ = make_model.published_config("Motif-2-12.7B-Base", layers=2, vocab=tr.VOCAB, heads=10, head_dim=8)
        make_model.write_model(t + "/gda", cfg, make_model.make_weights(cfg, seed=31), "f32", 2, hub=True)
        make_model.make_model(t + "/v2", "diff_transformer_v2", layers=2, hidden=64, heads=4, kv_heads=2, ffn=96,
                              vocab=tr.VOCAB, seed=32)
        cls.prompts = tr.write_prompts(t + "/p.jsonl", (26, 11), 6)
        for name, model, extra in (("gda", "gda", ()), ("gdasel", "gda", ("--maps", "layers=1;heads=2-5")),
                                   ("v2", "v2", ())):
            args = ("--maps", "all") if not extra else extra
            tr.run_probe(t + "/" + model, t + "/p.jsonl", "%s/%s.h5" % (t, name), *args, "--map-dtype", "f32",
                         "--quiet")
        cls.ref = {m: reference.load_model(t + "/" + m) for m in ("gda", "v2")}
        cls.proc, cls.url = tv.start_server(t + "/gda.h5", t + "/gdasel.h5", t + "/v2.h5")

    @classmethod
    def tearDownClass(cls):
        cls.proc.kill()
        cls.proc.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_noise_map_stored_once_per_group(self):
        for name, heads, layers in (("gda", list(range(8)), [0, 1]), ("gdasel", [2, 3, 4, 5], [1])):
            with h5py.File("%s/%s.h5" % (self.tmp, name), "r") as f:
                np.testing.assert_array_equal(f["model/noise_group"][()], [0, 0, 0, 0, 1, 1, 1, 1])
                for si, p in enumerate(self.prompts):
                    a = f["samples/%06d/attn" % si]
                    groups = sorted({h // 4 for h in heads})
                    np.testing.assert_array_equal(a["heads"][()], heads)
                    np.testing.assert_array_equal(a["noise_groups"][()], groups)
                    self.assertEqual(a["map2"].shape[1], len(groups))
                    self.assertEqual(a["map1"].shape[1], len(heads))
                    r = reference.forward(self.ref["gda"], p["tokens"])
                    for li, l in enumerate(layers):
                        for gi, g in enumerate(groups):
                            e = np.abs(a["map2"][li, gi] - r["noise"][l, g]).max()
                            self.assertLess(float(e), tr.TOL_MAP, (name, si, l, g))

    def test_view_gives_each_signal_head_its_group_map(self):
        p = self.prompts[0]
        r = reference.forward(self.ref["gda"], p["tokens"])
        T = len(p["tokens"])
        rng = np.random.default_rng(1)
        for d, layers, heads in ((0, [0, 1], range(8)), (1, [1], [2, 3, 4, 5])):
            for _ in range(10):
                l, h = int(rng.choice(layers)), int(rng.choice(list(heads)))
                q = int(rng.integers(0, T))
                k = int(rng.integers(0, q + 1))
                c = tv.get_json(self.url, "/api/cell?d=%d&s=0&l=%d&h=%d&q=%d&k=%d" % (d, l, h, q, k))
                for m in ("map1", "map2", "diff"):
                    self.assertLess(abs(c[m] - r[m][l, h, q, k]), tr.TOL_MAP, (d, l, h, q, k, m))
            # a row of map2 for a head that is not its group's first
            h = 6 if d == 0 else 5
            row = tv.get_json(self.url, "/api/row?d=%d&s=0&l=1&h=%d&m=map2&q=%d&topk=3&width=40" % (d, h, T - 1))
            want = np.sort(r["noise"][1, h // 4, T - 1])[::-1][:3]
            got = [e["v"] for e in row["top"]][:3]
            np.testing.assert_allclose(got, want, atol=tr.TOL_MAP)

    def test_attnmap_draws_map2_of_any_signal_head(self):
        for h in (0, 3, 5, 7):
            out = "%s/m2-%d.png" % (self.tmp, h)
            res = subprocess.run([ATTNMAP, "%s/gda.h5" % self.tmp, "--map", "map2", "--head", str(h), "--layer", "1",
                                  "--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            self.assertEqual(res.returncode, 0, res.stderr.decode(errors="replace"))
            self.assertTrue(os.path.getsize(out) > 0)
        # heads of one group draw the same noise map: identical images but for the title
        with open("%s/m2-0.png" % self.tmp, "rb") as a, open("%s/m2-5.png" % self.tmp, "rb") as b:
            self.assertNotEqual(a.read(), b.read())   # different groups, different maps

    def test_view_hover_gives_the_rows_lambda(self):
        rng = np.random.default_rng(2)
        for si, p in enumerate(self.prompts):
            r = reference.forward(self.ref["v2"], p["tokens"])
            T = len(p["tokens"])
            for _ in range(6):
                l, h, q = int(rng.integers(0, 2)), int(rng.integers(0, 4)), int(rng.integers(0, T))
                c = tv.get_json(self.url, "/api/cell?d=2&s=%d&l=%d&h=%d&q=%d&k=0" % (si, l, h, q))
                self.assertLess(abs(c["lambda"] - r["sigma"][l, q, h]), 1e-6, (si, l, h, q))
                self.assertLess(abs(c["diff"] - (r["map1"][l, h, q, 0] - r["sigma"][l, q, h] * r["map2"][l, h, q, 0])),
                                tr.TOL_MAP)


if __name__ == "__main__":
    unittest.main(verbosity=1)
