#!/usr/bin/python3
"""test_attnmap.py — end-to-end tests of bin/attnmap: single maps, grids, --vs and
--delta, crops, dumps that captured only some layers, heads and rows (written here with
h5py, as the coming probe will write them), the pixels of the written PNG, and every bad
input: one line on stderr naming what is wrong, exit 1 (2 for usage errors), and no
output or temporary file left behind.

Run from the repo root:  /usr/bin/python3 tests/test_attnmap.py   (BIN=bin by default)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
ATTNMAP = os.path.join(BIN, "attnmap")
VOCAB = 64


def png_size(path):
    """(width, height) from the IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def read_png(path):
    """(width, height, uint8 [h, w, 3]) of an 8-bit RGB, non-interlaced PNG, decoded
    independently of libpng: with Pillow when it is installed, else here (zlib + the
    five PNG filters; slow, so tests decode small images only)."""
    try:
        from PIL import Image
        with Image.open(path) as im:
            a = np.asarray(im.convert("RGB"))
        return a.shape[1], a.shape[0], a
    except ImportError:
        pass
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(raw):
        n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        body = raw[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, ctype, interlace) == (8, 2, 0)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    data = zlib.decompress(idat)
    stride = 3 * w
    out = np.zeros((h, stride), np.int32)
    prev = np.zeros(stride, np.int32)
    for y in range(h):
        f = data[y * (stride + 1)]
        line = np.frombuffer(data, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, np.int32)
        for x in range(stride):
            a = cur[x - 3] if x >= 3 else 0
            b = prev[x]
            c = prev[x - 3] if x >= 3 else 0
            if f == 0:
                p = 0
            elif f == 1:
                p = a
            elif f == 2:
                p = b
            elif f == 3:
                p = (a + b) // 2
            else:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[x] = (line[x] + p) & 255
        out[y] = cur
        prev = cur
    return w, h, out.reshape(h, w, 3).astype(np.uint8)


