#!/usr/bin/python3
"""torch_generate.py — the PyTorch side of bench/generate.sh: greedy KV-cached decoding
of a llama model directory, written as a user of PyTorch would without transformers: the
weights of the same safetensors in bf16 (torch_dtype=torch.bfloat16), a prefill over the
prompt, then one token per step with the keys and values of every layer kept and
concatenated as transformers' DynamicCache does (torch.cat along the sequence), eager
attention, under torch.inference_mode() with torch.set_num_threads(THREADS).

    torch_generate.py --model DIR --prompts P.jsonl --new N [--repeats R] [--threads T]
        [--dtype bf16|f32]
prints "torch_decode new=<N> best_tok_s=<rate> prefill_s=<s> first_ids=<ids>" (N tokens
over the N - 1 decoding steps after the prefill, as probe counts; the best of R runs).
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama  # noqa: E402  (the weight loader and the model's layout)


class Cached(torch_llama.Llama):
    """torch_llama.Llama with a KV cache: step(tokens, cache) runs positions
    len(cache) .. len(cache) + n - 1 and appends their keys and values."""

    def inv_freq(self):
        f = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
        if self.llama3:
            r = self.llama3
            factor, low, high = float(r["factor"]), float(r["low_freq_factor"]), float(r["high_freq_factor"])
            old = float(r["original_max_position_embeddings"])
            wavelen = 2 * math.pi / f
            scaled = torch.where(wavelen > old / low, f / factor, f)
            smooth = (old / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = ~(wavelen < old / high) * ~(wavelen > old / low)
            f = torch.where(medium, smoothed, scaled)
        return f

    def step(self, tokens, cache, dtype):
        n, past = tokens.shape[0], (cache[0][0].shape[2] if cache else 0)
        x = Fn.embedding(tokens, self.embed).unsqueeze(0)                 # [1, n, D]
        pos = torch.arange(past, past + n, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_f)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None].to(dtype), emb.sin()[None, None].to(dtype)
        T = past + n
        mask = torch.full((n, T), torch.finfo(torch.float32).min).triu(past + 1)[None, None]
        n_rep, scaling = self.H // self.Hkv, self.hd ** -0.5
        for li, lw in enumerate(self.layers):
            h = self.rmsnorm(x, lw["in_norm"])
            q = Fn.linear(h, lw["q"]).view(1, n, self.H, self.hd).transpose(1, 2)
            k = Fn.linear(h, lw["k"]).view(1, n, self.Hkv, self.hd).transpose(1, 2)
            v = Fn.linear(h, lw["v"]).view(1, n, self.Hkv, self.hd).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if len(cache) > li:   # DynamicCache.update: concatenate along the sequence
                k = torch.cat([cache[li][0], k], dim=2)
                v = torch.cat([cache[li][1], v], dim=2)
                cache[li] = (k, v)
            else:
                cache.append((k, v))
            if n_rep > 1:
                k = k[:, :, None].expand(1, self.Hkv, n_rep, T, self.hd).reshape(1, self.H, T, self.hd)
                v = v[:, :, None].expand(1, self.Hkv, n_rep, T, self.hd).reshape(1, self.H, T, self.hd)
            a = torch.matmul(q, k.transpose(2, 3)) * scaling + mask.to(q.dtype)
            a = Fn.softmax(a, dim=-1, dtype=torch.float32).to(q.dtype)
            o = torch.matmul(a, v).transpose(1, 2).reshape(1, n, self.H * self.hd)
            x = x + Fn.linear(o, lw["o"])
            h = self.rmsnorm(x, lw["post_norm"])
            x = x + Fn.linear(Fn.silu(Fn.linear(h, lw["gate"])) * Fn.linear(h, lw["up"]), lw["down"])
        x = self.rmsnorm(x[:, -1:], self.norm)
        return Fn.linear(x, self.lm_head)[0, -1]                          # [V] of the last row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--new", type=int, required=True)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    cfg, w = torch_llama.load_model(a.model)
    w = {k: v.to(dtype) for k, v in w.items()}   # torch_dtype=torch.bfloat16
    m = Cached(cfg, w)
    del w
    m.inv_f = m.inv_freq()
    prompt = torch.tensor(torch_llama.read_first_prompt(a.prompts), dtype=torch.long)
    best, prefill, ids = 0.0, 0.0, []
    with torch.inference_mode():
        for _ in range(a.repeats):
            cache = []
            t0 = time.perf_counter()
            z = m.step(prompt, cache, dtype)
            t1 = time.perf_counter()
            out = [int(z.argmax())]
            for _ in range(a.new - 1):
                z = m.step(torch.tensor(out[-1:], dtype=torch.long), cache, dtype)
                out.append(int(z.argmax()))
            rate = a.new / (time.perf_counter() - t1)
            if rate > best:
                best, prefill, ids = rate, t1 - t0, out
    print("torch_decode new=%d best_tok_s=%.3f prefill_s=%.3f first_ids=%s" % (
        a.new, best, prefill, ",".join(map(str, ids[:8]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
