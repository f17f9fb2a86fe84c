#!/usr/bin/python3
"""test_view.py — bin/view end to end: the HTTP API against the dumps read with h5py
and numpy (cells, rows and top-k, colour limits, tile pixels at exact and pooled zoom
levels on both reading paths, deltas), status codes for bad requests, 8 concurrent
clients, the command line's errors; then the page itself in headless chromium driven
through the DevTools protocol (tests/cdp.py): choose a sample, zoom, hover a cell and
read the values shown, click a row and read its top-k list, no console errors, and
screenshots in $BUILD/view/.

Run from the repo root:  /usr/bin/python3 tests/test_view.py   (BIN=bin, BUILD=build)
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
sys.path.insert(0, HERE)
import make_model  # noqa: E402
from cdp import Browser  # noqa: E402
from test_attnmap import read_png  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
BUILD = os.environ.get("BUILD", "build")
PROBE = os.path.join(BIN, "probe")
VIEW = os.path.join(BIN, "view")
VOCAB = 64
LONG = 600  # tokens of the sample that has several zoom levels
NODATA = (200, 200, 200)


def prompts(seed):
    """Needle-style prompts with token text (one non-ASCII) and every segment kind; the
    last is LONG tokens (three zoom levels at 256-pixel tiles)."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, T in enumerate((24, 40, LONG)):
        toks = [0] + [int(t) for t in rng.integers(1, VOCAB, T - 1)]
        text = ["<bos>"] + ["w%d" % t for t in toks[1:]]
        text[3] = "caf\u00e9"
        rows.append({"id": "s%d" % k, "tokens": toks, "text": text, "answer": [[4, 7]],
                     "distractor": [[9, 11]], "query": [[T - 6, T - 3]], "target": [[T - 3, T]]})
    return rows


