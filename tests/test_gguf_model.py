#!/usr/bin/python3
"""test_gguf_model.py — bin/probe --model FILE.gguf against its safetensors twin and the
numpy reference.

- llama, mistral, qwen2, qwen3 written by tests/ref/make_model.py as safetensors and by
  tests/ref/gguf.py's converter as GGUF (Q/K rows permuted for llama and mistral as
  convert_hf_to_gguf.py does), F32 and F16: probe's logits and maps on the two agree;
- every quantized type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) and BF16: probe on
  the GGUF against tests/ref/reference.py run on the weights as numpy dequantizes them,
  within tests/test_reference.py's tolerances; a model in three split files too;
- Gemma 2, Gemma 3, Phi-3, OLMo 2, GPT-2 and GPT-NeoX (gemma2 / gemma3 / phi3 / olmo2 /
  gpt2 / gptneox GGUF architectures):
  F32 against the safetensors twin, Q8_0 against the numpy reference (tests/ref/families.py);
- refusals: an IQ type by name, an unknown architecture, a missing key, a tensor the
  model does not use, rope frequency factors of the wrong shape;
- Llama 3's rope_scaling as the converter's rope_freqs tensor, against the safetensors
  twin with rope_scaling llama3.

Run from the repo root:  /usr/bin/python3 tests/test_gguf_model.py   (BIN=bin by default)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import families  # noqa: E402
import gguf  # noqa: E402
import make_model  # noqa: E402
import reference  # noqa: E402
import test_reference as tr  # noqa: E402

import h5py  # noqa: E402

TMP = tempfile.mkdtemp(prefix="dfl-gguf-model-")
SUMMARY = []


def probe(model, prompts, out, *extra, ok=True):
    cmd = [tr.PROBE, "--model", model, "--prompts", prompts, "--out", out, "--maps", "all", "--map-dtype", "f32",
           "--save-logits", "--quiet"] + list(extra)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if ok and r.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr))
    return r


def read_dump(path, n):
    out = []
    with h5py.File(path, "r") as f:
        for si in range(n):
            s = f["samples/%06d" % si]
            out.append((s["logits"][()], s["attn/map1"][()], s["nll"][()]))
    return out


def model_files(name, mtype, hidden, ffn, wtype, heads=4, kv_heads=2, split=0, **kw):
    """(safetensors dir, gguf path, config, numpy-dequantized hf tensors)."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    cfg = make_model.make_config(mtype, 2, hidden, heads, kv_heads=kv_heads, ffn=ffn, vocab=tr.VOCAB, **kw)
    tensors = make_model.make_weights(cfg, seed=sum(name.encode()) % 1000)
    sdir = os.path.join(d, "st")
    make_model.write_model(sdir, cfg, tensors, "f32")
    base = os.path.join(d, "model" if split else "model.gguf")
    paths, back = gguf.convert(cfg, tensors, wtype, base, split=split)
    return sdir, paths[0], cfg, back


