#!/usr/bin/python3
"""test_quantize.py — probe --quantize (model/quantize.c, docs/probe.md "Quantization")
against independent references:

  - the quantizer (fast and naive twins) against a brute-force numpy nearest-grid-point
    search: every grid point enumerated, the nearest taken, a tie going to the even
    integer (numpy/torch round half to even); ties constructed exactly and checked by hand;
  - the Hadamard transform against scipy.linalg.hadamard (powers of two) and, for Paley ⊗
    Sylvester sizes, the defining property (entries ±1/√n, H·Hᵀ = I);
  - the rotation (QuaRot: RMSNorm gains folded, residual stream and down_proj input
    rotated) and the q/k Hadamard: an unquantized model's logits unchanged within 1e-5
    relative on eight model types (llama in bf16, qwen2 tied, diff_transformer, diffllama,
    DIFF V2, phi3, Motif V1 and GDA); the types it cannot hold refused by name;
  - weight quantization: probe's logits against tests/ref/reference.py run on weights
    quantized here in numpy (llama, bf16 llama, diff_transformer, GPT-2's Conv1D [in, out]
    storage, the LM head and embeddings), within test_reference.py's 1e-4;
  - activations and the KV cache: against a float64 numpy Llama forward written here from
    the published maths (checked first against reference.py unquantized), at 4 bits;
  - the SPEC grammar (canonical text, errors) and the dump's root attributes.

How: tests/quant_harness.c is built here against build/libdifflens.a with the Makefile's
own flags. Run from the repo root:  /usr/bin/python3 tests/test_quantize.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from fractions import Fraction

import h5py
import numpy as np
import scipy.linalg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import gguf  # noqa: E402
import make_model  # noqa: E402
import reference  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
TOL_LOGITS_REL = 1e-4     # test_reference.py's
TOL_INVARIANT = 1e-5      # the brief: rotations leave logits unchanged within 1e-5 relative

VOCAB, HIDDEN, FFN, LAYERS = 97, 64, 96, 2   # FFN 96 = 12·8: Paley's H_12 ⊗ H_8


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "--eval", "print-%: ; @echo $($*)",
                        "print-" + name], capture_output=True, text=True, check=True)
    return r.stdout.split()


def build_harness(tmp):
    lib = os.path.join(BUILD, "libdifflens.a")
    subprocess.run(["make", "-s", "-C", ROOT, os.path.relpath(lib, ROOT)], check=True)
    exe = os.path.join(tmp, "quant_harness")
    cmd = (make_var("CC") + make_var("CPPFLAGS") + make_var("CFLAGS") + [os.path.join(HERE, "quant_harness.c"),
           lib, "-o", exe] + make_var("LDFLAGS") + make_var("LDLIBS"))
    cmd = [a if not a.startswith("-I") or os.path.isabs(a[2:]) else "-I" + os.path.join(ROOT, a[2:]) for a in cmd]
    subprocess.run(cmd, check=True)
    return exe


# ---------------------------------------------------------------------------
# the numpy reference quantizer: brute force over the grid
# ---------------------------------------------------------------------------

def grid_of(group, bits, asym, clip):
    """The grid of one group as docs/probe.md defines it: (s, z, integers k) with grid
    points s·(k − z). Symmetric: s = clip·max|x| / (2^(b−1) − 1), k in ±(2^(b−1) − 1), z 0;
    asymmetric: lo = clip·min(min x, 0), hi = clip·max(max x, 0), s = (hi − lo)/(2^b − 1),
    z = round(−lo/s), k in [0, 2^b − 1]."""
    g = group.astype(np.float64)
    if not asym:
        qmax = 2 ** (bits - 1) - 1
        return clip * np.abs(g).max() / qmax, 0.0, np.arange(-qmax, qmax + 1, dtype=np.float64)
    lo, hi = clip * min(g.min(), 0.0), clip * max(g.max(), 0.0)
    s = (hi - lo) / (2 ** bits - 1)
    z = float(np.round(-lo / s)) if s > 0 else 0.0
    return s, z, np.arange(0, 2 ** bits, dtype=np.float64)


def nearest_grid(groups, bits, asym, clip):
    """groups [n, d] float32 → the nearest grid point of each value (float32), a tie going
    to the even integer k − z; a group with s = 0 unchanged. Distances in float64, and
    where the best two are within 1e-9·s of each other, again in exact rationals
    (fractions.Fraction of the double s and the float x): a value exactly half-way
    between two grid points is a tie however float64 rounds the two distances."""
    out = groups.astype(np.float32).copy()
    for i, g in enumerate(groups):
        s, z, ks = grid_of(g, bits, asym, clip)
        if not s > 0:
            continue
        pts = s * (ks - z)                                       # [K]
        dist = np.abs(g.astype(np.float64)[:, None] - pts[None, :])
        pick = np.argmin(dist, axis=1)
        two = np.sort(dist, axis=1)[:, :2] if len(ks) > 1 else np.zeros((len(g), 2))
        for j in np.nonzero(two[:, 1] - two[:, 0] <= 1e-9 * s)[0]:
            xf, sf = Fraction(float(g[j])), Fraction(s)
            exact = [abs(xf - sf * Fraction(int(k - z))) for k in ks]
            best = min(exact)
            ties = [n for n, e in enumerate(exact) if e == best]
            pick[j] = ties[0] if len(ties) == 1 else [n for n in ties if int(ks[n] - z) % 2 == 0][0]
        out[i] = pts[pick].astype(np.float32)
    return out


def quant_matrix_np(w, bits, asym, clip, group, io=False):
    """A weight [out, in] (or [in, out] when io: GPT-2's Conv1D) quantized per output
    channel (group 0) or per group of `group` input columns."""
    w32 = np.asarray(w, np.float32)
    a = w32.T if io else w32                                     # [out, in]
    g = group or a.shape[1]
    q = nearest_grid(a.reshape(-1, g), bits, asym, clip).reshape(a.shape)
    return (q.T if io else q).astype(np.float64)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def write_prompts(path, lengths, seed, vocab=VOCAB):
    rng = np.random.default_rng(seed)
    toks = [[0] + [int(x) for x in rng.integers(1, vocab, T - 1)] for T in lengths]
    with open(path, "w") as f:
        for i, t in enumerate(toks):
            f.write(json.dumps({"id": "q%d" % i, "tokens": t}) + "\n")
    return toks


def probe(model, prompts, out, *extra, check=True):
    cmd = [PROBE, "--model", model, "--prompts", prompts, "--out", out, "--save-logits", "--quiet",
           "--force"] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr))
    return r


def logits_of(path):
    with h5py.File(path, "r") as f:
        return [f["samples"][k]["logits"][()].astype(np.float64) for k in sorted(f["samples"])]


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


# ---------------------------------------------------------------------------
# a float64 Llama forward with the quantization hooks (activations, K/V)
# ---------------------------------------------------------------------------

def rope_half(x, T, hd, theta):
    """Rotate-half RoPE (modeling_llama.py apply_rotary_pos_emb) of x [T, heads, hd]."""
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.concatenate([np.cos(ang)] * 2, -1)[:, None], np.concatenate([np.sin(ang)] * 2, -1)[:, None]
    rot = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
    return x * cos + rot * sin


def llama_forward(m, tokens, acts=None, kv=None, hadamard=False):
    """logits [T, V] of a Llama model (reference.Model m) with fake quantization of the
    linear layers' inputs (acts = (bits, "token" | "tensor")) and of K and V after RoPE
    (kv = bits; K per token and head of hd, V per token and KV head), the q and k heads
    rotated by H_hd/√hd first when hadamard."""
    t, T, hd, H, Hkv = m.t, len(tokens), m.hd, m.H, m.Hkv

    def qa(x):
        if acts is None:
            return x
        bits, gran = acts
        x32 = x.astype(np.float32)
        if gran == "tensor":
            return nearest_grid(x32.reshape(1, -1), bits, False, 1.0).reshape(x.shape).astype(np.float64)
        return nearest_grid(x32, bits, False, 1.0).astype(np.float64)

    def qkv(x, d):                                  # [T, n·d] per token and group of d
        if kv is None:
            return x
        return nearest_grid(x.astype(np.float32).reshape(-1, d), kv, False, 1.0).reshape(x.shape).astype(np.float64)

    x = t["model.embed_tokens.weight"][tokens].copy()
    Hd = scipy.linalg.hadamard(hd).astype(np.float64) / np.sqrt(hd)
    for l in range(m.L):
        p = "model.layers.%d." % l
        hn = qa(reference.rmsnorm(x, t[p + "input_layernorm.weight"], m.eps))
        q = (hn @ t[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd)
        k = (hn @ t[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, hd)
        v = hn @ t[p + "self_attn.v_proj.weight"].T
        q, k = rope_half(q, T, hd, m.theta), rope_half(k, T, hd, m.theta)
        if hadamard:
            q, k = q @ Hd, k @ Hd
        k = qkv(k.reshape(T, -1), hd).reshape(T, Hkv, hd)
        v = qkv(v, v.shape[1] // Hkv).reshape(T, Hkv, -1)
        att = np.zeros((T, H, v.shape[2]))
        for h in range(H):
            kv_h = h // (H // Hkv)
            s = q[:, h] @ k[:, kv_h].T / np.sqrt(hd)
            s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
            a = np.exp(s - s.max(1, keepdims=True))
            att[:, h] = (a / a.sum(1, keepdims=True)) @ v[:, kv_h]
        x = x + qa(att.reshape(T, -1)) @ t[p + "self_attn.o_proj.weight"].T
        hh = qa(reference.rmsnorm(x, t[p + "post_attention_layernorm.weight"], m.eps))
        g, u = hh @ t[p + "mlp.gate_proj.weight"].T, hh @ t[p + "mlp.up_proj.weight"].T
        x = x + qa(reference.silu(g) * u) @ t[p + "mlp.down_proj.weight"].T
    x = reference.rmsnorm(x, t["model.norm.weight"], m.eps)
    return x @ (t["model.embed_tokens.weight"] if m.tied else t["lm_head.weight"]).T


# ---------------------------------------------------------------------------

class Quantize(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-quant-")
        cls.exe = build_harness(cls.tmp)
        cls.models = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def harness(self, *args, data=None):
        r = subprocess.run([self.exe] + [str(a) for a in args], input=data, capture_output=True)
        return r

    def c_quant(self, groups, bits, asym, clip, naive=False):
        g = np.ascontiguousarray(groups, np.float32)
        args = ["quant", bits, int(asym), repr(clip), g.shape[1]] + (["naive"] if naive else [])
        r = self.harness(*args, data=g.tobytes())
        self.assertEqual(r.returncode, 0, r.stderr)
        return np.frombuffer(r.stdout, np.float32).reshape(g.shape)

    def model(self, name, mtype, dtype="f32", **kw):
        d = os.path.join(self.tmp, name)
        if name not in self.models:
            make_model.make_model(d, mtype, layers=LAYERS, hidden=HIDDEN, ffn=FFN, vocab=VOCAB, dtype=dtype,
                                  seed=11, **kw)
            self.models[name] = d
        return d

    def prompts(self, lengths=(19, 12)):
        p = os.path.join(self.tmp, "prompts-%s.jsonl" % "-".join(map(str, lengths)))
        return p, write_prompts(p, lengths, seed=5)

    # ---- the quantizer ----

    def test_quantizer_against_brute_force(self):
        rng = np.random.default_rng(1)
        x = rng.standard_normal((60, 48)).astype(np.float32)
        x[::7, 3] *= 40.0                                        # outlier channels
        x[5] = 0.0                                               # a group of zeros: unchanged
        x[6] = np.abs(x[6])                                      # one-signed groups (asym z = 0 or 2^b − 1)
        x[8] = -np.abs(x[8])
        checked = 0
        for bits in (2, 3, 4, 6, 8):
            for asym in (False, True):
                for clip in (1.0, 0.7):
                    want = nearest_grid(x, bits, asym, clip)
                    for naive in (False, True):
                        got = self.c_quant(x, bits, asym, clip, naive)
                        np.testing.assert_array_equal(got, want, err_msg="bits %d asym %s clip %g naive %s"
                                                      % (bits, asym, clip, naive))
                        checked += got.size
        # values on a coarse lattice (like bf16 weights): x/s lands on or next to half-integers,
        # where x/s rounded to double can read a tie that exact arithmetic does not have
        lat = (np.round(x * 16) / 16).astype(np.float32)
        for bits, asym in ((2, True), (3, True), (2, False), (4, True)):
            want = nearest_grid(lat, bits, asym, 1.0)
            for naive in (False, True):
                np.testing.assert_array_equal(self.c_quant(lat, bits, asym, 1.0, naive), want,
                                              err_msg="lattice bits %d asym %s naive %s" % (bits, asym, naive))
                checked += lat.size
        self.assertEqual(checked, 60 * 48 * 48)
        np.testing.assert_array_equal(self.c_quant(x[5:6], 4, False, 1.0), x[5:6])

    def test_ties_round_half_to_even(self):
        # 8-bit symmetric, max 127·2⁻³: s = 0.125 exactly, values at (j + ½)·s are ties
        g = np.zeros((1, 9), np.float32)
        g[0, :8] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 126.5]) * 0.125
        g[0, 8] = 127 * 0.125
        want = np.array([0, 2, 2, -0, -2, -2, 4, 126, 127], np.float32) * 0.125
        np.testing.assert_array_equal(self.c_quant(g, 8, False, 1.0), want.reshape(1, -1))
        np.testing.assert_array_equal(nearest_grid(g, 8, False, 1.0), want.reshape(1, -1))
        # 2-bit asymmetric: lo −0.75, hi 1.5 → s 0.75, z 1; x/s = ½ → 0, 3/2 → 2 (then clamped
        # to k ≤ 3: 2 − z... k = 3 → 1.5)
        a = np.array([[-0.75, 1.5, 0.375, 1.125, -0.375]], np.float32)
        want = np.array([[-0.75, 1.5, 0.0, 1.5, -0.0]], np.float32)
        for naive in (False, True):
            np.testing.assert_array_equal(self.c_quant(a, 2, True, 1.0, naive), want)
        np.testing.assert_array_equal(nearest_grid(a, 2, True, 1.0), want)

    # ---- the Hadamard transform ----

    def hadamard_matrix(self, n):
        r = self.harness("hadamard", n, data=np.eye(n, dtype=np.float32).tobytes())
        self.assertEqual(r.returncode, 0)
        return np.frombuffer(r.stdout, np.float32).reshape(n, n).astype(np.float64)

    def test_hadamard(self):
        for n in (1, 2, 8, 64, 512):
            np.testing.assert_allclose(self.hadamard_matrix(n), scipy.linalg.hadamard(n) / np.sqrt(n), atol=1e-7)
        for n, m in ((12, 12), (20, 20), (96, 12), (88, 44), (1408, 44)):
            self.assertEqual(self.harness("hadamard-ok", n).stdout.strip(), str(m).encode())
            h = self.hadamard_matrix(n)
            np.testing.assert_allclose(np.abs(h), 1 / np.sqrt(n), rtol=1e-6)
            np.testing.assert_allclose(h @ h.T, np.eye(n), atol=1e-5)
        # 11008 = 43·256: no m = p + 1 (p prime ≡ 3 mod 4) divides it by a power of two
        for n in (3, 6, 11008):
            self.assertEqual(self.harness("hadamard-ok", n).stdout.strip(), b"-1")
        self.assertEqual(self.harness("hadamard-ok", 14336).stdout.strip(), b"224")

    # ---- the grammar ----

    def test_spec_grammar(self):
        ok = {("weights=4",): "weights=4:sym:clip=1:channel",
              ("weights=3:group=32:asym:clip=0.9:head:embed",): "weights=3:asym:clip=0.9:group=32:head:embed",
              ("acts=8:tensor", "kv=4:hadamard"):
                  "acts=8:sym:clip=1:tensor,k=4:sym:clip=1:hadamard,v=4:sym:clip=1",
              ("k=8,v=4:asym,rotate",): "k=8:sym:clip=1,v=4:asym:clip=1,rotate",
              ("k=none:hadamard",): "k=none:hadamard",
              ("weights=none,kv=none",): "",
              ("none",): ""}
        for args, want in ok.items():
            r = self.harness("spec", *args)
            self.assertEqual((r.returncode, r.stdout.decode().strip()), (0, want), args)
        bad = {"weights=9": "bits must be 2 to 8", "weights=1": "bits must be 2 to 8",
               "weights=4:group=0": "not an option", "acts=8:head": "not an option",
               "weights=4:clip=1.5": "clip must be in (0, 1]", "kv=4,k=8": "given twice",
               "foo=4": "is not weights, acts, kv, k, v or rotate", "weights": "is not KIND=BITS",
               "weights=4,,acts=8": "empty", "rotate:x": "takes no options"}
        for spec, msg in bad.items():
            r = self.harness("spec", spec)
            self.assertEqual(r.returncode, 2, spec)
            self.assertIn(msg, r.stdout.decode(), spec)
        # probe: a bad SPEC is a usage error before anything is loaded
        r = probe("/nonexistent", "/nonexistent", os.path.join(self.tmp, "x.h5"), "--quantize", "acts=16",
                  check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--quantize: acts=16: bits must be 2 to 8 or none", r.stderr)

    # ---- rotation: computational invariance ----

    def test_rotation_leaves_logits_unchanged(self):
        pf, _ = self.prompts()
        cases = [("rot-llama", "llama", dict(heads=4, kv_heads=2)),
                 ("rot-qwen2-tied", "qwen2", dict(heads=4, kv_heads=2, tied=True)),
                 ("rot-difft", "diff_transformer", dict(heads=2)),
                 ("rot-diffllama", "diffllama", dict(heads=4)),
                 ("rot-diffv2", "diff_transformer_v2", dict(heads=4)),
                 ("rot-phi3", "phi3", dict(heads=4)),
                 # Motif as published (tests/test_motif.py's shapes): V1 pairs, and GDA's noise heads
                 ("rot-motif-v1", "published", dict(name="Motif-2.6B", heads=4, head_dim=8)),
                 ("rot-motif-gda", "published", dict(name="Motif-2-12.7B-Base", heads=10, head_dim=8))]
        for name, mtype, kw in cases:
            if mtype == "published":
                d = os.path.join(self.tmp, name)
                cfg, shards = make_model.published_config(kw.pop("name"), layers=LAYERS, vocab=VOCAB, **kw)
                make_model.write_model(d, cfg, make_model.make_weights(cfg, seed=5), "f32", shards, hub=True)
            else:
                d = self.model(name, mtype, "bf16" if mtype == "llama" else "f32", **kw)
            base = os.path.join(self.tmp, name + "-base.h5")
            probe(d, pf, base)
            # both rotations at once (each alone is broken-tested by the K/V case below too)
            for spec in ("rotate,k=none:hadamard",) if name != "rot-llama" else ("rotate", "k=none:hadamard"):
                out = os.path.join(self.tmp, name + "-rot.h5")
                probe(d, pf, out, "--quantize", spec)
                for a, b in zip(logits_of(out), logits_of(base)):
                    e = rel(a, b)
                    self.assertLess(e, TOL_INVARIANT, "%s %s: logits moved by %.3g relative" % (name, spec, e))
                    self.assertGreater(e, 0.0, "%s %s: bit-identical: was anything rotated?" % (name, spec))

    def test_rotation_refused_by_name(self):
        pf, _ = self.prompts()
        for name, mtype, why in (("ref-gpt2", "gpt2", "LayerNorm"), ("ref-neox", "gpt_neox", "LayerNorm"),
                                 ("ref-gemma2", "gemma2", "after the attention and MLP"),
                                 ("ref-olmo2", "olmo2", "after the attention and MLP")):
            d = self.model(name, mtype, heads=4)
            r = probe(d, pf, os.path.join(self.tmp, "refused.h5"), "--quantize", "rotate", check=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--quantize rotate: model_type %s" % mtype, r.stderr)
            self.assertIn(why, r.stderr)
        d = self.model("ref-hd12", "llama", heads=4, head_dim=12)        # 12 has a Hadamard: allowed
        probe(d, pf, os.path.join(self.tmp, "hd12.h5"), "--quantize", "kv=8:hadamard")
        d = self.model("ref-hd6", "llama", heads=4, head_dim=6)
        r = probe(d, pf, os.path.join(self.tmp, "hd6.h5"), "--quantize", "kv=8:hadamard", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("head_dim 6", r.stderr)

    # ---- weights against reference.py on numpy-quantized weights ----

    def check_weights(self, d, spec, bits, asym, clip, group, head=False, embed=False, rotate=False):
        pf, toks = self.prompts()
        out = os.path.join(self.tmp, "w.h5")
        probe(d, pf, out, "--quantize", spec)
        m = reference.load_model(d)
        gpt2 = m.arch == "gpt2"
        for name in list(m.t):
            w = m.t[name]
            if w.ndim != 2:
                continue
            is_embed = name.endswith(("embed_tokens.weight", "wte.weight", "wpe.weight"))
            is_head = name == "lm_head.weight"
            if (is_embed and not embed) or (is_head and not head):
                continue
            m.t[name] = quant_matrix_np(w, bits, asym, clip, group, io=gpt2 and not (is_embed or is_head))
        if head and m.tied:
            self.assertTrue(embed, "a tied head quantized alone is not checked here")
        for got, t in zip(logits_of(out), toks):
            want = reference.forward(m, t)["logits"]
            e = rel(got, want)
            self.assertLess(e, TOL_LOGITS_REL, "%s %s: %.3g" % (d, spec, e))
        return out

    def test_weights_against_reference(self):
        d = self.model("w-llama", "llama", heads=4, kv_heads=2)
        self.check_weights(d, "weights=4", 4, False, 1.0, 0)
        self.check_weights(d, "weights=3:group=16:asym:clip=0.9", 3, True, 0.9, 16)
        self.check_weights(d, "weights=8:group=32:head:embed", 8, False, 1.0, 32, head=True, embed=True)
        d = self.model("w-llama-bf16", "llama", "bf16", heads=4)
        self.check_weights(d, "weights=2:asym", 2, True, 1.0, 0)
        d = self.model("w-difft", "diff_transformer", heads=2, kv_heads=1)
        self.check_weights(d, "weights=4:group=32:asym", 4, True, 1.0, 32)
        d = self.model("w-gpt2", "gpt2", heads=4)                       # Conv1D [in, out], tied head
        self.check_weights(d, "weights=4:group=16", 4, False, 1.0, 16)
        self.check_weights(d, "weights=6:head:embed", 6, False, 1.0, 0, head=True, embed=True)

    def test_gguf_like_safetensors(self):
        # the same weights as GGUF F32 (Q/K rows permuted as convert_hf_to_gguf.py does):
        # quantized per group of input columns and rotated alike, so the same logits
        cfg = make_model.make_config("llama", LAYERS, HIDDEN, 4, kv_heads=2, ffn=FFN, vocab=VOCAB)
        tensors = make_model.make_weights(cfg, seed=3)
        sdir = os.path.join(self.tmp, "gguf-st")
        make_model.write_model(sdir, cfg, tensors, "f32")
        paths, _ = gguf.convert(cfg, tensors, gguf.F32, os.path.join(self.tmp, "twin.gguf"))
        pf, _ = self.prompts()
        for spec in ("weights=4:group=16:asym", "rotate,weights=3"):
            a, b = os.path.join(self.tmp, "g-st.h5"), os.path.join(self.tmp, "g-gguf.h5")
            probe(sdir, pf, a, "--quantize", spec)
            probe(paths[0], pf, b, "--quantize", spec)
            for x, y in zip(logits_of(b), logits_of(a)):
                self.assertLess(rel(x, y), 1e-5, spec)

    def test_dump_records_the_spec(self):
        d = self.model("w-llama", "llama", heads=4, kv_heads=2)
        pf, _ = self.prompts()
        out = os.path.join(self.tmp, "attrs.h5")
        probe(d, pf, out, "--quantize", "weights=4:group=32:asym:clip=0.9:head", "--quantize", "acts=8:tensor,v=4",
              "--quantize-logits", "6:row")
        with h5py.File(out, "r") as f:
            a = dict(f.attrs)
        s = lambda k: a[k].decode() if isinstance(a[k], bytes) else str(a[k])  # noqa: E731
        self.assertEqual(s("quantize"), "weights=4:asym:clip=0.9:group=32:head,acts=8:sym:clip=1:tensor,v=4:sym:clip=1")
        self.assertEqual((int(a["quant_weight_bits"]), int(a["quant_weight_group"]), s("quant_weight_scheme"),
                          float(a["quant_weight_clip"]), s("quant_weight_tensors")),
                         (4, 32, "asym", 0.9, "blocks,head"))
        self.assertEqual((int(a["quant_act_bits"]), s("quant_act_granularity"), int(a["quant_k_bits"]),
                          s("quant_k_scheme"), int(a["quant_v_bits"]), int(a["quant_k_hadamard"]),
                          s("quant_rotate")), (8, "tensor", 0, "none", 4, 0, "none"))
        self.assertEqual(int(a["logit_quant_bits"]), 6)
        plain = os.path.join(self.tmp, "plain.h5")
        probe(d, pf, plain)
        with h5py.File(plain, "r") as f:
            self.assertFalse([k for k in f.attrs if k.startswith("quant")])

    # ---- activations and the KV cache against a numpy forward ----

    def test_acts_and_kv_against_numpy(self):
        d = self.model("akv-llama", "llama", heads=4, kv_heads=2)
        pf, toks = self.prompts()
        m = reference.load_model(d)
        # the numpy forward itself, unquantized, against reference.py
        for t in toks:
            self.assertLess(rel(llama_forward(m, t), reference.forward(m, t)["logits"]), 1e-12)
        for spec, kw in (("acts=4", dict(acts=(4, "token"))), ("acts=4:tensor", dict(acts=(4, "tensor"))),
                         ("kv=4", dict(kv=4)), ("kv=4:hadamard", dict(kv=4, hadamard=True)),
                         ("acts=4,kv=4:hadamard", dict(acts=(4, "token"), kv=4, hadamard=True))):
            out = os.path.join(self.tmp, "akv.h5")
            probe(d, pf, out, "--quantize", spec)
            for got, t in zip(logits_of(out), toks):
                want = llama_forward(m, t, **kw)
                e = rel(got, want)
                self.assertLess(e, TOL_LOGITS_REL, "%s: %.3g" % (spec, e))
                self.assertGreater(rel(got, reference.forward(m, t)["logits"]), 1e-3, spec + ": no effect?")


if __name__ == "__main__":
    unittest.main(verbosity=2)
