#!/usr/bin/python3
"""probe's map writer (direct chunk writes, lib/dump/dump.c) end to end, read back with
h5py and h5dump: every --map-compression choice and both --map-dtype values against
the same run stored raw as f32 (f16 against numpy's own float16 rounding of it), bit
for bit; the filters each dump declares; the causal-tile rule (chunks wholly in the
future are never allocated) with partial edge tiles in both directions; flag errors;
and a write refused by a file-size limit (as a full disk would), which must leave
nothing at --out. (The forward's own results differ in the last bits between thread
counts, so chunk bytes from 1 and 2 writer threads are compared on fixed values in
tests/test_dump_direct.c.)"""
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

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.abspath(os.path.join(BIN, "probe"))
MAPS = ("map1", "map2", "diff")
CHOICES = ["none"] + ["gzip:%d" % level for level in range(10)] + ["gzip"]


def probe(model, prompts, out, *extra):
    return subprocess.run([PROBE, "--model", model, "--prompts", prompts, "--out", out, "--quiet", "--force",
                           "--maps", "all", *extra], capture_output=True, text=True)


def causal_tiles(R, T, rows=32, keys=512):
    """Tiles (per layer and head) whose first key is at or before their last row."""
    rows, keys = min(rows, R), min(keys, T)
    return sum(1 for r in range(0, R, rows) for k in range(0, T, keys) if k <= min(r + rows, R) - 1)


class MapCompression(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="dfl_mapc_")
        cls.model = os.path.join(cls.root, "m")
        make_model.make_model(cls.model, "diff_transformer", layers=2, hidden=32, heads=2, ffn=48, vocab=61,
                              max_pos=1024, seed=5)
        rng = np.random.default_rng(7)
        cls.prompts = os.path.join(cls.root, "p.jsonl")
        with open(cls.prompts, "w") as f:
            # 600 tokens: tiles 32 x 512 end partial in rows (600 = 18·32 + 24) and keys
            for i, T in enumerate((600, 45)):  # BOS (token 0) first, as the model expects
                toks = [0] + [int(t) for t in rng.integers(0, 61, T - 1)]
                f.write('{"id": "s%d", "tokens": [%s]}\n' % (i, ", ".join(str(t) for t in toks)))
        cls.base = os.path.join(cls.root, "base.h5")
        r = probe(cls.model, cls.prompts, cls.base, "--map-dtype", "f32", "--map-compression", "none")
        assert r.returncode == 0, r.stderr
        with h5py.File(cls.base, "r") as f:
            cls.ref = {(s, m): f["samples/%s/attn/%s" % (s, m)][...] for s in f["samples"] for m in MAPS}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def check_dump(self, path, dtype, choice):
        level = None if choice == "none" else int(choice.split(":")[1]) if ":" in choice else 1
        with h5py.File(path, "r") as f:
            for (s, m), ref in self.ref.items():
                ds = f["samples/%s/attn/%s" % (s, m)]
                what = "%s %s %s/%s" % (dtype, choice, s, m)
                self.assertEqual(ds.dtype, np.dtype(dtype), what)
                got = ds[...]
                want = ref if dtype == "f4" else ref.astype(np.float16)
                self.assertTrue(np.array_equal(got.view(np.uint8), want.view(np.uint8)), what)
                self.assertEqual(ds.compression, None if level is None else "gzip", what)
                self.assertEqual(ds.compression_opts, level, what)
                self.assertEqual(ds.shuffle, level is not None, what)
                L, H, R, T = ds.shape
                self.assertEqual(ds.id.get_num_chunks(), L * H * causal_tiles(R, T), what)
                self.assertTrue(np.all(np.triu(got[0, 0], 1) == 0), what)

    def test_every_choice_round_trips(self):
        # f16 with every choice; f32 with the ends of the range (tests/test_dump_direct.c
        # takes every level for both types)
        runs = [("f2", "f16", c) for c in CHOICES] + [("f4", "f32", c) for c in ("gzip:0", "gzip:1", "gzip:9")]
        for dtype, flag, choice in runs:
            with self.subTest(dtype=dtype, choice=choice):
                out = os.path.join(self.root, "c.h5")
                r = probe(self.model, self.prompts, out, "--map-dtype", flag, "--map-compression", choice)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.check_dump(out, dtype, choice)

    def test_default_is_gzip_1(self):
        out = os.path.join(self.root, "d.h5")
        self.assertEqual(probe(self.model, self.prompts, out).returncode, 0)
        self.check_dump(out, "f2", "gzip:1")

    def test_h5dump_reads_without_plugins(self):
        out = os.path.join(self.root, "h.h5")
        self.assertEqual(probe(self.model, self.prompts, out, "--map-compression", "gzip:9").returncode, 0)
        r = subprocess.run(["h5dump", "-d", "/samples/000000/attn/map1", "-s", "1,1,599,560", "-c", "1,1,1,8",
                            "-m", "%.9g", out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        body = r.stdout.split("DATA {")[1].split("}")[0]
        vals = [float(v) for line in body.splitlines() if ":" in line for v in line.split(":")[1].split(",") if v.strip()]
        want = self.ref[("000000", "map1")][1, 1, 599, 560:568].astype(np.float16).astype(np.float64)
        self.assertEqual(len(vals), 8, r.stdout)
        # h5dump prints 9 significant digits: far finer than an f16 step (2^-11 relative)
        np.testing.assert_allclose(np.array(vals), want, rtol=1e-8)

    def test_bad_flag_values(self):
        for bad in ("gzip:10", "gzip:-1", "zip", "gzip:", "gzip1", "none:1"):
            r = probe(self.model, self.prompts, os.path.join(self.root, "bad.h5"), "--map-compression", bad)
            self.assertEqual(r.returncode, 2, bad)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("--map-compression", lines[0])

    def test_refused_write_leaves_nothing(self):
        outdir = tempfile.mkdtemp(dir=self.root)
        out = os.path.join(outdir, "full.h5")
        # 96 KB limit; the maps need megabytes. SIGXFSZ ignored: the write fails with EFBIG.
        cmd = "ulimit -f 192; trap '' XFSZ; exec \"$0\" \"$@\""
        r = subprocess.run(["sh", "-c", cmd, PROBE, "--model", self.model, "--prompts", self.prompts, "--out", out,
                            "--quiet", "--maps", "all", "--map-compression", "none", "--map-dtype", "f32"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("HDF5 failed to write the chunk", lines[0])
        self.assertEqual(os.listdir(outdir), [], "output or temporary file left behind")
        # killed by the limit's signal instead: nothing under the final name either
        cmd = "ulimit -f 192; exec \"$0\" \"$@\""
        r = subprocess.run(["sh", "-c", cmd, PROBE, "--model", self.model, "--prompts", self.prompts, "--out", out,
                            "--quiet", "--maps", "all", "--map-compression", "none", "--map-dtype", "f32"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