class Twin(unittest.TestCase):
    """F32/F16 GGUF against the safetensors model of the same weights."""

    def check(self, mtype, wtype, tag="", tol=(1e-6, 1e-7), **kw):
        name = "twin-%s-%s%s" % (mtype, gguf.TYPES[wtype][0], tag)
        sdir, gpath, cfg, back = model_files(name, mtype, 64, 96, wtype, **kw)
        if wtype == gguf.F16:   # the twin holds the same f16 matrices (and the F32 vectors)
            t = [(n, back[n].astype(np.float32)) for n, _ in make_model.make_weights(cfg, seed=0)]
            make_model.write_model(sdir, cfg, t, "f32")
        pfile = os.path.join(TMP, name, "prompts.jsonl")
        prompts = tr.write_prompts(pfile, (19, 13), seed=3)
        a, b = os.path.join(TMP, name, "st.h5"), os.path.join(TMP, name, "gguf.h5")
        probe(sdir, pfile, a)
        probe(gpath, pfile, b)
        worst = [0.0, 0.0]
        for (la, ma, _), (lb, mb, _) in zip(read_dump(a, 2), read_dump(b, 2)):
            worst[0] = max(worst[0], float(np.abs(la - lb).max() / np.abs(la).max()))
            worst[1] = max(worst[1], float(np.abs(ma - mb).max()))
        SUMMARY.append("%s: logits rel %.1e maps %.1e" % (name, worst[0], worst[1]))
        self.assertLess(worst[0], tol[0], name)
        self.assertLess(worst[1], tol[1], name)
        del prompts

    def test_llama_f32(self):
        self.check("llama", gguf.F32)

    def test_mistral_f16(self):
        self.check("mistral", gguf.F16, sliding_window=None)

    def test_qwen2_f32(self):
        self.check("qwen2", gguf.F32, tied=True)

    def test_qwen3_f16(self):
        self.check("qwen3", gguf.F16, head_dim=24)

    def test_llama3_rope_freqs(self):
        # Llama 3.1's rope_scaling reaches the GGUF as the converter's rope_freqs tensor: f32
        # factors against Hugging Face's double-precision frequencies, so the usual tolerances
        self.check("llama", gguf.F32, tag="-llama3", tol=(tr.TOL_LOGITS_REL, tr.TOL_MAP), rope_scaling="llama3")


class AgainstReference(unittest.TestCase):
    """Quantized GGUF against the numpy reference on the numpy-dequantized weights."""

    def check(self, mtype, wtype, split=0, heads=4, **kw):
        name = "ref-%s-%s%s" % (mtype, gguf.TYPES[wtype][0], "-split%d" % split if split else "")
        _, gpath, cfg, back = model_files(name, mtype, 256, 512, wtype, heads=heads, split=split, **kw)
        m = reference.Model(cfg, back)
        pfile = os.path.join(TMP, name, "prompts.jsonl")
        prompts = tr.write_prompts(pfile, (21, 14), seed=5)
        out = os.path.join(TMP, name, "dump.h5")
        probe(gpath, pfile, out)
        worst = [0.0, 0.0, 0.0]
        for p, (lg, mp, nll) in zip(prompts, read_dump(out, 2)):
            r = reference.forward(m, p["tokens"])
            worst[0] = max(worst[0], float(np.abs(lg - r["logits"]).max() / np.abs(r["logits"]).max()))
            worst[1] = max(worst[1], float(np.abs(mp - r["map1"]).max()))
            # NLL's error follows the logits' absolute error, so it is measured on their
            # scale as the logits are (tied embeddings give logits near 200: f32 rounding
            # of those alone moves an NLL by ~1e-4)
            scale = max(1.0, float(np.abs(r["logits"]).max()))
            err = np.abs(nll[:-1] - reference.nll(r["logits"], p["tokens"])[:-1]).max()
            worst[2] = max(worst[2], float(err) / scale)
        SUMMARY.append("%s: logits rel %.1e maps %.1e nll rel %.1e" % (name, *worst))
        self.assertLess(worst[0], tr.TOL_LOGITS_REL, name)
        self.assertLess(worst[1], tr.TOL_MAP, name)
        self.assertLess(worst[2], tr.TOL_NLL, name)
        return out


def _add(mtype, tname, **kw):
    def test(self):
        self.check(mtype, gguf.BY_NAME[tname], **kw)
    extra = "".join("_%s%s" % kv for kv in sorted(kw.items()))
    setattr(AgainstReference, "test_%s_%s%s" % (mtype, tname.lower(), extra), test)


for _t in gguf.QUANT_NAMES + ["BF16"]:
    _add("llama", _t)
for _m, _t, _kw in (("qwen2", "Q4_K", {}), ("qwen3", "Q6_K", dict(heads=8, head_dim=32)), ("mistral", "Q5_0", {}),
                    ("qwen2", "Q8_0", dict(tied=True)), ("llama", "Q4_K", dict(split=3))):
    _add(_m, _t, **_kw)


