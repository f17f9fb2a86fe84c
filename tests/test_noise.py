#!/usr/bin/python3
"""test_noise.py — end-to-end tests of bin/noise and bin/noise prompts.

Shares on dumps constructed here with h5py (following docs/format.md, root attributes
included) against numbers computed by hand; depth, layer and head grouping with counts;
--layers / --heads; --map and --norm; the low-total warning; every output format; the
two PNGs; the generated prompts' invariants (answer at the requested depth within one
needle length, distinct keys, spans consistent with the tokens, seeds reproducible),
templates; a real pipeline (noise prompts -> probe -> noise) checked against the
dump's own numbers; and bad inputs: one line on stderr, exit 1 (2 for usage errors),
nothing written.

Run from the repo root:  /usr/bin/python3 tests/test_noise.py   (BIN=bin by default)
"""
import csv
import io
import json
import math
import os
import shutil
import struct
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
NOISE = os.path.join(BIN, "noise")
PROBE = os.path.join(BIN, "probe")
SEGS = ["bos", "context_before", "answer", "context_after", "query", "distractor", "target"]


def run(*args, check=True):
    r = subprocess.run([NOISE, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("noise %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def table(args, name=None):
    """The first (or named) table of `noise ... --format json` as (columns, rows)."""
    out = json.loads(run(*args, "--format", "json").stdout)
    t = out["tables"][0] if name is None else [x for x in out["tables"] if x["name"] == name][0]
    return t["columns"], t["data"]


def shares_column(args, col):
    """{row name: value} of column `col` of the shares table."""
    cols, rows = table(args)
    j = cols.index(col)
    return {r[0]: r[j] for r in rows}


def write_dump(path, model_type, samples, L=2, H=2):
    """A dump as probe writes it (docs/format.md): root attributes, /model for Diff, one
    /samples/NNNNNN group per sample with segments and the noise datasets. Each sample
    is a dict: shares [M, L, H, 7], raw (default: shares, i.e. totals of 1),
    shares_abs (default: shares), segments, id, depth (None = NaN), correct, nll,
    entropy [M', L, H] and negative [L, H] (Diff; default: zeros)."""
    M = 3 if model_type != "llama" else 1
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "difflens-dump"
        f.attrs["format_version"] = np.int32(1)
        f.attrs["model_type"] = model_type
        f.attrs["config"] = json.dumps({"model_type": model_type})
        f.attrs["model"] = "constructed"
        f.attrs["num_layers"] = np.int64(L)
        f.attrs["num_heads"] = np.int64(H)
        f.attrs["head_dim"] = np.int64(8)
        f.attrs["logit_quant_bits"] = np.int64(0)
        f.attrs["logit_quant_granularity"] = "none"
        f.attrs["rows"] = "last"
        f.attrs["topk"] = np.int64(4)
        if M == 3:
            f["model/lambda"] = np.full(L, 0.5, np.float32)
            f["model/lambda_init"] = np.full(L, 0.2, np.float32)
        for i, s in enumerate(samples):
            g = f.create_group("samples/%06d" % i)
            g.attrs["id"] = s.get("id", "s%d" % i)
            g.attrs["depth"] = np.float64(np.nan if s.get("depth") is None else s["depth"])
            seg = np.array(s.get("segments", [1, 0, 2, 2, 0, 4, 0, 3, 5]), np.uint8)
            g["tokens"] = np.arange(len(seg), dtype=np.int32)
            g["segments"] = seg
            sh = np.asarray(s["shares"], np.float32).reshape(M, L, H, 7)
            g["noise/shares"] = sh
            g["noise/raw"] = np.asarray(s.get("raw", sh), np.float32).reshape(M, L, H, 7)
            g["noise/shares_abs"] = np.asarray(s.get("shares_abs", sh), np.float32).reshape(M, L, H, 7)
            g["noise/rows"] = np.array([len(seg) - 2], np.int32)
            g["noise"].attrs["segments"] = ",".join(SEGS)
            E = 2 if M == 3 else 1
            g["noise/entropy"] = np.asarray(s.get("entropy", np.zeros((E, L, H))), np.float32).reshape(E, L, H)
            if M == 3:
                g["noise/negative_mass"] = np.asarray(s.get("negative", np.zeros((L, H))), np.float32).reshape(L, H)
            if "correct" in s:
                g["target_correct"] = np.uint8(s["correct"])
                g["target_nll"] = np.float32(s.get("nll", 1.0))


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def check_bar_heights(test, png_path, args):
    """The Figure-1 chart at png_path, measured from its pixels: one bar per (segment
    present, dump), left to right, each dump in its own colour, heights proportional
    to the shares `noise ARGS --format json` prints (within 1.5 pixels)."""
    cols, rows = table(args)
    dumps = cols[1:]
    share = {r[0]: r[1:] for r in rows}
    measured = png.bars(png.read_png(png_path))
    expect = [(s, j, share[s][j]) for s in SEGS if s in share for j in range(len(dumps))]
    if len(measured) != len(expect):  # bars of zero height are not drawn
        expect = [e for e in expect if e[2] > 0]
    test.assertEqual(len(measured), len(expect), "bars found: %s" % [(b[0], b[3] - b[2] + 1) for b in measured])
    colours = {}
    for (seg, j, _), b in zip(expect, measured):
        colours.setdefault(j, set()).add(b[4])
    test.assertEqual([len(c) for c in colours.values()], [1] * len(dumps), "one colour per dump")
    test.assertEqual(len(set().union(*colours.values())), len(dumps), "a different colour for each dump")
    h = np.array([b[3] - b[2] + 1 for b in measured], float)
    v = np.array([e[2] for e in expect], float)
    k = (h * v).sum() / (v * v).sum()  # pixels per unit of share
    for (seg, j, val), hh in zip(expect, h):
        test.assertLess(abs(hh - k * val), 1.5, "bar %s of %s: %g px for %g (%.1f px per unit)"
                        % (seg, dumps[j], hh, val, k))
    test.assertGreater(k, 100)


def legend_entry(img, blob):
    """A marker with dark text just right of it: a legend's sample, not a data point."""
    x, y = int(round(blob[0])), int(round(blob[1]))
    strip = img[max(0, y - 3):y + 4, x + 25:x + 120, :3].astype(int)
    return int((strip.max(axis=2) < 100).sum()) >= 5


def check_depth_chart(test, png_path, args):
    """The depth chart of one dump at png_path, measured from its pixels: on each panel
    (answer left, noise right) one marker per depth, on that depth's vertical grid
    line, in order, at heights that map linearly (and upwards) onto the values
    `noise ARGS --by depth --format json` prints (within 2 pixels)."""
    cols, rows = table(args + ["--by", "depth"])
    img = png.read_png(png_path)
    rgb = [tuple(v) for v in img[png.saturated(img)][:, :3]]
    colour = max(set(rgb), key=rgb.count)
    half = img.shape[1] // 2
    for k, name in enumerate(("answer", "noise")):
        panel = img[:, k * half:(k + 1) * half]
        found = [b for b in png.blobs(panel, colour) if not legend_entry(panel, b)]
        lines = [x for x in png.grid_lines(panel, 0) if any(abs(x - fx) <= 3 for fx, _ in found)]
        test.assertEqual(len(lines), len(rows), "%s: a grid line with a marker per depth: %s" % (name, lines))
        ys = []
        for x in lines:
            on = [fy for fx, fy in found if abs(fx - x) <= 3]
            test.assertEqual(len(on), 1, "%s: one marker on the line at x = %g" % (name, x))
            ys.append(on[0])
        v = np.array([r[cols.index(name)] for r in rows], float)
        b, a = np.polyfit(v, np.array(ys), 1)
        test.assertLess(b, 0, "%s: larger values are higher" % name)
        worst = float(np.max(np.abs(np.array(ys) - (a + b * v))))
        test.assertLess(worst, 2.0, "%s: markers off a linear axis by %.1f px" % (name, worst))


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# Hand-made shares (M = 1, L = 2, H = 2): sample A is the same in every (layer, head);
# sample B differs in layer 0 head 0 only.
ROW_A = [0.1, 0.2, 0.3, 0.2, 0.1, 0.1, 0.0]
ROW_B0 = [0.0, 0.4, 0.1, 0.3, 0.2, 0.0, 0.0]
ROW_B = [0.2, 0.2, 0.2, 0.2, 0.2, 0.0, 0.0]


def sample_b():
    s = np.tile(np.array(ROW_B, np.float32), (1, 2, 2, 1))
    s[0, 0, 0] = ROW_B0
    return s


class NoiseConstructed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(NOISE, os.X_OK):
            raise AssertionError("no %s: run make first (a missing binary fails the suite)" % NOISE)
        cls.root = tempfile.mkdtemp(prefix="dfl_noise_")
        cls.tr = os.path.join(cls.root, "tr.h5")
        a = np.tile(np.array(ROW_A, np.float32), (1, 2, 2, 1))
        write_dump(cls.tr, "llama", [
            dict(id="a", shares=a, depth=0.0, correct=1, nll=0.5),
            dict(id="b", shares=sample_b(), depth=0.0, correct=0, nll=2.5),
            dict(id="c", shares=a, depth=0.5, correct=1, nll=1.0),
            dict(id="d", shares=sample_b(), depth=None),
        ])
        # Diff dump: map1 / map2 / diff distinguishable; diff of layer 1 head 1 of
        # sample 0 has a row total of 0.01 (raw), the rest 1; shares_abs differs.
        cls.df = os.path.join(cls.root, "df.h5")
        sh = np.zeros((3, 2, 2, 7), np.float32)
        sh[0] = [0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0]     # map1
        sh[1] = [0.6, 0.2, 0.0, 0.1, 0.1, 0.0, 0.0]     # map2
        sh[2] = [0.0, 0.1, 0.6, 0.1, 0.2, 0.0, 0.0]     # diff
        raw = sh.copy()
        raw[2, 1, 1] = [0.0, 0.001, 0.006, 0.001, 0.002, 0.0, 0.0]
        ab = sh.copy()
        ab[2] = [0.05, 0.15, 0.5, 0.15, 0.15, 0.0, 0.0]
        sh2 = sh.copy()
        sh2[2, 0] = [0.0, 0.2, 0.4, 0.2, 0.2, 0.0, 0.0]   # layer 0 of diff in sample 1
        write_dump(cls.df, "diff_transformer", [
            dict(id="x", shares=sh, raw=raw, shares_abs=ab, depth=0.0, correct=1),
            dict(id="y", shares=sh2, shares_abs=ab, depth=1.0, correct=1),
        ])
        # --stat: entropy [2, L, H] and negative mass [L, H] of two Diff samples, values
        # that tell map, layer, head and sample apart; a softmax dump beside it
        cls.ent = np.array([[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]],
                            [[[1.5, 2.5], [3.5, 4.5]], [[5.5, 6.5], [7.5, 8.5]]]])   # [S, E, L, H]
        cls.neg = np.array([[[-0.1, -0.2], [-0.3, -0.4]], [[-0.5, -0.6], [-0.7, -0.8]]])  # [S, L, H]
        cls.st = os.path.join(cls.root, "st.h5")
        write_dump(cls.st, "diff_transformer", [
            dict(id="p", shares=sh, depth=0.0, entropy=cls.ent[0], negative=cls.neg[0]),
            dict(id="q", shares=sh, depth=1.0, entropy=cls.ent[1], negative=cls.neg[1]),
        ])
        cls.st_soft = os.path.join(cls.root, "soft.h5")
        write_dump(cls.st_soft, "llama", [dict(id="s", shares=a, depth=0.0, entropy=np.full((1, 2, 2), 0.25))])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.root, name)

    def test_shares_by_hand(self):
        v = shares_column([self.tr], "tr")
        # answer: A 0.3 (x2 samples); B (0.1 + 3 x 0.2) / 4 = 0.175 (x2) -> 0.2375
        self.assertAlmostEqual(v["answer"], 0.2375, places=6)
        # context before: A 0.2; B (0.4 + 0.6) / 4 = 0.25 -> 0.225; after: A 0.2, B 0.225 -> 0.2125
        self.assertAlmostEqual(v["context_before"], 0.225, places=6)
        self.assertAlmostEqual(v["context_after"], 0.2125, places=6)
        self.assertAlmostEqual(v["noise"], 0.4375, places=6)
        self.assertAlmostEqual(v["answer/noise"], 0.2375 / 0.4375, places=6)
        self.assertAlmostEqual(v["bos"], (0.1 + 0.15) / 2, places=6)
        self.assertAlmostEqual(v["distractor"], 0.05, places=6)
        self.assertAlmostEqual(v["accuracy"], 2 / 3, places=6)         # 3 samples scored
        self.assertAlmostEqual(v["target_nll"], 4.0 / 3, places=6)
        self.assertEqual(v["samples"], 4)
        for seg in SEGS:
            self.assertIn(seg, v)

    def test_stat_entropy_by_hand(self):
        cols, rows = table([self.st, "--stat", "entropy"], "entropy")
        self.assertEqual(cols, ["map", "st"])
        v = {r[0]: r[1] for r in rows}
        self.assertAlmostEqual(v["map1"], self.ent[:, 0].mean(), places=6)   # 4.75
        self.assertAlmostEqual(v["map2"], self.ent[:, 1].mean(), places=6)   # 6.75
        self.assertEqual(v["samples"], 2)
        cols, rows = table([self.st, "--stat", "entropy", "--by", "layer"], "entropy")
        self.assertEqual(cols, ["layer", "map1", "map2"])
        for r in rows:
            self.assertAlmostEqual(r[1], self.ent[:, 0, r[0]].mean(), places=6)
            self.assertAlmostEqual(r[2], self.ent[:, 1, r[0]].mean(), places=6)
        cols, rows = table([self.st, "--stat", "entropy", "--by", "head", "--layers", "1"], "entropy")
        self.assertEqual([r[0] for r in rows], [0, 1])
        for r in rows:
            self.assertAlmostEqual(r[1], self.ent[:, 0, 1, r[0]].mean(), places=6)
        cols, rows = table([self.st, "--stat", "entropy", "--by", "depth", "--heads", "1"], "entropy")
        self.assertEqual([r[0] for r in rows], [0, 1])
        for k, r in enumerate(rows):
            self.assertAlmostEqual(r[2], self.ent[k, 1, :, 1].mean(), places=6)
        # side by side with a softmax dump: its map2 is n/a, its map1 its own
        cols, rows = table([self.st, self.st_soft, "--stat", "entropy"], "entropy")
        v = {r[0]: r[1:] for r in rows}
        self.assertAlmostEqual(v["map1"][1], 0.25, places=6)
        self.assertIsNone(v["map2"][1])
        out = run(self.st, self.st_soft, "--stat", "entropy").stdout
        self.assertIn("n/a", out)
        self.assertIn("Mean row entropy (nats)", out)

    def test_stat_negative_mass_by_hand(self):
        cols, rows = table([self.st, "--stat", "negative_mass"], "negative_mass")
        v = {r[0]: r[1] for r in rows}
        self.assertAlmostEqual(v["diff"], self.neg.mean(), places=6)
        cols, rows = table([self.st, "--stat", "negative_mass", "--by", "head"], "negative_mass")
        self.assertEqual(cols, ["head", "diff"])
        for r in rows:
            self.assertAlmostEqual(r[1], self.neg[:, :, r[0]].mean(), places=6)
        cols, rows = table([self.st, self.st_soft, "--stat", "negative_mass", "--by", "layer"], "negative_mass")
        self.assertEqual(cols, ["layer", "st diff"])          # the softmax dump has no column
        out = json.loads(run(self.st, self.st_soft, "--stat", "negative_mass", "--format", "json").stdout)
        self.assertTrue(any("no negative mass" in n for n in out["notes"]), out["notes"])
        r = run(self.st_soft, "--stat", "negative_mass", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("Diff dumps only", r.stderr)

    def test_stat_flag_errors_and_default(self):
        r = run(self.st, "--stat", "lambda", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not shares, entropy or negative_mass", r.stderr)
        png = self.path("stat.png")
        r = run(self.st, "--stat", "entropy", "--plot", png, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertFalse(os.path.exists(png))
        # the default shows the shares only, exactly as --stat shares does
        self.assertEqual(run(self.st).stdout, run(self.st, "--stat", "shares").stdout)
        out = json.loads(run(self.st, "--format", "json").stdout)
        self.assertEqual([t["name"] for t in out["tables"]], ["shares"])
        self.assertNotIn("statistic", out["meta"])

    def test_layers_heads_restrict(self):
        # layer 0 head 0 only: answer A 0.3, B 0.1 -> 0.2
        v = shares_column([self.tr, "--layers", "0", "--heads", "0"], "tr")
        self.assertAlmostEqual(v["answer"], 0.2, places=6)
        self.assertAlmostEqual(v["noise"], (0.4 + 0.7) / 2, places=6)
        # every head but 0 of layer 0: only the uniform rows
        v = shares_column([self.tr, "--layers", "1", "--heads", "0-1"], "tr")
        self.assertAlmostEqual(v["answer"], 0.25, places=6)

    def test_by_depth(self):
        cols, rows = table([self.tr, "--by", "depth"])
        self.assertEqual(cols, ["depth", "n", "answer", "noise", "answer/noise", "accuracy"])
        self.assertEqual([r[0] for r in rows], [0, 0.5])
        self.assertEqual([r[1] for r in rows], [2, 1])                     # d has no depth
        self.assertAlmostEqual(rows[0][2], (0.3 + 0.175) / 2, places=6)
        self.assertAlmostEqual(rows[0][3], (0.4 + 0.475) / 2, places=6)
        self.assertAlmostEqual(rows[0][5], 0.5)
        self.assertAlmostEqual(rows[1][2], 0.3, places=6)
        self.assertAlmostEqual(rows[1][5], 1.0)
        r = run(self.tr, "--by", "depth")
        self.assertIn("1 of 4 samples have no depth", r.stderr)
        self.assertIn("Table 3", r.stdout)

    def test_by_layer_and_head(self):
        cols, rows = table([self.tr, "--by", "layer"])
        self.assertEqual(cols[:3], ["layer", "n", "answer"])
        # layer 0: A 0.3 x 2 heads, B (0.1 + 0.2) -> (0.6 + 0.3 + 0.6 + 0.3) / 8
        self.assertAlmostEqual(rows[0][2], 1.8 / 8, places=6)
        self.assertAlmostEqual(rows[1][2], 0.25, places=6)
        self.assertEqual(rows[0][1], 4)
        cols, rows = table([self.tr, "--by", "head", "--heads", "1"])
        self.assertEqual([r[0] for r in rows], [1])                         # unselected heads: no row
        self.assertAlmostEqual(rows[0][2], 0.25, places=6)

    def test_diff_maps_and_norm(self):
        v = shares_column([self.df], "df")          # default: diff
        self.assertAlmostEqual(v["answer"], (0.6 + (0.4 * 2 + 0.6 * 2) / 4) / 2, places=6)
        v = shares_column([self.df, "--map", "map1"], "df")
        self.assertAlmostEqual(v["bos"], 0.5, places=6)
        v = shares_column([self.df, "--map", "map2"], "df")
        self.assertAlmostEqual(v["bos"], 0.6, places=6)
        v = shares_column([self.df, "--norm", "abs"], "df")
        self.assertAlmostEqual(v["answer"], 0.5, places=6)
        self.assertAlmostEqual(v["noise"], 0.3, places=6)
        out = json.loads(run(self.df, "--norm", "abs", "--format", "json").stdout)
        self.assertTrue(out["meta"]["normalisation"].startswith("abs"))
        out = json.loads(run(self.df, "--format", "json").stdout)
        self.assertTrue(out["meta"]["normalisation"].startswith("total"))
        self.assertIn("context_before + context_after", out["meta"]["noise"])
        self.assertIn("map diff", out["meta"]["df"])

    def test_low_total_warning(self):
        r = run(self.df)
        lines = [x for x in r.stderr.splitlines() if x]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("1 of 8 (sample, layer, head) entries of diff have a row total below 0.05", lines[0])
        self.assertIn("sample 'x' layer 1 head 1 (total 0.01)", lines[0])
        self.assertIn("warning", r.stdout)                                 # also in the report's notes
        self.assertEqual(run(self.df, "--quiet").stderr, "")
        self.assertEqual(run(self.df, "--warn-total", "0.001").stderr, "")
        # abs shares are not divided by the total: a note, no warning
        r = run(self.df, "--norm", "abs")
        self.assertEqual(r.stderr, "")
        self.assertIn("shares_abs is unaffected", r.stdout)
        # the softmax map's totals are 1
        self.assertEqual(run(self.df, "--map", "map1").stderr, "")

    def test_ratio_without_noise(self):
        # answer 0.9 with a noise of 1e-9: the quotient (~1e9) is shown as "> 1000" with a
        # note, not as a number; where answer and noise are both 0 the cell is a dash; a
        # plain ratio (0.5 / 0.001 = 500) stays a number
        p = self.path("quiet.h5")
        row = [0.1, 5e-10, 0.9, 5e-10, 0.0, 0.0, 0.0]
        zero = [0.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0]
        plain = [0.0, 0.0005, 0.5, 0.0005, 0.499, 0.0, 0.0]
        tile = lambda r: np.tile(np.array(r, np.float32), (1, 2, 2, 1))   # noqa: E731
        write_dump(p, "llama", [dict(id="q", shares=tile(row), depth=0.0),
                                dict(id="z", shares=tile(zero), depth=1.0),
                                dict(id="p", shares=tile(plain), depth=0.5)])
        r = run(p)
        line = [x for x in r.stdout.splitlines() if x.strip().startswith("answer/noise")][0]
        self.assertEqual(line.split()[-1], "1000")           # "> 1000"
        self.assertIn("> 1000", line)
        self.assertIn('"> 1000" where the noise share is below 1/1000 of the answer share', r.stdout)
        v = shares_column([p], "quiet")
        self.assertIsNone(v["answer/noise"])                 # json: null, the shares stay
        self.assertAlmostEqual(v["answer"], (0.9 + 0.5) / 3, places=6)
        cols, rows = table([p, "--by", "depth"])
        self.assertEqual([r[0] for r in rows], [0, 0.5, 1])
        self.assertIsNone(rows[0][4])
        self.assertAlmostEqual(rows[1][4], 500, places=2)
        self.assertIsNone(rows[2][4])
        md = run(p, "--by", "depth", "--format", "markdown").stdout
        cells = {r.split("|")[1].strip(): r.split("|")[5].strip() for r in md.splitlines()
                 if r.startswith("|") and r.split("|")[1].strip() in ("0", "0.5", "1")}
        self.assertEqual(cells, {"0": "> 1000", "0.5": "500", "1": "\u2014"})
        self.assertNotIn("e+", md)
        # no note when every ratio is a number
        self.assertNotIn("> 1000", run(self.tr).stdout)

    def test_side_by_side_and_labels(self):
        cols, rows = table([self.tr, self.df])
        self.assertEqual(cols, ["segment", "tr", "df"])
        cols, rows = table([self.tr, self.df, "--labels", "Transformer,DIFF", "--by", "depth"])
        self.assertEqual(cols[:7], ["depth", "Transformer n", "Transformer answer", "Transformer noise",
                                    "Transformer answer/noise", "Transformer accuracy", "DIFF n"])
        self.assertEqual([r[0] for r in rows], [0, 0.5, 1])                # union of depths
        self.assertIsNone(rows[1][6])                                      # DIFF has no 0.5
        self.assertEqual(rows[2][1], None)
        # the same file name twice: the paths label the columns
        sub = os.path.join(self.root, "sub")
        os.makedirs(sub, exist_ok=True)
        shutil.copy(self.tr, os.path.join(sub, "tr.h5"))
        cols, _ = table([self.tr, os.path.join(sub, "tr.h5")])
        self.assertEqual(cols[1:], [self.tr, os.path.join(sub, "tr.h5")])

    def test_formats(self):
        t = run(self.tr, self.df).stdout
        self.assertIn("Attention shares (Figure 1)", t)
        self.assertRegex(t, r"answer\s+0\.2375\s")
        md = run(self.tr, "--format", "markdown").stdout
        self.assertIn("| segment", md)
        self.assertIn("|---", md.replace(":", "-"))
        c = list(csv.reader(io.StringIO(run(self.tr, self.df, "--format", "csv").stdout)))
        self.assertEqual(c[0], ["segment", "tr", "df"])
        rows = {r[0]: r for r in c[1:]}
        self.assertAlmostEqual(float(rows["answer"][1]), 0.2375, places=6)
        c = list(csv.reader(io.StringIO(run(self.tr, "--by", "depth", "--format", "csv").stdout)))
        self.assertEqual(c[0][:3], ["depth", "n", "answer"])
        self.assertEqual(len(c), 3)
        r = run(self.tr, "--format", "xml", check=False)
        self.assertEqual(r.returncode, 2)

    def test_plots(self):
        bar, dep = self.path("bar.png"), self.path("depth.png")
        r = run(self.tr, self.df, "--plot", bar, "--plot-depth", dep, "--quiet")
        self.assertEqual(r.stderr, "")
        w, h = png_size(bar)
        self.assertGreaterEqual(w, 1000)
        check_bar_heights(self, bar, [self.tr, self.df, "--quiet"])
        self.assertEqual(png_size(dep), (1600, 800))
        # never overwritten without --force; nothing printed when refused
        r = run(self.tr, "--plot", bar, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("exists", r.stderr)
        self.assertEqual(r.stdout, "")
        run(self.tr, "--plot", bar, "--force")
        # no depths at all: refused clearly
        nodepth = self.path("nodepth.h5")
        write_dump(nodepth, "llama", [dict(shares=np.tile(np.array(ROW_A, np.float32), (1, 2, 2, 1)))])
        r = run(nodepth, "--plot-depth", self.path("nd.png"), check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no sample in %s has a depth" % nodepth, r.stderr)
        self.assertFalse(os.path.exists(self.path("nd.png")))
        self.assertEqual([x for x in os.listdir(self.root) if ".tmp" in x], [])

    def test_bad_inputs(self):
        txt = self.path("notes.txt")
        with open(txt, "w") as f:
            f.write("hello\n")
        bad_shape = self.path("bad_shape.h5")
        write_dump(bad_shape, "llama", [dict(shares=np.zeros((1, 2, 2, 7)))])
        with h5py.File(bad_shape, "a") as f:
            del f["samples/000000/noise/shares"]
            f["samples/000000/noise/shares"] = np.zeros((2, 2, 6), np.float32)
        empty = self.path("empty.h5")
        write_dump(empty, "llama", [])
        nodepth = self.path("nodepth2.h5")
        write_dump(nodepth, "llama", [dict(shares=np.zeros((1, 2, 2, 7)))])
        cases = [
            ([], 2, "at least one dump"),
            ([self.path("missing.h5")], 1, "missing.h5"),
            ([txt], 1, "not a difflens dump"),
            ([bad_shape], 1, "not [M, L, H, 7]"),
            ([empty], 1, "no samples"),
            ([nodepth, "--by", "depth"], 1, "no sample in %s has a depth attribute" % nodepth),
            ([self.tr, "--map", "diff"], 2, "a llama dump has only map1"),
            ([self.tr, "--map", "all"], 2, "--map: 'all'"),
            ([self.tr, "--norm", "x"], 2, "--norm"),
            ([self.tr, "--by", "sample"], 2, "--by"),
            ([self.tr, "--layers", "2"], 1, "layer 2 is not in the dump (it has layers 0-1)"),
            ([self.tr, "--heads", "0,5"], 1, "head 5 is not in the dump"),
            ([self.tr, "--layers", "1,,2"], 2, "--layers"),
            ([self.tr, "--layers", "0, 1"], 2, "--layers: '0, 1' has white space in an item"),
            ([self.tr, "--heads", "1,"], 2, "--heads: '1,' has an empty item"),
            ([self.tr, "--labels", "a,b"], 2, "--labels names 2 dumps but 1 is given"),
            ([self.tr, self.df, "--labels", "a,a"], 2, "'a' is given twice"),
            ([self.tr, "--labels", ","], 2, "--labels"),
            ([self.tr, "--warn-total", "-1"], 2, "--warn-total"),
            ([self.tr, "--bogus"], 2, ""),
        ]
        for args, code, msg in cases:
            r = run(*args, check=False)
            self.assertEqual(r.returncode, code, (args, r.stderr))
            self.assertEqual(r.stdout, "" if code else r.stdout, args)
            if msg:
                self.assertIn(msg, r.stderr, args)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("--plot-depth FILE", run("--help").stdout)
        self.assertIn("(default: 0.05)", run("--help").stdout)


class NoisePrompts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(NOISE, os.X_OK):
            raise AssertionError("no %s: run make first (a missing binary fails the suite)" % NOISE)
        cls.root = tempfile.mkdtemp(prefix="dfl_noisep_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.root, name)

    def check_synthetic(self, p, T, N, R, m, depth):
        tok = p["tokens"]
        self.assertEqual(len(tok), T)
        self.assertEqual(tok[0], 0)
        self.assertEqual(p["depth"], depth)
        C, nl = T - 1 - R * (m + 3), m + 2
        (a0, a1), = p["answer"]
        self.assertEqual(a1 - a0, nl)
        self.assertLessEqual(abs(a0 - (1 + depth * (C - nl))), nl)        # at the requested depth
        needles = [(a0, a1)] + [tuple(s) for s in p.get("distractor", [])]
        self.assertEqual(len(needles), N)
        keys = [tok[s + 1] for s, _ in needles]
        self.assertEqual(len(set(keys)), N)                                 # distinct keys
        for s, e in needles:
            self.assertEqual(tok[s], 1)
            self.assertTrue(15 <= tok[s + 1] <= 78)
            self.assertTrue(all(5 <= t <= 14 for t in tok[s + 2:e]))
        self.assertEqual(len(p["query"]), R)
        for (qs, qe), (ts, te) in zip(p["query"], p["target"]):
            self.assertEqual((tok[qs], tok[qs + 2], qe - qs, ts, te - ts), (2, 3, 3, qe, m))
            src = [n for n in needles if tok[n[0] + 1] == tok[qs + 1]]
            self.assertEqual(len(src), 1)
            self.assertEqual(tok[ts:te], tok[src[0][0] + 2:src[0][1]])       # target = that needle's digits
        self.assertEqual(tok[p["query"][-1][0] + 1], tok[a0 + 1])            # the last query asks for the answer
        self.assertEqual(p["target"][-1][1], T)
        self.assertEqual(len(p["text"]), T)

    def test_synthetic(self):
        out = self.path("p.jsonl")
        r = run("prompts", "-o", out, "--length", "128", "--needles", "3", "--queries", "2", "--digits", "3",
                "--depths", "0,0.3,1", "--samples", "4", "--seed", "7", "--vocab-size", "150")
        self.assertIn("wrote 12 prompts", r.stderr)
        ps = read_jsonl(out)
        self.assertEqual(len(ps), 12)
        self.assertEqual([p["id"] for p in ps[:5]], ["d0-s0", "d0-s1", "d0-s2", "d0-s3", "d30-s0"])
        for i, p in enumerate(ps):
            self.check_synthetic(p, 128, 3, 2, 3, [0, 0.3, 1][i // 4])
            self.assertTrue(all(t < 150 for t in p["tokens"]))
        # reproducible; another seed differs; never overwritten without --force
        again = self.path("p2.jsonl")
        run("prompts", "-o", again, "--length", "128", "--needles", "3", "--queries", "2", "--digits", "3",
            "--depths", "0,0.3,1", "--samples", "4", "--seed", "7", "--vocab-size", "150", "--quiet")
        with open(out, "rb") as f1, open(again, "rb") as f2:
            self.assertEqual(f1.read(), f2.read())
        r = run("prompts", "-o", again, "--length", "128", "--seed", "8", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("exists", r.stderr)
        run("prompts", "-o", again, "--length", "128", "--needles", "3", "--queries", "2", "--digits", "3",
            "--depths", "0,0.3,1", "--samples", "4", "--seed", "8", "--vocab-size", "150", "--force", "--quiet")
        self.assertNotEqual([p["tokens"] for p in read_jsonl(again)], [p["tokens"] for p in ps])
        # defaults: 256 tokens, 4 needles of 4 digits, 5 depths x 20
        d = self.path("default.jsonl")
        run("prompts", "-o", d)
        ps = read_jsonl(d)
        self.assertEqual(len(ps), 100)
        for i, p in enumerate(ps):
            self.check_synthetic(p, 256, 4, 1, 4, [0, 0.25, 0.5, 0.75, 1][i // 20])

    def test_template(self):
        tmpl = self.path("t.json")
        with open(tmpl, "w") as f:
            json.dump({"haystack": list(range(1000, 1050)), "needle": [7, 8, 9, 10, 11], "answer": [3, 5],
                       "query": [20, 21], "target": [10, 11], "bos": 128000, "vocab_size": 128256}, f)
        out = self.path("t.jsonl")
        run("prompts", "--template", tmpl, "-o", out, "--length", "64,200", "--samples", "2", "--quiet")
        ps = read_jsonl(out)
        self.assertEqual(len(ps), 20)
        self.assertEqual(ps[0]["id"], "L64-d0-s0")
        for i, p in enumerate(ps):
            T, depth = [64, 200][i // 10], [0, 0.25, 0.5, 0.75, 1][(i // 2) % 5]
            tok = p["tokens"]
            self.assertEqual(len(tok), T)
            self.assertEqual(tok[0], 128000)
            self.assertEqual(p["depth"], depth)
            C = T - 1 - 2 - 2
            start = 1 + math.floor(depth * (C - 5))
            self.assertEqual(tok[start:start + 5], [7, 8, 9, 10, 11])
            self.assertEqual(p["answer"], [[start + 3, start + 5]])
            self.assertEqual(p["query"], [[T - 4, T - 2]])
            self.assertEqual(p["target"], [[T - 2, T]])
            self.assertEqual(tok[-4:], [20, 21, 10, 11])
            hay = [t for j, t in enumerate(tok[1:1 + C]) if not start - 1 <= j < start + 4]
            self.assertTrue(all(1000 <= t < 1050 for t in hay))
            self.assertTrue(all((b - a) % 50 == 1 for a, b in zip(hay, hay[1:])))  # read cyclically
            self.assertNotIn("distractor", p)
        # errors: flags that belong to the synthetic task, ids outside --vocab-size,
        # too short, a bad file
        r = run("prompts", "--template", tmpl, "-o", self.path("x.jsonl"), "--needles", "3", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not --template", r.stderr)
        r = run("prompts", "--template", tmpl, "-o", self.path("x.jsonl"), "--vocab-size", "1040", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("haystack[40] = 1040 is not below the vocabulary size 1040", r.stderr)
        r = run("prompts", "--template", tmpl, "-o", self.path("x.jsonl"), "--length", "9", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("at least 10 tokens", r.stderr)
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            f.write('{"haystack": [1], "needle": [2], "query": [3]}')
        r = run("prompts", "--template", bad, "-o", self.path("x.jsonl"), check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad.json: missing key 'target'", r.stderr)
        self.assertFalse(os.path.exists(self.path("x.jsonl")))

    def test_bad_flags(self):
        o = self.path("never.jsonl")
        cases = [
            ([], "-o PROMPTS.jsonl is required"),
            (["-o", o, "--length", "0"], "--length"),
            (["-o", o, "--length", "64,,128"], "--length"),
            (["-o", o, "--depths", "0,2"], "--depths"),
            (["-o", o, "--samples", "0"], "--samples"),
            (["-o", o, "--needles", "65"], "--needles"),
            (["-o", o, "--digits", "0"], "--digits"),
            (["-o", o, "--seed", "-1"], "--seed"),
            (["-o", o, "--vocab-size", "100"], "at least 128"),
            (["-o", o, "--length", "20"], "too short"),
            (["-o", o, "extra"], "unexpected argument 'extra'"),
        ]
        for args, msg in cases:
            r = run("prompts", *args, check=False)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(msg, r.stderr, args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertFalse(os.path.exists(o))
        h = run("prompts", "--help").stdout
        for flag in ("--length LIST", "--needles N", "--queries R", "--digits M", "--depths LIST", "--samples S",
                     "--vocab-size V", "--seed X", "--template FILE.json", "(default: 0,0.25,0.5,0.75,1)"):
            self.assertIn(flag, h)


class NoisePipeline(unittest.TestCase):
    """noise prompts -> probe -> noise on tiny random models: the tool's averages equal
    numpy's over the dump's own datasets."""

    @classmethod
    def setUpClass(cls):
        for b in (NOISE, PROBE):
            if not os.access(b, os.X_OK):
                raise AssertionError("no %s: run make first (a missing binary fails the suite)" % b)
        cls.root = tempfile.mkdtemp(prefix="dfl_noisepipe_")
        cls.prompts = os.path.join(cls.root, "p.jsonl")
        run("prompts", "-o", cls.prompts, "--length", "80", "--needles", "3", "--digits", "2", "--samples", "2",
            "--quiet")
        cls.dumps = {}
        for t in ("llama", "diff_transformer"):
            m = os.path.join(cls.root, t)
            make_model.make_model(m, t, layers=2, hidden=32, heads=2, ffn=48, vocab=128, max_pos=128, seed=3)
            d = os.path.join(cls.root, t + ".h5")
            r = subprocess.run([PROBE, "--model", m, "--prompts", cls.prompts, "--out", d, "--quiet"],
                               capture_output=True, text=True)
            if r.returncode:
                raise AssertionError(r.stderr)
            cls.dumps[t] = d

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def reference(self, path, dset, mi):
        with h5py.File(path, "r") as f:
            names = sorted(f["samples"])
            sh = np.stack([f["samples"][n][dset][mi] for n in names]).astype(np.float64)   # [S, L, H, 7]
            depth = np.array([f["samples"][n].attrs["depth"] for n in names])
            acc = np.array([f["samples"][n]["target_correct"][()] for n in names], np.float64)
        return sh, depth, acc

    def test_against_dump(self):
        for t, mi in (("llama", 0), ("diff_transformer", 2)):
            for norm, dset in (("total", "noise/shares"), ("abs", "noise/shares_abs")):
                sh, depth, acc = self.reference(self.dumps[t], dset, mi)
                v = shares_column([self.dumps[t], "--norm", norm, "--quiet"], t)
                mean = sh.mean(axis=(0, 1, 2))
                for k, s in enumerate(SEGS):
                    self.assertAlmostEqual(v[s], mean[k], places=5, msg=(t, norm, s))
                self.assertAlmostEqual(v["noise"], mean[1] + mean[3], places=5)
                self.assertAlmostEqual(v["accuracy"], acc.mean(), places=6)
                cols, rows = table([self.dumps[t], "--norm", norm, "--by", "depth", "--quiet"])
                self.assertEqual([r[0] for r in rows], [0, 0.25, 0.5, 0.75, 1])
                self.assertEqual([r[1] for r in rows], [2] * 5)
                for r in rows:
                    sel = depth == r[0]
                    self.assertAlmostEqual(r[2], sh[sel].mean(axis=(0, 1, 2))[2], places=5)
                cols, rows = table([self.dumps[t], "--norm", norm, "--by", "head", "--layers", "1", "--quiet"])
                for r in rows:
                    self.assertAlmostEqual(r[2], sh[:, 1, r[0], 2].mean(), places=5)

    def test_stat_against_maps(self):
        """--stat entropy and negative_mass against the entropy and negative entries of
        the dump's own f32 maps at its analysis rows (float64 numpy), not against probe's
        noise/entropy."""
        m = os.path.join(self.root, "diff_transformer")
        d = os.path.join(self.root, "maps.h5")
        r = subprocess.run([PROBE, "--model", m, "--prompts", self.prompts, "--out", d, "--maps", "all",
                            "--map-dtype", "f32", "--quiet"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        ent, neg = [], []
        with h5py.File(d, "r") as f:
            for n in sorted(f["samples"]):
                s = f["samples"][n]
                rows = s["noise/rows"][()]
                at = s["attn/rows"][()]
                idx = [int(np.nonzero(at == q)[0][0]) for q in rows]
                e = []
                for k in ("map1", "map2"):
                    p = s["attn"][k][()].astype(np.float64)[:, :, idx, :]       # [L, H, R', T]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        e.append(-np.where(p > 0, p * np.log(p), 0.0).sum(-1).mean(-1))
                ent.append(e)
                df = s["attn/diff"][()].astype(np.float64)[:, :, idx, :]
                neg.append(np.minimum(df, 0).sum(-1).mean(-1))
        ent, neg = np.array(ent), np.array(neg)                       # [S, 2, L, H], [S, L, H]
        v = {r[0]: r[1] for r in table([d, "--stat", "entropy", "--quiet"], "entropy")[1]}
        self.assertAlmostEqual(v["map1"], ent[:, 0].mean(), places=4)
        self.assertAlmostEqual(v["map2"], ent[:, 1].mean(), places=4)
        v = {r[0]: r[1] for r in table([d, "--stat", "negative_mass", "--quiet"], "negative_mass")[1]}
        self.assertLess(neg.mean(), 0)
        self.assertAlmostEqual(v["diff"], neg.mean(), places=5)
        cols, rows = table([d, "--stat", "entropy", "--by", "layer", "--quiet"], "entropy")
        for r in rows:
            self.assertAlmostEqual(r[2], ent[:, 1, r[0]].mean(), places=4)

    def test_plots_of_real_dumps(self):
        out = os.path.join(self.root, "fig.png")
        run(self.dumps["llama"], self.dumps["diff_transformer"], "--labels", "Transformer,Diff", "--plot", out,
            "--plot-depth", os.path.join(self.root, "depth.png"), "--quiet")
        check_bar_heights(self, out, [self.dumps["llama"], self.dumps["diff_transformer"], "--labels",
                                      "Transformer,Diff", "--quiet"])
        for t in ("llama", "diff_transformer"):  # one dump per chart: no marker hides another
            one = os.path.join(self.root, "depth_%s.png" % t)
            run(self.dumps[t], "--plot-depth", one, "--quiet")
            check_depth_chart(self, one, [self.dumps[t], "--quiet"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
