#!/usr/bin/python3
"""test_reference.py — checks bin/probe against the independent numpy reference
(tests/ref/reference.py) on tiny random models of all three types, in F32, F16 and
BF16, single-file and sharded; and checks the reference itself (row sums, an
alternative one-head computation, RoPE properties, safetensors round trips).

Run from the repo root:  /usr/bin/python3 tests/test_reference.py   (BIN=bin by default)
Prints one line per model case with the largest errors seen.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import families  # noqa: E402
import make_model  # noqa: E402
import reference  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")

# tolerances (see the brief: never loosened to make a failure pass)
TOL_LOGITS_REL = 1e-4
TOL_MAP = 1e-5
TOL_LAMBDA = 1e-6
TOL_NLL = 1e-4
TOL_ARGMAX_TIE = 1e-5

VOCAB = 97
HIDDEN = 64
FFN = 96
LAYERS = 2

# name, model type, make_model keywords, weight dtype, shards, prompt lengths
CASES = [
    ("llama-mha-f32", "llama", dict(heads=4), "f32", 1, (17, 13)),
    ("llama-gqa-bf16-sharded", "llama", dict(heads=4, kv_heads=2), "bf16", 2, (23, 14)),
    ("llama-tied-llama3-f16", "llama",
     dict(heads=4, tied=True, rope_scaling="llama3"), "f16", 1, (40, 16)),
    ("llama-linear-interleaved-bf16", "llama",
     dict(heads=2, kv_heads=1, rope_scaling="linear", rope_theta=500000.0,
          rms_norm_eps=1e-5, rope_interleaved=True), "bf16", 1, (19, 13)),
    ("difft-mha-f16", "diff_transformer", dict(heads=2), "f16", 1, (21, 15)),
    ("difft-gqa-flash-f32", "diff_transformer",
     dict(heads=4, kv_heads=2, kv_pairing="flash"), "f32", 1, (29, 13)),
    ("difft-gqa-naive-bf16-sharded", "diff_transformer",
     dict(heads=4, kv_heads=2, kv_pairing="naive"), "bf16", 3, (26, 17)),
    ("difft-gqa-default-nosubln-lambdainit-f32", "diff_transformer",
     dict(heads=4, kv_heads=1, subln=False, lambda_init=0.5), "f32", 1, (18, 14)),
    ("diffllama-mha-bf16", "diffllama", dict(heads=4), "bf16", 1, (24, 13)),
    ("diffllama-gqa-f16-sharded", "diffllama", dict(heads=4, kv_heads=2), "f16", 2, (31, 20)),
    ("diffllama-gqa-tied-lambdainit-f32", "diffllama",
     dict(heads=8, kv_heads=2, tied=True, lambda_init=0.3), "f32", 1, (22, 13)),
    # longer than one attention row block (1024 rows / heads, clamped to 16..128 rows:
    # forward.c ATTN_ROWS_TOTAL), so maps and logits are assembled from several blocks
    ("llama-multiblock-f32", "llama", dict(heads=8, kv_heads=2), "f32", 1, (150, 40)),
    ("difft-multiblock-f32", "diff_transformer", dict(heads=4, kv_heads=2), "f32", 1, (150, 20)),
    ("diffllama-multiblock-bf16", "diffllama", dict(heads=8, kv_heads=4), "bf16", 1, (141, 30)),
    # longer than one MLP row block (512 rows) and one LM-head block (512 rows)
    ("llama-long-f32", "llama", dict(heads=4, kv_heads=2, max_pos=1024), "f32", 1, (600, 20)),
    # Llama-family checkpoints: Qwen2 q/k/v biases, Qwen3 per-head q/k norms, sliding
    # windows (Mistral: every layer; Qwen2: from max_window_layers on), dynamic RoPE
    # within its original context
    ("qwen2-bias-tied-bf16-sharded", "qwen2", dict(heads=4, kv_heads=2, tied=True), "bf16", 2,
     (23, 14)),
    ("qwen2-window-from-layer1-f32", "qwen2",
     dict(heads=4, kv_heads=2, sliding_window=6, max_window_layers=1), "f32", 1, (25, 13)),
    ("mistral-window-f16", "mistral", dict(heads=4, kv_heads=2, sliding_window=7), "f16", 1,
     (30, 9)),
    ("mistral-window-multiblock-f32", "mistral", dict(heads=8, kv_heads=2, sliding_window=37),
     "f32", 1, (150, 40)),
    ("qwen3-qknorm-hd24-bf16", "qwen3", dict(heads=4, kv_heads=2, head_dim=24), "bf16", 1, (21, 13)),
    ("llama-dynamic-within-f32", "llama", dict(heads=4, rope_scaling="dynamic", max_pos=64), "f32", 1,
     (40, 16)),
    # published configs (tests/ref/make_model.py PUBLISHED), shrunk, in their torch_dtype
    ("pub-Llama-3.2-1B", "published", dict(name="Llama-3.2-1B", sizes=dict(heads=8, head_dim=8)),
     "bf16", 2, (40, 17)),
    ("pub-TinyLlama", "published", dict(name="TinyLlama-1.1B-Chat-v1.0", sizes=dict(heads=8)),
     "bf16", 1, (21, 13)),
    ("pub-SmolLM2-135M", "published", dict(name="SmolLM2-135M", sizes=dict(heads=6, head_dim=8)),
     "bf16", 1, (19, 14)),
    ("pub-Qwen2.5-0.5B", "published", dict(name="Qwen2.5-0.5B", sizes=dict(heads=7, head_dim=8)),
     "bf16", 1, (22, 13)),
    ("pub-Mistral-7B-window", "published",
     dict(name="Mistral-7B-v0.1", sizes=dict(heads=8, head_dim=8, window=6)), "bf16", 1, (33, 15)),
    ("pub-DiffLlama", "published", dict(name="DiffLlama", sizes=dict(heads=8, head_dim=8)), "f32", 1,
     (20, 13)),
    # GPT-2 (tests/ref/families.py, from modeling_gpt2.py): LayerNorm, Conv1D weights [in, out]
    # with q|k|v fused in c_attn, learned positions, biases, tied head; as save_pretrained
    # writes it ("transformer." prefix) with its switches, and as openai-community/gpt2 ships
    # it (no prefix, the causal-mask buffers)
    ("gpt2-bylayer-bf16-sharded", "gpt2",
     dict(heads=4, family_keys={"scale_attn_by_inverse_layer_idx": True}), "bf16", 2, (23, 14)),
    ("gpt2-untied-erf-unscaled-f16", "gpt2",
     dict(heads=2, family_keys={"tie_word_embeddings": False, "activation_function": "gelu",
                                "scale_attn_weights": False, "reorder_and_upcast_attn": True}),
     "f16", 1, (19, 13)),
    ("gpt2-multiblock-f32", "gpt2", dict(heads=8, max_pos=160), "f32", 1, (150, 40)),
    ("pub-gpt2", "published", dict(name="gpt2", sizes=dict(heads=4, head_dim=16)), "f32", 1, (40, 17)),
    # GPT-NeoX (Pythia; families.py from modeling_gpt_neox.py): per-head interleaved
    # query_key_value, rotary on the first rotary_pct of each head, parallel residual or not
    ("neox-parallel-bf16-sharded", "gpt_neox", dict(heads=4), "bf16", 2, (23, 14)),
    ("neox-sequential-half-rotary-nobias-f16", "gpt_neox",
     dict(heads=2, family_keys={"use_parallel_residual": False, "rotary_pct": 0.5, "attention_bias": False,
                                "hidden_act": "gelu_new"}), "f16", 1, (19, 13)),
    ("neox-tied-multiblock-f32", "gpt_neox", dict(heads=8, tied=True), "f32", 1, (150, 40)),
    ("pub-pythia-1b", "published", dict(name="pythia-1b", sizes=dict(heads=4, head_dim=16)), "f16", 1,
     (40, 17)),
    # Gemma 2 (families.py from modeling_gemma2.py): GeGLU, (1 + w) norms before and after
    # attention and MLP, embeddings × √D, soft-caps small enough to bite, alternating
    # sliding windows, query_pre_attn_scalar apart from head_dim
    ("gemma2-caps-window-gqa-bf16-sharded", "gemma2",
     dict(heads=4, family_keys={"num_key_value_heads": 2, "attn_logit_softcapping": 4.0,
                                "final_logit_softcapping": 3.0, "sliding_window": 5,
                                "query_pre_attn_scalar": 8}), "bf16", 2, (23, 14)),
    ("gemma2-window-multiblock-f32", "gemma2",
     dict(heads=8, family_keys={"sliding_window": 37, "attn_logit_softcapping": 2.0}), "f32", 1, (150, 40)),
    ("pub-gemma-2-2b-window", "published",
     dict(name="gemma-2-2b", sizes=dict(heads=8, head_dim=8, window=6)), "f32", 3, (33, 15)),
    # Gemma 3's text model: per-head (1 + w) q/k norms, the local RoPE base on sliding
    # layers (every layer but each third here, every sixth as published), a scaled global RoPE
    ("gemma3-pattern3-linear-gqa-bf16", "gemma3_text",
     dict(heads=4, family_keys={"num_key_value_heads": 1, "sliding_window": 6, "sliding_window_pattern": 3,
                                "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "rope_theta": 500.0,
                                "rope_local_base_freq": 20.0}), "bf16", 1, (25, 13)),
    ("pub-gemma-3-1b-pt-window", "published",
     dict(name="gemma-3-1b-pt", layers=6, sizes=dict(heads=4, head_dim=16, window=7)), "bf16", 1, (33, 15)),
    # OLMo 2 (families.py from modeling_olmo2.py): norms after attention and MLP only, q/k
    # norms over the whole projections, GQA
    ("olmo2-gqa-tied-f16", "olmo2", dict(heads=4, tied=True, family_keys={"num_key_value_heads": 2}), "f16", 1,
     (21, 13)),
    ("pub-OLMo-2-1124-7B", "published", dict(name="OLMo-2-1124-7B", sizes=dict(heads=4, head_dim=16)), "f32", 3,
     (40, 17)),
    # Phi-3 (families.py from modeling_phi3.py): qkv_proj and gate_up_proj bound as views,
    # longrope with short factors up to original_max_position_embeddings (32) and long ones
    # past it (the first prompt), the attention factor on cos and sin; GQA, a window
    ("phi3-longrope-gqa-window-bf16-sharded", "phi3",
     dict(heads=4, family_keys={"num_key_value_heads": 2, "sliding_window": 9}), "bf16", 2, (41, 14)),
    ("pub-Phi-3-mini-128k-instruct", "published",
     dict(name="Phi-3-mini-128k-instruct", sizes=dict(heads=4, head_dim=16)), "bf16", 2, (40, 17)),
]

SUMMARY = []


def write_prompts(path, lengths, seed, vocab=VOCAB, bos_second=True):
    """Two prompts: the first with id, text, every span kind and depth; the second
    tokens only (with "bos": false when not bos_second). Returns the token lists."""
    rng = np.random.default_rng(seed)
    t0, t1 = lengths
    a = [0] + [int(x) for x in rng.integers(1, vocab, t0 - 1)]
    b = [int(x) for x in rng.integers(0, vocab, t1)]
    p0 = {"id": "p0", "tokens": a, "text": ["<bos>"] + ["w%d" % x for x in a[1:]],
          "answer": [[3, 6]], "distractor": [[7, 9]], "query": [[t0 - 6, t0 - 4]],
          "target": [[t0 - 4, t0 - 2]], "depth": 0.25}
    p1 = {"id": "p1", "tokens": b}
    if not bos_second:
        p1["bos"] = False
    with open(path, "w") as f:
        f.write(json.dumps(p0) + "\n")
        f.write(json.dumps(p1) + "\n")
    return [p0, p1]


def segments_of(p):
    """Segment codes of a prompt dict (docs/format.md): 0 context, 1 bos (token 0 unless
    "bos": false), then answer 2, query 3, distractor 4, target 5."""
    seg = np.zeros(len(p["tokens"]), np.uint8)
    if p.get("bos", True):
        seg[0] = 1
    for code, kind in ((2, "answer"), (3, "query"), (4, "distractor"), (5, "target")):
        for a, b in p.get(kind, []):
            seg[a:b] = code
    return seg


def run_probe(model, prompts, out, *extra):
    cmd = [PROBE, "--model", model, "--prompts", prompts, "--out", out] + list(extra)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0:
        raise AssertionError("%s exited %d\nstdout: %s\nstderr: %s" % (
            " ".join(cmd), r.returncode, r.stdout.decode(errors="replace"),
            r.stderr.decode(errors="replace")))
    return r


def top2_gap(logits):
    s = np.sort(logits, axis=1)
    return s[:, -1] - s[:, -2]


# ---------------------------------------------------------------------------
# the reference checked on its own
# ---------------------------------------------------------------------------

class ReferenceSelfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-ref-self-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def model(self, name, mtype, dtype="f32", shards=1, **kw):
        d = os.path.join(self.tmp, name)
        if not os.path.exists(d):
            make_model.make_model(d, mtype, layers=LAYERS, hidden=HIDDEN, ffn=FFN,
                                  vocab=VOCAB, dtype=dtype, shards=shards, seed=7, **kw)
        return reference.load_model(d)

    def test_bf16_round_to_nearest_even(self):
        x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20,
                      -(1 + 3 * 2 ** -8), 3.4e38, np.inf, -0.0], dtype=np.float32)
        want = np.array([1.0, 1.0, 1 + 2 ** -6, 1 + 2 ** -7, -(1 + 2 ** -6), np.inf,
                         np.inf, -0.0], dtype=np.float32)
        got = make_model.bf16_bits_to_f32(make_model.f32_to_bf16_bits(x))
        np.testing.assert_array_equal(got, want)
        self.assertTrue(np.signbit(got[-1]))
        self.assertTrue(np.isnan(make_model.bf16_bits_to_f32(
            make_model.f32_to_bf16_bits(np.array([np.nan], np.float32))))[0])

    def test_safetensors_round_trip(self):
        cfg = make_model.make_config("diff_transformer", 2, HIDDEN, 4, kv_heads=2, ffn=FFN)
        tensors = make_model.make_weights(cfg, seed=3)
        for dtype in ("f32", "f16", "bf16"):
            for shards in (1, 3):
                d = os.path.join(self.tmp, "rt-%s-%d" % (dtype, shards))
                make_model.write_model(d, cfg, tensors, dtype, shards)
                got = reference.read_tensors(d)
                self.assertEqual(set(got), {n for n, _ in tensors})
                for name, arr in tensors:
                    if dtype == "f32":
                        want = arr.astype(np.float64)
                    elif dtype == "f16":
                        want = arr.astype(np.float16).astype(np.float64)
                    else:
                        want = make_model.bf16_bits_to_f32(
                            make_model.f32_to_bf16_bits(arr)).astype(np.float64)
                        # bf16 keeps 8 significant bits: relative error <= half an ulp
                        self.assertLessEqual(float(np.max(np.abs(want - arr) / np.abs(arr))),
                                             2.0 ** -8)
                    self.assertEqual(got[name].shape, arr.shape, name)
                    np.testing.assert_array_equal(got[name], want, err_msg=name)
                # header layout: length fits, data 8-byte aligned
                files = [f for f in os.listdir(d) if f.endswith(".safetensors")]
                self.assertEqual(len(files), shards)
                for f in files:
                    with open(os.path.join(d, f), "rb") as fh:
                        n = int.from_bytes(fh.read(8), "little")
                        hdr = json.loads(fh.read(n))
                    self.assertEqual(n % 8, 0)
                    for k, e in hdr.items():
                        if k != "__metadata__":
                            self.assertEqual(e["data_offsets"][0] % 8, 0)

    def test_make_model_cli(self):
        tool = os.path.join(HERE, "ref", "make_model.py")
        d = os.path.join(self.tmp, "cli")
        r = subprocess.run([sys.executable, tool, d, "--type", "diffllama", "--layers", "1",
                            "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "40",
                            "--vocab", "50", "--dtype", "bf16", "--shards", "2", "--tied",
                            "--lambda-init", "0.4", "--rope-scaling", "llama3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(d, "model.safetensors.index.json")))
        m = reference.load_model(d)
        self.assertEqual((m.type, m.L, m.D, m.H, m.Hkv, m.hd, m.F, m.V, m.tied),
                         ("diffllama", 1, 32, 4, 2, 8, 40, 50, True))
        self.assertEqual(m.lambda_init(0), 0.4)
        self.assertEqual(m.rope_kind, "llama3")
        r = subprocess.run([sys.executable, tool, d + "2", "--type", "diffllama", "--layers", "1",
                            "--hidden", "32", "--heads", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 2)
        self.assertFalse(os.path.exists(d + "2"))

    def test_shapes_follow_design_table(self):
        D, H, Hkv = HIDDEN, 4, 2
        cfg = make_model.make_config("diff_transformer", 1, D, H, kv_heads=Hkv, ffn=FFN)
        d = D // H // 2
        t = dict(make_model.make_weights(cfg))
        a = "model.layers.0.self_attn."
        self.assertEqual(t[a + "q_proj.weight"].shape, (2 * H * d, D))
        self.assertEqual(t[a + "k_proj.weight"].shape, (2 * Hkv * d, D))
        self.assertEqual(t[a + "v_proj.weight"].shape, (Hkv * 2 * d, D))
        self.assertEqual(t[a + "out_proj.weight"].shape, (D, H * 2 * d))
        self.assertEqual(t[a + "subln.weight"].shape, (2 * d,))
        self.assertEqual(t[a + "lambda_q1"].shape, (d,))
        cfg = make_model.make_config("diffllama", 1, D, H, kv_heads=Hkv, ffn=FFN, tied=True)
        hd = D // H
        t = dict(make_model.make_weights(cfg))
        self.assertEqual(t[a + "q_proj.weight"].shape, (H * hd, D))
        self.assertEqual(t[a + "k_proj.weight"].shape, (Hkv * hd, D))
        self.assertEqual(t[a + "o_proj.weight"].shape, (D, H * hd))
        self.assertEqual(t[a + "lambda_k2"].shape, (hd,))
        self.assertEqual(t["model.layers.0.mlp.down_proj.weight"].shape, (D, FFN))
        self.assertNotIn("lm_head.weight", t)

    def test_published_configs_keep_every_key(self):
        sizes = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
                 "intermediate_size", "vocab_size", "head_dim", "bos_token_id", "eos_token_id",
                 "max_window_layers", "rope_scaling", "n_layer", "n_head", "n_embd",
                 "original_max_position_embeddings", "max_position_embeddings", "num_noise_heads"}
        for name, (shards, pub) in make_model.PUBLISHED.items():
            cfg, n = make_model.published_config(name)
            self.assertEqual(n, shards)
            self.assertEqual(set(cfg), set(pub), name)
            for k in set(pub) - sizes:
                self.assertEqual(cfg[k], pub[k], "%s: %s" % (name, k))
        # hub layout: sorted names, packed data, shards listed in the index
        cfg, _ = make_model.published_config("Qwen2.5-0.5B")
        d = os.path.join(self.tmp, "hub")
        make_model.write_model(d, cfg, make_model.make_weights(cfg), "bf16", 3, hub=True)
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            wmap = json.load(f)["weight_map"]
        self.assertEqual(sorted(set(wmap.values())), ["model-%05d-of-00003.safetensors" % i
                                                      for i in (1, 2, 3)])
        self.assertIn("model.layers.0.self_attn.q_proj.bias", wmap)
        with open(os.path.join(d, "config.json")) as f:
            self.assertEqual(json.load(f), cfg)

    def test_map_rows(self):
        rng = np.random.default_rng(0)
        toks = rng.integers(0, VOCAB, 21)
        for mtype, kw in (("llama", dict(heads=4, kv_heads=2)),
                          ("diff_transformer", dict(heads=4, kv_heads=2, kv_pairing="naive")),
                          ("diffllama", dict(heads=4, kv_heads=2))):
            m = self.model("rows-" + mtype, mtype, **kw)
            r = reference.forward(m, toks)
            T = len(toks)
            upper = np.triu(np.ones((T, T), bool), 1)
            self.assertEqual(r["logits"].shape, (T, VOCAB))
            self.assertEqual(r["map1"].shape, (LAYERS, m.diff_heads(), T, T))
            np.testing.assert_allclose(r["map1"].sum(-1), 1.0, atol=1e-12)
            self.assertTrue(np.all(r["map1"][..., upper] == 0))
            self.assertTrue(np.all(r["map1"] >= 0))
            if mtype == "llama":
                self.assertNotIn("map2", r)
                continue
            np.testing.assert_allclose(r["map2"].sum(-1), 1.0, atol=1e-12)
            want = np.broadcast_to((1 - r["lambda"])[:, None, None], r["diff"].shape[:3])
            np.testing.assert_allclose(r["diff"].sum(-1), want, atol=1e-12)
            self.assertTrue(np.all(r["diff"][..., upper] == 0))
            np.testing.assert_allclose(r["lambda_init"],
                                       [0.8 - 0.6 * math.exp(-0.3 * l) for l in range(LAYERS)])
            # maps are not trivially uniform or one-hot
            self.assertGreater(float(r["map1"][..., -1, :].max()), 0.1)
            self.assertLess(float(r["map1"][..., -1, :].max()), 0.999)

    def test_llama_head_against_loop(self):
        """One head per layer recomputed with scalar loops and complex-number RoPE."""
        for kw in (dict(heads=4, kv_heads=2), dict(heads=4, rope_scaling="llama3"),
                   dict(heads=2, kv_heads=1, rope_interleaved=True, rope_scaling="linear")):
            name = "loop-" + "-".join("%s%s" % kv for kv in sorted(kw.items()))
            m = self.model(name, "llama", **kw)
            toks = np.random.default_rng(1).integers(0, VOCAB, 15)
            r = reference.forward(m, toks)
            T, hd = len(toks), m.hd
            xs = [m.t["model.embed_tokens.weight"][toks]] + list(r["hidden"][:-1])
            freqs = reference.inv_freq(m, hd)
            for l in range(LAYERS):
                p = "model.layers.%d." % l
                x = xs[l]
                h = x / np.sqrt((x ** 2).mean(1, keepdims=True) + m.eps) * \
                    m.t[p + "input_layernorm.weight"]
                head = m.H - 1
                kvh = head // (m.H // m.Hkv)
                Wq = m.t[p + "self_attn.q_proj.weight"][head * hd:(head + 1) * hd]
                Wk = m.t[p + "self_attn.k_proj.weight"][kvh * hd:(kvh + 1) * hd]

                def rot(vec, pos):
                    if m.interleaved:
                        z = vec[0::2] + 1j * vec[1::2]
                    else:
                        z = vec[:hd // 2] + 1j * vec[hd // 2:]
                    z = z * np.exp(1j * pos * freqs)
                    out = np.empty(hd)
                    if m.interleaved:
                        out[0::2], out[1::2] = z.real, z.imag
                    else:
                        out[:hd // 2], out[hd // 2:] = z.real, z.imag
                    return out

                A = np.zeros((T, T))
                for i in range(T):
                    qi = rot(Wq @ h[i], i)
                    s = [float(qi @ rot(Wk @ h[j], j)) / math.sqrt(hd) for j in range(i + 1)]
                    e = [math.exp(v - max(s)) for v in s]
                    for j in range(i + 1):
                        A[i, j] = e[j] / sum(e)
                np.testing.assert_allclose(r["map1"][l, head], A, atol=1e-12, err_msg=name)

    def test_rope_relative_and_norm(self):
        m = self.model("rope", "llama", heads=4, rope_scaling="llama3")
        rng = np.random.default_rng(2)
        q, k = rng.standard_normal(16), rng.standard_normal(16)
        T = 12
        fr = reference.inv_freq(m, 16)
        for inter in (True, False):
            Q = reference.rope(np.tile(q, (T, 1, 1)), fr, inter)[:, 0]
            K = reference.rope(np.tile(k, (T, 1, 1)), fr, inter)[:, 0]
            S = Q @ K.T
            for off in range(-3, 4):
                dg = np.diagonal(S, off)
                np.testing.assert_allclose(dg, dg[0], atol=1e-12)
            np.testing.assert_allclose(np.linalg.norm(Q, axis=1), np.linalg.norm(q), rtol=1e-12)
            np.testing.assert_allclose(Q[0], q)

    def test_llama3_frequencies(self):
        m = self.model("l3", "llama", heads=4, rope_scaling="llama3")   # hd 16
        f0 = 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16.0)
        f = reference.inv_freq(m, 16)
        wl = 2 * math.pi / f0
        # original 64, low 1, high 4: keep wl < 16, divide by 8 when wl > 64, else smooth
        self.assertEqual(f[0], f0[0])                      # wl 6.3
        self.assertTrue(16 < wl[1] < 64 and 16 < wl[2] < 64)
        s = (64 / wl[1] - 1) / 3
        self.assertAlmostEqual(f[1], (1 - s) * f0[1] / 8 + s * f0[1], places=15)
        np.testing.assert_allclose(f[3:], f0[3:] / 8, rtol=1e-15)
        m = self.model("lin", "llama", heads=4, rope_scaling="linear")
        np.testing.assert_allclose(reference.inv_freq(m, 16), f0 / 2.5, rtol=1e-15)

    def test_kv_pairings_agree_without_gqa(self):
        toks = np.random.default_rng(4).integers(0, VOCAB, 11)
        a = reference.forward(self.model("mha-f", "diff_transformer", heads=2,
                                         kv_pairing="flash"), toks)
        b = reference.forward(self.model("mha-n", "diff_transformer", heads=2,
                                         kv_pairing="naive"), toks)
        np.testing.assert_array_equal(a["logits"], b["logits"])
        c = reference.forward(self.model("gqa-f", "diff_transformer", heads=4, kv_heads=2,
                                         kv_pairing="flash"), toks)
        d = reference.forward(self.model("gqa-n", "diff_transformer", heads=4, kv_heads=2,
                                         kv_pairing="naive"), toks)
        self.assertGreater(float(np.abs(c["map2"] - d["map2"]).max()), 1e-3)

    def test_nll(self):
        logits = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
        got = reference.nll(logits, [0, 2, 1])
        lse0 = math.log(1 + math.e + math.e ** 2)
        self.assertAlmostEqual(got[0], lse0 - 2.0)
        self.assertAlmostEqual(got[1], math.log(math.e ** 3 + 2))
        self.assertTrue(math.isnan(got[2]))


# ---------------------------------------------------------------------------
# bin/probe against the reference
# ---------------------------------------------------------------------------

class ProbeAgainstReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-ref-probe-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_case(self, idx, name, mtype, kw, dtype, shards, lengths):
        if not os.access(PROBE, os.X_OK):
            self.fail("%s not found or not executable (build it, or set BIN)" % PROBE)
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        mdir = os.path.join(d, "model")
        if mtype == "published":
            # a published config, every key as the hub has it, shrunk; sharded as the hub
            # shards it, tensors sorted and packed as save_pretrained writes them
            cfg, hub_shards = make_model.published_config(kw["name"], layers=kw.get("layers", LAYERS), vocab=VOCAB,
                                                          **kw.get("sizes", {}))
            make_model.write_model(mdir, cfg, make_model.make_weights(cfg, seed=100 + idx, hub=True), dtype,
                                   max(shards, hub_shards), hub=True)
            mtype = cfg["model_type"]
        else:
            make_model.make_model(mdir, mtype, layers=LAYERS, hidden=HIDDEN, ffn=FFN, vocab=VOCAB,
                                  dtype=dtype, shards=shards, seed=100 + idx, **kw)
        pfile = os.path.join(d, "prompts.jsonl")
        prompts = write_prompts(pfile, lengths, seed=200 + idx, bos_second=idx % 2 == 0)
        out = os.path.join(d, "dump.h5")
        run_probe(mdir, pfile, out, "--maps", "all", "--map-dtype", "f32", "--save-logits",
                  "--quiet")
        m = reference.load_model(mdir)
        diff = m.type != "llama"
        err = {"logits": 0.0, "maps": 0.0, "lambda": 0.0, "nll": 0.0}
        problems = []
        extras = {}
        with h5py.File(out, "r") as f:
            for si, prompt in enumerate(prompts):
                toks = prompt["tokens"]
                r = reference.forward(m, toks)
                s = f["samples/%06d" % si]
                T = len(toks)
                np.testing.assert_array_equal(s["tokens"][()], toks)
                # logits
                lg = s["logits"][()]
                self.assertEqual(lg.shape, (T, VOCAB))
                e = float(np.abs(lg - r["logits"]).max() / np.abs(r["logits"]).max())
                err["logits"] = max(err["logits"], e)
                if not e < TOL_LOGITS_REL:
                    problems.append("sample %d: logits rel error %.3g" % (si, e))
                # maps: index the reference by the captured layers/heads/rows scales
                at = s["attn"]
                layers, heads, rows = at["layers"][()], at["heads"][()], at["rows"][()]
                np.testing.assert_array_equal(layers, np.arange(m.L))
                np.testing.assert_array_equal(heads, np.arange(m.diff_heads()))
                np.testing.assert_array_equal(rows, np.arange(T))
                for key in (("map1", "map2", "diff") if diff else ("map1",)):
                    got = at[key][()]
                    want = r[key][np.ix_(layers, heads, rows, np.arange(T))]
                    if key == "map2" and "noise_groups" in at:   # Motif GDA: one map per noise group
                        want = r["noise"][np.ix_(layers, at["noise_groups"][()], rows, np.arange(T))]
                    self.assertEqual(got.shape, want.shape, key)
                    self.assertEqual(got.dtype, np.float32, key)
                    e = float(np.abs(got - want).max())
                    err["maps"] = max(err["maps"], e)
                    if not e < TOL_MAP:
                        li, hi, qi, ki = np.unravel_index(np.abs(got - want).argmax(), got.shape)
                        problems.append("sample %d: %s error %.3g at layer %d head %d "
                                        "query %d key %d (probe %.7g, reference %.7g)" % (
                                            si, key, e, li, hi, qi, ki, got[li, hi, qi, ki],
                                            want[li, hi, qi, ki]))
                if not diff:
                    self.assertNotIn("map2", at)
                    self.assertNotIn("diff", at)
                # nll and argmax
                want_nll = reference.nll(r["logits"], toks)
                got_nll = s["nll"][()]
                self.assertTrue(np.isnan(got_nll[-1]), "nll[T-1] must be NaN")
                self.assertFalse(np.isnan(got_nll[:-1]).any(), "nll NaN before T-1")
                e = float(np.abs(got_nll[:-1] - want_nll[:-1]).max())
                err["nll"] = max(err["nll"], e)
                if not e < TOL_NLL:
                    problems.append("sample %d: nll error %.3g" % (si, e))
                am = s["argmax"][()]
                clear = top2_gap(r["logits"]) > TOL_ARGMAX_TIE
                bad = np.nonzero(clear & (am != r["logits"].argmax(1)))[0]
                if len(bad):
                    problems.append("sample %d: argmax differs at %s" % (si, bad.tolist()))
                self.compare_extras(s, r, prompt, si, extras, problems)
            # lambda (one per layer; DIFF V2's is per token: its own test)
            if diff and "lambda" in r:
                lam, li = f["model/lambda"][()], f["model/lambda_init"][()]
                self.assertEqual(lam.dtype, np.float32)
                e = max(float(np.abs(lam - r["lambda"]).max()),
                        float(np.abs(li - r["lambda_init"]).max()))
                err["lambda"] = e
                if not e < TOL_LAMBDA:
                    problems.append("lambda error %.3g (probe %s / %s, reference %s / %s)" % (
                        e, lam.tolist(), li.tolist(), r["lambda"].tolist(),
                        r["lambda_init"].tolist()))
            else:
                self.assertNotIn("lambda", f.get("model", {}))
        line = "%s: logits rel %.1e maps %.1e nll %.1e" % (name, err["logits"], err["maps"],
                                                             err["nll"])
        if diff and mtype != "diff_transformer_v2":
            line += " lambda %.1e" % err["lambda"]
        for k in sorted(extras):
            line += " %s %.1e" % (k, extras[k])
        SUMMARY.append(line + ("" if not problems else "  FAILED"))
        print("\n" + line, file=sys.stderr)
        if problems:
            self.fail(name + ":\n  " + "\n  ".join(problems))

    def compare_extras(self, s, r, prompt, si, err, problems):
        """Derived datasets, compared only when the dump has them (outliers/, noise/,
        target_*): the reference computes them from docs/format.md's definitions."""
        toks = prompt["tokens"]

        def note(key, e, tol, what):
            err[key] = max(err.get(key, 0.0), e)
            if not e < tol:
                problems.append("sample %d: %s error %.3g (tolerance %.0e)" % (si, what, e, tol))

        o = "outliers/"
        if o + "hidden/top" in s:
            got = s[o + "hidden/top"][()]
            for l in range(got.shape[0]):
                want = reference.top_abs(r["hidden"][l], got.shape[1])
                scale = want[0]
                note("hidden", float(np.abs(got[l] - want).max()) / scale, 1e-4,
                     "outliers/hidden/top layer %d (relative)" % l)
        if o + "hidden/channel_absmax" in s:
            got = s[o + "hidden/channel_absmax"][()]
            want = np.abs(r["hidden"]).max(axis=1)                 # [L, D]
            note("hidden", float(np.abs(got - want).max() / want.max()), 1e-4,
                 "outliers/hidden/channel_absmax (relative)")
        if o + "logits/top" in s:
            got = s[o + "logits/top"][()]
            for l in range(got.shape[0]):
                want = reference.qk_top(r, l, got.shape[1])
                note("qk", float(np.abs(got[l, :len(want)] - want).max() / want[0]), 1e-4,
                     "outliers/logits/top layer %d (relative)" % l)
        # noise: only for a sample with an answer and a query span (analysis row = the
        # last token of the last query span)
        if "noise/shares" in s and prompt.get("answer") and prompt.get("query"):
            row = prompt["query"][-1][1] - 1
            want = reference.noise_stats(r, segments_of(prompt), [row])
            for k in ("shares", "raw", "shares_abs", "entropy", "negative_mass"):
                if k == "negative_mass" and "diff" not in r:
                    self.assertNotIn("noise/negative_mass", s)
                    continue
                got = s["noise/" + k][()]
                self.assertEqual(got.shape, want[k].shape, "noise/" + k)
                note("noise", float(np.abs(got - want[k]).max()), 1e-4 if k == "entropy" else 1e-5,
                     "noise/" + k)
        if prompt.get("target") and "target_nll" in s:
            pos = [t for a, b in prompt["target"] for t in range(a, b) if t > 0]
            nll = reference.nll(r["logits"], toks)
            want_nll = float(np.mean([nll[t - 1] for t in pos]))
            note("target", abs(float(s["target_nll"][()]) - want_nll), 1e-4, "target_nll")
            gaps = top2_gap(r["logits"])
            if all(gaps[t - 1] > TOL_ARGMAX_TIE for t in pos):
                want_ok = all(int(r["logits"][t - 1].argmax()) == toks[t] for t in pos)
                if bool(s["target_correct"][()]) != want_ok:
                    problems.append("sample %d: target_correct %s, reference %s" % (
                        si, bool(s["target_correct"][()]), want_ok))
        elif not prompt.get("target"):
            self.assertNotIn("target_nll", s)
            self.assertNotIn("target_correct", s)


