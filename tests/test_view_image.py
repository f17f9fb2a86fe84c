#!/usr/bin/python3
"""test_view_image.py — bin/view on dumps of image prompts (docs/view.md "Images"):
a DiffCLIP and a CLIP model with random weights under the published layout
(tests/ref/clip_ref.py, converted by scripts/convert_diffclip.py with a BPE tokenizer),
probed with --maps all on an image with an object box and two text captions.

The API against h5py and numpy: the samples listed (each image sample, then its
captions' text-tower maps), the input image's pixels, the box mapped into the input,
cells, rows and tiles of the image tower's maps, which are not causal (no masked
future), the captions' maps, which are, λ of each tower, the shares and scores. Then
chromium headless (tests/cdp.py): the overlay's pixels at the hottest and coldest patch
against matplotlib's viridis blended over the image, hovering a patch names it and shows
its stored values, map2 switches the overlay and its shares, a caption's link opens its
text map with the token labels; screenshots in build/view/.

Run from the repo root:  /usr/bin/python3 tests/test_view_image.py   (BIN=bin by default)
"""
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import clip_bpe  # noqa: E402
import clip_ref  # noqa: E402
import convert_diffclip  # noqa: E402
from cdp import Browser  # noqa: E402
from test_view import BIN, BUILD, colour_index, get, get_json, png_pixels, start_server  # noqa: E402

import h5py  # noqa: E402
import subprocess  # noqa: E402

PROBE = os.path.join(BIN, "probe")
CAPTIONS = ["a photo of a cat", "a photo of the dog"]
BOX = [30, 12, 58, 40]  # x0, y0, x1, y1 in the original's pixels (80 x 60)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


