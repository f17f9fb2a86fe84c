#!/usr/bin/python3
"""The ViT / Diff-ViT trainer (lib/train/train_vit.c, `train --task shapes`) against
independent references:

- one step's loss and every parameter's gradient against torch autograd in float64 on a
  model written here from the published maths (timm's VisionTransformer: Conv2d patch
  embedding, class token, learned positions, pre-norm blocks with LayerNorm, full
  attention, exact-GELU MLP; DiffCLIP's DiffAttention: adjacent sub-head pairs, λ
  reparameterisation, RMSNorm sub-norm × (1 − λ_init); the cosine head of train_vit.h);
- the saved checkpoint through model/clip.c (tests/clip_harness.c) against the float64
  reference tests/ref/clip_ref.py, and the zero-shot scores of its text side against the
  trainer's own class probabilities;
- the shapes images: the object inside its box, brighter than the background there, and a
  sample PNG through model/image.c's preprocessing equal to the trainer's own input;
- `train --task shapes` end to end (a few steps, probe reads the model) and its usage errors.
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as Fn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import clip_ref  # noqa: E402
import test_diffclip as tdc  # noqa: E402  (harness building, safetensors reading, clip_harness output)

TMP = tempfile.mkdtemp(prefix="dfl-vit-train-")
atexit.register(shutil.rmtree, TMP, True)
atexit.register(shutil.rmtree, tdc.TMP, True)  # the one importing test_diffclip made
BIN = os.environ.get("BIN", os.path.join(ROOT, "bin"))
TRAIN, PROBE = os.path.join(BIN, "train"), os.path.join(BIN, "probe")
EXE = None
# the tiny config of the gradient checks: S P D L H F E B
SIZES = (16, 4, 16, 2, 4, 24, 8, 3)


def vit_harness():
    global EXE
    if EXE:
        return EXE
    lib = os.path.join(tdc.BUILD, "libdifflens.a")
    subprocess.run(["make", "-s", "-C", ROOT, lib], check=True)
    exe = os.path.join(TMP, "vit_harness")
    cmd = (tdc.make_var("CC") + tdc.make_var("CPPFLAGS") + tdc.make_var("CFLAGS") +
           [os.path.join(HERE, "vit_harness.c"), lib, "-o", exe] + tdc.make_var("LDFLAGS") + tdc.make_var("LDLIBS"))
    cmd = [a if not a.startswith("-I") or os.path.isabs(a[2:]) else "-I" + os.path.join(ROOT, a[2:]) for a in cmd]
    subprocess.run(cmd, check=True)
    EXE = exe
    return exe


def run_step(diff, seed):
    out = os.path.join(TMP, "step-%d-%d" % (diff, seed))
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([vit_harness(), "grad", str(diff)] + [str(s) for s in SIZES] + [str(seed), out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out, tdc.read_safetensors(os.path.join(out, "step.safetensors"))


# ---------------------------------------------------------------- the reference

def reference_loss(p, px, labels, diff, S, P, D, L, H, E, lambda_init=0.8):
    """float64 torch: the loss of train_vit.h's model from the published maths."""
    eps = 1e-5 if diff else 1e-6
    B = px.shape[0]
    x = Fn.conv2d(px, p["visual.patch_embed.proj.weight"], p["visual.patch_embed.proj.bias"], stride=P)
    x = x.flatten(2).transpose(1, 2)  # [B, N, D] (timm: flatten(2).transpose(1, 2))
    x = torch.cat([p["visual.cls_token"].expand(B, 1, D), x], 1) + p["visual.pos_embed"]
    T, d = x.shape[1], D // H
    for l in range(L):
        pre = "visual.blocks.%d." % l
        h = Fn.layer_norm(x, (D,), p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps)
        if diff:  # DiffAttention: q, k as H sub-heads, v as H/2 heads of 2d
            q = Fn.linear(h, p[pre + "attn.q_proj.weight"], p[pre + "attn.q_proj.bias"])
            k = Fn.linear(h, p[pre + "attn.k_proj.weight"], p[pre + "attn.k_proj.bias"])
            v = Fn.linear(h, p[pre + "attn.v_proj.weight"], p[pre + "attn.v_proj.bias"])
            q = q.view(B, T, H, d).transpose(1, 2)
            k = k.view(B, T, H, d).transpose(1, 2)
            v = v.view(B, T, H // 2, 2 * d).transpose(1, 2)
            a = torch.softmax(q @ k.transpose(-1, -2) * d ** -0.5, -1).view(B, H // 2, 2, T, T)
            lam = (torch.exp((p[pre + "attn.lambda_q1"] * p[pre + "attn.lambda_k1"]).sum()) -
                   torch.exp((p[pre + "attn.lambda_q2"] * p[pre + "attn.lambda_k2"]).sum()) + lambda_init)
            o = (a[:, :, 0] - lam * a[:, :, 1]) @ v  # [B, H/2, T, 2d]
            o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5) * p[pre + "attn.diff_norm.weight"]
            o = (o * (1 - lambda_init)).transpose(1, 2).reshape(B, T, D)
            o = Fn.linear(o, p[pre + "attn.out_proj.weight"], p[pre + "attn.out_proj.bias"])
        else:  # timm Attention: fused qkv, rows q | k | v
            qkv = Fn.linear(h, p[pre + "attn.qkv.weight"], p[pre + "attn.qkv.bias"])
            q, k, v = qkv.view(B, T, 3, H, d).permute(2, 0, 3, 1, 4)
            o = torch.softmax(q @ k.transpose(-1, -2) * d ** -0.5, -1) @ v
            o = Fn.linear(o.transpose(1, 2).reshape(B, T, D), p[pre + "attn.proj.weight"], p[pre + "attn.proj.bias"])
        x = x + o
        h = Fn.layer_norm(x, (D,), p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps)
        m = Fn.gelu(Fn.linear(h, p[pre + "mlp.fc1.weight"], p[pre + "mlp.fc1.bias"]))
        x = x + Fn.linear(m, p[pre + "mlp.fc2.weight"], p[pre + "mlp.fc2.bias"])
    f = Fn.layer_norm(x[:, 0], (D,), p["visual.norm.weight"], p["visual.norm.bias"], eps)
    e = f @ p["image_projection"]
    t = Fn.layer_norm(p["class_vectors"], (E,), None, None, 1e-5)
    scale = float(np.exp(np.float64(np.float32(np.log(10.0)))))
    z = scale * Fn.normalize(e, dim=-1) @ Fn.normalize(t, dim=-1).T
    return Fn.cross_entropy(z, labels), torch.softmax(z, -1)


class Gradients(unittest.TestCase):
    """One step of the C trainer against torch autograd (float64) on the same weights and images."""

    def check(self, diff, seed):
        S, P, D, L, H, F, E, B = SIZES
        _, st = run_step(diff, seed)
        names = [k[2:] for k in st if k.startswith("p.")]
        p = {n: torch.tensor(st["p." + n], dtype=torch.float64, requires_grad=True) for n in names}
        px = torch.tensor(st["px"], dtype=torch.float64)
        labels = torch.tensor(st["labels"], dtype=torch.int64)
        loss, probs = reference_loss(p, px, labels, diff, S, P, D, L, H, E)
        loss.backward()
        self.assertAlmostEqual(float(st["loss"][0]), loss.item(), delta=1e-5 * max(1.0, abs(loss.item())))
        np.testing.assert_allclose(st["probs"], probs.detach().numpy(), atol=2e-6)
        self.assertGreater(len(names), 20)
        top = max(float(np.abs(p[n].grad.numpy()).max()) for n in names)
        for n in names:
            want = p[n].grad.numpy()
            got = st["g." + n]
            # k's bias shifts every score of a row alike (softmax ignores it): its gradient is
            # 0 up to rounding, so each tensor's error is also bounded by 1e-4 of the largest
            scale = max(float(np.abs(want).max()), 1e-4 * top)
            err = float(np.abs(got - want).max())
            self.assertLessEqual(err, 2e-4 * scale, "%s (diff %d): max error %.3g of scale %.3g" % (n, diff, err, scale))
            if not n.endswith("k_proj.bias"):  # every other tensor gets a gradient worth checking
                self.assertGreater(float(np.abs(want).max()), 1e-5 * top, n)

    def test_vit(self):
        self.check(0, 3)

    def test_diff_vit(self):
        self.check(1, 3)


class Checkpoint(unittest.TestCase):
    """The saved model through model/clip.c against clip_ref.py; its text side is the classifier."""

    def check(self, diff):
        out, st = run_step(diff, 5)
        mdir = os.path.join(out, "model")
        with open(os.path.join(mdir, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["model_type"], "diffclip" if diff else "clip")
        sd = tdc.read_safetensors(os.path.join(mdir, "model.safetensors"))
        S = SIZES[0]
        T = 1 + (S // SIZES[1]) ** 2
        text = [clip_ref.text_tower(sd, cfg, [k])["embed"] for k in range(4)]
        for b in range(SIZES[7]):
            pix = os.path.join(out, "px-%d.f32" % b)
            st["px"][b].astype("<f4").tofile(pix)
            res = os.path.join(out, "out-%d.f32" % b)
            r = subprocess.run([tdc.harness(), "image", mdir, pix, res], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = tdc.read_out(res, cfg, "vision", T)
            want = clip_ref.image_tower(sd, cfg, st["px"][b])
            tdc.close(self, got["embed"], want["embed"], 1e-4, "embed")
            for l in range(SIZES[3]):
                for key in ("map1", "map2", "diff") if diff else ("map1",):
                    tdc.close(self, got["layers"][l][key], want["layers"][l][key], 1e-5, "%s layer %d" % (key, l))
            _, zs = clip_ref.scores(sd, want["embed"], text)
            np.testing.assert_allclose(zs, st["probs"][b], atol=1e-5)

    def test_vit(self):
        self.check(0)

    def test_diff_vit(self):
        self.check(1)


class Shapes(unittest.TestCase):
    def test_object_in_box(self):
        """Each class's object: its box holds the brightest pixels of the image's centre
        region (the background's level is at most 0.45 + texture; the object's 0.75 +)."""
        seen = set()
        for i in range(40):
            out = os.path.join(TMP, "img.u8")
            r = subprocess.run([vit_harness(), "sample", "7", "1", str(i), "32", out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            label, x0, y0, x1, y1 = map(int, r.stdout.split())
            img = np.fromfile(out, dtype=np.uint8).reshape(32, 32, 3).astype(np.float64) / 255
            seen.add(label)
            self.assertTrue(0 < x0 < x1 <= 31 and 0 < y0 < y1 <= 31 and 8 <= x1 - x0 <= 12, r.stdout)
            inside = img[y0:y1, x0:x1].mean(-1)
            outside = np.ones((32, 32), bool)
            outside[y0:y1, x0:x1] = False
            # the box's brightest quarter is object; the background's median is far below it
            self.assertGreater(np.quantile(inside, 0.75), np.median(img.mean(-1)[outside]) + 0.2)
            fill = (inside > 0.6).mean()
            want = {0: 1.0, 1: np.pi / 4, 2: 0.5, 3: 5 / 9}[label]
            self.assertLess(abs(fill - want), 0.2, "class %d fills %.2f of its box" % (label, fill))
        self.assertEqual(seen, {0, 1, 2, 3})

    def test_png_preprocessed_as_trained(self):
        """A sample PNG through model/image.c's preprocessing (the model's config: resize =
        crop = S, bicubic, CLIP's mean and std) gives exactly the floats the trainer
        computes from the generator's bytes: (x / 255 − mean) / std in float32 (torchvision's)."""
        out, st = run_step(0, 5)
        mdir = os.path.join(out, "model")
        with open(os.path.join(mdir, "config.json")) as f:
            pre = json.load(f)["preprocess"]
        mean, std = np.array(pre["mean"], np.float32), np.array(pre["std"], np.float32)
        self.assertEqual((pre["resize"], pre["crop"]), (16, 16))
        for b in range(SIZES[7]):  # the trainer's own input: images 0.. of stream 0 of the seed
            raw = os.path.join(TMP, "raw.u8")
            subprocess.run([vit_harness(), "sample", "5", "0", str(b), "16", raw], check=True, capture_output=True)
            rgb = np.fromfile(raw, np.uint8).reshape(16, 16, 3)
            want = ((rgb.astype(np.float32) / np.float32(255) - mean) / std).transpose(2, 0, 1)
            self.assertLessEqual(float(np.abs(st["px"][b] - want).max()), 1e-6, b)
        samples = os.path.join(TMP, "pre-samples")
        r = subprocess.run([TRAIN, "--task", "shapes", "--samples", samples, "--count", "3", "--image-size", "16",
                            "--seed", "4", "--first", "7", "--quiet", "--force"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for i in range(3):
            raw = os.path.join(TMP, "raw.u8")
            r = subprocess.run([vit_harness(), "sample", "4", "1", str(7 + i), "16", raw], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            rgb = np.fromfile(raw, np.uint8).reshape(16, 16, 3)
            want = ((rgb.astype(np.float32) / np.float32(255) - mean) / std).transpose(2, 0, 1)
            got_f = os.path.join(TMP, "pre.f32")
            r = subprocess.run([tdc.harness(), "preprocess", mdir, os.path.join(samples, "sample-%d.png" % i), got_f],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = np.fromfile(got_f, "<f4").reshape(3, 16, 16)
            self.assertLessEqual(float(np.abs(got - want).max()), 1e-6, i)


class Tool(unittest.TestCase):
    def test_train_and_probe(self):
        out = os.path.join(TMP, "pair")
        r = subprocess.run([TRAIN, "--task", "shapes", "--pair", out, "--image-size", "16", "--hidden", "16",
                            "--ffn", "16", "--embed", "8", "--steps", "3", "--batch", "4", "--eval-samples", "8",
                            "--quiet", "--threads", "1"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = r.stdout.strip().splitlines()
        self.assertEqual(rows[0], "seed,model,params,steps,eval_loss,eval_acc,seconds")
        self.assertEqual([x.split(",")[1] for x in rows[1:]], ["vit", "diff_vit"])
        pv, pd = (int(x.split(",")[2]) for x in rows[1:])
        self.assertEqual(pd - pv, 2 * 6 * 4)  # 6·d per layer, d = 16/4
        samples = os.path.join(TMP, "samples")
        r = subprocess.run([TRAIN, "--task", "shapes", "--samples", samples, "--count", "2", "--image-size", "16",
                            "--quiet"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for m in ("vit", "diff_vit"):
            h5 = os.path.join(TMP, m + ".h5")
            r = subprocess.run([PROBE, "--model", os.path.join(out, m), "--prompts",
                                os.path.join(samples, "prompts.jsonl"), "--out", h5, "--force"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
        # a second run refuses to overwrite, and bad sizes are usage errors
        r = subprocess.run([TRAIN, "--task", "shapes", "--out", os.path.join(out, "vit"), "--image-size", "16",
                            "--hidden", "16", "--ffn", "16", "--embed", "8", "--steps", "1", "--batch", "2",
                            "--eval-samples", "2", "--quiet"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("exists", r.stderr)
        for bad in (["--patch-size", "5"], ["--heads", "3", "--hidden", "15"], ["--image-size", "8"],
                    ["--task", "nope"], ["--out", out, "--pair", out]):
            args = [TRAIN, "--task", "shapes"] + (["--pair", out] if "--out" not in bad else []) + bad
            r = subprocess.run(args, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))


if __name__ == "__main__":
    unittest.main()
