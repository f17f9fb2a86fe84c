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


if __name__ == "__main__":
    unittest.main()
