#!/usr/bin/python3
"""torch_llama.py — the PyTorch eager side of `make bench`: a Llama forward pass over the
same config.json + safetensors weights that bin/probe runs, written the way Hugging Face
transformers' LlamaForCausalLM computes it with attn_implementation="eager":

    x = embed[tokens]
    per layer:  h = RMSNorm(x); q, k, v = Linear(h); rotate-half RoPE on q, k;
                A = softmax_f32(q·kᵀ/√d + causal_mask) ; x += o_proj(A·v)
                h = RMSNorm(x); x += down(silu(gate(h)) · up(h))
    logits = lm_head(RMSNorm(x))            # [T, V], all positions

f32 throughout, batch 1, under torch.inference_mode(), torch.set_num_threads(THREADS).

    torch_llama.py time  --model DIR --prompts P.jsonl [--repeats 3] [--threads 2]
        prints  "torch_forward T=<T> best_s=<s> runs_s=<s>,<s>,..."  (first prompt only)
    torch_llama.py check --model DIR --prompts P.jsonl --dump X.h5 [--threads 2]
        compares our logits with /samples/000000/logits of a `probe --save-logits` dump;
        prints  "agreement: max |Δlogit|/max|logit| = <r> (T=<T>, max|logit| = <m>)"
        and exits 1 when r > --tol (default 1e-4).
Only llama models (model_type "llama", no rope scaling or llama3's) are handled;
anything else is refused. Exit 2 on a usage error, 1 on a runtime error.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as Fn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import reference  # noqa: E402  (tests/ref/reference.py: the safetensors reader)

# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------

def load_model(model_dir):
    """(config dict, tensors dict) of a llama model directory (single file or shards)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "llama":
        raise ValueError("model_type %r: this benchmark implements llama only" % cfg.get("model_type"))
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if rs and (rs.get("rope_type") or rs.get("type")) not in (None, "default", "llama3"):
        raise ValueError("rope scaling %r is not implemented here" % rs)
    # the test suite's safetensors reader (single file or shards), as f32
    tensors = {name: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
               for name, a in reference.read_tensors(model_dir, as_float64=False).items()}
    return cfg, tensors


def read_first_prompt(path):
    with open(path) as f:
        for line in f:
            if line.strip():
                return [int(t) for t in json.loads(line)["tokens"]]
    raise ValueError("%s: no prompt" % path)


# ---------------------------------------------------------------------------
# the model (Hugging Face LlamaForCausalLM, eager attention)
# ---------------------------------------------------------------------------