class ProbeRefusesUnsupported(unittest.TestCase):
    """docs/format.md: other rope kinds, attention_bias / mlp_bias true, a hidden_act other
    than silu are refused with a clear error (exit 1, message naming the key, no output)."""

    def test_refusals(self):
        if not os.access(PROBE, os.X_OK):
            self.fail("%s not found or not executable (build it, or set BIN)" % PROBE)
        tmp = tempfile.mkdtemp(prefix="dfl-ref-refuse-")
        try:
            cases = (("yarn", "llama", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}),
                     # dynamic NTK past the original context (prompts of 13 > 8 tokens)
                     ("dynamic", "llama", {"rope_scaling": {"type": "dynamic", "factor": 2.0},
                                           "max_position_embeddings": 8}),
                     # a renamed Mistral: its window would be silently ignored by llama
                     ("sliding_window", "llama", {"sliding_window": 4}),
                     # keys that change the maths and are not implemented
                     ("final_logit_softcapping", "llama", {"final_logit_softcapping": 30.0}),
                     ("quantization_config", "mistral", {"quantization_config": {"bits": 4}}),
                     ("layer_types", "qwen2", {"use_sliding_window": True, "sliding_window": 4,
                                               "layer_types": ["sliding_attention", "full_attention"]}),
                     ("yarn", "llama", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                                                            "rope_theta": 10000.0}}),
                     ("attention_bias", "llama", {"attention_bias": True}),
                     ("mlp_bias", "diffllama", {"mlp_bias": True}),
                     ("hidden_act", "diff_transformer", {"hidden_act": "gelu"}))
            for i, (word, mtype, edit) in enumerate(cases):
                d = os.path.join(tmp, str(i))
                cfg = make_model.make_config(mtype, 2 if mtype == "qwen2" else 1, 32, 2, ffn=48,
                                             vocab=VOCAB)
                w = make_model.make_weights(cfg)
                cfg.update(edit)
                make_model.write_model(os.path.join(d, "m"), cfg, w)
                write_prompts(os.path.join(d, "p.jsonl"), (13, 13), 1)
                r = subprocess.run([PROBE, "--model", os.path.join(d, "m"), "--prompts",
                                    os.path.join(d, "p.jsonl"), "--out", os.path.join(d, "o.h5"),
                                    "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=60)
                err = r.stderr.decode(errors="replace")
                self.assertEqual(r.returncode, 1, "%s: exit %d (%s)" % (edit, r.returncode, err))
                self.assertIn(word, err, "%s: message does not name it: %s" % (edit, err))
                self.assertEqual(sorted(os.listdir(d)), ["m", "p.jsonl"], "%s: output left" % edit)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class ProbeNoSilentDrops(unittest.TestCase):
    """Every checkpoint tensor is used or named (refused; --allow-unused warns), and a
    prompt without the config's bos_token_id first is warned about once."""

    def setUp(self):
        if not os.access(PROBE, os.X_OK):
            self.fail("%s not found or not executable (build it, or set BIN)" % PROBE)
        self.tmp = tempfile.mkdtemp(prefix="dfl-ref-drops-")
        self.prompts = os.path.join(self.tmp, "p.jsonl")
        write_prompts(self.prompts, (13, 11), 3)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def probe(self, mdir, *extra):
        out = os.path.join(self.tmp, "o.h5")
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run([PROBE, "--model", mdir, "--prompts", self.prompts, "--out", out,
                            "--quiet", "--save-logits"] + list(extra),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        return r.returncode, r.stderr.decode(errors="replace"), out

    def write(self, name, cfg, tensors, **kw):
        d = os.path.join(self.tmp, name)
        make_model.write_model(d, cfg, tensors, **kw)
        return d

    def test_renamed_qwen2_is_refused_then_warned(self):
        cfg = make_model.make_config("qwen2", 1, 32, 2, ffn=48, vocab=VOCAB)
        w = make_model.make_weights(cfg, seed=5)
        renamed = dict(cfg, model_type="llama")
        for k in ("use_sliding_window", "sliding_window", "max_window_layers"):
            del renamed[k]
        d = self.write("renamed", renamed, w)
        code, err, out = self.probe(d)
        self.assertEqual(code, 1, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for word in ("q_proj.bias", "k_proj.bias", "v_proj.bias", "--allow-unused"):
            self.assertIn(word, err)
        self.assertFalse(os.path.exists(out))
        code, err, out = self.probe(d, "--allow-unused")
        self.assertEqual(code, 0, err)
        self.assertIn("warning", err)
        self.assertIn("3 checkpoint tensors are not used", err)
        self.assertIn("model.layers.0.self_attn.v_proj.bias", err)
        # the biases matter: without them the logits are far from the qwen2 reference
        with open(self.prompts) as f:
            first = json.loads(f.readline())["tokens"]
        right = reference.forward(reference.Model(cfg, {n: a.astype(np.float64) for n, a in w}), first)
        with h5py.File(out, "r") as f:
            got = f["samples/000000/logits"][()]
        self.assertGreater(float(np.abs(got - right["logits"]).max() / np.abs(right["logits"]).max()), 1e-2)

    def test_extra_and_tied_head_tensors(self):
        cfg = make_model.make_config("llama", 1, 32, 2, ffn=48, vocab=VOCAB, tied=True)
        w = make_model.make_weights(cfg, seed=6)
        emb = dict(w)["model.embed_tokens.weight"]
        # a tied model shipping lm_head.weight equal to the embedding: that is tying
        code, err, _ = self.probe(self.write("tied-same", cfg, w + [("lm_head.weight", emb)]))
        self.assertEqual(code, 0, err)
        code, err, _ = self.probe(self.write("tied-other", cfg, w + [("lm_head.weight", emb + 1)]))
        self.assertEqual(code, 1, err)
        self.assertIn("'lm_head.weight'", err)
        code, err, _ = self.probe(self.write("extra", cfg, w + [("model.extra.scale", np.ones(3))]))
        self.assertEqual(code, 1, err)
        self.assertIn("1 checkpoint tensor is not used by a llama model: 'model.extra.scale'", err)
        # RoPE frequency buffers of older exports are derived from the config: accepted
        code, err, _ = self.probe(self.write("invfreq", cfg, w + [
            ("model.layers.0.self_attn.rotary_emb.inv_freq", np.ones(8))]))
        self.assertEqual(code, 0, err)

    def test_bos_warning(self):
        cfg = make_model.make_config("llama", 1, 32, 2, ffn=48, vocab=VOCAB)   # bos_token_id 0
        d = self.write("bos", cfg, make_model.make_weights(cfg))
        code, err, _ = self.probe(d)    # the second prompt starts with a random token
        self.assertEqual(code, 0, err)
        with open(self.prompts) as f:
            toks = [json.loads(line)["tokens"] for line in f]
        missing = sum(t[0] != 0 for t in toks)
        self.assertTrue(missing >= 1)
        self.assertEqual(err.count("bos_token_id 0"), 1, err)
        self.assertIn("%d of 2 prompts do not start with bos_token_id 0" % missing, err)
        with open(self.prompts, "w") as f:
            for t in toks:
                f.write(json.dumps({"tokens": [0] + t[1:]}) + "\n")
        code, err, _ = self.probe(d)
        self.assertEqual(code, 0, err)
        self.assertNotIn("bos_token_id", err)


class ProbeGpt2AsPublished(unittest.TestCase):
    """GPT-2's own rules: sequences past n_positions refused; the causal-mask buffers
    (h.{l}.attn.bias, attn.masked_bias) accepted unused, any other extra tensor named; a
    Conv1D weight stored as a Linear ([out, in]) refused by shape, not run transposed."""

    def setUp(self):
        if not os.access(PROBE, os.X_OK):
            self.fail("%s not found or not executable (build it, or set BIN)" % PROBE)
        self.tmp = tempfile.mkdtemp(prefix="dfl-ref-gpt2-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def probe(self, cfg, tensors, lengths=(13, 11)):
        d = os.path.join(self.tmp, "m%d" % len(os.listdir(self.tmp)))
        make_model.write_model(d, cfg, tensors)
        prompts = os.path.join(d, "p.jsonl")
        write_prompts(prompts, lengths, 3)
        out = os.path.join(d, "o.h5")
        r = subprocess.run([PROBE, "--model", d, "--prompts", prompts, "--out", out, "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        return r.returncode, r.stderr.decode(errors="replace")

    def test_gpt2_rules(self):
        cfg = families.make_config("gpt2", 1, 32, 2, ffn=48, vocab=VOCAB, max_pos=12)
        w = families.make_weights(cfg, seed=4)
        code, err = self.probe(cfg, w)
        self.assertEqual(code, 1, err)
        self.assertIn("longer than the model's 12 learned positions (n_positions)", err)
        cfg["n_positions"] = cfg["n_ctx"] = 16
        hub = families.make_weights(cfg, seed=4, hub=True)
        self.assertTrue(any(n.endswith(".attn.bias") for n, _ in hub))
        code, err = self.probe(cfg, hub)
        self.assertEqual(code, 0, err)
        # no BOS convention: prompts without bos_token_id (0 here) first are not warned about
        self.assertNotIn("bos_token_id", err)
        code, err = self.probe(cfg, hub + [("h.0.attn.extra", np.ones(3, np.float32))])
        self.assertEqual(code, 1, err)
        self.assertIn("'h.0.attn.extra'", err)
        lin = [(n, a.T.copy() if n.endswith("c_fc.weight") else a) for n, a in hub]
        code, err = self.probe(cfg, lin)
        self.assertEqual(code, 1, err)
        self.assertIn("h.0.mlp.c_fc.weight' has shape [48, 32], config needs [32, 48]", err)
        code, err = self.probe(dict(cfg, add_cross_attention=True), hub)
        self.assertEqual(code, 1, err)
        self.assertIn("add_cross_attention", err)


class ProbeGemma2Softcap(unittest.TestCase):
    """The dump says where soft-capping sits: root attributes attn_logit_softcapping,
    final_logit_softcapping and logit_stats_softcap "before" (absent for a model without
    soft-capping); outliers/logits/top holds raw scores beyond the cap."""

    def test_softcap_attributes(self):
        if not os.access(PROBE, os.X_OK):
            self.fail("%s not found or not executable (build it, or set BIN)" % PROBE)
        tmp = tempfile.mkdtemp(prefix="dfl-ref-softcap-")
        try:
            for mtype, caps in (("gemma2", (1.5, 3.0)), ("llama", None)):
                d = os.path.join(tmp, mtype)
                kw = dict(family_keys={"attn_logit_softcapping": caps[0], "final_logit_softcapping": caps[1]}) \
                    if caps else {}
                make_model.make_model(d, mtype, layers=2, hidden=32, heads=2, ffn=48, vocab=VOCAB, seed=9, **kw)
                write_prompts(os.path.join(tmp, "p.jsonl"), (20, 13), 5)
                out = os.path.join(tmp, mtype + ".h5")
                run_probe(d, os.path.join(tmp, "p.jsonl"), out, "--quiet")
                with h5py.File(out, "r") as f:
                    a = f.attrs
                    if not caps:
                        for k in ("attn_logit_softcapping", "final_logit_softcapping", "logit_stats_softcap"):
                            self.assertNotIn(k, a)
                        continue
                    self.assertEqual(float(a["attn_logit_softcapping"]), caps[0])
                    self.assertEqual(float(a["final_logit_softcapping"]), caps[1])
                    stats = a["logit_stats_softcap"]
                    self.assertEqual(stats.decode() if isinstance(stats, bytes) else stats, "before")
                    top = f["samples/000000/outliers/logits/top"][()]
                    self.assertGreater(float(top.max()), caps[0])   # raw, not capped
                    self.assertEqual(as_str(a["model_type"]), "llama")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def as_str(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def _add_case(idx, case):
    def test(self):
        self.check_case(idx, *case)
    test.__name__ = "test_%02d_%s" % (idx, case[0].replace("-", "_"))
    setattr(ProbeAgainstReference, test.__name__, test)


for _i, _c in enumerate(CASES):
    _add_case(_i, _c)


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=1)
    if SUMMARY:
        print("largest errors per case (tolerances: logits rel %.0e, maps %.0e, nll %.0e, "
              "lambda %.0e):" % (TOL_LOGITS_REL, TOL_MAP, TOL_NLL, TOL_LAMBDA))
        for line in SUMMARY:
            print("  " + line)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
