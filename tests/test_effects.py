#!/usr/bin/python3
"""test_effects.py — bin/effects end to end: the causal-tracing heatmap of a patching
sweep (dumps written here with h5py in the patch/ schema of docs/format.md), the head
grid of DLA (from probe --dla), of head patching and of head ablations (effects/), two
dumps on one colour scale, the logit-lens table (probe --logit-lens); tables checked
value by value against the dumps read with h5py and numpy, figures decoded (PNG with
tests/ref/png.py, SVG through rsvg-convert, PDF through pdftoppm), and the refusals.

Run from the repo root:  /usr/bin/python3 tests/test_effects.py   (BIN=bin by default)
"""
import csv
import io
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
import png  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
EFFECTS = os.path.join(BIN, "effects")
PROBE = os.path.join(BIN, "probe")
VOCAB = 97
RED_END = (0x67, 0x00, 0x1F)  # RdBu's last entry: the colour of +vmax


def run(*args, check=True):
    r = subprocess.run([EFFECTS] + list(args), capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError("effects %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def table(*args):
    return list(csv.DictReader(io.StringIO(run(*(list(args) + ["--format", "csv"])).stdout)))


def add_interventions(path, site, scale=1.0, seed=1):
    """patch/ (the sweep over every layer and position, or head) and effects/ (every
    head zero-ablated, plus a mean ablation that the grid must not mix in) per sample."""
    with h5py.File(path, "a") as f:
        L, H = int(f.attrs["num_layers"]), int(f.attrs["num_heads"])
        rng = np.random.default_rng(seed)
        for g in f["samples"].values():
            T = g["tokens"].shape[0]
            p = g.create_group("patch")
            p.attrs["site"], p.attrs["metric"], p.attrs["source"] = site, "target_prob", "clean"
            p["layers"] = np.arange(L, dtype=np.int32)
            n = H if site == "head" else T
            p["heads" if site == "head" else "positions"] = np.arange(n, dtype=np.int32)
            patched = rng.uniform(0.1, 0.9, (L, n)).astype(np.float32)
            p["patched"], p["clean"], p["corrupted"] = patched, np.float32(0.9), np.float32(0.1)
            p["effect"] = (scale * (patched - 0.1) / 0.8).astype(np.float32)
            e = g.create_group("effects")
            # probe's canonical specs, a whole layer's ablation (no cell of the grid) and the short form
            names = (["none"] + ["ablate:layer=%d,head=%d,mode=zero,pos=all" % (l, h) for l in range(L) for h in range(H)]
                     + ["ablate:L0H0:mean", "ablate:layer=0,head=all,mode=zero,pos=all"])
            e["names"] = np.array(names, dtype=h5py.string_dtype())
            e["target_nll"] = np.concatenate([[1.0], 1.0 + rng.normal(0, 0.3, len(names) - 1)]).astype(np.float32)


class EffectsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for exe in (EFFECTS, PROBE):
            if not os.access(exe, os.X_OK):
                raise AssertionError("%s not found or not executable (build it, or set BIN)" % exe)
        cls.tmp = tempfile.mkdtemp(prefix="difflens-effects-")
        rng = np.random.default_rng(3)
        prompts = []
        for n in (14, 11):
            toks = [int(x) for x in rng.integers(0, VOCAB, n)]
            prompts.append({"id": "s%d" % n, "tokens": toks, "text": ["w%d" % t for t in toks],
                            "query": [[n - 5, n - 3]], "target": [[n - 3, n - 1]]})
        cls.prompt_path = os.path.join(cls.tmp, "p.jsonl")
        with open(cls.prompt_path, "w") as f:
            for p in prompts:
                f.write(json.dumps(p) + "\n")
        cls.dumps = {}
        for mtype in ("llama", "diff_transformer"):
            d = os.path.join(cls.tmp, mtype)
            # tied embeddings: the embedding's lens reads the prompt's own tokens (with text)
            make_model.make_model(d, mtype, layers=2, hidden=32, heads=4, vocab=VOCAB, seed=5, tied=True)
            out = os.path.join(cls.tmp, mtype + ".h5")
            r = subprocess.run([PROBE, "--quiet", "--model", d, "--prompts", cls.prompt_path, "--out", out,
                                "--logit-lens", "3", "--dla", "--rows", "target"], capture_output=True, text=True)
            if r.returncode:
                raise AssertionError(r.stderr)
            cls.dumps[mtype] = out
        cls.pos = os.path.join(cls.tmp, "pos.h5")
        shutil.copy(cls.dumps["llama"], cls.pos)
        add_interventions(cls.pos, "resid_pre")
        cls.head = os.path.join(cls.tmp, "head.h5")
        shutil.copy(cls.dumps["diff_transformer"], cls.head)
        add_interventions(cls.head, "head", scale=0.1)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def out(self, name):
        return os.path.join(self.tmp, name)

    def test_trace_table_is_the_sweep(self):
        rows = table("trace", self.pos, "--sample", "s11")
        with h5py.File(self.pos) as f:
            g = f["samples/000001"]
            eff, text = g["patch/effect"][()], [t.decode() for t in g["token_text"][()]]
        L, P = eff.shape
        self.assertEqual(len(rows), L * P)
        for r in rows:
            pos = int(r["position"].split()[-1])
            self.assertEqual(r["position"], "%s %d" % (text[pos], pos))       # token labels
            self.assertAlmostEqual(float(r["value"]), float(eff[int(r["layer"]), pos]), places=6)

    def test_trace_head_site(self):
        rows = table("trace", self.head)
        with h5py.File(self.head) as f:
            eff = f["samples/000000/patch/effect"][()]
        got = {(r["layer"], r["head"]): float(r["value"]) for r in rows}
        for l in range(eff.shape[0]):
            for h in range(eff.shape[1]):
                self.assertAlmostEqual(got[("L%d" % l, "H%d" % h)], float(eff[l, h]), places=6)

    def test_heads_dla_mean(self):
        rows = table("heads", self.dumps["llama"])
        with h5py.File(self.dumps["llama"]) as f:
            want = np.concatenate([g["dla/heads"][()] for g in f["samples"].values()]).mean(axis=0)
        for r in rows:
            l, h = int(r["layer"][1:]), int(r["head"][1:])
            self.assertAlmostEqual(float(r["value"]), float(want[l, h]), places=5)
        one = table("heads", self.dumps["llama"], "--sample", "1")
        with h5py.File(self.dumps["llama"]) as f:
            want1 = f["samples/000001/dla/heads"][()].mean(axis=0)
        self.assertAlmostEqual(float(one[0]["value"]), float(want1[0, 0]), places=5)

    def test_heads_ablation_and_patch(self):
        rows = table("heads", self.pos, "--source", "ablation")
        with h5py.File(self.pos) as f:
            d = np.mean([g["effects/target_nll"][1:9] - g["effects/target_nll"][0] for g in f["samples"].values()],
                        axis=0)
        got = {(r["layer"], r["head"]): float(r["value"]) for r in rows}
        for i in range(8):        # names 1..8: ablate:layer=<i//4>,head=<i%4>,mode=zero,...; the mean ablation is left out
            self.assertAlmostEqual(got[("L%d" % (i // 4), "H%d" % (i % 4))], float(d[i]), places=5)
        prow = table("heads", self.head, "--source", "patch")
        with h5py.File(self.head) as f:
            pe = np.mean([g["patch/effect"][()] for g in f["samples"].values()], axis=0)
        self.assertAlmostEqual(float(prow[5]["value"]), float(pe[1, 1]), places=5)
        r = run("heads", self.pos, "--source", "patch", check=False)   # a position sweep is no head grid
        self.assertEqual(r.returncode, 1)
        self.assertIn("not head", r.stderr)

    def test_lens_table(self):
        rows = table("lens", self.dumps["diff_transformer"], "--positions", "2-4")
        named = 0
        with h5py.File(self.dumps["diff_transformer"]) as f:
            g = f["samples/000000"]
            ids, prob = g["lens/top_ids"][()], g["lens/top_prob"][()]
            toks, text = list(g["tokens"][()]), [t.decode() for t in g["token_text"][()]]
        self.assertEqual(len(rows), ids.shape[0] * 3)
        for r in rows:
            li = 0 if r["layer"] == "embed" else int(r["layer"]) + 1
            t = int(r["position"].split()[-1])
            self.assertIn(t, (2, 3, 4))
            top = int(ids[li, t, 0])
            self.assertEqual(r["top_token"], text[toks.index(top)] if top in toks else "#%d" % top)
            self.assertAlmostEqual(float(r["probability"]), float(prob[li, t, 0]), places=6)
            named += top in toks
        self.assertGreater(named, 0, "no top token from the prompt: the labels are untested")

    def test_figures_in_three_formats(self):
        for cmd, dump, name in (("trace", self.pos, "trace"), ("lens", self.dumps["llama"], "lens"),
                                ("heads", self.dumps["llama"], "heads")):
            for ext in ("png", "svg", "pdf"):
                path = self.out("%s.%s" % (name, ext))
                run(cmd, dump, "--out", path, "--force")
                self.assertGreater(os.path.getsize(path), 500)
            img = png.read_png(self.out(name + ".png"))
            self.assertGreater(img.shape[0], 100)
            svg_png = self.out(name + "_svg.png")
            subprocess.run(["rsvg-convert", self.out(name + ".svg"), "-o", svg_png], check=True)
            subprocess.run(["pdftoppm", "-png", "-r", "50", "-singlefile", self.out(name + ".pdf"),
                            self.out(name + "_pdf")], check=True)
            self.assertGreater(png.read_png(svg_png).shape[1], 100)
            self.assertTrue(os.path.exists(self.out(name + "_pdf.png")))

    def test_two_panels_one_scale(self):
        # head.h5's patching effects are a tenth of pos.h5's ablation-free scale: drawn
        # together with a dump ten times larger, none of its cells reaches the end colour
        big = self.out("big.h5")
        shutil.copy(self.dumps["diff_transformer"], big)
        add_interventions(big, "head", scale=1.0)
        path = self.out("pair.png")
        run("heads", self.head, big, "--source", "patch", "--labels", "small,big", "--out", path, "--force")
        img = png.read_png(path)[:, :, :3].astype(int)
        red = np.all(np.abs(img - np.array(RED_END)) <= 3, axis=2)
        cols = np.nonzero(red.any(axis=0))[0]
        self.assertGreater(len(cols), 0, "no cell at +vmax")
        # the small panel is the left one; the big one and the colour bar lie right of the middle
        self.assertGreater(cols.min(), img.shape[1] // 2, "a cell of the small panel at the big panel's maximum")
        # alone, the small panel spans the whole scale
        alone = self.out("small.png")
        run("heads", self.head, "--source", "patch", "--out", alone, "--force")
        img = png.read_png(alone)[:, :, :3].astype(int)
        self.assertTrue(np.all(np.abs(img - np.array(RED_END)) <= 3, axis=2).any())

    def test_refusals(self):
        for args, code, what in ((["trace", self.dumps["llama"]], 1, "no patch/"),
                                 (["lens", self.pos, "--positions", "99"], 1, "outside"),
                                 (["heads", self.dumps["llama"], "--source", "ablation"], 1, "no sample has"),
                                 (["bogus", self.pos], 2, "unknown command"),
                                 (["trace"], 2, "a dump is required"),
                                 (["trace", self.pos, self.pos], 2, "one dump"),
                                 (["trace", self.pos, "--source", "dla"], 2, "--source"),
                                 (["heads", self.pos, "--source", "x"], 2, "--source"),
                                 (["heads", self.pos, "--labels", "a,b"], 2, "--labels"),
                                 (["heads", self.pos, "--out", self.out("x.gif")], 2, "x.gif"),
                                 (["heads", self.pos, "--vmax", "0"], 2, "--vmax")):
            r = run(*args, check=False)
            self.assertEqual(r.returncode, code, (args, r.stderr))
            self.assertIn(what, r.stderr, args)
        path = self.out("exists.png")
        run("heads", self.pos, "--out", path, "--force")
        r = run("heads", self.pos, "--out", path, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("exists", r.stderr)
        self.assertEqual(run("--help").returncode, 0)
        self.assertIn("effects (difflens)", run("--version").stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