class Llama:
    def __init__(self, cfg, w):
        self.D = cfg["hidden_size"]
        self.H = cfg["num_attention_heads"]
        self.Hkv = cfg.get("num_key_value_heads") or self.H
        self.hd = cfg.get("head_dim") or self.D // self.H
        self.L = cfg["num_hidden_layers"]
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.theta = float(cfg.get("rope_theta", 10000.0))
        rs = cfg.get("rope_scaling") or {}
        self.llama3 = rs if (rs.get("rope_type") or rs.get("type")) == "llama3" else None
        self.embed = w["model.embed_tokens.weight"]                       # [V, D]
        self.lm_head = w.get("lm_head.weight", self.embed)                # [V, D]
        self.norm = w["model.norm.weight"]
        self.layers = []
        for l in range(self.L):
            p = "model.layers.%d." % l
            self.layers.append({k: w[p + n] for k, n in (
                ("in_norm", "input_layernorm.weight"), ("post_norm", "post_attention_layernorm.weight"),
                ("q", "self_attn.q_proj.weight"), ("k", "self_attn.k_proj.weight"),
                ("v", "self_attn.v_proj.weight"), ("o", "self_attn.o_proj.weight"),
                ("gate", "mlp.gate_proj.weight"), ("up", "mlp.up_proj.weight"),
                ("down", "mlp.down_proj.weight"))})

    def rmsnorm(self, x, g):
        # LlamaRMSNorm: variance in f32, x * rsqrt(var + eps), then weight * x
        var = x.pow(2).mean(-1, keepdim=True)
        return g * (x * torch.rsqrt(var + self.eps))

    @staticmethod
    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, tokens):
        """logits [T, V] of a 1-D LongTensor of token ids."""
        T = tokens.shape[0]
        x = Fn.embedding(tokens, self.embed).unsqueeze(0)                # [1, T, D]
        # LlamaRotaryEmbedding: inv_freq = 1/theta^(2i/d); emb = cat(freqs, freqs)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
        if self.llama3:   # _compute_llama3_parameters
            r = self.llama3
            factor, low, high = float(r["factor"]), float(r["low_freq_factor"]), float(r["high_freq_factor"])
            old = float(r["original_max_position_embeddings"])
            wavelen = 2 * math.pi / inv_freq
            scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
            smooth = (old / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = ~(wavelen < old / high) * ~(wavelen > old / low)
            inv_freq = torch.where(medium, smoothed, scaled)
        pos = torch.arange(T, dtype=torch.float32)
        freqs = torch.outer(pos, inv_freq)                                # [T, hd/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]           # [1, 1, T, hd]
        # additive causal mask as HF builds it: finfo.min above the diagonal
        mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]   # [1, 1, T, T]
        scaling = self.hd ** -0.5
        n_rep = self.H // self.Hkv
        for lw in self.layers:
            h = self.rmsnorm(x, lw["in_norm"])
            q = Fn.linear(h, lw["q"]).view(1, T, self.H, self.hd).transpose(1, 2)      # [1, H, T, hd]
            k = Fn.linear(h, lw["k"]).view(1, T, self.Hkv, self.hd).transpose(1, 2)    # [1, Hkv, T, hd]
            v = Fn.linear(h, lw["v"]).view(1, T, self.Hkv, self.hd).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if n_rep > 1:   # repeat_kv
                k = k[:, :, None].expand(1, self.Hkv, n_rep, T, self.hd).reshape(1, self.H, T, self.hd)
                v = v[:, :, None].expand(1, self.Hkv, n_rep, T, self.hd).reshape(1, self.H, T, self.hd)
            # eager_attention_forward
            a = torch.matmul(q, k.transpose(2, 3)) * scaling              # [1, H, T, T]
            a = a + mask
            a = Fn.softmax(a, dim=-1, dtype=torch.float32).to(q.dtype)
            o = torch.matmul(a, v).transpose(1, 2).contiguous().reshape(1, T, self.H * self.hd)
            x = x + Fn.linear(o, lw["o"])
            h = self.rmsnorm(x, lw["post_norm"])
            x = x + Fn.linear(Fn.silu(Fn.linear(h, lw["gate"])) * Fn.linear(h, lw["up"]), lw["down"])
        x = self.rmsnorm(x, self.norm)
        return Fn.linear(x, self.lm_head)[0]                              # [T, V]


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------

def cmd_time(model, tokens, repeats):
    runs = []
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.perf_counter()
            logits = model.forward(tokens)
            runs.append(time.perf_counter() - t0)
            del logits
    print("torch_forward T=%d best_s=%.4f runs_s=%s" % (tokens.shape[0], min(runs),
                                                        ",".join("%.4f" % r for r in runs)))
    return 0


def cmd_check(model, tokens, dump, tol):
    import h5py
    with h5py.File(dump, "r") as f:
        ref = np.asarray(f["samples/000000/logits"], dtype=np.float64)    # [T, V]
    with torch.inference_mode():
        ours = model.forward(tokens).double().numpy()
    if ref.shape != ours.shape:
        print("torch_llama.py: logits shape %s in %s, ours %s" % (ref.shape, dump, ours.shape), file=sys.stderr)
        return 1
    m = float(np.abs(ref).max())
    r = float(np.abs(ours - ref).max()) / m
    print("agreement: max |Δlogit|/max|logit| = %.2e (T=%d, max|logit| = %.3g)" % (r, ours.shape[0], m))
    if not r <= tol:   # also catches NaN
        print("torch_llama.py: agreement %.2e exceeds %.0e: not the same computation" % (r, tol), file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch eager Llama forward pass for make bench.")
    ap.add_argument("command", choices=("time", "check"))
    ap.add_argument("--model", required=True, help="model directory (config.json + safetensors)")
    ap.add_argument("--prompts", required=True, help="JSON Lines prompts; the first line is used")
    ap.add_argument("--repeats", type=int, default=3, help="timed forward passes (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--dump", help="check: probe dump written with --save-logits")
    ap.add_argument("--tol", type=float, default=1e-4, help="check: largest accepted ratio (default 1e-4)")
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.threads < 1:
        ap.error("--repeats and --threads must be >= 1")
    if a.command == "check" and not a.dump:
        ap.error("check needs --dump")
    torch.set_num_threads(a.threads)
    try:
        cfg, w = load_model(a.model)
        tokens = torch.tensor(read_first_prompt(a.prompts), dtype=torch.int64)
        model = Llama(cfg, w)
        if a.command == "time":
            return cmd_time(model, tokens, a.repeats)
        return cmd_check(model, tokens, a.dump, a.tol)
    except (OSError, ValueError, KeyError) as e:
        print("torch_llama.py: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
