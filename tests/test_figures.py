#!/usr/bin/python3
"""test_figures.py — figures in PNG, SVG and PDF, checked with the tools a reader of the
file would use: poppler-utils for PDF (pdfinfo: one page of the figure's size;
pdftotext: title, axis labels and a Unicode token label are text; pdffonts: every font
embedded), an XML parser and librsvg's rsvg-convert for SVG, matplotlib's colormap for
the PNG's heatmap cells, and the PNG against the PDF rasterised by pdftoppm (the map and
the colour bar land in the same place). Also noise, outliers and train plots in SVG and
PDF, and their --width (the PDF page is that wide, a PNG 300 dpi) and --font (pdffonts
names the family).

Run from the repo root:  /usr/bin/python3 tests/test_figures.py   (BIN=bin by default)
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
sys.path.insert(0, HERE)
import make_model  # noqa: E402
from test_attnmap import read_png, png_size  # noqa: E402

import h5py  # noqa: E402
from matplotlib import colormaps  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
ATTNMAP = os.path.join(BIN, "attnmap")
NOISE = os.path.join(BIN, "noise")
OUTLIERS = os.path.join(BIN, "outliers")
TRAIN = os.path.join(BIN, "train")
VOCAB = 64
T = 40
UNICODE_TOKEN = "\u6771\u4eac"  # 東京
SVG_NS = "{http://www.w3.org/2000/svg}"


# Under `make asan`: cairo 1.16 leaks 768 bytes inside cairo_surface_finish when it
# subsets a CFF font (the CJK label) into a PDF; tests/lsan.supp names that frame, and
# full stacks are needed to see it. No effect on builds without sanitizers.
ENV = {**os.environ,
       "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "fast_unwind_on_malloc=0"])),
       "LSAN_OPTIONS": "suppressions=" + os.path.join(HERE, "lsan.supp")}


def tool(*args):
    """Runs a command; fails the test with its stderr when it exits non-zero."""
    r = subprocess.run(list(args), capture_output=True, env=ENV)
    if r.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (args[0], r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout


def read_ppm(path):
    """uint8 [h, w, 3] of a binary PPM (P6, maxval 255), as pdftoppm writes it."""
    with open(path, "rb") as f:
        data = f.read()
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    assert fields[0] == b"P6" and fields[3] == b"255", fields
    w, h = int(fields[1]), int(fields[2])
    return np.frombuffer(data, np.uint8, w * h * 3, pos + 1).reshape(h, w, 3)


def viridis_mask(px):
    """Pixels within 6 of a viridis entry and clearly coloured: heatmap cells and the
    colour bar (the segment colours and greys are farther)."""
    lut = (colormaps["viridis"](np.linspace(0, 1, 256))[:, :3] * 255).astype(np.int32)
    flat = px.reshape(-1, 3).astype(np.int32)
    best = np.full(flat.shape[0], 1 << 30)
    for i in range(0, 256, 4):
        d = np.abs(flat[:, None, :] - lut[None, i:i + 4, :]).max(axis=2).min(axis=1)
        best = np.minimum(best, d)
    chroma = flat.max(axis=1) - flat.min(axis=1)
    return ((best <= 6) & (chroma > 30)).reshape(px.shape[:2])


def column_groups(mask, min_cols=3):
    """[(x0, x1, y0, y1)] of the runs of columns holding mask pixels, widest first."""
    cols = mask.sum(axis=0) > 2
    groups, x = [], 0
    while x < len(cols):
        if cols[x]:
            x0 = x
            while x < len(cols) and cols[x]:
                x += 1
            if x - x0 >= min_cols:
                rows = np.nonzero(mask[:, x0:x].sum(axis=1) > 0)[0]
                groups.append((x0, x, int(rows[0]), int(rows[-1]) + 1))
        x += 1
    return sorted(groups, key=lambda g: g[0] - g[1])


class Figures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for b in (PROBE, ATTNMAP, NOISE, OUTLIERS, TRAIN):
            assert os.access(b, os.X_OK), "no %s (run make first)" % b
        for t in ("pdfinfo", "pdftotext", "pdffonts", "pdftoppm", "rsvg-convert"):
            assert shutil.which(t), "%s is missing (scripts/deps.sh installs it)" % t
        cls.root = tempfile.mkdtemp(prefix="dfl_figures_")
        make_model.make_model(os.path.join(cls.root, "tr"), "llama", layers=2, hidden=32, heads=2, ffn=48,
                              vocab=VOCAB, max_pos=128, seed=3)
        rng = np.random.default_rng(7)
        toks = [0] + [int(t) for t in rng.integers(1, VOCAB, T - 1)]
        text = ["<bos>"] + ["w%d" % t for t in toks[1:]]
        text[5] = UNICODE_TOKEN
        text[6] = " Paris"
        pfile = os.path.join(cls.root, "p.jsonl")
        with open(pfile, "w") as f:
            f.write(json.dumps({"id": "s0", "tokens": toks, "text": text, "answer": [[5, 7]],
                                "query": [[T - 6, T - 3]], "target": [[T - 3, T]], "depth": 0.25}, ensure_ascii=False) + "\n")
        cls.dump = os.path.join(cls.root, "tr.h5")
        tool(PROBE, "--model", os.path.join(cls.root, "tr"), "--prompts", pfile, "--out", cls.dump,
             "--maps", "all", "--quiet")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def out(self, name):
        return os.path.join(self.root, name)

    def attnmap(self, out, *args):
        tool(ATTNMAP, self.dump, "--layer", "1", "--head", "0", "--size", "400", "--vmin", "0", "--vmax", "0.5",
             "-o", out, "--force", "--quiet", *args)
        return out

    # ---------------------------------------------------------------- PDF
    def test_pdf(self):
        pdf = self.attnmap(self.out("map.pdf"))
        png = self.attnmap(self.out("map.png"))
        info = tool("pdfinfo", pdf).decode()
        self.assertRegex(info, r"Pages:\s+1\n")
        # 72 units per inch: the page in points is the PNG's size in pixels (scale 1)
        w_pt, h_pt = map(float, re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info).groups())
        w_px, h_px = png_size(png)
        self.assertAlmostEqual(w_pt, w_px, delta=0.5)
        self.assertAlmostEqual(h_pt, h_px, delta=0.5)
        text = tool("pdftotext", pdf, "-").decode()
        for needle in ("sample s0", "layer 1", "head 0", "query position", "key position", UNICODE_TOKEN, "Paris"):
            self.assertIn(needle, text)
        fonts = tool("pdffonts", pdf).decode().splitlines()[2:]
        self.assertGreater(len(fonts), 0)
        for line in fonts:
            # name type [type] encoding emb sub uni object ID: "emb" is the 5th field from the end
            self.assertEqual(line.split()[-5], "yes", "font not embedded: " + line)
        # one image per map at its native resolution (40 x 40 cells), never interpolated
        with open(pdf, "rb") as f:
            raw = f.read()
        dicts = re.findall(rb"/Subtype /Image[^>]*?/Width (\d+)[^>]*?/Height (\d+)[^>]*", raw)
        self.assertIn((b"40", b"40"), [d[:2] for d in dicts])
        self.assertNotIn(b"/Interpolate true", raw)

    # ---------------------------------------------------------------- SVG
    def test_svg(self):
        svg = self.attnmap(self.out("map.svg"))
        root = ET.parse(svg).getroot()
        self.assertEqual(root.tag, SVG_NS + "svg")
        images = list(root.iter(SVG_NS + "image"))
        # the map (40 x 40) and the colour bar (1 x 256), each one image, kept sharp
        sizes = sorted((int(float(i.get("width"))), int(float(i.get("height")))) for i in images)
        self.assertEqual(sizes, [(1, 256), (40, 40)])
        for i in images:
            self.assertEqual(i.get("image-rendering"), "optimizeSpeed")
        self.assertIn("pixelated", "".join(s.text or "" for s in root.iter(SVG_NS + "style")))
        self.assertIn("sample s0", root.find(SVG_NS + "title").text)
        r = subprocess.run(["rsvg-convert", svg, "-o", self.out("svg.png")], capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        _, _, px = read_png(self.out("svg.png"))
        self.assertGreater(viridis_mask(px).sum(), 1000)  # the map is drawn

    # ---------------------------------------------------------------- PNG
    def test_png_cells_are_the_colormap(self):
        """Every unmasked cell's centre pixel is matplotlib's viridis of (v - 0) / 0.5,
        v read from the dump with h5py."""
        _, _, px = read_png(self.attnmap(self.out("cells.png"), "--no-token-labels"))
        with h5py.File(self.dump, "r") as f:
            v = f["samples/000000/attn/map1"][1, 0].astype(np.float64)  # [T, T]
        # the map's frame: a 1-unit grey (0x66) outline one pixel outside the cells
        grey = np.all(px == 0x66, axis=2)
        rows = np.nonzero(grey.sum(axis=1) >= 400)[0]
        cols = np.nonzero(grey.sum(axis=0) >= 400)[0]
        my, mx = rows[0] + 1, cols[0] + 1
        self.assertEqual(rows[-1] - rows[0], 401)
        want = colormaps["viridis"](np.clip(v / 0.5, 0, 1), bytes=True)[..., :3].astype(int)
        bad = 0
        for r in range(T):
            for k in range(r + 1):
                got = px[my + 10 * r + 5, mx + 10 * k + 5].astype(int)
                bad += int(np.abs(got - want[r, k]).max() > 1)  # table rounded vs truncated
        self.assertEqual(bad, 0)

    # ------------------------------------------------------------- layout
    def test_png_and_pdf_agree(self):
        """A 3.3-inch figure as a 150-dpi PNG and as a PDF rasterised at 150 dpi by
        pdftoppm: same size, and the map and the colour bar within 3 pixels."""
        args = ("--width", "3.3", "--no-token-labels")
        _, _, a = read_png(self.attnmap(self.out("lay.png"), "--dpi", "150", *args))
        self.attnmap(self.out("lay.pdf"), *args)
        tool("pdftoppm", "-r", "150", "-singlefile", self.out("lay.pdf"), self.out("lay_pdf"))
        b = read_ppm(self.out("lay_pdf.ppm"))
        self.assertLessEqual(abs(a.shape[0] - b.shape[0]), 1)
        self.assertLessEqual(abs(a.shape[1] - b.shape[1]), 1)
        ga, gb = column_groups(viridis_mask(a)), column_groups(viridis_mask(b))
        self.assertGreaterEqual(len(ga), 2)
        # the two widest: the map, then the colour bar, by x
        for boxa, boxb in zip(sorted(ga[:2]), sorted(gb[:2])):
            for p, q in zip(boxa, boxb):
                self.assertLessEqual(abs(p - q), 3, "%s vs %s" % (boxa, boxb))

    # --------------------------------------------------- the other tools
    def test_plots_of_noise_outliers_train(self):
        for ext in ("pdf", "svg"):
            tool(NOISE, self.dump, "--plot", self.out("shares." + ext), "--force", "--quiet")
            tool(OUTLIERS, self.dump, "--plot", self.out("outliers." + ext), "--force")
        text = tool("pdftotext", self.out("shares.pdf"), "-").decode()
        for needle in ("Attention to each part of the prompt", "key segment", "share of attention"):
            self.assertIn(needle, text)
        text = tool("pdftotext", self.out("outliers.pdf"), "-").decode()
        for needle in ("Attention logits", "Hidden states", "layer"):
            self.assertIn(needle, text)
        for name in ("shares.svg", "outliers.svg"):
            ET.parse(self.out(name))
            r = subprocess.run(["rsvg-convert", self.out(name), "-o", self.out(name + ".png")], capture_output=True)
            self.assertEqual(r.returncode, 0, r.stderr)
        # train curves: a short run, then its curves as PDF
        run = self.out("run")
        tool(TRAIN, "--out", run, "--layers", "1", "--hidden", "16", "--heads", "2", "--ffn", "32", "--seq", "16",
             "--needles", "1", "--queries", "1", "--digits", "1", "--steps", "4", "--eval-every", "2",
             "--batch", "2", "--threads", "1", "--quiet", "--plot", self.out("train.pdf"))
        with open(os.path.join(run, "train.csv")) as f:
            self.assertGreater(len(list(csv.reader(f))), 1)
        text = tool("pdftotext", self.out("train.pdf"), "-").decode()
        for needle in ("retrieval accuracy", "step", "loss (nats)"):
            self.assertIn(needle, text)

    # ------------------------------------------- --width and --font of the charts
    def page_width_pt(self, pdf):
        info = tool("pdfinfo", pdf).decode()
        return float(re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info).group(1))

    def font_names(self, pdf):
        # name type [type] encoding emb sub uni object ID: the name is the first field,
        # a subset's "ABCDEF+" prefix dropped
        lines = tool("pdffonts", pdf).decode().splitlines()[2:]
        return {line.split()[0].split("+")[-1] for line in lines}

    def check_paper(self, pdf):
        """pdf was written with --width 3.3 --font "DejaVu Serif"."""
        self.assertAlmostEqual(self.page_width_pt(pdf), 3.3 * 72, delta=0.05)   # 237.6 pt
        names = self.font_names(pdf)
        self.assertTrue(any(n.startswith("DejaVuSerif") for n in names), names)
        self.assertFalse(any(n.startswith("DejaVuSans") for n in names), names)

    def test_width_and_font_of_noise_outliers_train(self):
        paper = ("--width", "3.3", "--font", "DejaVu Serif")
        # the defaults first: 150 units per inch (1500 units: six segments), DejaVu Sans
        tool(NOISE, self.dump, "--plot", self.out("shares0.pdf"), "--force", "--quiet")
        self.assertAlmostEqual(self.page_width_pt(self.out("shares0.pdf")), 1500 / 150 * 72, delta=0.05)
        self.assertTrue(any(n.startswith("DejaVuSans") for n in self.font_names(self.out("shares0.pdf"))))
        tool(NOISE, self.dump, "--plot", self.out("shares1.pdf"), "--plot-depth", self.out("depth1.pdf"),
             "--force", "--quiet", *paper)
        self.check_paper(self.out("shares1.pdf"))
        self.check_paper(self.out("depth1.pdf"))
        # a PNG at that width is 300 dpi: 3.3 in = 990 pixels
        tool(NOISE, self.dump, "--plot", self.out("shares1.png"), "--force", "--quiet", "--width", "3.3")
        self.assertEqual(png_size(self.out("shares1.png"))[0], 990)
        tool(OUTLIERS, self.dump, "--plot", self.out("outliers1.pdf"), "--force", *paper)
        self.check_paper(self.out("outliers1.pdf"))
        run = self.out("run_paper")
        tool(TRAIN, "--out", run, "--layers", "1", "--hidden", "16", "--heads", "2", "--ffn", "32", "--seq", "16",
             "--needles", "1", "--queries", "1", "--digits", "1", "--steps", "2", "--eval-every", "2",
             "--batch", "2", "--threads", "1", "--quiet", "--plot", self.out("train1.pdf"), *paper)
        self.check_paper(self.out("train1.pdf"))

    def test_bad_width(self):
        for args in ([NOISE, self.dump, "--plot", self.out("bad.pdf")],
                     [OUTLIERS, self.dump, "--plot", self.out("bad.pdf")],
                     [TRAIN, "--out", self.out("bad_run"), "--plot", self.out("bad.pdf"), "--plot-only"]):
            for w in ("0", "abc", "-1", "101", ""):
                r = subprocess.run(args + ["--width", w], capture_output=True, text=True, env=ENV)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--width", r.stderr.splitlines()[0])
                # one line (train adds its usual "(see train --help)")
                self.assertLessEqual(len(r.stderr.splitlines()), 2 if args[0] == TRAIN else 1, r.stderr)
                self.assertFalse(os.path.exists(self.out("bad.pdf")))

    def test_bad_extension(self):
        r = subprocess.run([ATTNMAP, self.dump, "-o", self.out("map.gif"), "--quiet"], capture_output=True, text=True,
                           env=ENV)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(".png, .svg or .pdf", r.stderr)
        self.assertFalse(os.path.exists(self.out("map.gif")))


if __name__ == "__main__":
    unittest.main()