class ViewImage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from PIL import Image
        cls.root = tempfile.mkdtemp(prefix="dfl_view_image_")
        words = "a photo of a cat the dog cats dogs photograph photos of the cat and the dog".split() * 3
        merges = clip_bpe.learn_merges(words, 40)
        bpe = os.path.join(cls.root, "bpe.txt.gz")
        with gzip.open(bpe, "wt", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
        # a 64-pixel input cut into 8 x 8 patches of 8 pixels
        clip_ref.SIZES["view"] = dict(clip_ref.SIZES["tiny"], image=64, patch=8, vocab=512 + len(merges) + 2, ctx=24)
        rng = np.random.default_rng(4)
        a = np.clip(rng.normal(90, 30, (60, 80, 3)), 0, 255).astype(np.uint8)
        a[BOX[1]:BOX[3], BOX[0]:BOX[2]] = (250, 200, 30)
        Image.fromarray(a).save(os.path.join(cls.root, "object.png"))
        prompts = os.path.join(cls.root, "p.jsonl")
        with open(prompts, "w") as f:
            f.write(json.dumps({"id": "obj", "image": "object.png", "box": BOX, "captions": CAPTIONS,
                                "rows": [0, 9]}) + "\n")
            f.write(json.dumps({"id": "plain", "image": "object.png"}) + "\n")
        cls.dumps, cls.sd = {}, {}
        for kind in ("diffclip", "clip"):
            sd = clip_ref.make_state_dict(kind, "view", seed=3)
            ck = os.path.join(cls.root, kind + ".pt")
            clip_ref.save_checkpoint(ck, sd)
            model = os.path.join(cls.root, kind)
            assert convert_diffclip.main([ck, model, "--vision-heads", "4", "--text-heads", "4", "--bpe", bpe]) == 0
            out = os.path.join(cls.root, kind + ".h5")
            r = subprocess.run([PROBE, "--model", model, "--prompts", prompts, "--out", out, "--maps", "all",
                                "--quiet"], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            cls.dumps[kind], cls.sd[kind] = out, sd
        cls.p, cls.url = start_server(cls.dumps["diffclip"], cls.dumps["clip"])
        cls.cmaps = {n: np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)]
                                  for c in get_json(cls.url, "/api/colormap?cmap=" + n)["colors"]])
                     for n in ("viridis", "rdbu")}

    @classmethod
    def tearDownClass(cls):
        cls.p.terminate()
        code = cls.p.wait(60)
        err = cls.p.stderr.read()
        cls.p.stdout.close()
        cls.p.stderr.close()
        shutil.rmtree(cls.root)
        # a clean stop on SIGTERM (under make asan: no leak, no sanitizer report)
        assert code == 0 and "Sanitizer" not in err, (code, err[-2000:])

    def h5(self, kind="diffclip"):
        return h5py.File(self.dumps[kind], "r")

    # ------------------------------------------------------------------ API
    def test_samples_listed(self):
        for d, kind in enumerate(("diffclip", "clip")):
            j = get_json(self.url, "/api/dumps")["dumps"][d]
            self.assertEqual(j["model_type"], kind)
            # the image sample, its two captions, the second image (no captions)
            self.assertEqual([s["kind"] for s in j["samples"]], ["image", "caption", "caption", "image"])
            self.assertEqual([s["id"] for s in j["samples"]], ["obj", "obj · caption 0", "obj · caption 1", "plain"])
            with self.h5(kind) as f:
                s = f["samples/000000"]
                self.assertEqual(j["samples"][0]["T"], s["vision/attn/map1"].shape[3])
                self.assertEqual(j["samples"][0]["R"], s["vision/attn/map1"].shape[2])
                self.assertFalse(j["samples"][0]["causal"])
                for c in (0, 1):
                    self.assertEqual(j["samples"][1 + c]["T"], len(s["text/%03d/tokens" % c]))
                    self.assertTrue(j["samples"][1 + c]["causal"])
                self.assertEqual(j["samples"][0]["maps"], ["map1", "map2", "diff"] if kind == "diffclip" else ["map1"])

    def test_image_sample(self):
        with self.h5() as f:
            s = f["samples/000000"]
            geo, size = s["image/geometry"][:], s["image/size"][:]
            seg, rgb = s["vision/segments"][:], s["image/input"][:]
            sim, zs = s["scores/similarity"][:], s["scores/zero_shot"][:]
            shares = s["vision/noise/shares"][:]
            lam, tlam = f["model/lambda"][:], f["model/text_lambda"][:]
            text0 = [text(x) for x in s["text/000/token_text"][:]]
            tok0 = list(s["text/000/tokens"][:])
        j = get_json(self.url, "/api/sample?d=0&s=0")
        self.assertEqual(j["kind"], "image")
        self.assertEqual(j["image"]["grid"], 8)
        self.assertEqual(j["image"]["size"], 64)
        # the box mapped into the input: x · resized_w / width − left
        want = [BOX[0] * geo[0] / size[0] - geo[2], BOX[1] * geo[1] / size[1] - geo[3],
                BOX[2] * geo[0] / size[0] - geo[2], BOX[3] * geo[1] / size[1] - geo[3]]
        np.testing.assert_allclose(j["image"]["box"], want, atol=1e-4)
        self.assertEqual(j["segments"], [int(x) for x in seg])
        self.assertEqual(j["text"][0], "cls")
        self.assertEqual(j["text"][1 + 2 * 8 + 5], "(2,5)")  # patch row 2, column 5
        np.testing.assert_array_equal(np.float32(j["lambda"]), lam)
        got = np.array(j["stats"]["noise/shares"]["data"], np.float32).reshape(j["stats"]["noise/shares"]["shape"])
        np.testing.assert_array_equal(got, shares)
        self.assertEqual(j["stats"]["segment_names"], "cls,object,background")
        self.assertEqual([c["text"] for c in j["captions"]], CAPTIONS)
        np.testing.assert_array_equal(np.float32([c["similarity"] for c in j["captions"]]), sim)
        np.testing.assert_array_equal(np.float32([c["zero_shot"] for c in j["captions"]]), zs)
        self.assertEqual([c["sample"] for c in j["captions"]], [1, 2])
        # a caption: the text tower's λ, its tokens and their text
        c = get_json(self.url, "/api/sample?d=0&s=1")
        self.assertEqual((c["kind"], c["image_sample"], c["caption"]), ("caption", 0, 0))
        np.testing.assert_array_equal(np.float32(c["lambda"]), tlam)
        self.assertEqual(c["tokens"], [int(x) for x in tok0])
        self.assertEqual(c["text"], text0)
        # the input image, pixel for pixel
        code, ctype, body = get(self.url, "/api/image?d=0&s=0")
        self.assertEqual((code, ctype), (200, "image/png"))
        np.testing.assert_array_equal(png_pixels(body, self.root), rgb)
        # the second image: no box, no captions
        p = get_json(self.url, "/api/sample?d=0&s=3")
        self.assertIsNone(p["image"]["box"])
        self.assertEqual(p["captions"], [])

    def test_cells_rows_and_tiles_not_causal(self):
        with self.h5() as f:
            s = f["samples/000000"]
            maps = {m: s["vision/attn/" + m][:] for m in ("map1", "map2", "diff")}
            lam = f["model/lambda"][:]
        T = maps["map1"].shape[3]
        for q, k in ((0, 40), (9, 63), (63, 0)):  # key beyond the query: not masked
            c = get_json(self.url, "/api/cell?d=0&s=0&l=1&h=1&q=%d&k=%d" % (q, k))
            self.assertFalse(c["masked"])
            for m in maps:
                self.assertEqual(np.float32(c[m]), maps[m][1, 1, q, k], (m, q, k))
            self.assertEqual(np.float32(c["lambda"]), lam[1])
            self.assertEqual(c["key"]["segment"], int(f_seg(self.dumps["diffclip"])[k]))
        # the class token's row whole: every key, the strip the exact row at width T
        r = get_json(self.url, "/api/row?d=0&s=0&l=0&h=1&m=diff&q=0&width=%d&topk=5" % T)
        row = maps["diff"][0, 1, 0]
        self.assertEqual(r["keys"], T)
        np.testing.assert_array_equal(np.float32(r["strip"]), row)
        order = sorted(range(T), key=lambda kk: (-row[kk], kk))[:5]
        self.assertEqual([e["k"] for e in r["top"]], order)
        # a tile of the 65 x 65 map at zoom 0: every cell drawn in its colour (no grey future)
        lim = get_json(self.url, "/api/limits?d=0&s=0&l=0&h=0&m=map1")
        vmin, vmax = lim["vmin"], lim["vmax"]
        code, _, body = get(self.url, "/api/tile?d=0&s=0&l=0&h=0&m=map1&z=0&x=0&y=0&vmin=%r&vmax=%r" % (vmin, vmax))
        self.assertEqual(code, 200)
        px = png_pixels(body, self.root)
        self.assertEqual(px.shape[:2], (T, T))
        want = self.cmaps["viridis"][colour_index(maps["map1"][0, 0].astype(np.float64), vmin, vmax, False)
                                     .astype(int)]
        self.assertGreaterEqual(float((np.abs(px[..., :3].astype(int) - want).max(axis=2) <= 1).mean()), 0.99)

    def test_caption_maps_are_causal(self):
        with self.h5() as f:
            g = f["samples/000000/text/001"]
            maps = {m: g["attn/" + m][:] for m in ("map1", "map2", "diff")}
            lam = f["model/text_lambda"][:]
            labels = [text(x) for x in g["token_text"][:]]
        C = maps["map1"].shape[2]
        c = get_json(self.url, "/api/cell?d=0&s=2&l=1&h=0&q=%d&k=1" % (C - 1))
        self.assertFalse(c["masked"])
        for m in maps:
            self.assertEqual(np.float32(c[m]), maps[m][1, 0, C - 1, 1])
        self.assertEqual(np.float32(c["lambda"]), lam[1])
        self.assertEqual(c["key"]["text"], labels[1])
        self.assertTrue(get_json(self.url, "/api/cell?d=0&s=2&l=0&h=0&q=1&k=3")["masked"])
        r = get_json(self.url, "/api/row?d=0&s=2&l=0&h=0&m=map1&q=2&width=64")
        self.assertEqual(r["keys"], 3)

    def test_status_codes(self):
        for path, code, msg in (("/api/image?d=0&s=1", 404, "not an image sample"),
                                ("/api/image?d=0&s=9", 404, "no sample 9"),
                                ("/api/image?d=0", 400, "needs parameter 's'"),
                                ("/api/image?d=0&s=0&l=0", 400, "takes no parameter 'l'"),
                                ("/api/cell?d=0&s=0&l=0&h=0&q=0&k=65", 404, "beyond the 65 tokens"),
                                ("/api/cell?d=1&s=0&l=0&h=4&q=0&k=1", 404, "head 4 not captured")):
            c, _, body = get(self.url, path)
            self.assertEqual(c, code, path)
            self.assertIn(msg, json.loads(body)["error"], path)

    # -------------------------------------------------------------- browser
    def test_browser(self):
        from matplotlib import cm
        shots = os.path.join(BUILD, "view")
        os.makedirs(shots, exist_ok=True)
        with self.h5() as f:
            s = f["samples/000000"]
            m1 = s["vision/attn/map1"][:]
            m2 = s["vision/attn/map2"][:]
            rgb = s["image/input"][:].astype(float)
            shares = s["vision/noise/shares"][:]
            lam = f["model/lambda"][:]
            labels = [text(x) for x in s["text/000/token_text"][:]]
            t0 = s["text/000/attn/diff"][:]
        with self.h5("clip") as f:
            c1 = f["samples/000000/vision/attn/map1"][:]
        G = 8
        b = Browser(1500, 1000)
        try:
            b.navigate(self.url)
            b.wait("document.body && document.body.dataset.ready === '1' && dlv.tilesLoaded() && "
                   "dlv.state.overlays && dlv.state.overlays.length === 2", what="the page")
            # one map over both panels: map1 of layer 0 head 0 (CLIP beside it: its map1)
            b.eval("(() => { const s = document.getElementById('map'); s.value = 'map1';"
                   " s.dispatchEvent(new Event('change')); })()")
            b.wait("dlv.state.map === 'map1' && dlv.state.overlays.length === 2 && dlv.tilesLoaded()", what="map1")
            time.sleep(0.3)
            b.screenshot(os.path.join(shots, "image_overlay.png"))
            grids = [m1[0, 0, 0, 1:], c1[0, 0, 0, 1:]]
            hi = max(float(np.abs(g).max()) for g in grids)  # one scale: [0, the largest patch]
            for i, grid in enumerate(grids):
                for idx in (int(np.argmax(grid)), int(np.argmin(grid))):
                    r, c = divmod(idx, G)
                    pix = b.eval("(() => { const o = dlv.state.overlays[%d]; const g = o.canvas.getContext('2d');"
                                 " const x = Math.floor((%d + 0.5) * o.OV / o.G), y = Math.floor((%d + 0.5) * o.OV / o.G);"
                                 " return [...g.getImageData(x, y, 1, 1).data, x, y, o.OV]; })()" % (i, c, r))
                    x, y, OV = pix[4:]
                    img = rgb[y * 64 // OV, x * 64 // OV]  # the input's pixel under it (nearest)
                    z = bilinear(grid.reshape(G, G).astype(np.float64), (y + 0.5) * G / OV - 0.5,
                                 (x + 0.5) * G / OV - 0.5)
                    want = 0.4 * img + 0.6 * np.array(cm.viridis(z / hi)[:3]) * 255
                    self.assertLessEqual(float(np.abs(np.array(pix[:3]) - want).max()), 1.01, (i, idx, pix, want))
            # hover a patch: the box names it and shows the stored values of both dumps
            r, c = 5, 2
            k = 1 + r * G + c
            pt = b.eval("dlv.patchToClient(0, %d, %d)" % (r, c))
            b.mouse("mouseMoved", pt["x"], pt["y"])
            b.wait("document.getElementById('hover').dataset.k === '%d'" % k, what="the hover box")
            self.assertEqual(b.eval("document.querySelectorAll('#hover .tok')[1].textContent"), "(%d,%d)" % (r, c))
            self.assertEqual(b.eval("dlv.state.overlays[0].canvas.dataset.patch"), "%d,%d" % (r, c))
            shown = b.eval("Object.fromEntries([...document.querySelectorAll('#hover td[data-field]')]"
                           ".map(td => [td.dataset.dump + ':' + td.dataset.field, td.dataset.value]))")
            self.assertEqual(np.float32(shown["0:map1"]), m1[0, 0, 0, k])
            self.assertEqual(np.float32(shown["0:map2"]), m2[0, 0, 0, k])
            self.assertEqual(np.float32(shown["1:map1"]), c1[0, 0, 0, k])
            self.assertEqual(np.float32(shown["0:lambda"]), lam[0])
            # map2 of layer 1 head 1: the overlay follows, with its λ and shares
            b.eval("(() => { for (const [id, v] of [['layer', '1'], ['head', '1'], ['map', 'map2']]) {"
                   " const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event('change')); } })()")
            b.wait("dlv.state.map === 'map2' && dlv.state.layer === 1 && dlv.state.head === 1 && "
                   "document.querySelector('#overlays .title') && "
                   "document.querySelector('#overlays .title').textContent.includes('map2 · layer 1 head 1')",
                   what="map2")
            sub = b.eval("document.querySelector('#overlays .sub').textContent")
            self.assertIn("object %.3f" % shares[1, 1, 1, 1], sub)
            self.assertIn("background %.3f" % shares[1, 1, 1, 2], sub)
            self.assertEqual(np.float32(b.eval("document.querySelector('#overlays .sub').dataset.lambda")), lam[1])
            time.sleep(0.3)
            b.screenshot(os.path.join(shots, "image_map2.png"))
            # the captions' scores listed; the first caption's text maps
            self.assertEqual(b.eval("document.querySelectorAll('#captions tr').length"), 3)
            b.eval("document.querySelector('#captions a[data-sample=\"1\"]').click()")
            b.wait("dlv.state.s === 1 && dlv.state.panels.length === 2 && dlv.state.panels[0].sample.kind === 'caption'"
                   " && dlv.tilesLoaded()", what="the caption's maps")
            self.assertEqual(b.eval("document.getElementById('overlays').children.length"), 0)
            b.eval("(() => { for (const [id, v] of [['layer', '0'], ['head', '0'], ['map', 'diff']]) {"
                   " const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event('change')); } })()")
            b.wait("dlv.state.map === 'diff' && dlv.state.layer === 0 && dlv.tilesLoaded()", what="diff of the caption")
            q, kk = len(labels) - 1, 2
            pt = b.eval("dlv.cellToClient(0, %d, %d)" % (q, kk))
            b.mouse("mouseMoved", pt["x"], pt["y"])
            b.wait("document.getElementById('hover').dataset.q === '%d' && "
                   "document.getElementById('hover').dataset.k === '%d'" % (q, kk), what="a caption cell")
            toks = b.eval("[...document.querySelectorAll('#hover .tok')].map(t => t.textContent)")
            self.assertEqual(toks, [labels[q].replace(" ", "␣"), labels[kk].replace(" ", "␣")])
            v = b.eval("document.querySelector('#hover td[data-dump=\"0\"][data-field=\"diff\"]').dataset.value")
            self.assertEqual(np.float32(v), t0[0, 0, q, kk])
            time.sleep(0.3)
            b.screenshot(os.path.join(shots, "image_caption.png"))
            self.assertEqual(b.eval("document.getElementById('status').textContent"), "")
            self.assertEqual(b.errors, [], "JavaScript console errors")
        finally:
            b.close()


def bilinear(g, y, x):
    """The grid g [G, G] at (y, x) in cell units (cell centres at integers), edges clamped."""
    G = g.shape[0]
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    fy, fx = y - y0, x - x0
    v = lambda r, c: g[min(max(r, 0), G - 1), min(max(c, 0), G - 1)]  # noqa: E731
    return ((v(y0, x0) * (1 - fx) + v(y0, x0 + 1) * fx) * (1 - fy) +
            (v(y0 + 1, x0) * (1 - fx) + v(y0 + 1, x0 + 1) * fx) * fy)


def f_seg(path):
    with h5py.File(path, "r") as f:
        return f["samples/000000/vision/segments"][:]


if __name__ == "__main__":
    unittest.main(verbosity=2)