class Families(unittest.TestCase):
    """Gemma 2 and 3 (norm gains stored as 1 + w, llama.cpp's fixed layer patterns and
    local RoPE base), Phi-3 (fused projections, longrope factors as tensors) and OLMo 2
    (norms after the sub-layers, whole-projection q/k norms) from GGUF: the F32 file
    against its safetensors twin, and a Q8_0 file against the numpy reference
    (tests/ref/families.py) on its weights."""

    def files(self, name, mtype, layers, wtype, lengths=(23, 17), **extra):
        d = os.path.join(TMP, name)
        os.makedirs(d)
        ffn = None if mtype == "gpt2" else 96   # GPT2Model writes feed_forward_length 4·n_embd
        cfg = families.make_config(mtype, layers, 64, 4, ffn=ffn, vocab=tr.VOCAB, max_pos=64, extra=extra)
        tensors = families.make_weights(cfg, seed=11)
        sdir = os.path.join(d, "st")
        make_model.write_model(sdir, cfg, tensors, "f32")
        gpath = os.path.join(d, "model.gguf")
        if mtype in ("gpt2", "gpt_neox"):
            paths, back = [gpath], gguf.convert_ln(cfg, tensors, wtype, gpath)
        else:
            paths, back = gguf.convert(cfg, tensors, wtype, gpath)
        pfile = os.path.join(d, "prompts.jsonl")
        prompts = tr.write_prompts(pfile, lengths, seed=7)
        return d, sdir, paths[0], cfg, back, pfile, prompts

    def twin(self, mtype, layers, lengths=(23, 17), tol=(1e-6, 1e-7), **extra):
        name = "family-twin-%s" % mtype
        d, sdir, gpath, cfg, _, pfile, _ = self.files(name, mtype, layers, gguf.F32, lengths, **extra)
        a, b = os.path.join(d, "st.h5"), os.path.join(d, "gguf.h5")
        probe(sdir, pfile, a)
        probe(gpath, pfile, b)
        worst = [0.0, 0.0]
        for (la, ma, _), (lb, mb, _) in zip(read_dump(a, 2), read_dump(b, 2)):
            worst[0] = max(worst[0], float(np.abs(la - lb).max() / np.abs(la).max()))
            worst[1] = max(worst[1], float(np.abs(ma - mb).max()))
        SUMMARY.append("%s: logits rel %.1e maps %.1e" % (name, *worst))
        self.assertLess(worst[0], tol[0], name)
        self.assertLess(worst[1], tol[1], name)

    def against_reference(self, mtype, layers, lengths=(23, 17), **extra):
        name = "family-ref-%s-Q8_0" % mtype
        d, _, gpath, cfg, back, pfile, prompts = self.files(name, mtype, layers, gguf.Q8_0, lengths, **extra)
        m = reference.Model(cfg, back)
        out = os.path.join(d, "dump.h5")
        probe(gpath, pfile, out)
        worst = [0.0, 0.0]
        for p, (lg, mp, _) in zip(prompts, read_dump(out, 2)):
            r = reference.forward(m, p["tokens"])
            worst[0] = max(worst[0], float(np.abs(lg - r["logits"]).max() / np.abs(r["logits"]).max()))
            worst[1] = max(worst[1], float(np.abs(mp - r["map1"]).max()))
        SUMMARY.append("%s: logits rel %.1e maps %.1e" % (name, *worst))
        self.assertLess(worst[0], tr.TOL_LOGITS_REL, name)
        self.assertLess(worst[1], tr.TOL_MAP, name)

    # windows of 8 keys on 23-token prompts; Gemma 3 with six layers has a global one
    def test_gemma2_twin(self):
        self.twin("gemma2", 2, sliding_window=8, attn_logit_softcapping=2.0, final_logit_softcapping=5.0)

    def test_gemma3_twin(self):
        self.twin("gemma3_text", 6, sliding_window=8, final_logit_softcapping=8.0,
                  rope_scaling={"rope_type": "linear", "factor": 4.0})

    def test_gemma2_q8_0_against_reference(self):
        self.against_reference("gemma2", 2, sliding_window=8)

    def test_gemma3_q8_0_against_reference(self):
        self.against_reference("gemma3_text", 6, sliding_window=8)

    # Phi-3: a 40-token prompt passes original_max_position_embeddings (32): long factors
    # (its factors are f32 tensors in the file, doubles in config.json: usual tolerances)
    def test_phi3_twin(self):
        self.twin("phi3", 2, lengths=(40, 17), tol=(tr.TOL_LOGITS_REL, tr.TOL_MAP))

    def test_phi3_window_q8_0_against_reference(self):
        self.against_reference("phi3", 2, lengths=(40, 17), sliding_window=8)

    # GPT-2: Conv1D weights transposed by the converter; NeoX: q/k/v rows regrouped
    def test_gpt2_twin(self):
        # the safetensors twin multiplies Conv1D [in, out] weights, the file [out, in] ones:
        # two products, equal only to rounding (on the AVX-512 path), so the usual tolerances
        self.twin("gpt2", 2, tol=(tr.TOL_LOGITS_REL, tr.TOL_MAP))

    def test_gpt2_q8_0_against_reference(self):
        self.against_reference("gpt2", 2)

    def test_gpt_neox_twin(self):
        self.twin("gpt_neox", 2)

    def test_gpt_neox_sequential_q8_0_against_reference(self):
        self.against_reference("gpt_neox", 2, use_parallel_residual=False)

    def test_olmo2_twin(self):
        self.twin("olmo2", 2)

    def test_olmo2_q8_0_against_reference(self):
        self.against_reference("olmo2", 2)


