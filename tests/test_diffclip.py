#!/usr/bin/python3
"""test_diffclip.py — DiffCLIP and its CLIP baseline (docs/format.md "DiffCLIP and its CLIP
baseline"): scripts/convert_diffclip.py on training checkpoints made here with random
weights under the published layout (tests/ref/clip_ref.py), and both towers of the C
forward pass (model/clip.h, driven by tests/clip_harness.c) against the float64 reference.
"""
import io
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import clip_ref  # noqa: E402
import convert_diffclip  # noqa: E402

TMP = tempfile.mkdtemp(prefix="dfl-diffclip-")
CONVERT = os.path.join(ROOT, "scripts", "convert_diffclip.py")


class Result:
    def __init__(self, returncode, stderr):
        self.returncode, self.stderr = returncode, stderr


def run_convert(*args):
    """convert_diffclip's main in this process (importing torch once: the suite stays cheap);
    the command line itself is run once, by test_command_line."""
    err = io.StringIO()
    old, sys.stderr = sys.stderr, err
    try:
        rc = convert_diffclip.main([str(a) for a in args])
    finally:
        sys.stderr = old
    return Result(rc, err.getvalue())


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        assert v["dtype"] == "F32", v
        out[k] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(v["shape"])
    return out


class Converter(unittest.TestCase):
    def convert(self, kind, name, **kw):
        sd = clip_ref.make_state_dict(kind, "tiny", seed=3, **kw)
        ck = os.path.join(TMP, name + ".pt")
        clip_ref.save_checkpoint(ck, sd)
        out = os.path.join(TMP, name)
        s = clip_ref.SIZES["tiny"]
        r = run_convert(ck, out, "--vision-heads", s["hv"], "--text-heads", s["ht"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return sd, out

    def test_diffclip_and_clip_round_trip(self):
        for kind in ("diffclip", "clip"):
            sd, out = self.convert(kind, "rt-" + kind)
            with open(os.path.join(out, "config.json")) as f:
                cfg = json.load(f)
            want = clip_ref.config(kind, "tiny")
            for k in ("model_type", "embed_dim", "vision_config", "text_config"):
                self.assertEqual(cfg[k], want[k], k)
            self.assertEqual(cfg["preprocess"]["interpolation"], "bilinear")
            got = read_safetensors(os.path.join(out, "model.safetensors"))
            self.assertEqual(sorted(got), sorted(sd))  # "module." gone, nothing lost or added
            for k in sd:
                np.testing.assert_array_equal(got[k], sd[k], err_msg=k)

    def test_layer_scale_is_kept(self):
        sd, out = self.convert("diffclip", "ls", layer_scale=True)
        self.assertIn("visual.blocks.1.ls2.gamma", read_safetensors(os.path.join(out, "model.safetensors")))

    def test_plain_state_dict_loads_weights_only(self):
        # no args: torch.load(weights_only=True) alone reads it
        sd = clip_ref.make_state_dict("clip", "tiny", seed=1)
        ck = os.path.join(TMP, "plain.pt")
        clip_ref.save_checkpoint(ck, sd, args=False, prefix="")
        obj = torch.load(ck, weights_only=True)
        self.assertIn("state_dict", obj)
        self.assertEqual(run_convert(ck, os.path.join(TMP, "plain"), "--vision-heads", 4, "--text-heads", 4)
                         .returncode, 0)

    def test_code_in_the_pickle_is_refused_and_not_run(self):
        marker = os.path.join(TMP, "ran")

        class Evil:
            def __reduce__(self):
                return (os.system, ("touch " + marker,))

        sd = clip_ref.make_state_dict("diffclip", "tiny")
        ck = os.path.join(TMP, "evil.pt")
        torch.save({"state_dict": {k: torch.from_numpy(v) for k, v in sd.items()}, "x": Evil()}, ck)
        r = run_convert(ck, os.path.join(TMP, "evil"), "--vision-heads", 4, "--text-heads", 4)
        self.assertEqual(r.returncode, 1)
        self.assertIn("refused global", r.stderr)
        self.assertIn("system", r.stderr)
        self.assertFalse(os.path.exists(marker))
        self.assertFalse(os.path.exists(os.path.join(TMP, "evil", "model.safetensors")))

    def test_refusals_name_the_problem(self):
        sd = clip_ref.make_state_dict("diffclip", "tiny")
        cases = []
        bad = dict(sd)
        bad["visual.blocks.0.attn.extra"] = np.zeros(3, np.float32)
        cases.append((bad, ["--vision-heads", 4, "--text-heads", 4], "visual.blocks.0.attn.extra"))
        bad = dict(sd)
        del bad["visual.blocks.1.attn.diff_norm.weight"]
        cases.append((bad, ["--vision-heads", 4, "--text-heads", 4], "missing tensor visual.blocks.1.attn.diff_norm"))
        bad = dict(sd)
        bad["text_projection"] = np.zeros((5, 24), np.float32)
        cases.append((bad, ["--vision-heads", 4, "--text-heads", 4], "text_projection has shape"))
        cases.append((sd, ["--vision-heads", 2, "--text-heads", 4], "--vision-heads"))
        cases.append((sd, ["--vision-heads", 4, "--text-heads", 3], "text"))
        for i, (d, flags, msg) in enumerate(cases):
            ck = os.path.join(TMP, "bad%d.pt" % i)
            clip_ref.save_checkpoint(ck, d)
            r = run_convert(ck, os.path.join(TMP, "bad%d" % i), *flags)
            self.assertEqual(r.returncode, 1, (i, r.stderr))
            self.assertIn(msg, r.stderr, i)
        ck = os.path.join(TMP, "junk.pt")
        with open(ck, "wb") as f:
            f.write(b"not a checkpoint")
        self.assertEqual(run_convert(ck, os.path.join(TMP, "junk")).returncode, 1)

    def test_command_line(self):
        sd = clip_ref.make_state_dict("clip", "tiny", seed=2)
        ck = os.path.join(TMP, "cli.pt")
        clip_ref.save_checkpoint(ck, sd)
        r = subprocess.run(["/usr/bin/python3", CONVERT, ck, os.path.join(TMP, "cli"), "--vision-heads", "4",
                            "--text-heads", "4", "--preprocess", "clip"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(TMP, "cli", "config.json")) as f:
            self.assertEqual(json.load(f)["preprocess"]["interpolation"], "bicubic")
        r = subprocess.run(["/usr/bin/python3", CONVERT, ck], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)

    def test_existing_output_needs_force(self):
        sd, out = self.convert("clip", "force")
        ck = os.path.join(TMP, "force.pt")
        r = run_convert(ck, out, "--vision-heads", 4, "--text-heads", 4)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--force", r.stderr)
        self.assertEqual(run_convert(ck, out, "--vision-heads", 4, "--text-heads", 4, "--force").returncode, 0)


# ---------------------------------------------------------------------------
# the C towers against the float64 reference
# ---------------------------------------------------------------------------

BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
EXE = None


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "--eval", "print-%: ; @echo $($*)",
                        "print-" + name], capture_output=True, text=True, check=True)
    return r.stdout.split()


def harness():
    global EXE
    if EXE:
        return EXE
    lib = os.path.join(BUILD, "libdifflens.a")
    subprocess.run(["make", "-s", "-C", ROOT, lib], check=True)
    exe = os.path.join(TMP, "clip_harness")
    cmd = (make_var("CC") + make_var("CPPFLAGS") + make_var("CFLAGS") + [os.path.join(HERE, "clip_harness.c"),
           lib, "-o", exe] + make_var("LDFLAGS") + make_var("LDLIBS"))
    cmd = [a if not a.startswith("-I") or os.path.isabs(a[2:]) else "-I" + os.path.join(ROOT, a[2:]) for a in cmd]
    subprocess.run(cmd, check=True)
    EXE = exe
    return exe


def read_out(path, cfg, tower, T):
    c = cfg[tower + "_config"]
    D, E, L = c["width"], cfg["embed_dim"], c["layers"]
    diff = cfg["model_type"] == "diffclip"
    h = c["heads"] // 2 if diff else c["heads"]
    a = np.fromfile(path, dtype="<f4")
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        v = a[at:at + n].reshape(shape)
        at += n
        return v
    out = {"feature": take(D), "embed": take(E), "layers": [], "hidden": []}
    for _ in range(L):
        m = {"map1": take(h, T, T)}
        if diff:
            m["map2"], m["diff"], m["lambda"] = take(h, T, T), take(h, T, T), float(take(1)[0])
        out["layers"].append(m)
        out["hidden"].append(take(T, D))
    assert at == a.size, (at, a.size)
    return out


def close(test, got, want, tol, what):
    """max abs error within tol × the reference's scale (its largest magnitude, at least 1e-3)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    test.assertEqual(got.shape, want.shape, what)
    scale = max(float(np.abs(want).max()), 1e-3)
    err = float(np.abs(got - want).max())
    test.assertLessEqual(err, tol * scale, "%s: max error %.3g, scale %.3g" % (what, err, scale))


class Towers(unittest.TestCase):
    """Both towers of both model types, random weights under the published layout, against
    tests/ref/clip_ref.py: features and embeddings within 1e-4 of their scale, every map
    (map1, map2, diff) within 1e-5, λ within 1e-6."""

    @classmethod
    def setUpClass(cls):
        if hasattr(cls, "models"):
            return
        cls.models = {}
        for kind in ("diffclip", "clip"):
            for ls in (False, True) if kind == "diffclip" else (False,):
                sd = clip_ref.make_state_dict(kind, "tiny", seed=11, layer_scale=ls)
                ck = os.path.join(TMP, "tower-%s-%d.pt" % (kind, ls))
                clip_ref.save_checkpoint(ck, sd)
                out = os.path.join(TMP, "tower-%s-%d" % (kind, ls))
                r = run_convert(ck, out, "--vision-heads", 4, "--text-heads", 4)
                assert r.returncode == 0, r.stderr
                with open(os.path.join(out, "config.json")) as f:
                    cls.models[(kind, ls)] = (sd, json.load(f), out)

    @classmethod
    def models_for_images(cls):
        if not hasattr(cls, "models"):
            cls.setUpClass()
        return cls.models[("diffclip", False)]

    def check(self, got, want, diff, what):
        close(self, got["feature"], want["feature"], 1e-4, what + " feature")
        close(self, got["embed"], want["embed"], 1e-4, what + " embed")
        for l, (g, w) in enumerate(zip(got["layers"], want["layers"])):
            for k in ("map1", "map2", "diff") if diff else ("map1",):
                self.assertLessEqual(float(np.abs(g[k] - w[k]).max()), 1e-5, "%s layer %d %s" % (what, l, k))
            if diff:
                self.assertAlmostEqual(g["lambda"], w["lambda"], delta=1e-6)
            close(self, got["hidden"][l], want["hidden"][l], 1e-4, "%s layer %d hidden" % (what, l))

    def test_image_tower(self):
        rng = np.random.default_rng(5)
        for (kind, ls), (sd, cfg, path) in self.models.items():
            S = cfg["vision_config"]["image_size"]
            px = rng.normal(0, 1, (3, S, S)).astype(np.float32)
            f = os.path.join(TMP, "px.f32")
            px.tofile(f)
            out = os.path.join(TMP, "img.out")
            r = subprocess.run([harness(), "image", path, f, out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            T = 1 + (S // cfg["vision_config"]["patch_size"]) ** 2
            self.check(read_out(out, cfg, "vision", T), clip_ref.image_tower(sd, cfg, px), kind == "diffclip",
                       "%s%s image" % (kind, " +LayerScale" if ls else ""))

    def test_text_tower(self):
        for (kind, ls), (sd, cfg, path) in self.models.items():
            V = cfg["text_config"]["vocab_size"]
            # a caption: <start> (V − 2) words, <end> (V − 1, the largest id), then padding
            # (0) that the causal tower cannot see from the end token's row
            for ids in ([V - 2, 5, 17, 3, 40, V - 1], [V - 2, V - 1], [V - 2, 9, 9, V - 1, 0, 0]):
                out = os.path.join(TMP, "txt.out")
                r = subprocess.run([harness(), "text", path, out] + [str(i) for i in ids], capture_output=True,
                                   text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.check(read_out(out, cfg, "text", len(ids)), clip_ref.text_tower(sd, cfg, ids),
                           kind == "diffclip", "%s text %s" % (kind, ids))

    def test_refusals(self):
        sd, cfg, path = self.models[("diffclip", False)]
        out = os.path.join(TMP, "bad.out")
        V, C = cfg["text_config"]["vocab_size"], cfg["text_config"]["context_length"]
        for ids, msg in (([V], "outside the vocabulary"), ([1] * (C + 1), "the text tower takes 1 to")):
            r = subprocess.run([harness(), "text", path, out] + [str(i) for i in ids], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn(msg, r.stderr)
        # a tensor the config does not describe, a wrong config key, a shape that disagrees
        bad = os.path.join(TMP, "bad-model")
        os.makedirs(bad, exist_ok=True)
        with open(os.path.join(path, "model.safetensors"), "rb") as f:
            blob = f.read()
        plain = {k: {a: b for a, b in v.items() if a != "lambda_init"} if k.endswith("_config") else v
                 for k, v in cfg.items()}
        cases = [(dict(plain, model_type="clip"), "missing tensor visual.blocks.0.attn.qkv.weight"),
                 (dict(cfg, model_type="clip"), "lambda_init is for diffclip only"),
                 (dict(cfg, extra=1), "unknown key config.extra"),
                 (dict(cfg, text_config=dict(cfg["text_config"], heads=1)), "must be even"),
                 (dict(cfg, vision_config=dict(cfg["vision_config"], layers=1)),
                  "tensor visual.blocks.1.attn.diff_norm.weight is not part of"),
                 (dict(cfg, embed_dim=7), "image_projection has shape")]
        for c, msg in cases:
            with open(os.path.join(bad, "config.json"), "w") as f:
                json.dump(c, f)
            with open(os.path.join(bad, "model.safetensors"), "wb") as f:
                f.write(blob)
            r = subprocess.run([harness(), "text", bad, out, "1"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, msg)
            self.assertIn(msg, r.stderr)


# ---------------------------------------------------------------------------
# images: decoding against PIL, resampling against PIL, preprocessing against PIL + numpy
# ---------------------------------------------------------------------------

def test_pictures():
    """PIL-written test images: name -> path (smooth gradients plus noise, odd sizes)."""
    from PIL import Image
    rng = np.random.default_rng(8)
    h, w = 37, 50
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx * 5, yy * 6, (xx + yy) * 3], -1) + rng.integers(0, 40, (h, w, 3))
    rgb = np.clip(base, 0, 255).astype(np.uint8)
    out = {}

    def save(name, im, **kw):
        p = os.path.join(TMP, name)
        im.save(p, **kw)
        out[name] = p
    save("rgb.png", Image.fromarray(rgb))
    save("rgba.png", Image.fromarray(np.dstack([rgb, rng.integers(0, 256, (h, w, 1)).astype(np.uint8)])))
    save("grey.png", Image.fromarray(rgb[..., 0]))
    save("palette.png", Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=20))
    save("q85.jpg", Image.fromarray(rgb), quality=85)
    save("q95-444.jpg", Image.fromarray(rgb), quality=95, subsampling=0)
    save("progressive.jpg", Image.fromarray(rgb), quality=80, progressive=True)
    save("grey.jpg", Image.fromarray(rgb[..., 1]), quality=90)
    save("tall.png", Image.fromarray(np.ascontiguousarray(rgb.transpose(1, 0, 2))))
    # 82 × 64 → 41 × 32: the crop offset (41 − 32)/2 = 4.5 rounds to even (4), as Python's round
    big = np.clip(np.kron(base, np.ones((2, 2, 1)))[:64, :82], 0, 255).astype(np.uint8)
    save("wide-tie.png", Image.fromarray(big))
    save("tall-tie.jpg", Image.fromarray(np.ascontiguousarray(big.transpose(1, 0, 2))), quality=90)
    return out


def pil_preprocess(path, pre):
    """torchvision's Resize(int) + CenterCrop + ToTensor + Normalize on a PIL image, in numpy."""
    from PIL import Image
    im = Image.open(path).convert("RGB")
    w, h = im.size
    short, long_ = (w, h) if w <= h else (h, w)
    nl = int(pre["resize"] * long_ / short)
    nw, nh = (pre["resize"], nl) if w <= h else (nl, pre["resize"])
    f = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}[pre["interpolation"]]
    im = im.resize((nw, nh), f)
    c = pre["crop"]
    top, left = int(round((nh - c) / 2.0)), int(round((nw - c) / 2.0))
    a = np.asarray(im, dtype=np.uint8)[top:top + c, left:left + c].astype(np.float32) / np.float32(255)
    a = (a - np.asarray(pre["mean"], np.float32)) / np.asarray(pre["std"], np.float32)
    return a.transpose(2, 0, 1), (nw, nh, left, top)


