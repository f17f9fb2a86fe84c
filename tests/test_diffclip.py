#!/usr/bin/python3
"""test_diffclip.py — DiffCLIP and its CLIP baseline (docs/format.md "DiffCLIP and its CLIP
baseline"): scripts/convert_diffclip.py on training checkpoints made here with random
weights under the published layout (tests/ref/clip_ref.py), and both towers of the C
forward pass (model/clip.h, driven by tests/clip_harness.c) against the float64 reference.
"""
import io
import json
import os
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


if __name__ == "__main__":
    unittest.main()