def start_server(*args):
    """bin/view on a free loopback port; returns (process, base URL)."""
    p = subprocess.Popen([VIEW, *args, "--port", "0", "--quiet"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    url = p.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        p.kill()
        raise AssertionError("view did not print its URL: %r %s" % (url, p.stderr.read()))
    return p, url


def get(url, path):
    """(status, content type, body bytes)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + path, timeout=120) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def get_json(url, path):
    code, ctype, body = get(url, path)
    assert code == 200, (path, code, body)
    assert ctype == "application/json", ctype
    return json.loads(body)


def png_pixels(body, root):
    path = os.path.join(root, "t%d.png" % threading.get_ident())
    with open(path, "wb") as f:
        f.write(body)
    return read_png(path)[2]


def pool_ref(m, rows, c0, f, mode):
    """Brute-force pooling of map m [R, T] (query positions rows, keys c0 ..) by f x f
    cells, the causal cells only (key <= query); NaN where a block has none. float64."""
    R, T = m.shape
    oh, ow = -(-R // f), -(-T // f)
    out = np.full((oh, ow), np.nan)
    causal = c0 + np.arange(T)[None, :] <= np.asarray(rows)[:, None]
    v = np.full((oh * f, ow * f), np.nan)
    v[:R, :T] = np.where(causal, m.astype(np.float64), np.nan)
    blocks = v.reshape(oh, f, ow, f).transpose(0, 2, 1, 3).reshape(oh, ow, f * f)
    ok = ~np.isnan(blocks)
    has = ok.any(axis=2)
    if mode == "mean":
        out[has] = np.nansum(blocks, axis=2)[has] / ok.sum(axis=2)[has]
    else:
        far = np.argmax(np.where(ok, np.abs(blocks), -1), axis=2)  # first entry farthest from 0
        out[has] = np.take_along_axis(blocks, far[..., None], axis=2)[..., 0][has]
    return out


def colour_index(v, vmin, vmax, diverging):
    """matplotlib's lookup of a value on a 256-entry colormap (linear norm)."""
    if diverging:
        t = (v / vmax + 1) / 2
    else:
        t = (v - vmin) / (vmax - vmin)
    t = np.clip(t, 0, 1)
    return np.minimum(np.floor(256 * t), 255)


class View(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for b in (PROBE, VIEW):
            if not os.access(b, os.X_OK):
                raise AssertionError("no %s (run make first)" % b)
        cls.root = tempfile.mkdtemp(prefix="dfl_view_")
        cls.procs = []
        make_model.make_model(os.path.join(cls.root, "tr"), "llama", layers=2, hidden=32, heads=2, ffn=48,
                              vocab=VOCAB, max_pos=1024, seed=1)
        make_model.make_model(os.path.join(cls.root, "df"), "diff_transformer", layers=2, hidden=32, heads=2,
                              ffn=48, vocab=VOCAB, max_pos=1024, seed=1)
        pfile = os.path.join(cls.root, "p.jsonl")
        with open(pfile, "w") as f:
            for r in prompts(3):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        cls.tr = cls.probe("tr", pfile, "tr.h5")
        cls.df = cls.probe("df", pfile, "df.h5")
        cls.p, cls.url = start_server(cls.tr, cls.df)
        cls.procs.append(cls.p)
        # a second server that pools only 64 x 64 cells per map: its closer zoom levels
        # read the dump directly (the other reading path)
        cls.p2, cls.url2 = start_server(cls.tr, cls.df, "--base-cells", "64")
        cls.procs.append(cls.p2)
        cls.cmaps = {n: [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))
                         for c in get_json(cls.url, "/api/colormap?cmap=" + n)["colors"]]
                     for n in ("viridis", "rdbu")}

    @classmethod
    def tearDownClass(cls):
        codes = []
        for p in cls.procs:
            p.terminate()
            codes.append(p.wait(60))  # a clean stop (and, under make asan, no leaks)
            p.stdout.close()
            p.stderr.close()
        shutil.rmtree(cls.root)

    @classmethod
    def probe(cls, model, prompts_path, out):
        path = os.path.join(cls.root, out)
        r = subprocess.run([PROBE, "--model", os.path.join(cls.root, model), "--prompts", prompts_path,
                            "--out", path, "--maps", "all", "--quiet"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return path

    def dump_map(self, path, s, name, layer, head):
        with h5py.File(path, "r") as f:
            g = f["samples/%06d" % s]
            return g["attn/" + name][layer, head].astype(np.float32), g["attn/rows"][:]

    # ------------------------------------------------------------------ API
    def test_dumps_list(self):
        d = get_json(self.url, "/api/dumps")["dumps"]
        self.assertEqual([x["name"] for x in d], ["tr.h5", "df.h5"])
        self.assertEqual(d[0]["model_type"], "llama")
        self.assertIsNone(d[0]["lambda"])
        with h5py.File(self.df, "r") as f:
            np.testing.assert_array_equal(np.float32(d[1]["lambda"]), f["model/lambda"][:])
        self.assertEqual([s["T"] for s in d[1]["samples"]], [24, 40, LONG])
        self.assertEqual(d[1]["samples"][2]["maps"], ["map1", "map2", "diff"])
        self.assertEqual(d[0]["samples"][2]["zmax"], 2)  # 600 -> 300 -> 150 <= 256

    def test_cells_match_h5py(self):
        rng = np.random.default_rng(0)
        with h5py.File(self.df, "r") as f:
            for _ in range(12):
                s = int(rng.integers(0, 3))
                g = f["samples/%06d" % s]
                T = g["tokens"].shape[0]
                l, h = int(rng.integers(0, 2)), int(rng.integers(0, 2))
                q = int(rng.integers(0, T))
                k = int(rng.integers(0, T))
                c = get_json(self.url, "/api/cell?d=1&s=%d&l=%d&h=%d&q=%d&k=%d" % (s, l, h, q, k))
                for m in ("map1", "map2", "diff"):
                    self.assertEqual(np.float32(c[m]), g["attn/" + m][l, h, q, k], (s, l, h, q, k, m))
                self.assertEqual(c["masked"], k > q)
                self.assertEqual(np.float32(c["lambda"]), f["model/lambda"][l])
                self.assertEqual(c["query"]["text"], g["token_text"][q].decode())
                self.assertEqual(c["key"]["segment"], g["segments"][k])
        c = get_json(self.url, "/api/cell?d=0&s=0&l=0&h=0&q=5&k=3")
        self.assertEqual(c["key"]["text"], "caf\u00e9")
        self.assertNotIn("map2", c)

    def test_row_topk_matches_numpy(self):
        for d, path, m in ((0, self.tr, "map1"), (1, self.df, "diff")):
            a, rows = self.dump_map(path, 2, m, 1, 1)
            for q in (0, 17, LONG - 1):
                r = get_json(self.url, "/api/row?d=%d&s=2&l=1&h=1&m=%s&q=%d&topk=7&width=50" % (d, m, q))
                row = a[q, :q + 1].astype(np.float64)
                order = sorted(range(q + 1), key=lambda k: (-row[k], k))[:7]
                self.assertEqual([e["k"] for e in r["top"]], order)
                np.testing.assert_array_equal(np.float32([e["v"] for e in r["top"]]), a[q, order])
                self.assertEqual(r["keys"], q + 1)
                self.assertAlmostEqual(r["sum"], row.sum(), places=5)
                # the strip: q+1 keys pooled to at most 50 bars by the entry farthest from 0
                w = min(50, q + 1)
                self.assertEqual(len(r["strip"]), w)
                if q + 1 == w:
                    np.testing.assert_array_equal(np.float32(r["strip"]), a[q, :q + 1])
                else:
                    self.assertAlmostEqual(max(map(abs, r["strip"])), np.abs(row).max(), places=6)

    def test_delta_row(self):
        a, _ = self.dump_map(self.tr, 1, "map1", 0, 1)
        b, _ = self.dump_map(self.df, 1, "map1", 0, 1)
        r = get_json(self.url, "/api/row?d=0&s=1&l=0&h=1&m=map1&q=39&topk=5&minus=1")
        diff = a[39].astype(np.float32) - b[39].astype(np.float32)
        order = sorted(range(40), key=lambda k: (-diff[k], k))[:5]
        self.assertEqual([e["k"] for e in r["top"]], order)
        np.testing.assert_allclose([e["v"] for e in r["top"]], diff[order], rtol=0, atol=1e-7)

    def test_ticks(self):
        t = get_json(self.url, "/api/ticks?vmin=0&vmax=0.05")["ticks"]
        self.assertEqual([x["label"] for x in t], ["0", "0.01", "0.02", "0.03", "0.04", "0.05"])
        np.testing.assert_allclose([x["t"] for x in t], np.array([x["v"] for x in t]) / 0.05, atol=1e-12)
        t = get_json(self.url, "/api/ticks?vmin=-0.5&vmax=0.5&div=1&scale=sqrt")["ticks"]
        v = np.array([x["v"] for x in t])
        np.testing.assert_allclose([x["t"] for x in t], 0.5 + 0.5 * np.sign(v) * np.sqrt(np.abs(v) / 0.5), atol=1e-12)
        self.assertIn("0", [x["label"] for x in t])

    def test_limits_are_robust_quantile(self):
        # maps <= 2048 cells a side pool nothing: the limit is the 99.5th percentile of
        # the causal cells outside bos columns (|v| when diverging), nearest rank
        for d, path, m, div in ((0, self.tr, "map1", False), (1, self.df, "diff", True)):
            a, rows = self.dump_map(path, 2, m, 0, 1)
            with h5py.File(path, "r") as f:
                seg = f["samples/000002/segments"][:]
            causal = np.arange(a.shape[1])[None, :] <= rows[:, None]
            keep = causal & (seg != 1)[None, :]
            v = np.sort(np.abs(a[keep]) if div else a[keep])
            q = v[int(np.floor(0.995 * (len(v) - 1) + 0.5))]
            lim = get_json(self.url, "/api/limits?d=%d&s=2&l=0&h=1&m=%s" % (d, m))
            self.assertEqual(lim["diverging"], div)
            self.assertTrue(lim["complete"])
            self.assertEqual(np.float32(lim["vmax"]), q)
            self.assertEqual(np.float32(lim["data_max"]), a[causal].max())

    def compare_tile(self, body, ref, vmin, vmax, div, exact_share=0.99):
        """A PNG tile against brute-force pooled values ref (NaN = masked)."""
        px = png_pixels(body, self.root)
        self.assertEqual(px.shape[:2], ref.shape)
        masked = np.isnan(ref)
        self.assertTrue(masked.any() and (~masked).any())
        self.assertTrue((px[masked] == NODATA).all(), "masked pixels are not no-data grey")
        lut = {c: i for i, c in enumerate(self.cmaps["rdbu" if div else "viridis"])}
        got = np.array([lut.get(tuple(p), -99) for p in px[~masked]])
        want = colour_index(ref[~masked], vmin, vmax, div)
        # the server rounds once to f32 before colouring: an index may move by one at a boundary
        self.assertLessEqual(np.abs(got - want).max(), 1, "tile colours far from the reference")
        self.assertGreaterEqual((got == want).mean(), exact_share)

    def check_tile(self, url, d, path, m, z, x, y, pool, vmin, vmax):
        a, rows = self.dump_map(path, 2, m, 1, 0)
        code, ctype, body = get(url, "/api/tile?d=%d&s=2&l=1&h=0&m=%s&z=%d&x=%d&y=%d&vmin=%r&vmax=%r&pool=%s"
                                % (d, m, z, x, y, vmin, vmax, pool))
        self.assertEqual((code, ctype), (200, "image/png"), body[:200])
        f = 2 ** z
        span = 256 * f
        ref = pool_ref(a[y * span:(y + 1) * span, x * span:(x + 1) * span], rows[y * span:(y + 1) * span], x * span, f,
                       pool)
        self.compare_tile(body, ref, vmin, vmax, m == "diff")

    def test_large_map_preview_then_complete(self):
        # 4096 tokens: 8.4 M causal cells, enough for a preview first and the full
        # pooled grid (2 x 2 cells a pixel) from the background thread
        T = 4096
        model = os.path.join(self.root, "m4")
        make_model.make_model(model, "llama", layers=1, hidden=16, heads=1, ffn=32, vocab=VOCAB, max_pos=T, seed=1)
        rng = np.random.default_rng(4)
        pfile = os.path.join(self.root, "p4.jsonl")
        with open(pfile, "w") as f:
            f.write(json.dumps({"id": "long", "tokens": [0] + [int(t) for t in rng.integers(1, VOCAB, T - 1)]}) + "\n")
        dump = self.probe("m4", pfile, "d4.h5")
        p, url = start_server(dump, "--cache-mb", "80")
        try:
            q = "/api/limits?d=0&s=0&l=0&h=0&m=map1"
            self.assertFalse(get_json(url, q)["complete"])  # the first answer is the preview
            code, ctype, body = get(url, "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=4&x=0&y=0&vmin=0&vmax=0.01")
            self.assertEqual((code, ctype, body[:4]), (200, "image/png", b"\x89PNG"))
            for pool in ("max", "mean"):
                while True:  # the background pooling ends (no time limit: the machine may be busy)
                    lim = get_json(url, q + "&pool=" + pool)
                    if lim["complete"]:
                        break
                    time.sleep(0.1)
            with h5py.File(dump, "r") as f:
                a = f["samples/000000/attn/map1"][0, 0].astype(np.float32)
                seg = f["samples/000000/segments"][:]
            rows = np.arange(T)
            base = pool_ref(a, rows, 0, 2, "mean")  # the pooled grid: 2048 x 2048
            bos = np.zeros(base.shape[1], bool)
            bos[np.nonzero(seg == 1)[0] // 2] = True
            v = np.sort(base[:, ~bos][~np.isnan(base[:, ~bos])])
            want = v[int(np.floor(0.995 * (len(v) - 1) + 0.5))]
            self.assertAlmostEqual(lim["vmax"], want, delta=abs(want) * 1e-6)
            vmax = lim["vmax"]
            for z, x, y, pool in ((4, 0, 0, "max"), (3, 1, 1, "mean"), (0, 9, 9, "mean"), (1, 3, 3, "max")):
                code, ctype, body = get(url, "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=%d&x=%d&y=%d&vmin=0&vmax=%r&pool=%s"
                                        % (z, x, y, vmax, pool))
                self.assertEqual(code, 200)
                f = 2 ** z
                span = 256 * f
                ref = pool_ref(a[y * span:(y + 1) * span, x * span:(x + 1) * span], rows[y * span:(y + 1) * span],
                               x * span, f, pool)
                if pool == "mean" and z > 1:
                    # pooled from the 2 x 2 grid: means of block means; compare with the
                    # reference built the same way from the brute-force grid
                    g = base[y * span // 2:(y + 1) * span // 2, x * span // 2:(x + 1) * span // 2]
                    ref = pool_ref(g, np.full(g.shape[0], 1 << 30), 0, f // 2, "mean")
                    ref[np.isnan(pool_ref(a[y * span:(y + 1) * span, x * span:(x + 1) * span],
                                          rows[y * span:(y + 1) * span], x * span, f, "max"))] = np.nan
                with self.subTest(z=z, x=x, y=y, pool=pool):
                    self.compare_tile(body, ref, 0.0, vmax, False)
        finally:
            p.terminate()
            self.assertEqual(p.wait(60), 0)
            p.stdout.close()
            p.stderr.close()

    def test_tiles_exact_and_pooled_on_both_paths(self):
        for url in (self.url, self.url2):
            self.check_tile(url, 0, self.tr, "map1", 0, 1, 1, "mean", 0.0, 0.05)
            self.check_tile(url, 1, self.df, "diff", 0, 0, 0, "mean", -0.02, 0.02)
            self.check_tile(url, 0, self.tr, "map1", 1, 0, 0, "mean", 0.0, 0.05)
            self.check_tile(url, 1, self.df, "map2", 1, 1, 1, "max", 0.0, 0.08)
            self.check_tile(url, 1, self.df, "diff", 2, 0, 0, "max", -0.05, 0.05)

    def test_status_codes(self):
        u = self.url
        ok = [("/", "text/html; charset=utf-8"), ("/app.js", "text/javascript; charset=utf-8"),
              ("/app.css", "text/css; charset=utf-8")]
        for path, ctype in ok:
            code, t, body = get(u, path)
            self.assertEqual((code, t), (200, ctype), path)
            self.assertGreater(len(body), 100)
        bad = [
            ("/nope", 404, "no such page"),
            ("/../../etc/passwd", 404, "no such page"),
            ("/%2e%2e/etc/passwd", 404, "no such page"),
            ("/api/tile?d=0&s=0&l=7&h=0&m=map1&z=0&x=0&y=0&vmin=0&vmax=1", 404, "layer 7 not captured"),
            ("/api/tile?d=0&s=0&l=0&h=5&m=map1&z=0&x=0&y=0&vmin=0&vmax=1", 404, "head 5 not captured"),
            ("/api/tile?d=0&s=0&l=0&h=0&m=diff&z=0&x=0&y=0&vmin=0&vmax=1", 404, "no diff map"),
            ("/api/tile?d=0&s=0&l=0&h=0&m=map1&z=1&x=0&y=0&vmin=0&vmax=1", 404, "zoom level 1 beyond 0"),
            ("/api/tile?d=0&s=2&l=0&h=0&m=map1&z=0&x=3&y=0&vmin=0&vmax=1", 404, "no tile (3, 0)"),
            ("/api/tile?d=9&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=0&vmax=1", 404, "no dump 9"),
            ("/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=1&vmax=0", 400, "vmin < vmax"),
            ("/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0", 400, "needs parameter 'vmin'"),
            ("/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=0&vmax=inf", 400, "finite"),
            ("/api/tile?d=0&s=0&l=0&h=0&m=map1&z=abc&x=0&y=0&vmin=0&vmax=1", 400, "parameter z"),
            ("/api/sample?d=0&s=99", 404, "no sample 99"),
            ("/api/sample?d=0&s=0&s=1", 400, "given twice"),
            ("/api/sample?d=0&s=0&path=/etc/passwd", 400, "no parameter 'path'"),
            ("/api/sample?d=-1&s=0", 400, "parameter d"),
            ("/api/sample?d=0&s=99999999999999999999", 400, "parameter s"),
            ("/api/cell?d=0&s=0&l=0&h=0&q=24&k=0", 404, "query row 24 not captured"),
            ("/api/cell?d=0&s=0&l=0&h=0&q=3&k=24", 404, "key 24 beyond"),
            ("/api/row?d=0&s=0&l=0&h=0&m=map1&q=3&topk=0", 400, "parameter topk"),
            ("/api/row?d=0&s=0&l=0&h=0&m=map1&q=3&minus=1&topk=3", 200, None),
            ("/api/row?d=0&s=0&l=0&h=0&m=map2&q=3", 404, "no map2 map"),
            ("/api/colormap?cmap=jet", 400, "colormap"),
            ("/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=0&vmax=1&scale=log", 400, "log"),
            ("/api/tile?d=1&s=0&l=0&h=0&m=diff&z=0&x=0&y=0&vmin=-1&vmax=1&scale=log", 200, None),
            ("/api/ticks?vmin=0&vmax=1&scale=log", 400, "log"),
            ("/api/ticks?vmin=-1&vmax=1&scale=log&div=1", 200, None),
            ("/api/sample?d=%zz&s=0", 400, "parameter d: malformed"),
            ("/api/sample?d=%00&s=0", 400, "parameter d: malformed"),
        ]
        for path, code, needle in bad:
            c, t, body = get(u, path)
            self.assertEqual(c, code, (path, body))
            if needle:
                self.assertEqual(t, "application/json")
                self.assertIn(needle, json.loads(body)["error"], path)
        # other methods, and a target longer than the 2048-byte bound
        conn = http.client.HTTPConnection(u[7:].rstrip("/"), timeout=60)
        conn.request("POST", "/api/dumps", body=b"x" * 1000)
        r = conn.getresponse()
        self.assertEqual(r.status, 405)
        r.read()
        conn.request("GET", "/api/dumps?" + "a" * 3000)
        r = conn.getresponse()
        self.assertEqual(r.status, 414)
        self.assertIn("longer than 2048", json.loads(r.read())["error"])
        conn.close()
        # HEAD: same status, no body
        conn = http.client.HTTPConnection(u[7:].rstrip("/"), timeout=60)
        conn.request("HEAD", "/api/dumps")
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b""))
        conn.close()

    def test_eight_concurrent_clients(self):
        paths = []
        for z, x, y in ((0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 0), (1, 1, 1), (2, 0, 0)):
            for d, m in ((0, "map1"), (1, "map2")):
                paths.append("/api/tile?d=%d&s=2&l=0&h=1&m=%s&z=%d&x=%d&y=%d&vmin=0&vmax=0.1&pool=max"
                             % (d, m, z, x, y))
        paths += ["/api/cell?d=1&s=2&l=1&h=0&q=%d&k=%d" % (q, q // 2) for q in range(0, LONG, 97)]
        paths += ["/api/row?d=1&s=2&l=1&h=1&m=diff&q=%d" % q for q in range(0, LONG, 151)]
        paths += ["/api/tile?d=0&s=2&l=9&h=0&m=map1&z=0&x=0&y=0&vmin=0&vmax=1", "/nothing"]
        # the serial answers of the other server (the same dumps, another reading path
        # for the tiles) are the reference
        serial = {p: get(self.url2, p)[::2] for p in paths}
        results, errors = [], []

        def client(i):
            try:
                rng = np.random.default_rng(i)
                for p in rng.permutation(paths):
                    results.append((p, get(self.url, p)[::2]))
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        ts = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 8 * len(paths))
        for p, (code, body) in results:
            self.assertEqual(code, serial[p][0], p)
            if code == 200:
                self.assertEqual(body, serial[p][1], p)
        self.assertIsNone(self.p.poll(), "the server died")

    # --------------------------------------------------------- command line
    def test_command_line_errors(self):
        def run(*args):
            return subprocess.run([VIEW, *args], capture_output=True, text=True, timeout=120)
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for flag in ("--port P", "--bind ADDR", "--allow-remote", "--cache-mb", "--threads", "--base-cells",
                     "--quiet", "(default: 8077)", "(default: 127.0.0.1)", "(default: 256)", "(default: 4)",
                     "(default: 2048)"):
            self.assertIn(flag, r.stdout)
        cases = [
            ((), 2, "give at least one dump"),
            ((self.tr, "--bind", "0.0.0.0"), 2, "--allow-remote"),
            ((self.tr, "--bind", "::"), 2, "not a loopback address"),
            ((self.tr, "--bind", "localhost"), 2, "not a numeric"),
            ((self.tr, "--port", "70000"), 2, "--port"),
            ((self.tr, "--cache-mb", "1"), 2, "--cache-mb"),
            ((self.tr, "--cache-mb", "20"), 2, "too small for base grids of 2048 cells: need 36 MiB"),
            ((self.tr, "--threads", "0"), 2, "--threads"),
            ((self.tr, "--base-cells", "32"), 2, "--base-cells"),
            ((self.tr,) * 17, 2, "at most 16 dumps"),
            ((self.tr, "--port", self.url.rsplit(":", 1)[1].strip("/")), 1, "cannot listen on 127.0.0.1 port"),
            ((os.path.join(self.root, "missing.h5"),), 1, "missing.h5"),
            ((os.path.join(self.root, "p.jsonl"),), 1, "p.jsonl"),
        ]
        for args, code, needle in cases:
            r = run(*args, "--port", "0") if "--port" not in args else run(*args)
            self.assertEqual(r.returncode, code, (args, r.stderr))
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("view: ") and needle in lines[0], lines[0])
            self.assertEqual(r.stdout, "")

    def test_refuses_scales_not_ascending(self):
        """A dump whose attn/layers, heads or rows scale is out of order is refused at
        start, naming the dataset (the one sample reader every figure shares)."""
        for name in ("layers", "heads", "rows"):
            bad = os.path.join(self.root, "unordered_%s.h5" % name)
            shutil.copy(self.df, bad)
            with h5py.File(bad, "r+") as f:
                d = f["samples/000001/attn/" + name]
                v = d[:]
                v[0], v[1] = v[1], v[0]
                d[...] = v
            p = subprocess.Popen([VIEW, bad, "--port", "0", "--quiet"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            url = p.stdout.readline()  # a server that accepted the dump prints its URL
            if url:
                p.kill()
            out, err = p.communicate()
            self.assertEqual(url + out, "", "view served a dump whose attn/%s is out of order" % name)
            self.assertEqual(p.returncode, 1, (name, err))
            self.assertIn("samples/000001/attn/%s is not strictly ascending" % name, err)

    # -------------------------------------------------------------- browser
    def test_browser(self):
        shots = os.path.join(BUILD, "view")
        b = Browser(1500, 1000)
        try:
            b.navigate(self.url)
            b.wait("document.body && document.body.dataset.ready === '1' && dlv.tilesLoaded()", what="the page")
            self.assertEqual(b.eval("dlv.state.panels.length"), 2)  # side by side for two dumps
            b.screenshot(os.path.join(shots, "side_by_side.png"))

            # choose the long sample, as a user does
            b.eval("(() => { const s = document.getElementById('sample'); s.value = '2';"
                   " s.dispatchEvent(new Event('change')); })()")
            b.wait("dlv.state.s === 2 && dlv.state.panels.length === 2 && dlv.state.panels[0].sample"
                   " && dlv.state.panels[0].sample.T === %d && dlv.tilesLoaded()" % LONG, what="sample 2")
            a, rows = self.dump_map(self.tr, 2, "map1", 0, 0)
            q = 431
            k = int(np.argmax(a[q, :q + 1]))
            # zoom in with the wheel over the cell (it stays under the pointer)
            s0 = b.eval("dlv.state.view.s")
            pt = b.eval("dlv.cellToClient(0, %d, %d)" % (q, k))
            for _ in range(6):
                b.wheel(pt["x"], pt["y"], -120)
            s1 = b.eval("dlv.state.view.s")
            self.assertGreater(s1, 3 * s0)
            b.wait("dlv.tilesLoaded()")
            pt = b.eval("dlv.cellToClient(0, %d, %d)" % (q, k))
            b.mouse("mouseMoved", pt["x"], pt["y"])
            b.wait("document.getElementById('hover').dataset.q === '%d' && "
                   "document.getElementById('hover').dataset.k === '%d'" % (q, k), what="the hover box")
            # the text shown (6 significant digits) and the exact value behind it
            shown = b.eval("Object.fromEntries([...document.querySelectorAll('#hover td[data-field]')]"
                           ".map(td => [td.dataset.dump + ':' + td.dataset.field, [td.textContent, td.dataset.value]]))")

            def check(key, want):
                text, exact = shown[key]
                self.assertEqual(np.float32(exact), want, key)
                self.assertAlmostEqual(float(text), float(want), delta=abs(float(want)) * 5e-6 + 1e-12, msg=key)
            check("0:map1", a[q, k])
            self.assertEqual(shown["0:map2"][0], "—")
            with h5py.File(self.df, "r") as f:
                g = f["samples/000002/attn"]
                for m in ("map1", "map2", "diff"):
                    check("1:" + m, g[m][0, 0, q, k])
                check("1:lambda", f["model/lambda"][0])
            tok = b.eval("document.querySelectorAll('#hover .tok')[1].textContent")
            with h5py.File(self.tr, "r") as f:
                self.assertEqual(tok, f["samples/000002/token_text"][k].decode())

            # click the row: its top-k keys
            b.click(pt["x"], pt["y"])
            b.wait("document.querySelectorAll('#topk li').length === 10 && dlv.state.row === %d" % q,
                   what="the top-k list")
            top = b.eval("[...document.querySelectorAll('#topk li')].map(li => [+li.dataset.k, li.dataset.v])")
            row = a[q, :q + 1]
            order = sorted(range(q + 1), key=lambda kk: (-row[kk], kk))[:10]
            self.assertEqual([t[0] for t in top], order)
            np.testing.assert_array_equal(np.float32([t[1] for t in top]), row[order])
            b.wait("dlv.tilesLoaded()")
            time.sleep(0.3)
            b.screenshot(os.path.join(shots, "zoomed_row.png"))

            # the delta view and the overview grid
            b.eval("(() => { const s = document.getElementById('mode'); s.value = 'delta';"
                   " s.dispatchEvent(new Event('change')); })()")
            b.wait("dlv.state.panels.length === 1 && dlv.state.panels[0].minus === 1 && dlv.tilesLoaded()",
                   what="the delta view")
            thumbs = b.eval("document.querySelectorAll('.ovgrid img').length")
            self.assertEqual(thumbs, 8)  # both dumps' 2 layers x 2 heads
            b.eval("document.querySelector('.ovgrid img[data-layer=\"1\"][data-head=\"1\"]').click()")
            b.wait("dlv.state.layer === 1 && dlv.state.head === 1 && dlv.tilesLoaded()", what="a thumbnail")
            # the hover box follows the map opened: the same cell, layer 1 head 1
            a11, _ = self.dump_map(self.tr, 2, "map1", 1, 1)
            b.wait("(() => { const td = document.querySelector('#hover td[data-dump=\"0\"][data-field=\"map1\"]');"
                   " return td && Math.fround(+td.dataset.value) === Math.fround(%r); })()" % float(a11[q, k]),
                   what="the hover box of layer 1 head 1")
            b.eval("document.getElementById('fit').click()")
            b.wait("dlv.tilesLoaded()")
            time.sleep(0.3)
            b.screenshot(os.path.join(shots, "delta.png"))
            self.assertEqual(b.eval("document.getElementById('status').textContent"), "")
            self.assertEqual(b.errors, [], "JavaScript console errors")
        finally:
            b.close()
        for n in ("side_by_side.png", "zoomed_row.png", "delta.png"):
            with open(os.path.join(shots, n), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