class Images(unittest.TestCase):
    PICS = None

    @classmethod
    def pictures(cls):
        if cls.PICS is None:
            cls.PICS = test_pictures()
        return cls.PICS

    @classmethod
    def setUpClass(cls):
        cls.pics = cls.pictures()

    def test_decode_matches_pil(self):
        from PIL import Image
        for name, path in self.pics.items():
            out = os.path.join(TMP, "dec.rgb")
            r = subprocess.run([harness(), "decode", path, out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            want = np.asarray(Image.open(path).convert("RGB"))
            self.assertEqual(r.stdout.split(), [str(want.shape[1]), str(want.shape[0])])
            got = np.fromfile(out, np.uint8).reshape(want.shape)
            self.assertEqual(int(np.abs(got.astype(int) - want).max()), 0, name)  # the same libjpeg-turbo

    def test_resize_matches_pil_bit_for_bit(self):
        from PIL import Image
        path = self.pics["rgb.png"]
        im = Image.open(path).convert("RGB")
        for filt, code in (("bilinear", Image.BILINEAR), ("bicubic", Image.BICUBIC)):
            for w, h in ((32, 43), (24, 7), (50, 20), (97, 81), (13, 37), (1, 1), (200, 3)):
                out = os.path.join(TMP, "rs.rgb")
                r = subprocess.run([harness(), "resize", path, str(w), str(h), filt, out], capture_output=True,
                                   text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                want = np.asarray(im.resize((w, h), code))
                got = np.fromfile(out, np.uint8).reshape(want.shape)
                self.assertEqual(int(np.abs(got.astype(int) - want).max()), 0, (filt, w, h))

    def test_preprocess_matches_torchvision_steps(self):
        sd, cfg, path = Towers.models_for_images()
        for interp in ("bilinear", "bicubic"):
            mdir = os.path.join(TMP, "pre-" + interp)
            os.makedirs(mdir, exist_ok=True)
            c = dict(cfg, preprocess=dict(cfg["preprocess"], interpolation=interp))
            with open(os.path.join(mdir, "config.json"), "w") as f:
                json.dump(c, f)
            if not os.path.exists(os.path.join(mdir, "model.safetensors")):
                os.symlink(os.path.join(path, "model.safetensors"), os.path.join(mdir, "model.safetensors"))
            for name in ("rgb.png", "q85.jpg", "tall.png", "grey.jpg", "wide-tie.png", "tall-tie.jpg"):
                out = os.path.join(TMP, "pre.f32")
                r = subprocess.run([harness(), "preprocess", mdir, self.pics[name], out], capture_output=True,
                                   text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                want, geo = pil_preprocess(self.pics[name], c["preprocess"])
                got = np.fromfile(out, "<f4").reshape(want.shape)
                self.assertLessEqual(float(np.abs(got - want).max()), 1e-6, (interp, name))
                self.assertEqual([int(v) for v in r.stdout.split()[:4]], list(geo), (interp, name))

    def test_bad_images(self):
        junk = os.path.join(TMP, "junk.png")
        with open(junk, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
        trunc = os.path.join(TMP, "trunc.jpg")
        with open(self.pics["q85.jpg"], "rb") as f:
            data = f.read()
        with open(trunc, "wb") as f:
            f.write(data[:len(data) // 3])
        text = os.path.join(TMP, "text.png")
        with open(text, "w") as f:
            f.write("hello")
        for p, msg in ((junk, "corrupt PNG"), (text, "neither a PNG nor a JPEG"),
                       (os.path.join(TMP, "absent.png"), "cannot open")):
            r = subprocess.run([harness(), "decode", p, os.path.join(TMP, "x")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, p)
            self.assertIn(msg, r.stderr)
        # a truncated JPEG decodes as libjpeg does (the rest grey), like PIL with LOAD_TRUNCATED_IMAGES: no crash
        r = subprocess.run([harness(), "decode", trunc, os.path.join(TMP, "x")], capture_output=True, text=True)
        self.assertIn(r.returncode, (0, 1))


# ---------------------------------------------------------------------------
# probe on image prompts
# ---------------------------------------------------------------------------

PROBE = os.path.join(os.environ.get("BIN", os.path.join(ROOT, "bin")), "probe")


def expected_segments(cfg, geo, box, size):
    """1 cls, 2 object (patch centre inside the box mapped into the model's input), 0 background."""
    c = cfg["vision_config"]
    P, G = c["patch_size"], c["image_size"] // c["patch_size"]
    rw, rh, left, top = geo
    sx, sy = rw / size[0], rh / size[1]
    seg = [1]
    for p in range(G * G):
        cx, cy = (p % G + 0.5) * P, (p // G + 0.5) * P
        inside = (box[0] * sx - left <= cx < box[2] * sx - left) and (box[1] * sy - top <= cy < box[3] * sy - top)
        seg.append(2 if inside else 0)
    return np.array(seg)


class Probe(unittest.TestCase):
    """bin/probe on image prompts: every dataset against the float64 reference (maps,
    shares from the reference maps and independently computed segments, embeddings,
    scores, outliers), the schema header names everything, --maps stores every row."""

    @classmethod
    def setUpClass(cls):
        from PIL import Image
        Towers.setUpClass()
        cls.pics = test_pictures()
        rng = np.random.default_rng(4)
        a = np.clip(rng.normal(90, 30, (48, 64, 3)), 0, 255).astype(np.uint8)
        a[10:30, 20:40] = (250, 200, 30)
        cls.img = os.path.join(TMP, "object.jpg")
        Image.fromarray(a).save(cls.img, quality=92)
        cls.prompts = os.path.join(TMP, "images.jsonl")
        V = clip_ref.SIZES["tiny"]["vocab"]
        lines = [{"id": "obj", "image": "object.jpg", "box": [20, 10, 40, 30],
                  "caption_tokens": [[V - 2, 5, V - 1], [V - 2, 7, 8, V - 1], [V - 2, V - 1]], "rows": [0, 6]},
                 {"id": "wide", "image": os.path.basename(cls.pics["wide-tie.png"]), "box": [0, 0, 41, 64]}]
        with open(cls.prompts, "w") as f:
            f.write("\n".join(json.dumps(x) for x in lines) + "\n\n")

    def probe(self, kind, *extra):  # noqa: also called by Overlay on an instance
        sd, cfg, path = Towers.models[(kind, False)]
        out = os.path.join(TMP, "probe-%s%s.h5" % (kind, "-maps" if extra else ""))
        r = subprocess.run([PROBE, "--model", path, "--prompts", self.prompts, "--out", out, "--force"] + list(extra),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return sd, cfg, out

    def test_dump_against_reference(self):
        import h5py
        for kind in ("diffclip", "clip"):
            sd, cfg, out = self.probe(kind)
            diff = kind == "diffclip"
            with h5py.File(out, "r") as f:
                self.assertEqual(f.attrs["model_type"], kind)
                smp = f["samples/000000"]
                size = [int(x) for x in smp["image/size"][:]]
                self.assertEqual(size, [64, 48])
                geo = [int(x) for x in smp["image/geometry"][:4]]
                px, want_geo = pil_preprocess(self.img, cfg["preprocess"])
                self.assertEqual(geo, list(want_geo))
                ref = clip_ref.image_tower(sd, cfg, px)
                close(self, smp["embed/image"][:], ref["embed"], 1e-4, kind + " image embed")
                rows = [0, 6]
                self.assertEqual(list(smp["vision/attn/rows"][:]), rows)
                seg = expected_segments(cfg, geo, [20, 10, 40, 30], size)
                np.testing.assert_array_equal(smp["vision/segments"][:], seg)
                self.assertGreater(int((seg == 2).sum()), 0)
                names = ("map1", "map2", "diff") if diff else ("map1",)
                slot = {1: 0, 2: 1, 0: 2}
                for m, name in enumerate(names):
                    got = smp["vision/attn/" + name][:]
                    for l, lay in enumerate(ref["layers"]):
                        want = lay[name][:, rows, :]
                        self.assertLessEqual(float(np.abs(got[l] - want).max()), 1e-5, (kind, name, l))
                        for h in range(want.shape[0]):
                            sh = np.zeros(3)
                            for r in range(len(rows)):
                                for s in (0, 1, 2):
                                    sh[slot[s]] += want[h, r, seg == s].sum() / want[h, r].sum()
                            np.testing.assert_allclose(smp["vision/noise/shares"][m, l, h], sh / len(rows),
                                                       atol=2e-5)
                            sa = np.zeros(3)
                            for r in range(len(rows)):
                                for s in (0, 1, 2):
                                    sa[slot[s]] += np.abs(want[h, r, seg == s]).sum() / np.abs(want[h, r]).sum()
                            np.testing.assert_allclose(smp["vision/noise/shares_abs"][m, l, h], sa / len(rows),
                                                       atol=2e-5)
                # outliers: the top values and their positions against the reference hidden states
                K = int(f.attrs["topk"])
                for l, hid in enumerate(ref["hidden"]):
                    a = np.abs(hid).reshape(-1)
                    order = np.argsort(-a, kind="stable")[:K]
                    np.testing.assert_allclose(smp["vision/outliers/hidden/top"][l], a[order], rtol=1e-4, atol=1e-4)
                    idx = smp["vision/outliers/hidden/top_index"][l]
                    D = hid.shape[1]
                    G = cfg["vision_config"]["image_size"] // cfg["vision_config"]["patch_size"]
                    t0, c0 = divmod(int(order[0]), D)
                    self.assertEqual(list(idx[0]), [t0, c0, (t0 - 1) // G if t0 else -1, (t0 - 1) % G if t0 else -1])
                    np.testing.assert_allclose(smp["vision/outliers/token_norm"][l], np.linalg.norm(hid, axis=1),
                                               rtol=1e-4)
                # captions: embeddings and zero-shot scores
                caps = smp["captions/tokens"][:]
                texts = []
                for row in caps:
                    ids = [int(x) for x in row if x >= 0]
                    texts.append(clip_ref.text_tower(sd, cfg, ids)["embed"])
                close(self, smp["embed/text"][:], np.array(texts), 1e-4, kind + " text embeds")
                sim, prob = clip_ref.scores(sd, ref["embed"], texts)
                close(self, smp["scores/similarity"][:], sim, 1e-4, kind + " similarity")
                np.testing.assert_allclose(smp["scores/zero_shot"][:], prob, atol=1e-5)
                if diff:
                    lam = [lay["lambda"] for lay in ref["layers"]]
                    np.testing.assert_allclose(f["model/lambda"][:], lam, atol=1e-6)
                # the second sample: no captions, the default row (the class token)
                s1 = f["samples/000001"]
                self.assertEqual(list(s1["vision/attn/rows"][:]), [0])
                self.assertNotIn("scores", s1)
                # image/input is the model's input before normalisation
                want_rgb = np.round((px.transpose(1, 2, 0) * np.array(cfg["preprocess"]["std"]) +
                                     np.array(cfg["preprocess"]["mean"])) * 255)
                self.assertLessEqual(float(np.abs(smp["image/input"][:].astype(float) - want_rgb).max()), 0.01)

    def test_text_tower_maps(self):
        """text/NNN/: each caption's tokens and the text tower's causal maps (every layer,
        head and row) against the float64 reference within 1e-5, the scales 0 … n − 1."""
        import h5py
        for kind in ("diffclip", "clip"):
            sd, cfg, out = self.probe(kind)
            diff = kind == "diffclip"
            names = ("map1", "map2", "diff") if diff else ("map1",)
            with h5py.File(out, "r") as f:
                smp = f["samples/000000"]
                caps = smp["captions/tokens"][:]
                self.assertEqual(sorted(smp["text"].keys()), ["%03d" % i for i in range(len(caps))])
                for i, row in enumerate(caps):
                    ids = [int(x) for x in row if x >= 0]
                    g = smp["text/%03d" % i]
                    self.assertEqual(list(g["tokens"][:]), ids)
                    ref = clip_ref.text_tower(sd, cfg, ids)
                    C = len(ids)
                    for m in names:
                        got = g["attn/" + m][:]
                        self.assertEqual(got.shape, (len(ref["layers"]), ref["layers"][0][m].shape[0], C, C))
                        for l, lay in enumerate(ref["layers"]):
                            self.assertLessEqual(float(np.abs(got[l] - lay[m]).max()), 1e-5, (kind, i, m, l))
                        # causal: the future is 0
                        self.assertEqual(float(np.abs(np.triu(got, 1)).max()), 0.0)
                    for sc, n in (("layers", got.shape[0]), ("heads", got.shape[1]), ("rows", C), ("keys", C)):
                        self.assertEqual(list(g["attn/" + sc][:]), list(range(n)), sc)
                    if diff:
                        lam = [lay["lambda"] for lay in ref["layers"]]
                        np.testing.assert_allclose(f["model/text_lambda"][:], lam, atol=1e-6)
                self.assertNotIn("text", f["samples/000001"])  # no captions, no text maps

    def test_every_dataset_is_in_the_schema(self):
        import h5py
        sys.path.insert(0, HERE)
        import test_dump_schema
        entries, _ = test_dump_schema.header_schema()
        for kind in ("diffclip", "clip"):
            _, _, out = self.probe(kind, "--maps", "all")
            with h5py.File(out, "r") as f:
                seen = []
                f.visititems(lambda n, o: seen.append(n) if isinstance(o, h5py.Dataset) else None)
                for n in seen:
                    rel = n.split("/", 2)[2] if n.startswith("samples/") else "/" + n
                    rel = re.sub(r"^text/\d{3,}/", "text/NNN/", rel)  # a caption's group
                    e = entries.get(("dataset", rel, None))
                    self.assertIsNotNone(e, "%s is not in dump_schema.h" % rel)
                    self.assertEqual(test_dump_schema.dtype_name(f[n].dtype), e["dtype"], rel)
                    self.assertEqual(len(f[n].shape), len(e["dims"].split(",")) if e["dims"] else 0, rel)
                T = 1 + (clip_ref.SIZES["tiny"]["image"] // clip_ref.SIZES["tiny"]["patch"]) ** 2
                self.assertEqual(f["samples/000000/vision/attn/map1"].shape[2], T)  # --maps: every row

    def test_bad_image_prompts(self):
        sd, cfg, path = Towers.models[("clip", False)]
        cases = [({"image": "object.jpg", "box": [1, 2, 3]}, "\"box\" must be"),
                 ({"image": "object.jpg", "captoins": []}, "unknown key \"captoins\""),
                 ({"box": [0, 0, 1, 1]}, "\"image\" (a path) is required"),
                 ({"image": "absent.jpg"}, "cannot open"),
                 ({"image": "object.jpg", "captions": ["a cat"]}, "need a tokenizer"),
                 ({"image": "object.jpg", "caption_tokens": [[500]]}, "not an id"),
                 ({"image": "object.jpg", "rows": [17]}, "rows[0] is not a token")]
        for i, (line, msg) in enumerate(cases):
            pr = os.path.join(TMP, "bad%d.jsonl" % i)
            with open(pr, "w") as f:
                f.write(json.dumps(line) + "\n")
            out = os.path.join(TMP, "bad%d.h5" % i)
            r = subprocess.run([PROBE, "--model", path, "--prompts", pr, "--out", out], capture_output=True, text=True)
            # a missing --tokenizer is a usage error (2), the rest runtime errors (1)
            self.assertEqual(r.returncode, 2 if "tokenizer" in msg else 1, (line, r.stderr))
            self.assertIn(msg, r.stderr)
            self.assertIn("bad%d.jsonl:1" % i, r.stderr)
            self.assertFalse(os.path.exists(out))


# ---------------------------------------------------------------------------
# attnmap overlays
# ---------------------------------------------------------------------------

ATTNMAP = os.path.join(os.environ.get("BIN", os.path.join(ROOT, "bin")), "attnmap")


class Overlay(unittest.TestCase):
    """attnmap on image dumps: the panels, the box where the object is, the hottest patch
    where the dump says it is, one scale for CLIP vs DiffCLIP, refusals."""

    @classmethod
    def setUpClass(cls):
        Probe.setUpClass()
        cls.dumps = {}
        for kind in ("diffclip", "clip"):
            _, cfg, out = Probe.probe(Probe("test_dump_against_reference"), kind)
            cls.dumps[kind] = out

    def draw(self, *args, ok=True):
        out = os.path.join(TMP, "fig.png")
        r = subprocess.run([ATTNMAP] + list(args) + ["-o", out, "--force"], capture_output=True, text=True)
        if ok:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r, out

    def test_panels_box_and_hot_patch(self):
        import h5py
        from PIL import Image
        from matplotlib import cm
        size = 160
        r, out = self.draw(self.dumps["clip"], "--size", str(size), "--layer", "1", "--head", "0")
        im = np.asarray(Image.open(out).convert("RGB")).astype(int)
        x0, y0 = 16, 16 + 2 * 10 + 8  # the first panel's corner (pad, pad + title)
        with h5py.File(self.dumps["clip"], "r") as f:
            s = f["samples/000000"]
            grid = s["vision/attn/map1"][1, 0, 0, 1:]
            geo = s["image/geometry"][:]
            rgb = s["image/input"][:].astype(float)
        G, S = int(geo[6]), int(geo[4])
        # the box's left edge: x = 20 · resized_w / 64 − left, in panel pixels
        bx = x0 + (20 * geo[0] / 64 - geo[2]) * size / S
        by = y0 + (10 * geo[1] / 48 - geo[3]) * size / S
        by2 = y0 + (30 * geo[1] / 48 - geo[3]) * size / S
        col = im[int((by + by2) / 2), int(round(bx)) - 1:int(round(bx)) + 2]
        self.assertTrue(any(c[0] > 200 and c[0] - c[1] > 80 for c in col) or any((c > 215).all() for c in col), col)
        # the hottest and the coldest patch: their centres show their viridis colour on the
        # scale [0, max] blended over the image (matplotlib's table: an independent colormap)
        lo, hi = float(grid.min()), float(grid.max())
        for idx in (int(np.argmax(grid)), int(np.argmin(grid))):
            t = grid[idx] / hi  # the scale: [0, the largest entry]
            gy, gx = divmod(idx, G)
            px, py = int(x0 + (gx + 0.5) * size / G), int(y0 + (gy + 0.5) * size / G)
            want_map = np.array(cm.viridis(t)[:3]) * 255
            img = rgb[(py - y0) * S // size, (px - x0) * S // size]  # the input pixel under the panel's
            want = 0.4 * img + 0.6 * want_map
            self.assertLessEqual(float(np.abs(im[py, px] - want).max()), 6, (idx, im[py, px], want))
        self.assertLess(lo, hi)

    def test_all_maps_and_vs_on_one_scale(self):
        r, _ = self.draw(self.dumps["diffclip"], "--map", "all", "--size", "96")
        self.assertIn("3 tiles", r.stderr + r.stdout)
        r, out = self.draw(self.dumps["diffclip"], "--vs", self.dumps["clip"], "--size", "96")
        self.assertIn("2 tiles", r.stderr + r.stdout)
        for ext in ("svg", "pdf"):
            o = os.path.join(TMP, "fig." + ext)
            r2 = subprocess.run([ATTNMAP, self.dumps["diffclip"], "--vs", self.dumps["clip"], "-o", o, "--force"],
                                capture_output=True, text=True)
            self.assertEqual(r2.returncode, 0, r2.stderr)
            self.assertGreater(os.path.getsize(o), 1000)

    def test_caption_text_map(self):
        """--caption N draws the caption's text-tower map as a text map: causal (the future
        hatched), its cells coloured by the reference's values (every cell above t saturates
        under --vmax t: as many as the float64 reference has), λ of the text tower."""
        from PIL import Image
        sd, cfg, _ = Towers.models[("diffclip", False)]
        V = clip_ref.SIZES["tiny"]["vocab"]
        ids = [V - 2, 7, 8, V - 1]  # caption 1 of the "obj" prompt
        ref = clip_ref.text_tower(sd, cfg, ids)["layers"][1]["map1"][0]
        C = len(ids)
        causal = np.tril(np.ones((C, C), bool))
        t = float(np.median(ref[causal]))
        r, out = self.draw(self.dumps["diffclip"], "--caption", "1", "--layer", "1", "--head", "0", "--map", "map1",
                           "--size", "400", "--vmin", "0", "--vmax", repr(t))
        px = np.asarray(Image.open(out).convert("RGB")).astype(int)
        cell = (400 // C) ** 2
        top = int(np.all(px == (253, 231, 37), axis=2).sum())
        self.assertEqual(round(top / cell), int((ref[causal] > t).sum()), top / cell)
        grey = ((px[..., 0] == px[..., 1]) & (px[..., 1] == px[..., 2]) & (px[..., 0] >= 160) & (px[..., 0] <= 200))
        self.assertGreater(int(grey.sum()), 0.9 * cell * C * (C - 1) / 2)  # the masked future
        r, out = self.draw(self.dumps["diffclip"], "--caption", "0", "--map", "all")
        self.assertIn("3 tiles", r.stderr + r.stdout)
        r, out = self.draw(self.dumps["diffclip"], "--caption", "0", "--vs", self.dumps["clip"])
        self.assertIn("2 tiles", r.stderr + r.stdout)
        for args, msg in ((["--caption", "3"], "has no caption 3 with text-tower maps (captions 0..2)"),
                          (["--sample", "wide", "--caption", "0"], "has no caption 0 with text-tower maps (none)"),
                          (["--caption", "-1"], "--caption")):
            r, _ = self.draw(self.dumps["diffclip"], *args, ok=False)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(msg, r.stderr)

    def test_refusals(self):
        for args, msg in (([self.dumps["clip"], "--map", "map2"], "map1 only"),
                          ([self.dumps["diffclip"], "--layer", "9"], "layer 9 is not in the dump"),
                          ([self.dumps["diffclip"], "--head", "all"], "one layer and one head"),
                          ([self.dumps["diffclip"], "--rows", "5:6"], "not among the dump's stored rows")):
            r, out = self.draw(*args, ok=False)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(msg, r.stderr)


# ---------------------------------------------------------------------------
# the CLIP tokenizer written by the converter
# ---------------------------------------------------------------------------

class Tokenizer(unittest.TestCase):
    """convert_diffclip --bpe: tokenizer.json from a merges file in CLIP's format, read by
    difflens' tokenizer (bin/tokenize) against tests/ref/clip_bpe.py (CLIP's algorithm,
    written independently); probe's text captions through it."""

    TEXTS = ["a photo of a cat", "A Photo of   TWO cats!", "the cat's 3 naïve dogs, isn't it?", "cat<|endoftext|>dog",
             "東京 2024年", "x^2 + y_1 = 42.5 %", "   a dog   ", "we're catting'n'dogging", "photo photograph phot"]

    @classmethod
    def setUpClass(cls):
        import gzip
        import clip_bpe
        words = ("a photo of a cat the dog cats dogs photograph photos of the cat and the dog isn't it "
                 "naïve we're catting dogging 2024 tokyo").split() * 3
        cls.merges = clip_bpe.learn_merges(words, 60)
        cls.bpe = os.path.join(TMP, "bpe_tiny.txt.gz")
        with gzip.open(cls.bpe, "wt", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in cls.merges) + "\n")
        clip_ref.SIZES["bpe"] = dict(clip_ref.SIZES["tiny"], vocab=512 + len(cls.merges) + 2, ctx=24)
        sd = clip_ref.make_state_dict("diffclip", "bpe", seed=6)
        cls.sd, ck = sd, os.path.join(TMP, "bpe.pt")
        clip_ref.save_checkpoint(ck, sd)
        cls.model = os.path.join(TMP, "bpe-model")
        r = run_convert(ck, cls.model, "--vision-heads", 4, "--text-heads", 4, "--bpe", cls.bpe)
        assert r.returncode == 0, r.stderr

    def test_tokenize_matches_clip(self):
        import clip_bpe
        tok = os.path.join(self.model, "tokenizer.json")
        r = subprocess.run([os.path.join(os.path.dirname(PROBE), "tokenize"), "--tokenizer", tok, "--json"],
                           input="\n".join(json.dumps(t) for t in self.TEXTS), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(x)["ids"] for x in r.stdout.splitlines()]
        self.assertEqual(len(got), len(self.TEXTS))
        for t, g in zip(self.TEXTS, got):
            self.assertEqual(g, clip_bpe.encode(self.merges, t), t)
        self.assertGreater(max(len(g) for g in got), 8)

    def test_probe_text_captions(self):
        import h5py
        import clip_bpe
        pr = os.path.join(TMP, "captions.jsonl")
        caps = ["a photo of a cat", "a photo of a dog"]
        with open(pr, "w") as f:
            f.write(json.dumps({"id": "t", "image": os.path.basename(Images.pictures()["rgb.png"]), "captions": caps})
                    + "\n")
        out = os.path.join(TMP, "captions.h5")
        r = subprocess.run([PROBE, "--model", self.model, "--prompts", pr, "--out", out, "--force"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.model, "config.json")) as f:
            cfg = json.load(f)
        with h5py.File(out, "r") as f:
            s = f["samples/000000"]
            self.assertEqual([x.decode() if isinstance(x, bytes) else x for x in s["captions/text"][:]], caps)
            for i, c in enumerate(caps):
                ids = [int(x) for x in s["captions/tokens"][i] if x >= 0]
                self.assertEqual(ids, clip_bpe.encode(self.merges, c))
                close(self, s["embed/text"][i], clip_ref.text_tower(self.sd, cfg, ids)["embed"], 1e-4, c)

    def test_vocab_must_match_the_text_tower(self):
        sd = clip_ref.make_state_dict("clip", "tiny", seed=1)
        ck = os.path.join(TMP, "bpe-bad.pt")
        clip_ref.save_checkpoint(ck, sd)
        r = run_convert(ck, os.path.join(TMP, "bpe-bad"), "--vision-heads", 4, "--text-heads", 4, "--bpe", self.bpe)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the text tower has 96", r.stderr)


if __name__ == "__main__":
    unittest.main()