def prompts(seed):
    """Two needle-style prompts with token text (one non-ASCII) and every segment kind."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, T in enumerate((24, 40)):
        toks = [0] + [int(t) for t in rng.integers(1, VOCAB, T - 1)]
        text = ["<bos>"] + ["w%d" % t for t in toks[1:]]
        text[3] = "caf\u00e9"
        rows.append({"id": "s%d" % k, "tokens": toks, "text": text, "answer": [[4, 7]],
                     "distractor": [[9, 11]], "query": [[T - 6, T - 3]], "target": [[T - 3, T]]})
    return rows


class AttnMap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for b in (PROBE, ATTNMAP):
            if not os.access(b, os.X_OK):
                raise AssertionError("no %s: run make first (a missing binary fails the suite)" % b)
        cls.root = tempfile.mkdtemp(prefix="dfl_attnmap_")
        make_model.make_model(os.path.join(cls.root, "tr"), "llama", layers=2, hidden=32, heads=2, ffn=48,
                              vocab=VOCAB, max_pos=128, seed=1)
        make_model.make_model(os.path.join(cls.root, "df"), "diff_transformer", layers=2, hidden=32, heads=2,
                              ffn=48, vocab=VOCAB, max_pos=128, seed=1)
        cls.pfile = cls.write_jsonl("p.jsonl", prompts(3))
        other = prompts(3)
        other[0]["tokens"][5] = (other[0]["tokens"][5] + 1) % VOCAB
        cls.pother = cls.write_jsonl("other.jsonl", other)
        cls.tr = cls.probe("tr", cls.pfile, "tr.h5")
        cls.df = cls.probe("df", cls.pfile, "df.h5")
        cls.df_other = cls.probe("df", cls.pother, "df_other.h5")
        cls.partial = cls.make_partial(cls.tr, "partial.h5")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    @classmethod
    def write_jsonl(cls, name, rows):
        path = os.path.join(cls.root, name)
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        return path

    @classmethod
    def probe(cls, model, prompts_path, out):
        path = os.path.join(cls.root, out)
        r = subprocess.run([PROBE, "--model", os.path.join(cls.root, model), "--prompts", prompts_path,
                            "--out", path, "--maps", "all", "--quiet"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return path

    @classmethod
    def make_partial(cls, src, name):
        """A copy of dump src whose samples keep only layer 1, head 1 and query rows
        {5, T-1}: maps [1, 1, 2, T] with attn/layers, heads, rows naming them, attached
        as dimension scales — the layout of docs/format.md for Ls < L, Hs < H, R < T."""
        path = os.path.join(cls.root, name)
        shutil.copy(src, path)
        with h5py.File(path, "r+") as f:
            for sname in f["samples"]:
                g = f["samples"][sname]["attn"]
                T = g["map1"].shape[3]
                rows = np.array([5, T - 1], np.int32)
                m = g["map1"][1:2, 1:2][:, :, rows, :]
                for k in list(g.keys()):
                    del g[k]
                g["layers"] = np.array([1], np.int32)
                g["heads"] = np.array([1], np.int32)
                g["rows"] = rows
                g["keys"] = np.arange(T, dtype=np.int32)
                d = g.create_dataset("map1", data=m.astype(np.float16), chunks=(1, 1, 2, T),
                                     compression="gzip", compression_opts=1, shuffle=True)
                for i, (sc, lab) in enumerate(zip(("layers", "heads", "rows", "keys"),
                                                  ("layer", "head", "query", "key"))):
                    g[sc].make_scale(sc)
                    d.dims[i].attach_scale(g[sc])
                    d.dims[i].label = lab
        return path

    # ------------------------------------------------------------ helpers
    def run_tool(self, *args):
        return subprocess.run([ATTNMAP, *args, "--quiet"], capture_output=True, text=True)

    def render(self, *args, decode=False):
        """Run attnmap into a fresh folder; returns (path, width, height, pixels or None)."""
        outdir = tempfile.mkdtemp(dir=self.root)
        out = os.path.join(outdir, "out.png")
        r = self.run_tool(*args, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(outdir), ["out.png"], "temporary file left behind")
        if not decode:
            w, h = png_size(out)
            return out, w, h, None
        w, h, px = read_png(out)
        return out, w, h, px

    def expect_error(self, args, needles, code=1):
        outdir = tempfile.mkdtemp(dir=self.root)
        out = os.path.join(outdir, "out.png")
        r = self.run_tool(*args, "-o", out)
        self.assertEqual(r.returncode, code, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("attnmap: "), lines[0])
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertEqual(os.listdir(outdir), [], "output or temporary file left behind")
        return lines[0]

    @staticmethod
    def count(px, rgb):
        return int(np.all(px == np.array(rgb, np.uint8), axis=2).sum())

    @staticmethod
    def count_masked(px):
        """Pixels of masked cells: neutral greys from the hatch (160) to the ground
        (200), anti-aliased hatch edges in between."""
        r, g, b = (px[..., i].astype(int) for i in range(3))
        return int(((r == g) & (g == b) & (r >= 160) & (r <= 200)).sum())

    # ------------------------------------------------------------ good paths
    def test_single_map_pixels(self):
        """Default map of a llama dump: softmax map1; the future triangle hatched grey,
        saturated cells in viridis' top colour when --vmax is tiny."""
        _, w, h, px = self.render(self.tr, "--sample", "s1", "--layer", "1", "--head", "0", "--size", "400",
                                  decode=True)
        self.assertGreater(w, 400)
        self.assertGreater(h, 400)
        # 40 tokens at 400 px: cells of 10 x 10; the masked triangle holds 40·39/2 cells
        self.assertGreater(self.count_masked(px), 0.9 * 780 * 100)
        # every unmasked cell is above 1e-9, so all of them get the top colour
        _, _, _, sat = self.render(self.tr, "--sample", "s1", "--layer", "1", "--size", "400",
                                   "--vmin", "0", "--vmax", "1e-9", decode=True)
        self.assertGreaterEqual(self.count(sat, (253, 231, 37)), 820 * 100)

    def test_diff_default_is_diverging(self):
        _, _, _, px = self.render(self.df, "--sample", "0", "--size", "240", decode=True)
        # RdBu's centre (near white) and some blue for negative entries may both appear;
        # viridis' darkest colour must not (the diff map uses the diverging map)
        self.assertEqual(self.count(px, (68, 1, 84)), 0)

    def test_grids_and_crops(self):
        _, w1, _, _ = self.render(self.tr, "--heads", "all", "--layer", "0", "--size", "120")
        _, w2, _, _ = self.render(self.tr, "--layers", "all", "--head", "mean", "--size", "120")
        _, w3, _, _ = self.render(self.df, "--maps", "all", "--layer", "1", "--size", "120")
        self.assertGreater(w3, w1)  # three tiles in a row against two
        self.assertGreater(w2, 2 * 120)
        self.render(self.tr, "--rows", "10:30", "--cols", ":20", "--pool", "max", "--scale", "log")
        self.render(self.tr, "--scale", "sqrt", "--cmap", "magma", "--sample", "s1")
        self.render(self.df, "--map", "map2", "--no-token-labels")

    def test_large_map_is_pooled(self):
        """A 40-token map at --size 16 is pooled (both ways) to 16 x 16 cells."""
        _, _, h_big, _ = self.render(self.tr, "--sample", "s1", "--size", "400")
        for pool in ("mean", "max"):
            _, w, h, _ = self.render(self.tr, "--sample", "s1", "--size", "16", "--pool", pool)
            self.assertLess(h, h_big - 150)

    def test_long_map_same_image_on_any_thread_count(self):
        """A 1100-token map (tiles of 32 x 512, the future ones never stored) read by the
        parallel chunk decoder and pooler: the PNG is byte-identical on 1 and 2 threads;
        a crop wholly in the masked future draws as masked."""
        model = os.path.join(self.root, "long")
        make_model.make_model(model, "llama", layers=1, hidden=16, heads=1, ffn=32, vocab=VOCAB,
                              max_pos=2048, seed=2)
        T = 1100
        toks = [0] + [int(t) for t in np.random.default_rng(5).integers(1, VOCAB, T - 1)]
        pfile = self.write_jsonl("long.jsonl", [{"id": "long", "tokens": toks, "answer": [[500, 504]],
                                                 "query": [[T - 6, T - 3]], "target": [[T - 3, T]]}])
        dump = os.path.join(self.root, "long.h5")
        r = subprocess.run([PROBE, "--model", model, "--prompts", pfile, "--out", dump, "--maps", "all",
                            "--rows", "all", "--quiet"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for pool in ("mean", "max"):
            images = []
            for threads in ("1", "2"):
                out = os.path.join(self.root, "long_%s_%s.png" % (pool, threads))
                r = subprocess.run([ATTNMAP, dump, "-o", out, "--size", "275", "--pool", pool, "--force", "--quiet"],
                                   capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": threads})
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out, "rb") as f:
                    images.append(f.read())
            self.assertEqual(images[0], images[1], "--pool %s: the image depends on the thread count" % pool)
        # 100 rows x 500 keys at 200 px: a 200 x 40 tile, every cell masked
        _, _, _, px = self.render(dump, "--rows", "0:100", "--cols", "600:1100", "--size", "200", decode=True)
        self.assertGreater(self.count_masked(px), 0.95 * 200 * 40)

    def test_vs_and_delta(self):
        _, w, _, _ = self.render(self.tr, "--vs", self.df, "--sample", "s0", "--size", "200",
                                 "--labels", "Transformer,Diff")
        self.assertGreater(w, 2 * 200)
        self.render(self.tr, "--vs", self.df, "--delta", "--map", "map1", "--heads", "all")
        self.render(self.df, "--vs", self.df, "--maps", "all")

    def test_inf_in_the_data_is_named_not_the_flags(self):
        """Limits taken from the data fail on a map holding Inf: the message says so and
        does not blame --vmin/--vmax, which were not given; given limits still draw."""
        bad = os.path.join(self.root, "inf.h5")
        shutil.copy(self.df, bad)
        with h5py.File(bad, "r+") as f:
            for m in ("map1", "diff"):
                d = f["samples/000000/attn/" + m]
                a = d[...]
                a[...] = np.inf
                d[...] = a
        for args in ([bad, "--vs", self.df, "--delta", "--map", "map1", "--sample", "0"],
                     [bad, "--map", "diff", "--sample", "0"]):
            self.expect_error(args, ["not finite", "--vmin and --vmax"], code=1)
            outdir = tempfile.mkdtemp(dir=self.root)
            r = self.run_tool(*args, "-o", os.path.join(outdir, "x.png"))
            self.assertNotIn("--vmin/--vmax:", r.stderr)
        self.render(bad, "--map", "diff", "--sample", "0", "--vmin", "-1", "--vmax", "1")

    def test_partial_dump(self):
        """Ls < L, Hs < H, R < T: numbers map through the scales; rows draw as strips."""
        _, w, h, px = self.render(self.partial, "--layer", "1", "--head", "1", "--sample", "s1", "--size", "400")
        self.assertLess(h, w)
        self.expect_error([self.partial, "--layer", "0"], ["layer 0 was not captured", "layers 1"], code=1)
        self.expect_error([self.partial, "--layer", "1", "--head", "0"], ["head 0 was not captured", "heads 1"])
        self.expect_error([self.partial, "--rows", "6:20"], ["selects none", "5, 23"])

    def test_existing_output_needs_force(self):
        outdir = tempfile.mkdtemp(dir=self.root)
        out = os.path.join(outdir, "out.png")
        with open(out, "w") as f:
            f.write("precious")
        r = self.run_tool(self.tr, "-o", out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--force", r.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "precious")
        self.assertEqual(os.listdir(outdir), ["out.png"])
        r = self.run_tool(self.tr, "-o", out, "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(png_size(out)[0] > 0, True)

    # ------------------------------------------------------------ bad inputs
    def test_vs_tokens_differ(self):
        self.expect_error([self.df, "--vs", self.df_other, "--sample", "s0"],
                          ["tokens differ at position 5", self.df_other])
        self.expect_error([self.df, "--vs", self.df_other, "--sample", "s0", "--delta"], ["tokens differ"])

    def test_missing_dataset(self):
        path = os.path.join(self.root, "nomap2.h5")
        shutil.copy(self.df, path)
        with h5py.File(path, "r+") as f:
            del f["samples/000000/attn/map2"]
        self.expect_error([path, "--map", "map2"], ["samples/000000/attn/map2", "no such dataset"])
        nomaps = os.path.join(self.root, "nomaps.h5")
        r = subprocess.run([PROBE, "--model", os.path.join(self.root, "tr"), "--prompts", self.pfile,
                            "--out", nomaps, "--quiet", "--force"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.expect_error([nomaps], ["no attention maps", "--maps"])

    def test_scales_not_ascending(self):
        """The sample reader attnmap shares with bin/view refuses a scale out of order,
        or rows outside the tokens, naming the dataset."""
        for name in ("layers", "heads", "rows"):
            bad = os.path.join(self.root, "unordered_%s.h5" % name)
            shutil.copy(self.df, bad)
            with h5py.File(bad, "r+") as f:
                d = f["samples/000000/attn/" + name]
                v = d[:]
                v[0], v[1] = v[1], v[0]
                d[...] = v
            self.expect_error([bad], ["samples/000000/attn/%s is not strictly ascending" % name])
        bad = os.path.join(self.root, "row_outside.h5")
        shutil.copy(self.df, bad)
        with h5py.File(bad, "r+") as f:
            d = f["samples/000000/attn/rows"]
            v = d[:]
            v[-1] = f["samples/000000/tokens"].shape[0]
            d[...] = v
        self.expect_error([bad], ["samples/000000/attn/rows lists row", "outside the"])

    def test_out_of_range(self):
        self.expect_error([self.tr, "--layer", "7"], ["layer 7 was not captured", "layers 0-1"])
        self.expect_error([self.tr, "--head", "2"], ["head 2 was not captured", "heads 0-1"])
        self.expect_error([self.tr, "--sample", "9"], ["no sample with id or index '9'", "'s0'", "0 to 1"])
        self.expect_error([self.tr, "--sample", "nope"], ["no sample", "nope"])
        self.expect_error([self.tr, "--cols", "50:60"], ["selects no keys"])

    def test_not_a_dump(self):
        txt = os.path.join(self.root, "notes.txt")
        with open(txt, "w") as f:
            f.write("hello\n")
        self.expect_error([txt], ["notes.txt", "not a difflens dump"])
        other = os.path.join(self.root, "other.h5")
        with h5py.File(other, "w") as f:
            f["x"] = np.zeros(3)
        self.expect_error([other], ["not a difflens dump"])
        wrong = os.path.join(self.root, "wrong.h5")
        with h5py.File(wrong, "w") as f:
            f.attrs["format"] = "something-else"
        self.expect_error([wrong], ["not a difflens dump", "something-else"])
        newer = os.path.join(self.root, "newer.h5")
        shutil.copy(self.tr, newer)
        with h5py.File(newer, "r+") as f:
            f.attrs["format_version"] = np.int32(99)
        self.expect_error([newer], ["format_version 99"])
        self.expect_error([os.path.join(self.root, "missing.h5")], ["missing.h5", "cannot open"])

    def test_unwritable_output(self):
        out = os.path.join(self.root, "no", "such", "dir", "out.png")
        r = self.run_tool(self.tr, "-o", out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("out.png", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.root, "no")))

    def test_option_conflicts(self):
        self.expect_error([self.tr, "--maps", "all"], ["--maps all needs a Diff dump"], code=2)
        self.expect_error([self.tr, "--map", "diff"], ["only map1", "--map diff"], code=2)
        self.expect_error([self.df, "--maps", "all", "--heads", "all"], ["choose one of"], code=2)
        self.expect_error([self.tr, "--scale", "log", "--vmin", "0"], ["log"], code=2)

    def test_usage_errors(self):
        for args in ([self.tr, "--size", "5"], [self.tr, "--pool", "median"], [self.tr, "--rows", "5:3"],
                     [self.tr, "--cmap", "rdbu"], [self.tr, "--cmap", "jet"], [self.tr, "--layer", "x"],
                     [self.tr, "--head", "-1"], [self.tr, "--scale", "cubic"], [self.tr, "--vmax", "nan"],
                     [self.tr, "--delta"], [self.tr, "--labels", "A"], [self.tr, "--bogus"],
                     [self.tr, "stray"]):
            outdir = tempfile.mkdtemp(dir=self.root)
            r = self.run_tool(*args, "-o", os.path.join(outdir, "x.png"))
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("attnmap", r.stderr)
            self.assertEqual(os.listdir(outdir), [])
        r = self.run_tool(self.tr)
        self.assertEqual(r.returncode, 2)
        self.assertIn("-o", r.stderr)

    def test_help_lists_every_flag(self):
        r = subprocess.run([ATTNMAP, "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        for flag in ("--out", "--sample", "--caption", "--layer", "--head", "--map", "--layers", "--heads", "--maps", "--vs",
                     "--labels", "--delta", "--rows", "--cols", "--size", "--pool", "--cmap", "--scale", "--vmin",
                     "--vmax", "--no-token-labels", "--force", "--quiet", "--help"):
            self.assertIn(flag, r.stdout)
        for default in ("default: 1024 for one map", "default: mean", "default: viridis", "default: linear",
                        "default: the first sample"):
            self.assertIn(default, r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=1)
