#!/usr/bin/python3
"""torch_train.py — the PyTorch eager side of the training benchmark (bench/train_bench.sh):
the same Llama model bin/train trains (pre-norm RMSNorm blocks, rotate-half RoPE, causal
softmax attention as Hugging Face's eager path computes it, SwiGLU MLP, untied LM head),
the same batch shape, and one training step = forward + cross-entropy over every token +
backward + AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices only, as
bin/train does) — f32, torch.set_num_threads(THREADS).

    torch_train.py --layers 2 --hidden 128 --heads 4 --ffn 512 --vocab 128 --seq 256 \\
                   --batch 16 --steps 10 [--warmup-steps 2] [--threads 2]
prints   "torch_train tokens_per_s=<x> step_s=<median s> steps=<n>"
Tokens are random ids (the cost does not depend on them). Exit 2 on a usage error.
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as Fn


class Llama(torch.nn.Module):
    def __init__(self, L, D, H, F, V, T, eps=1e-6, theta=10000.0):
        super().__init__()
        self.L, self.D, self.H, self.hd, self.eps = L, D, H, D // H, eps

        def lin(o, i):
            return torch.nn.Parameter(torch.randn(o, i) * 0.02)

        def ones(n):
            return torch.nn.Parameter(torch.ones(n))

        self.embed = lin(V, D)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.in_norm, m.post_norm = ones(D), ones(D)
            m.q, m.k, m.v, m.o = lin(D, D), lin(D, D), lin(D, D), lin(D, D)
            m.gate, m.up, m.down = lin(F, D), lin(F, D), lin(D, F)
            self.layers.append(m)
        self.norm = ones(D)
        self.lm_head = lin(V, D)
        inv_freq = 1.0 / (theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos()[None, None], persistent=False)   # [1, 1, T, hd]
        self.register_buffer("sin", emb.sin()[None, None], persistent=False)
        self.register_buffer("mask", torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None],
                             persistent=False)

    def rmsnorm(self, x, g):
        return g * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    @staticmethod
    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, tokens):
        B, T = tokens.shape
        x = Fn.embedding(tokens, self.embed)                                      # [B, T, D]
        for m in self.layers:
            h = self.rmsnorm(x, m.in_norm)
            q = Fn.linear(h, m.q).view(B, T, self.H, self.hd).transpose(1, 2)     # [B, H, T, hd]
            k = Fn.linear(h, m.k).view(B, T, self.H, self.hd).transpose(1, 2)
            v = Fn.linear(h, m.v).view(B, T, self.H, self.hd).transpose(1, 2)
            q = q * self.cos + self.rotate_half(q) * self.sin
            k = k * self.cos + self.rotate_half(k) * self.sin
            a = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd) + self.mask
            a = Fn.softmax(a, dim=-1, dtype=torch.float32)
            o = torch.matmul(a, v).transpose(1, 2).reshape(B, T, self.D)
            x = x + Fn.linear(o, m.o)
            h = self.rmsnorm(x, m.post_norm)
            x = x + Fn.linear(Fn.silu(Fn.linear(h, m.gate)) * Fn.linear(h, m.up), m.down)
        return Fn.linear(self.rmsnorm(x, self.norm), self.lm_head)                # [B, T, V]


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch eager training step for the difflens bench.")
    for name, default in (("layers", 2), ("hidden", 128), ("heads", 4), ("ffn", 512), ("vocab", 128),
                          ("seq", 256), ("batch", 16), ("steps", 10), ("warmup-steps", 2), ("threads", 2)):
        ap.add_argument("--" + name, type=int, default=default, help="(default %d)" % default)
    ap.add_argument("--lr", type=float, default=1e-3, help="(default 1e-3)")
    a = ap.parse_args(argv)
    if min(a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.seq, a.batch, a.steps, a.threads) < 1 or a.hidden % a.heads:
        ap.error("sizes must be >= 1 and hidden a multiple of heads")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = Llama(a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.seq)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(2)
    times = []
    for i in range(a.warmup_steps + a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
        t0 = time.perf_counter()
        logits = model(tokens[:, :-1])
        loss = Fn.cross_entropy(logits.reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if i >= a.warmup_steps:
            times.append(dt)
    total = sum(times)
    print("torch_train tokens_per_s=%.1f step_s=%.4f steps=%d loss=%.4f" %
          (a.steps * a.batch * a.seq / total, statistics.median(times), a.steps, loss.item()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
