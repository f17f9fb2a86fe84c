#!/usr/bin/python3
"""torch_families.py — the PyTorch eager side of the real-size bench for GPT-2 and
GPT-NeoX (Pythia): the forward pass over the same config.json + safetensors weights that
bin/probe runs, written the way Hugging Face transformers computes it with
attn_implementation="eager" (modeling_gpt2.py GPT2LMHeadModel, modeling_gpt_neox.py
GPTNeoXForCausalLM):

    gpt2:      x = wte[tokens] + wpe[0..T); per block x += c_proj(attn(ln_1(x))),
               x += mlp.c_proj(gelu_new(mlp.c_fc(ln_2(x)))) (Conv1D: x @ W + b); ln_f; x @ wteᵀ
    gpt_neox:  x = embed_in[tokens]; per layer a = dense(attn(input_layernorm(x))) with
               query_key_value viewed [T, H, 3·hd] and rotate-half RoPE on the first
               rotary_pct of each head, m = mlp(post_attention_layernorm(x));
               x += a + m (use_parallel_residual); final_layer_norm; embed_out

f32 throughout, batch 1, under torch.inference_mode(), torch.set_num_threads(THREADS).
Commands and output as bench/torch_llama.py (time, check).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import reference  # noqa: E402  (tests/ref/reference.py: the safetensors reader)
from torch_llama import cmd_check, cmd_time, read_first_prompt  # noqa: E402


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") not in ("gpt2", "gpt_neox"):
        raise ValueError("model_type %r: this benchmark implements gpt2 and gpt_neox" % cfg.get("model_type"))
    tensors = {name: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
               for name, a in reference.read_tensors(model_dir, as_float64=False).items()}
    return cfg, tensors


def causal_attention(q, k, v, scaling):
    """q, k, v [1, H, T, hd]: eager softmax attention with HF's additive causal mask."""
    T = q.shape[2]
    mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
    a = torch.matmul(q, k.transpose(2, 3)) * scaling + mask
    a = Fn.softmax(a, dim=-1, dtype=torch.float32)
    return torch.matmul(a, v).transpose(1, 2).reshape(1, T, -1)


class GPT2:
    def __init__(self, cfg, w):
        self.D, self.H, self.L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
        self.hd = self.D // self.H
        self.eps = float(cfg.get("layer_norm_epsilon", 1e-5))
        pre = "transformer." if "transformer.wte.weight" in w else ""
        self.w, self.pre = w, pre
        self.wte, self.wpe = w[pre + "wte.weight"], w[pre + "wpe.weight"]

    def ln(self, x, name):
        return Fn.layer_norm(x, (self.D,), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def conv1d(self, x, name):   # transformers.pytorch_utils.Conv1D: addmm(b, x, W)
        return torch.addmm(self.w[name + ".bias"], x.reshape(-1, x.shape[-1]), self.w[name + ".weight"]).view(
            *x.shape[:-1], -1)

    def forward(self, tokens):
        T = tokens.shape[0]
        x = (Fn.embedding(tokens, self.wte) + self.wpe[:T]).unsqueeze(0)
        for l in range(self.L):
            p = self.pre + "h.%d." % l
            h = self.ln(x, p + "ln_1")
            q, k, v = self.conv1d(h, p + "attn.c_attn").split(self.D, dim=2)
            q, k, v = (t.view(1, T, self.H, self.hd).transpose(1, 2) for t in (q, k, v))
            x = x + self.conv1d(causal_attention(q, k, v, self.hd ** -0.5), p + "attn.c_proj")
            h = self.ln(x, p + "ln_2")
            x = x + self.conv1d(Fn.gelu(self.conv1d(h, p + "mlp.c_fc"), approximate="tanh"), p + "mlp.c_proj")
        x = self.ln(x, self.pre + "ln_f")
        return Fn.linear(x, self.wte)[0]


class NeoX:
    def __init__(self, cfg, w):
        self.D, self.H, self.L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
        self.hd = self.D // self.H
        self.rd = int(self.hd * cfg.get("rotary_pct", 0.25))
        self.base = float(cfg.get("rotary_emb_base", 10000))
        self.eps = float(cfg.get("layer_norm_eps", 1e-5))
        self.parallel = cfg.get("use_parallel_residual", True)
        self.w = w

    def ln(self, x, name):
        return Fn.layer_norm(x, (self.D,), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def lin(self, x, name):
        return Fn.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    @staticmethod
    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, tokens):
        T, H, hd, rd = tokens.shape[0], self.H, self.hd, self.rd
        x = Fn.embedding(tokens, self.w["gpt_neox.embed_in.weight"]).unsqueeze(0)
        inv_freq = 1.0 / (self.base ** (torch.arange(0, rd, 2, dtype=torch.int64).float() / rd))
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]

        def rope(t):
            r, rest = t[..., :rd], t[..., rd:]
            return torch.cat((r * cos + self.rotate_half(r) * sin, rest), dim=-1)

        for l in range(self.L):
            p = "gpt_neox.layers.%d." % l
            h = self.ln(x, p + "input_layernorm")
            qkv = self.lin(h, p + "attention.query_key_value").view(1, T, H, 3 * hd).transpose(1, 2)
            q, k, v = qkv.chunk(3, dim=-1)
            a = self.lin(causal_attention(rope(q), rope(k), v, hd ** -0.5), p + "attention.dense")
            mlp_in = x if self.parallel else x + a
            m = self.lin(Fn.gelu(self.lin(self.ln(mlp_in, p + "post_attention_layernorm"), p + "mlp.dense_h_to_4h")),
                         p + "mlp.dense_4h_to_h")
            x = x + a + m
        x = self.ln(x, "gpt_neox.final_layer_norm")
        return Fn.linear(x, self.w["embed_out.weight"])[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch eager GPT-2 / GPT-NeoX forward pass for make bench.")
    ap.add_argument("command", choices=("time", "check"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True, help="JSON Lines prompts; the first line is used")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dump", help="check: probe dump written with --save-logits")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.threads < 1:
        ap.error("--repeats and --threads must be >= 1")
    if a.command == "check" and not a.dump:
        ap.error("check needs --dump")
    torch.set_num_threads(a.threads)
    try:
        cfg, w = load_model(a.model)
        model = (GPT2 if cfg["model_type"] == "gpt2" else NeoX)(cfg, w)
        tokens = torch.tensor(read_first_prompt(a.prompts), dtype=torch.int64)
        if a.command == "time":
            return cmd_time(model, tokens, a.repeats)
        return cmd_check(model, tokens, a.dump, a.tol)
    except (OSError, ValueError, KeyError) as e:
        print("torch_families.py: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
