#!/usr/bin/python3
"""make_model.py — write a tiny random model directory for difflens tests.

Writes OUTDIR/config.json and OUTDIR/model.safetensors (or N shards listed by
model.safetensors.index.json) with random weights from a fixed seed, for the three
model types of docs/format.md "Model directory": llama, diff_transformer, diffllama.
The safetensors writer is hand-written (numpy only) so the C reader is checked
against an independent encoder: F32, F16 and BF16 (upper 16 bits of the f32 with
round-to-nearest-even).

As a module:  make_model.make_model(outdir, "llama", layers=2, hidden=64, heads=4)
As a tool:    /usr/bin/python3 tests/ref/make_model.py OUT --type llama --layers 2 \
                  --hidden 64 --heads 4 [--kv-heads 2] [--dtype bf16] [--shards 2] ...

Head conventions (docs/format.md "The three model types"):
  llama             H softmax heads of head_dim [D/H]
  diff_transformer  H differential heads, head_dim d [D/H/2] per sub-head
  diffllama         H softmax maps of head_dim [D/H] (H even; H/2 differential heads)
  diff_transformer_v2  H output heads of head_dim [D/H] from 2H q heads, lambda_proj [H, D]
Motif checkpoints come from PUBLISHED (published_config + make_weights; docs/format.md
"Motif"): V1 pairs, or grouped noise heads with num_noise_heads.
Weights are PyTorch Linear layout [out, in] (y = x @ W.T), normal with std
1/sqrt(fan_in) so activations stay O(1); norm gains 1 + 0.1·N(0,1); lambda_* N(0, 0.1).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

import families  # noqa: E402  (gpt2...: configs and weights in their own layout)

TYPES = ("llama", "diff_transformer", "diffllama", "qwen2", "qwen3", "mistral", "diff_transformer_v2") + families.TYPES
LLAMA_FAMILY = ("llama", "qwen2", "qwen3", "mistral")
DTYPES = ("f32", "f16", "bf16")


# ---------------------------------------------------------------------------
# safetensors encoding
# ---------------------------------------------------------------------------

def f32_to_bf16_bits(a):
    """uint16 bf16 bit patterns of float32 array a, round-to-nearest-even; NaN stays
    NaN (quiet), overflow rounds to inf as the IEEE rule gives."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def bf16_bits_to_f32(b):
    """float32 values of uint16 bf16 bit patterns (exact)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def encode(arr, dtype):
    """(safetensors dtype name, little-endian bytes) of float array arr stored as
    dtype ("f32" | "f16" | "bf16")."""
    a = np.asarray(arr, dtype=np.float32)
    if dtype == "f32":
        return "F32", a.astype("<f4").tobytes()
    if dtype == "f16":
        return "F16", a.astype("<f2").tobytes()
    if dtype == "bf16":
        return "BF16", f32_to_bf16_bits(a).astype("<u2").tobytes()
    raise ValueError("unknown dtype %r" % dtype)


def write_safetensors(path, tensors, dtype, metadata=None, pack=False):
    """Write tensors (list of (name, float array)) to path in dtype. Data offsets
    are 8-byte aligned (pack: contiguous, as the safetensors library writes them, so a
    tensor after one of odd size starts unaligned); the header is padded with spaces to
    a multiple of 8."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs = []
    off = 0
    for name, arr in tensors:
        st_dtype, raw = encode(arr, dtype)
        header[name] = {"dtype": st_dtype, "shape": [int(s) for s in np.shape(arr)],
                        "data_offsets": [off, off + len(raw)]}
        pad = 0 if pack else (-len(raw)) % 8
        blobs.append(raw + b"\0" * pad)
        off += len(raw) + pad
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return off


# ---------------------------------------------------------------------------
# published configs
# ---------------------------------------------------------------------------

