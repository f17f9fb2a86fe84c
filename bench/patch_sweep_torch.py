#!/usr/bin/python3
"""patch_sweep_torch.py — the PyTorch side of bench/patch_sweep.sh: the layer × position
residual-stream patch sweep written the way TransformerLens users write it (its
"Activation Patching" demo): hook points on the model (nn.Module forward hooks, as
TransformerLens's HookPoint), one run_with_cache of the clean prompt, then for every
(layer, position) cell one full forward of the corrupted prompt with a hook on
blocks.{layer}.hook_resid_pre that writes the clean activation at that position:

    _, clean_cache = model.run_with_cache(clean)
    for layer in range(L):
        for pos in range(T):
            logits = model.run_with_hooks(corrupted, fwd_hooks=[(resid_pre(layer), patch(pos))])
            patched[layer, pos] = metric(logits)

The model is bench/torch_llama.py's (Hugging Face LlamaForCausalLM, eager, f32) with a
hook point before each layer. metric: the mean probability of the target tokens (rows
p − 1 of the target span), as probe's target_prob.

    patch_sweep_torch.py --model DIR --prompts P.jsonl [--cells N] [--threads 2] [--dump X.h5]

Every cell costs one full forward (the same shape each time), so the sweep is timed on N
cells spread over the grid (default: every layer at 8 positions) and its time is that
per-cell time × L·T plus the clean and corrupted runs; with --dump the patched values of
those cells are compared with probe's patch/patched (exit 1 beyond 1e-3 relative).
Prints "torch_sweep cells=<L·T> timed=<N> per_cell_s=<s> sweep_s=<s> [agreement=<r>]".
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama  # noqa: E402


class HookPoint(nn.Module):
    """TransformerLens's HookPoint: an identity whose forward hooks see and may replace x."""

    def forward(self, x):
        return x


class HookedLlama(torch_llama.Llama, nn.Module):
    def __init__(self, cfg, w):
        nn.Module.__init__(self)
        torch_llama.Llama.__init__(self, cfg, w)
        self.hook_resid_pre = nn.ModuleList([HookPoint() for _ in range(self.L)])

    def forward(self, tokens):
        T = tokens.shape[0]
        x = Fn.embedding(tokens, self.embed).unsqueeze(0)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
        n_rep = self.H // self.Hkv
        for l, lw in enumerate(self.layers):
            x = self.hook_resid_pre[l](x)
            h = self.rmsnorm(x, lw["in_norm"])
            q = Fn.linear(h, lw["q"]).view(1, T, self.H, self.hd).transpose(1, 2)
            k = Fn.linear(h, lw["k"]).view(1, T, self.Hkv, self.hd).transpose(1, 2)
            v = Fn.linear(h, lw["v"]).view(1, T, self.Hkv, self.hd).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if n_rep > 1:
                k = k[:, :, None].expand(1, self.Hkv, n_rep, T, self.hd).reshape(1, self.H, T, self.hd)
                v = v[:, :, None].expand(1, self.Hkv, n_rep, T, self.hd).reshape(1, self.H, T, self.hd)
            a = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5 + mask
            a = Fn.softmax(a, dim=-1, dtype=torch.float32)
            o = torch.matmul(a, v).transpose(1, 2).contiguous().reshape(1, T, self.H * self.hd)
            x = x + Fn.linear(o, lw["o"])
            h = self.rmsnorm(x, lw["post_norm"])
            x = x + Fn.linear(Fn.silu(Fn.linear(h, lw["gate"])) * Fn.linear(h, lw["up"]), lw["down"])
        return Fn.linear(self.rmsnorm(x, self.norm), self.lm_head)[0]

    def run_with_cache(self, tokens):
        cache, handles = {}, []
        for l, hp in enumerate(self.hook_resid_pre):
            handles.append(hp.register_forward_hook(lambda m, i, out, l=l: cache.__setitem__(l, out.detach())))
        try:
            return self.forward(tokens), cache
        finally:
            for h in handles:
                h.remove()

    def run_with_hooks(self, tokens, fwd_hooks):
        handles = [self.hook_resid_pre[l].register_forward_hook(fn) for l, fn in fwd_hooks]
        try:
            return self.forward(tokens)
        finally:
            for h in handles:
                h.remove()


def main(argv=None):
    ap = argparse.ArgumentParser(description="TransformerLens-style residual patch sweep in PyTorch.")
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True, help="clean prompt first, corrupted second (same length)")
    ap.add_argument("--cells", type=int, default=0, help="cells timed (default: every layer at 8 positions)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dump", help="probe dump with patch/ in its second sample, to compare")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    cfg, w = torch_llama.load_model(a.model)
    model = HookedLlama(cfg, w)
    with open(a.prompts) as f:
        prompts = [json.loads(line) for line in f if line.strip()]
    clean = torch.tensor(prompts[0]["tokens"], dtype=torch.int64)
    corrupted = torch.tensor(prompts[1]["tokens"], dtype=torch.int64)
    T, L = clean.shape[0], model.L
    tgt = [p for s, e in prompts[1]["target"] for p in range(s, e) if p >= 1]

    def metric(logits):
        lp = torch.log_softmax(logits.double(), dim=-1)
        return float(torch.stack([lp[p - 1, corrupted[p]].exp() for p in tgt]).mean())

    positions = np.linspace(0, T - 1, 8).round().astype(int)
    cells = [(l, int(p)) for l in range(L) for p in positions]
    if a.cells:
        cells = cells[:a.cells]
    patched = {}
    with torch.inference_mode():
        t0 = time.perf_counter()
        _, clean_cache = model.run_with_cache(clean)
        metric(model(corrupted))
        base = time.perf_counter() - t0
        t0 = time.perf_counter()
        for layer, pos in cells:
            def patch(module, inputs, out, pos=pos, layer=layer):
                out = out.clone()
                out[:, pos] = clean_cache[layer][:, pos]
                return out
            patched[(layer, pos)] = metric(model.run_with_hooks(corrupted, fwd_hooks=[(layer, patch)]))
        per_cell = (time.perf_counter() - t0) / len(cells)
    line = "torch_sweep cells=%d timed=%d per_cell_s=%.4f sweep_s=%.2f" % (L * T, len(cells), per_cell,
                                                                           base + per_cell * L * T)
    rc = 0
    if a.dump:
        import h5py
        with h5py.File(a.dump, "r") as f:
            ours = f["samples/000001/patch/patched"][()]
        r = max(abs(ours[l, p] - v) / max(abs(v), 1e-12) for (l, p), v in patched.items())
        line += " agreement=%.2e" % r
        rc = 0 if r <= 1e-3 else 1
    print(line)
    return rc


if __name__ == "__main__":
    sys.exit(main())