class Refusals(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp(dir=TMP)
        cfg = make_model.make_config("llama", 1, 64, 4, ffn=96, vocab=tr.VOCAB)
        self.cfg, self.tensors = cfg, make_model.make_weights(cfg)
        self.pfile = os.path.join(self.d, "p.jsonl")
        tr.write_prompts(self.pfile, (9, 5), seed=1)

    def refused(self, kvs, tensors, *want):
        p = os.path.join(self.d, "m.gguf")
        gguf.write_gguf(p, kvs, tensors)
        r = probe(p, self.pfile, os.path.join(self.d, "o.h5"), ok=False)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        for w in want:
            self.assertIn(w, r.stderr)

    def parts(self):
        _, back = gguf.convert(self.cfg, self.tensors, gguf.Q8_0)
        kvs = gguf.config_kvs(self.cfg)
        t = []
        for n, a in self.tensors:
            a = np.asarray(a, np.float32)
            ty = gguf.Q8_0 if a.ndim == 2 else gguf.F32
            t.append((gguf.gguf_name(n), ty, list(a.shape[::-1]), gguf.quantize(a, ty)))
        return kvs, t

    def test_iq_type_by_name(self):
        kvs, t = self.parts()
        name, _, ne, _ = t[3]
        t[3] = (name, gguf.IQ2_XXS, [256, 1], b"\0" * 66)
        self.refused(kvs, t, "IQ2_XXS", name)

    def test_unknown_architecture(self):
        kvs, t = self.parts()
        kvs[0] = ("general.architecture", gguf.STRING, "gptj")
        self.refused(kvs, t, "architecture 'gptj' is not supported")

    def test_missing_key(self):
        kvs, t = self.parts()
        kvs = [kv for kv in kvs if not kv[0].endswith("feed_forward_length")]
        self.refused(kvs, t, "'llama.feed_forward_length' is missing")

    def test_unused_tensor_and_rope_freqs(self):
        kvs, t = self.parts()
        self.refused(kvs, t + [("extra.weight", gguf.F32, [4], b"\0" * 16)], "'extra.weight'", "--allow-unused")
        self.refused(kvs, t + [("rope_freqs.weight", gguf.F32, [5], b"\0" * 20)], "rope_freqs.weight", "F32 [")

    def test_wrong_shape(self):
        kvs, t = self.parts()
        kvs = [(k, v, 128 if k.endswith("feed_forward_length") else x) for k, v, x in kvs]
        self.refused(kvs, t, "ffn_gate.weight", "[128, 64]")


if __name__ == "__main__":
    try:
        res = unittest.main(verbosity=2, exit=False)
        for line in SUMMARY:
            print(line, file=sys.stderr)
        sys.exit(0 if res.result.wasSuccessful() else 1)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
