#!/usr/bin/python3
"""make_big_model.py — write a full-size random-weight checkpoint of a published shape
(tests/ref/make_model.py PUBLISHED: Llama-3.2-1B, Meta-Llama-3-8B, Motif-2.6B, ...) for the
benchmarks, streaming: one tensor at a time, in chunks cut from pools of random values drawn once,
so memory stays small and the time is the disk's whatever the model size (an 8B bf16
model is 16 GB on disk).

    make_big_model.py OUTDIR --shape Llama-3.2-1B [--dtype bf16] [--seed 1]

Writes OUTDIR/config.json (the published config, key for key) and the weights as the
hub shards them (model.safetensors, or model-0000i-of-0000n.safetensors plus
model.safetensors.index.json), tensors sorted by name and packed. Weights: linear
layers N(0, 1/in), embeddings N(0, 1), norm gains 1 + 0.1·N(0, 1) (values repeat
between tensors: this is a benchmark model, not a test fixture). Every file is
written under a temporary name and renamed; config.json comes last, so a directory
with a config.json is complete.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import make_model  # noqa: E402

MAX_SHARD = 5 * 10 ** 9       # transformers' default max_shard_size, "5GB"


def family_tensor_list(cfg):
    """[(name, shape, kind)] of GPT-2 (Conv1D weights [in, out]: kind lin_io, fan-in their
    rows; no mask buffers) or GPT-NeoX (Linear, with biases)."""
    if cfg["model_type"] == "gpt2":
        D, V, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
        F = cfg.get("n_inner") or 4 * D
        out = [("wte.weight", (V, D), "emb"), ("wpe.weight", (P, D), "emb"), ("ln_f.weight", (D,), "gain"),
               ("ln_f.bias", (D,), "bias")]
        for l in range(cfg["n_layer"]):
            p = "h.%d." % l
            out += [(p + "ln_1.weight", (D,), "gain"), (p + "ln_1.bias", (D,), "bias"),
                    (p + "ln_2.weight", (D,), "gain"), (p + "ln_2.bias", (D,), "bias"),
                    (p + "attn.c_attn.weight", (D, 3 * D), "lin_io"), (p + "attn.c_attn.bias", (3 * D,), "bias"),
                    (p + "attn.c_proj.weight", (D, D), "lin_io"), (p + "attn.c_proj.bias", (D,), "bias"),
                    (p + "mlp.c_fc.weight", (D, F), "lin_io"), (p + "mlp.c_fc.bias", (F,), "bias"),
                    (p + "mlp.c_proj.weight", (F, D), "lin_io"), (p + "mlp.c_proj.bias", (D,), "bias")]
        return sorted(out)
    D, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    out = [("gpt_neox.embed_in.weight", (V, D), "emb"), ("embed_out.weight", (V, D), "lin"),
           ("gpt_neox.final_layer_norm.weight", (D,), "gain"), ("gpt_neox.final_layer_norm.bias", (D,), "bias")]
    for l in range(cfg["num_hidden_layers"]):
        p = "gpt_neox.layers.%d." % l
        out += [(p + "input_layernorm.weight", (D,), "gain"), (p + "input_layernorm.bias", (D,), "bias"),
                (p + "post_attention_layernorm.weight", (D,), "gain"),
                (p + "post_attention_layernorm.bias", (D,), "bias"),
                (p + "attention.query_key_value.weight", (3 * D, D), "lin"),
                (p + "attention.query_key_value.bias", (3 * D,), "bias"),
                (p + "attention.dense.weight", (D, D), "lin"), (p + "attention.dense.bias", (D,), "bias"),
                (p + "mlp.dense_h_to_4h.weight", (F, D), "lin"), (p + "mlp.dense_h_to_4h.bias", (F,), "bias"),
                (p + "mlp.dense_4h_to_h.weight", (D, F), "lin"), (p + "mlp.dense_4h_to_h.bias", (D,), "bias")]
    return sorted(out)


def tensor_list(cfg):
    """[(name, shape, kind)] of a llama-family config; kind: lin (fan-in scaled), emb, gain."""
    if cfg["model_type"] in ("gpt2", "gpt_neox"):
        return family_tensor_list(cfg)
    D, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or D // H
    out = [("model.embed_tokens.weight", (V, D), "emb"), ("model.norm.weight", (D,), "gain")]
    if not cfg.get("tie_word_embeddings"):
        out.append(("lm_head.weight", (V, D), "lin"))
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        out += [(p + "input_layernorm.weight", (D,), "gain"),
                (p + "post_attention_layernorm.weight", (D,), "gain"),
                (p + "self_attn.q_proj.weight", (H * hd, D), "lin"),
                (p + "self_attn.k_proj.weight", (Hkv * hd, D), "lin"),
                (p + "self_attn.v_proj.weight", (Hkv * hd, D), "lin"),
                (p + "self_attn.o_proj.weight", (D, H * hd), "lin"),
                (p + "mlp.gate_proj.weight", (F, D), "lin"),
                (p + "mlp.up_proj.weight", (F, D), "lin"),
                (p + "mlp.down_proj.weight", (D, F), "lin")]
        if cfg["model_type"] in ("Motif", "motif"):
            # Motif (docs/format.md): o_proj over the signal heads, λ vectors, sub-norm, PolyNorm
            out = [e for e in out if not e[0].endswith("o_proj.weight") or not e[0].startswith(p)]
            out += [(p + "self_attn.o_proj.weight", (D, make_model.motif_o_cols(cfg, hd)), "lin"),
                    (p + "self_attn.subln.weight", (2 * hd,), "gain"),
                    (p + "mlp.act_fn.weight", (3,), "small"), (p + "mlp.act_fn.bias", (1,), "small")]
            out += [(p + "self_attn." + n, (hd,), "small") for n in ("lambda_q1", "lambda_k1", "lambda_q2",
                                                                        "lambda_k2")]
        if cfg["model_type"] == "qwen2":
            out += [(p + "self_attn.%s_proj.bias" % x, (n,), "gain")
                    for x, n in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd))]
    return sorted(out)


POOL = 1 << 24   # values per pool of encoded random numbers


class Pools:
    """Encoded random values, drawn once per (kind, fan-in) and then cut at random
    offsets: writing 16 GB costs disk time, not 8 billion normal draws."""

    def __init__(self, rng, dtype):
        self.rng, self.dtype, self.pools = rng, dtype, {}

    def get(self, kind, cols):
        key = (kind, cols if kind in ("lin", "lin_io") else 0)
        if key not in self.pools:
            a = self.rng.standard_normal(2 * POOL, dtype=np.float32)
            if kind in ("lin", "lin_io"):
                a *= np.float32(1.0 / np.sqrt(cols))
            elif kind == "bias":
                a *= np.float32(0.1)
            elif kind == "gain":
                a = np.float32(1.0) + np.float32(0.1) * a
            elif kind == "small":   # λ vectors, PolyNorm coefficients
                a = np.float32(0.1) * a
            self.pools[key] = make_model.encode(a, self.dtype)[1]
        return self.pools[key]


def chunks(pools, shape, kind):
    """Encoded bytes of one tensor, chunk by chunk (at most POOL values each)."""
    cols = shape[1] if len(shape) > 1 else 1
    if kind == "lin_io":   # a Conv1D weight [in, out]: fan-in is its rows
        cols = shape[0]
    pool = pools.get(kind, cols)
    esz = len(pool) // (2 * POOL)
    left = int(np.prod(shape))
    while left:
        n = min(left, POOL)
        off = int(pools.rng.integers(0, POOL)) * esz
        yield pool[off:off + n * esz]
        left -= n


def write_file(path, tensors, dtype, pools):
    esz = {"f32": 4, "f16": 2, "bf16": 2}[dtype]
    name = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype]
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for n, shape, _ in tensors:
        nbytes = int(np.prod(shape)) * esz
        header[n] = {"dtype": name, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for n, shape, kind in tensors:
            for raw in chunks(pools, shape, kind):
                f.write(raw)
    os.replace(path + ".tmp", path)
    return off


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a full-size random checkpoint of a published shape.")
    ap.add_argument("outdir")
    ap.add_argument("--shape", required=True, choices=sorted(make_model.PUBLISHED))
    ap.add_argument("--dtype", choices=("f32", "f16", "bf16"), default="bf16")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    shards, cfg = make_model.PUBLISHED[a.shape]
    if cfg["model_type"] not in ("llama", "mistral", "qwen2", "gpt2", "gpt_neox", "Motif", "motif"):
        print("make_big_model.py: %s is not a llama-family, GPT-2, GPT-NeoX or Motif shape" % a.shape, file=sys.stderr)
        return 2
    os.makedirs(a.outdir, exist_ok=True)
    pools = Pools(np.random.default_rng(a.seed), a.dtype)
    ts = tensor_list(cfg)
    esz = {"f32": 4, "f16": 2, "bf16": 2}[a.dtype]
    if shards <= 1:   # the hub ships this shape as one file
        write_file(os.path.join(a.outdir, "model.safetensors"), ts, a.dtype, pools)
    else:
        # save_pretrained's rule: a new file when the next tensor would pass 5 GB
        groups, run = [[]], 0
        for t in ts:
            n = int(np.prod(t[1])) * esz
            if groups[-1] and run + n > MAX_SHARD:
                groups.append([])
                run = 0
            groups[-1].append(t)
            run += n
        shards = len(groups)
        wmap, size = {}, 0
        for i, g in enumerate(groups):
            fname = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
            size += write_file(os.path.join(a.outdir, fname), g, a.dtype, pools)
            wmap.update({n: fname for n, _, _ in g})
            print("make_big_model.py: wrote %s" % fname, file=sys.stderr)
        with open(os.path.join(a.outdir, "model.safetensors.index.json.tmp"), "w") as f:
            json.dump({"metadata": {"total_size": size}, "weight_map": wmap}, f, indent=2, sort_keys=True)
        os.replace(os.path.join(a.outdir, "model.safetensors.index.json.tmp"),
                   os.path.join(a.outdir, "model.safetensors.index.json"))
    with open(os.path.join(a.outdir, "config.json.tmp"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(os.path.join(a.outdir, "config.json.tmp"), os.path.join(a.outdir, "config.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