# config.json of published checkpoints, key for key as the Hugging Face hub carries
# them, with how the hub shards their weights (files; 1 = model.safetensors).
PUBLISHED = {
    "Llama-3.2-1B": (1, {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
        "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256}),
    "Meta-Llama-3-8B": (4, {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
        "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.40.0.dev0", "use_cache": True, "vocab_size": 128256}),
    "TinyLlama-1.1B-Chat-v1.0": (1, {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 1,
        "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
        "intermediate_size": 5632, "max_position_embeddings": 2048, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.35.0",
        "use_cache": True, "vocab_size": 32000}),
    "SmolLM2-135M": (1, {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
        "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
        "is_llama_config": True, "max_position_embeddings": 8192, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
        "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_interleaved": False, "rope_scaling": None, "rope_theta": 100000,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
        "use_cache": True, "vocab_size": 49152}),
    "Qwen2.5-0.5B": (1, {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
        "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
        "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.40.1", "use_cache": True, "use_mrope": False,
        "use_sliding_window": False, "vocab_size": 151936}),
    "Mistral-7B-v0.1": (2, {
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000}),
    # DiffLlamaConfig() as transformers' save_pretrained writes it
    "DiffLlama": (1, {
        "architectures": ["DiffLlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "head_dim": 64, "hidden_act": "silu",
        "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
        "lambda_std_dev": 0.1, "max_position_embeddings": 2048, "model_type": "diffllama",
        "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 32,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "torch_dtype": "float32", "transformers_version": "4.48.0",
        "use_cache": True, "vocab_size": 32000}),
    # openai-community/gpt2 (GPT-2 small): GPT2Config's own key names, no n_inner (4·n_embd),
    # tied head; one F32 model.safetensors without the "transformer." prefix, with the
    # h.{l}.attn.bias causal-mask buffers
    "gpt2": (1, {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
        "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
        "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
        "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True,
                                                                               "max_length": 50}},
        "vocab_size": 50257}),
    # EleutherAI/pythia-1b: GPTNeoXConfig keys, partial rotary (a quarter of each head),
    # parallel residual, untied embed_out; one model.safetensors
    "pythia-1b": (1, {
        "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
        "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "layer_norm_eps": 1e-05,
        "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 8,
        "num_hidden_layers": 16, "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
        "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": True,
        "use_parallel_residual": True, "vocab_size": 50304}),
    # google/gemma-2-2b: soft-capping, query_pre_attn_scalar, alternating windows, tied;
    # three F32 shards
    "gemma-2-2b": (3, {
        "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
        "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
        "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2",
        "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
        "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
        "torch_dtype": "float32", "transformers_version": "4.42.4", "use_cache": True, "vocab_size": 256000}),
    # google/gemma-3-1b-pt (the text model): q/k norms, local and global RoPE bases, five
    # sliding layers in six, no soft-capping; one BF16 model.safetensors
    "gemma-3-1b-pt": (1, {
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
        "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
        "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
        "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
        "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": True,
        "vocab_size": 262144}),
    # allenai/OLMo-2-1124-7B: norms after attention and MLP, q/k norms over the whole
    # projections, untied; F32 in shards
    "OLMo-2-1124-7B": (3, {
        "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "olmo2",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "pad_token_id": 100277,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False,
        "torch_dtype": "float32", "transformers_version": "4.47.0.dev0", "use_cache": True,
        "vocab_size": 100352}),
    # microsoft/Phi-3-mini-128k-instruct: fused qkv_proj and gate_up_proj, longrope (its
    # 48-entry factor lists are rebuilt at head_dim/2 entries by published_config);
    # two BF16 shards
    "Phi-3-mini-128k-instruct": (2, {
        "_name_or_path": "Phi-3-mini-128k-instruct", "architectures": ["Phi3ForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
                                               "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
        "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
        "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
        "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
        "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
        "rope_scaling": {"long_factor": [1.0] * 48, "short_factor": [1.0] * 48, "type": "longrope"},
        "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.40.2", "use_cache": True, "vocab_size": 32064}),
    # Motif Technologies. The hub's config.json and configuration_motif.py were not
    # reachable from here: the keys are those the ports read (MLX motif.py ModelArgs,
    # Swift MotifModelConfiguration, vLLM motif.py), the sizes those whose parameter
    # count gives the published 2.6B (tied) and 12.7B (untied); the unconfirmed values
    # are listed in docs/format.md "Motif". Shards: 5 GB hub shards of bf16.
    "Motif-2.6B": (2, {
        "architectures": ["MotifForCausalLM"], "attention_dropout": 0.0, "attn_rms_norm_eps": 1e-05,
        "bos_token_id": 219396, "eos_token_id": 219395, "fused_rope": True, "hidden_act": "poly_norm",
        "hidden_size": 2048, "initializer_range": 2e-05, "intermediate_size": 8192,
        "max_position_embeddings": 16384, "max_window_layers": 28, "model_type": "Motif",
        "num_attention_heads": 16, "num_hidden_layers": 32, "num_key_value_heads": 16,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 500000.0, "sliding_window": None,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.46.3",
        "use_bias": False, "use_cache": True, "use_sliding_window": False, "vocab_size": 219520}),
    "Motif-2-12.7B-Base": (6, {
        "architectures": ["MotifForCausalLM"], "attention_dropout": 0.0, "attn_rms_norm_eps": 1e-05,
        "bos_token_id": 219396, "eos_token_id": 219395, "fused_rope": True, "head_dim": 128,
        "hidden_act": "poly_norm", "hidden_size": 4096, "initializer_range": 2e-05,
        "intermediate_size": 16384, "k_ratio": 1, "max_position_embeddings": 16384,
        "model_type": "Motif", "num_attention_heads": 40, "num_hidden_layers": 40,
        "num_key_value_heads": 16, "num_noise_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": None,
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.51.3", "use_bias": False, "use_cache": True, "vocab_size": 219520}),
}


def published_config(name, layers=2, hidden=None, heads=None, kv_heads=None, head_dim=None,
                     ffn=None, vocab=97, window=None):
    """The published config of `name`, every key kept, with sizes shrunk for a test:
    the head counts keep their ratio (H/Hkv), hidden = heads·head_dim unless given, ids
    that would fall outside the shrunk vocabulary moved inside it, the sliding window
    set to `window` when given. Returns (config, hub shard count)."""
    shards, cfg = PUBLISHED[name]
    cfg = json.loads(json.dumps(cfg))
    # the family's names of the common keys (GPT-2's n_head...); None: not in its config
    names = families.KEY_NAMES.get(cfg["model_type"], {})
    key = {k: names.get(k, k) for k in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                        "hidden_size", "intermediate_size", "head_dim")}
    H0 = cfg[key["num_attention_heads"]]
    Hkv0 = (key["num_key_value_heads"] and cfg.get(key["num_key_value_heads"])) or H0
    heads = heads or 4
    kv_heads = kv_heads or max(1, heads * Hkv0 // H0)
    hd = head_dim or 8
    for k, v in (("num_hidden_layers", layers), ("num_attention_heads", heads), ("num_key_value_heads", kv_heads),
                 ("hidden_size", hidden or heads * hd), ("intermediate_size", ffn or 3 * (hidden or heads * hd)),
                 ("vocab_size", vocab)):
        if key.get(k, k) and (k not in names or key[k] in cfg):
            cfg[key.get(k, k)] = v
    if key["head_dim"] and ("head_dim" in cfg or head_dim is not None):
        cfg["head_dim"] = hd
    if cfg.get("num_noise_heads"):
        # Motif GDA: keep the group shape (gr signal heads per noise head)
        cfg["num_noise_heads"] = max(1, heads * cfg["num_noise_heads"] // H0)
    for k in ("bos_token_id", "eos_token_id"):
        if isinstance(cfg.get(k), int) and cfg[k] >= vocab:
            cfg[k] = cfg[k] % vocab
    if cfg.get("max_window_layers") is not None:
        cfg["max_window_layers"] = min(cfg["max_window_layers"], layers)
    if window is not None:
        cfg["sliding_window"] = window
    rs = cfg.get("rope_scaling")
    if isinstance(rs, dict) and rs.get("type", rs.get("rope_type")) == "longrope":
        # factor lists of head_dim/2 entries, and an original context short enough that a
        # test prompt passes it (long factors) and another does not (short factors)
        rs["short_factor"] = families.longrope_factors(hd, 1.05)
        rs["long_factor"] = families.longrope_factors(hd, 30.0)
        cfg["original_max_position_embeddings"] = 32
        cfg["max_position_embeddings"] = 32 * 32
    if isinstance(rs, dict) and "original_max_position_embeddings" in rs:
        rs["original_max_position_embeddings"] = 64   # frequencies in all three llama3 bands
    return cfg, shards


# ---------------------------------------------------------------------------
# config and weights
# ---------------------------------------------------------------------------

def motif_o_cols(cfg, hd):
    """o_proj columns of a Motif config: H·hd (V1 pairs) or 2·(H − Gn)·hd (GDA)."""
    H, Gn = cfg["num_attention_heads"], cfg.get("num_noise_heads") or 0
    return 2 * (H - Gn) * hd if Gn else H * hd


def default_head_dim(mtype, hidden, heads):
    if mtype == "diff_transformer":
        return hidden // heads // 2
    return hidden // heads


def make_config(mtype, layers, hidden, heads, kv_heads=None, head_dim=None, ffn=None,
                vocab=97, tied=False, kv_pairing=None, lambda_init=None,
                rope_theta=10000.0, max_pos=256, rope_scaling="none", rms_norm_eps=1e-6,
                rope_interleaved=None, sliding_window=None, max_window_layers=None):
    """config.json dict with Hugging Face Llama key names (docs/format.md "config.json")."""
    if mtype not in TYPES:
        raise ValueError("model type must be one of %s" % (TYPES,))
    kv_heads = heads if kv_heads is None else kv_heads
    if heads % kv_heads:
        raise ValueError("heads must be a multiple of kv-heads")
    if mtype == "diffllama" and heads % 2:
        raise ValueError("diffllama needs an even number of heads")
    hd = default_head_dim(mtype, hidden, heads) if head_dim is None else head_dim
    if hd <= 0 or hd % 2:
        raise ValueError("head_dim must be positive and even (RoPE pairs)")
    cfg = {
        "model_type": mtype,
        "architectures": {"llama": ["LlamaForCausalLM"], "diffllama": ["DiffLlamaForCausalLM"],
                          "diff_transformer": ["DiffTransformerForCausalLM"],
                          "qwen2": ["Qwen2ForCausalLM"], "qwen3": ["Qwen3ForCausalLM"],
                          "mistral": ["MistralForCausalLM"],
                          "diff_transformer_v2": ["DiffTransformerV2ForCausalLM"]}[mtype],
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": ffn if ffn is not None else 4 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hd,
        "hidden_act": "silu",
        "rms_norm_eps": rms_norm_eps,
        "rope_theta": rope_theta,
        "tie_word_embeddings": bool(tied),
        "max_position_embeddings": max_pos,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "float32",
    }
    if rope_interleaved is not None:
        cfg["rope_interleaved"] = bool(rope_interleaved)
    if mtype in ("qwen2", "mistral"):
        del cfg["attention_bias"]       # Qwen2 has fixed q/k/v biases; neither has the key
        del cfg["mlp_bias"]
    if mtype == "qwen3":
        del cfg["mlp_bias"]
    if mtype == "mistral":
        cfg["sliding_window"] = sliding_window
    elif mtype in ("qwen2", "qwen3"):
        # Qwen2Config: the window applies only with use_sliding_window, from layer
        # max_window_layers on
        cfg["use_sliding_window"] = sliding_window is not None
        cfg["sliding_window"] = sliding_window if sliding_window is not None else 4096
        cfg["max_window_layers"] = max_window_layers if max_window_layers is not None else layers
    elif sliding_window is not None:
        raise ValueError("sliding windows are for mistral, qwen2 and qwen3")
    if rope_scaling == "linear":
        # the older key name ("type"), as in checkpoints written before rope_type
        cfg["rope_scaling"] = {"type": "linear", "factor": 2.5}
    elif rope_scaling == "llama3":
        # original_max_position_embeddings chosen so a tiny head_dim has frequencies
        # in all three regimes (kept, smoothed, divided by factor)
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    elif rope_scaling == "dynamic":
        cfg["rope_scaling"] = {"type": "dynamic", "factor": 2.0}
    elif rope_scaling not in (None, "none"):
        raise ValueError("rope scaling must be none, linear, llama3 or dynamic")
    else:
        cfg["rope_scaling"] = None
    if mtype != "llama":
        if lambda_init is not None:
            cfg["diff_lambda_init"] = lambda_init
        if mtype == "diff_transformer" and kv_pairing is not None:
            cfg["diff_kv_pairing"] = kv_pairing   # absent = "flash" (docs/format.md default)
    return cfg


def make_weights(cfg, seed=0, subln=True, hub=False):
    """List of (name, float32 array) in a fixed order for config dict cfg. hub: for the
    families of families.py, named as the published checkpoint (with its buffers)."""
    mtype = cfg["model_type"]
    if mtype in families.TYPES:
        return families.make_weights(cfg, seed, hub)
    rng = np.random.default_rng(seed)
    D = cfg["hidden_size"]
    F = cfg["intermediate_size"]
    V = cfg["vocab_size"]
    L = cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or default_head_dim(mtype, D, H)

    def lin(out_f, in_f):
        return (rng.standard_normal((out_f, in_f)) / np.sqrt(in_f)).astype(np.float32)

    def gain(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def small(n):
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    t = [("model.embed_tokens.weight", rng.standard_normal((V, D)).astype(np.float32))]
    for l in range(L):
        p = "model.layers.%d." % l
        a = p + "self_attn."
        t.append((p + "input_layernorm.weight", gain(D)))
        if mtype == "diff_transformer":
            d = hd
            t.append((a + "q_proj.weight", lin(2 * H * d, D)))
            t.append((a + "k_proj.weight", lin(2 * Hkv * d, D)))
            t.append((a + "v_proj.weight", lin(Hkv * 2 * d, D)))
            t.append((a + "out_proj.weight", lin(D, H * 2 * d)))
            for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                t.append((a + n, small(d)))
            if subln:
                t.append((a + "subln.weight", gain(2 * d)))
        elif mtype == "diff_transformer_v2":
            # unilm MultiheadFlashDiffV2: 2H q heads, Hkv k/v heads, lambda_proj [H, D]
            t.append((a + "q_proj.weight", lin(2 * H * hd, D)))
            t.append((a + "k_proj.weight", lin(Hkv * hd, D)))
            t.append((a + "v_proj.weight", lin(Hkv * hd, D)))
            t.append((a + "o_proj.weight", lin(D, H * hd)))
            t.append((a + "lambda_proj.weight", lin(H, D)))
        elif mtype in ("Motif", "motif"):
            t.append((a + "q_proj.weight", lin(H * hd, D)))
            t.append((a + "k_proj.weight", lin(Hkv * hd, D)))
            t.append((a + "v_proj.weight", lin(Hkv * hd, D)))
            t.append((a + "o_proj.weight", lin(D, motif_o_cols(cfg, hd))))
            for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                t.append((a + n, small(hd)))
            t.append((a + "subln.weight", gain(2 * hd)))
        else:
            t.append((a + "q_proj.weight", lin(H * hd, D)))
            t.append((a + "k_proj.weight", lin(Hkv * hd, D)))
            t.append((a + "v_proj.weight", lin(Hkv * hd, D)))
            if mtype == "qwen2":
                # biases large enough that dropping them moves the logits visibly
                t.append((a + "q_proj.bias", 0.5 * rng.standard_normal(H * hd).astype(np.float32)))
                t.append((a + "k_proj.bias", 0.5 * rng.standard_normal(Hkv * hd).astype(np.float32)))
                t.append((a + "v_proj.bias", 0.5 * rng.standard_normal(Hkv * hd).astype(np.float32)))
            if mtype == "qwen3":
                t.append((a + "q_norm.weight", gain(hd)))
                t.append((a + "k_norm.weight", gain(hd)))
            t.append((a + "o_proj.weight", lin(D, H * hd)))
            if mtype == "diffllama":
                for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                    t.append((a + n, small(hd)))
        t.append((p + "post_attention_layernorm.weight", gain(D)))
        t.append((p + "mlp.gate_proj.weight", lin(F, D)))
        t.append((p + "mlp.up_proj.weight", lin(F, D)))
        t.append((p + "mlp.down_proj.weight", lin(D, F)))
        if mtype in ("Motif", "motif"):
            # PolyNorm: weight around its init ones/3, a visible bias
            t.append((p + "mlp.act_fn.weight", (1.0 / 3 + 0.2 * rng.standard_normal(3)).astype(np.float32)))
            t.append((p + "mlp.act_fn.bias", small(1)))
    t.append(("model.norm.weight", gain(D)))
    if not cfg.get("tie_word_embeddings", False):
        t.append(("lm_head.weight", lin(V, D)))
    return t


def write_model(outdir, cfg, tensors, dtype="f32", shards=1, hub=False):
    """Write config.json and the weights (one file, or `shards` files plus
    model.safetensors.index.json) into outdir (created if needed). hub: as
    save_pretrained does it: config written as given (torch_dtype included), tensors
    sorted by name and packed without padding, shards cut by bytes in that order."""
    os.makedirs(outdir, exist_ok=True)
    cfg = dict(cfg)
    if not hub:
        cfg["torch_dtype"] = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype]
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=hub)
        f.write("\n")
    meta = {"format": "pt"}
    if hub:
        tensors = sorted(tensors, key=lambda nt: nt[0])
    if shards <= 1:
        write_safetensors(os.path.join(outdir, "model.safetensors"), tensors, dtype, meta, pack=hub)
        return
    if hub:
        # cut where the running byte count passes each 1/shards of the total
        size = [len(encode(a, dtype)[1]) for _, a in tensors]
        total = sum(size)
        cuts, run = [], 0
        for i, n in enumerate(size):
            run += n
            cuts.append(min(shards - 1, (run - 1) * shards // total))
        groups = [[i for i, c in enumerate(cuts) if c == g] for g in range(shards)]
        groups = [g for g in groups if g]
        shards = len(groups)
    else:
        groups = np.array_split(np.arange(len(tensors)), shards)
    weight_map = {}
    total = 0
    for i, g in enumerate(groups):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        part = [tensors[j] for j in g]
        total += write_safetensors(os.path.join(outdir, fname), part, dtype, meta, pack=hub)
        for name, _ in part:
            weight_map[name] = fname
    with open(os.path.join(outdir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2,
                  sort_keys=hub)
        f.write("\n")


def make_model(outdir, mtype, layers=2, hidden=64, heads=4, kv_heads=None, head_dim=None,
               ffn=None, vocab=97, dtype="f32", seed=0, tied=False, shards=1,
               kv_pairing=None, lambda_init=None, rope_theta=10000.0, max_pos=256,
               rope_scaling="none", subln=True, rms_norm_eps=1e-6, rope_interleaved=None,
               sliding_window=None, max_window_layers=None, family_keys=None):
    """Create a model directory; returns its config dict. family_keys: config keys of a
    families.py family (gpt2: scale_attn_by_inverse_layer_idx...) set as given."""
    if dtype not in DTYPES:
        raise ValueError("dtype must be one of %s" % (DTYPES,))
    if mtype in families.TYPES:
        cfg = families.make_config(mtype, layers, hidden, heads, ffn=ffn, vocab=vocab,
                                   tied=tied or None, max_pos=max_pos, extra=family_keys)
        write_model(outdir, cfg, make_weights(cfg, seed), dtype, shards)
        return cfg
    cfg = make_config(mtype, layers, hidden, heads, kv_heads=kv_heads, head_dim=head_dim,
                      ffn=ffn, vocab=vocab, tied=tied, kv_pairing=kv_pairing,
                      lambda_init=lambda_init, rope_theta=rope_theta, max_pos=max_pos,
                      rope_scaling=rope_scaling, rms_norm_eps=rms_norm_eps,
                      rope_interleaved=rope_interleaved, sliding_window=sliding_window,
                      max_window_layers=max_window_layers)
    write_model(outdir, cfg, make_weights(cfg, seed, subln), dtype, shards)
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a tiny random difflens test model.")
    ap.add_argument("outdir")
    ap.add_argument("--type", required=True, choices=TYPES)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True,
                    help="llama: heads; diff_transformer: differential heads; "
                         "diffllama: softmax maps (even)")
    ap.add_argument("--kv-heads", type=int, default=None, help="default: --heads")
    ap.add_argument("--head-dim", type=int, default=None,
                    help="default D/H (diff_transformer: D/H/2)")
    ap.add_argument("--ffn", type=int, default=None, help="default 4*hidden")
    ap.add_argument("--vocab", type=int, default=97)
    ap.add_argument("--dtype", choices=DTYPES, default="f32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--kv-pairing", choices=("flash", "naive"), default=None)
    ap.add_argument("--lambda-init", type=float, default=None)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--max-pos", type=int, default=256)
    ap.add_argument("--rope-scaling", choices=("none", "linear", "llama3", "dynamic"), default="none")
    ap.add_argument("--sliding-window", type=int, default=None,
                    help="mistral: sliding_window; qwen2/qwen3: use_sliding_window with this W")
    ap.add_argument("--max-window-layers", type=int, default=None,
                    help="qwen2/qwen3: first windowed layer [all layers full]")
    ap.add_argument("--rms-norm-eps", type=float, default=1e-6)
    ap.add_argument("--rope-interleaved", choices=("true", "false"), default=None,
                    help="write rope_interleaved (default: key absent)")
    ap.add_argument("--no-subln", action="store_true",
                    help="diff_transformer: omit subln.weight (loaded as ones)")
    a = ap.parse_args(argv)
    try:
        make_model(a.outdir, a.type, a.layers, a.hidden, a.heads, a.kv_heads, a.head_dim,
                   a.ffn, a.vocab, a.dtype, a.seed, a.tied, a.shards, a.kv_pairing,
                   a.lambda_init, a.rope_theta, a.max_pos, a.rope_scaling, not a.no_subln,
                   a.rms_norm_eps,
                   None if a.rope_interleaved is None else a.rope_interleaved == "true",
                   a.sliding_window, a.max_window_layers)
    except ValueError as e:
        print("make_model.py: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
