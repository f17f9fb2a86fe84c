#!/usr/bin/python3
"""clip_ref.py — DiffCLIP and CLIP checkpoints with random weights, and a float64 numpy
reference of both towers, written from the published maths (docs/format.md "DiffCLIP and
its CLIP baseline": DiffCLIP's diff_attention.py / diff_clip.py, SLIP's models.py, timm's
VisionTransformer), not from difflens' C.

  make_state_dict(kind, size)  name -> float32 array under the published names ("module."
                               not included), shapes of ViT-B/16 scaled down by SIZES[size]
  save_checkpoint(path, sd, args=True)  a training checkpoint as the authors' scripts save
                               it: {"epoch", "best_acc1", "state_dict" ("module."-prefixed),
                               "args" (an argparse.Namespace)} through torch.save
  image_tower(sd, cfg, pixels) / text_tower(sd, cfg, tokens)  float64 forward passes
                               returning the feature, the embedding and per-layer maps
"""
import argparse
from collections import OrderedDict

import numpy as np

# ViT-B/16 and its text tower scaled down: (image, patch, Dv, Lv, Hv, ctx, vocab, Dt, Lt, Ht, E)
SIZES = {
    "tiny": dict(image=32, patch=8, dv=48, lv=2, hv=4, ctx=16, vocab=96, dt=32, lt=2, ht=4, embed=24),
    "small": dict(image=64, patch=16, dv=64, lv=3, hv=4, ctx=24, vocab=128, dt=48, lt=2, ht=4, embed=32),
}


def config(kind, size):
    s = SIZES[size]
    diff = kind == "diffclip"
    v = {"image_size": s["image"], "patch_size": s["patch"], "width": s["dv"], "layers": s["lv"], "heads": s["hv"],
         "mlp_width": 4 * s["dv"], "layer_norm_eps": 1e-5 if diff else 1e-6, "hidden_act": "gelu"}
    t = {"context_length": s["ctx"], "vocab_size": s["vocab"], "width": s["dt"], "layers": s["lt"], "heads": s["ht"],
         "mlp_width": 4 * s["dt"], "layer_norm_eps": 1e-5, "hidden_act": "quick_gelu"}
    if diff:
        v["lambda_init"] = t["lambda_init"] = 0.8
    return {"model_type": kind, "embed_dim": s["embed"], "vision_config": v, "text_config": t}


# ---------------------------------------------------------------------------
# random weights under the published names
# ---------------------------------------------------------------------------

def make_state_dict(kind, size="tiny", seed=0, layer_scale=False):
    rng = np.random.default_rng(seed)
    s = SIZES[size]
    sd = OrderedDict()

    def lin(name, out, inp, bias=True):
        sd[name + ".weight"] = rng.normal(0, inp ** -0.5, (out, inp))
        if bias:
            sd[name + ".bias"] = rng.normal(0, 0.1, out)

    def norm(name, d):
        sd[name + ".weight"] = 1 + 0.1 * rng.normal(size=d)
        sd[name + ".bias"] = 0.1 * rng.normal(size=d)

    def attention(pre, d, heads):
        if kind == "diffclip":
            for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
                lin(pre + "attn." + p, d, d)
            hd = d // heads
            for p in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                sd[pre + "attn." + p] = rng.normal(0, 0.1, hd)
            sd[pre + "attn.diff_norm.weight"] = 1 + 0.1 * rng.normal(size=2 * hd)
        elif pre.startswith("visual."):
            lin(pre + "attn.qkv", 3 * d, d)
            lin(pre + "attn.proj", d, d)
        else:
            sd[pre + "attn.in_proj_weight"] = rng.normal(0, d ** -0.5, (3 * d, d))
            sd[pre + "attn.in_proj_bias"] = rng.normal(0, 0.1, 3 * d)
            lin(pre + "attn.out_proj", d, d)

    dv, p, n = s["dv"], s["patch"], (s["image"] // s["patch"]) ** 2
    sd["visual.cls_token"] = rng.normal(0, 1, (1, 1, dv))
    sd["visual.pos_embed"] = rng.normal(0, 0.5, (1, 1 + n, dv))
    sd["visual.patch_embed.proj.weight"] = rng.normal(0, (3 * p * p) ** -0.5, (dv, 3, p, p))
    sd["visual.patch_embed.proj.bias"] = rng.normal(0, 0.1, dv)
    for l in range(s["lv"]):
        pre = "visual.blocks.%d." % l
        norm(pre + "norm1", dv)
        attention(pre, dv, s["hv"])
        if layer_scale:
            sd[pre + "ls1.gamma"] = 0.5 + 0.1 * rng.normal(size=dv)
            sd[pre + "ls2.gamma"] = 0.5 + 0.1 * rng.normal(size=dv)
        norm(pre + "norm2", dv)
        lin(pre + "mlp.fc1", 4 * dv, dv)
        lin(pre + "mlp.fc2", dv, 4 * dv)
    norm("visual.norm", dv)
    dt = s["dt"]
    sd["token_embedding.weight"] = rng.normal(0, 1, (s["vocab"], dt))
    sd["positional_embedding"] = rng.normal(0, 0.5, (s["ctx"], dt))
    for l in range(s["lt"]):
        pre = "transformer.resblocks.%d." % l
        norm(pre + "ln_1", dt)
        attention(pre, dt, s["ht"])
        norm(pre + "ln_2", dt)
        lin(pre + "mlp.c_fc", 4 * dt, dt)
        lin(pre + "mlp.c_proj", dt, 4 * dt)
    norm("ln_final", dt)
    sd["image_projection"] = rng.normal(0, dv ** -0.5, (dv, s["embed"]))
    sd["text_projection"] = rng.normal(0, dt ** -0.5, (dt, s["embed"]))
    sd["logit_scale"] = np.array(np.log(1 / 0.07))
    return OrderedDict((k, np.asarray(v, dtype=np.float32)) for k, v in sd.items())


def save_checkpoint(path, sd, args=True, prefix="module."):
    import torch
    ck = {"state_dict": OrderedDict((prefix + k, torch.from_numpy(np.array(v))) for k, v in sd.items())}
    if args:  # what the training scripts add (a float and a Namespace: beyond torch 1.13's weights_only)
        ck.update(epoch=7, best_acc1=12.5, args=argparse.Namespace(model="DiffCLIP_VITB16", lr=5e-4, epochs=40))
    torch.save(ck, path)


# ---------------------------------------------------------------------------
# float64 forward passes
# ---------------------------------------------------------------------------

def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def quick_gelu(x):
    return x / (1 + np.exp(-1.702 * x))


def softmax(s):
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(-1, keepdims=True)


def attention(sd, pre, x, heads, diff, lambda_init, causal, fused):
    """One attention sub-layer on x [T, D]; returns (out [T, D], maps dict)."""
    g = lambda n: sd[pre + n].astype(np.float64)  # noqa: E731
    T, D = x.shape
    d = D // heads
    mask = np.triu(np.full((T, T), -np.inf), 1) if causal else np.zeros((T, T))
    if diff:
        q = x @ g("attn.q_proj.weight").T + g("attn.q_proj.bias")
        k = x @ g("attn.k_proj.weight").T + g("attn.k_proj.bias")
        v = x @ g("attn.v_proj.weight").T + g("attn.v_proj.bias")
        q = q.reshape(T, heads, d).transpose(1, 0, 2) * d ** -0.5
        k = k.reshape(T, heads, d).transpose(1, 0, 2)
        v = v.reshape(T, heads // 2, 2 * d).transpose(1, 0, 2)
        p = softmax(q @ k.transpose(0, 2, 1) + mask).reshape(heads // 2, 2, T, T)
        lam = (np.exp(np.sum(g("attn.lambda_q1") * g("attn.lambda_k1"))) -
               np.exp(np.sum(g("attn.lambda_q2") * g("attn.lambda_k2"))) + lambda_init)
        a = p[:, 0] - lam * p[:, 1]
        o = a @ v  # [H/2, T, 2d]
        o = o / np.sqrt((o ** 2).mean(-1, keepdims=True) + 1e-5) * g("attn.diff_norm.weight") * (1 - lambda_init)
        o = o.transpose(1, 0, 2).reshape(T, D)
        out = o @ g("attn.out_proj.weight").T + g("attn.out_proj.bias")
        return out, {"map1": p[:, 0], "map2": p[:, 1], "diff": a, "lambda": lam}
    if fused == "qkv":
        w, b, wo, bo = g("attn.qkv.weight"), g("attn.qkv.bias"), g("attn.proj.weight"), g("attn.proj.bias")
    else:
        w, b, wo, bo = (g("attn.in_proj_weight"), g("attn.in_proj_bias"), g("attn.out_proj.weight"),
                        g("attn.out_proj.bias"))
    qkv = x @ w.T + b
    q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, heads, d).transpose(1, 0, 2) for i in range(3))
    p = softmax((q * d ** -0.5) @ k.transpose(0, 2, 1) + mask)
    o = (p @ v).transpose(1, 0, 2).reshape(T, D)
    return o @ wo.T + bo, {"map1": p}


def image_tower(sd, cfg, pixels):
    """pixels [3, S, S] (already normalised) -> dict(feature, embed, layers=[maps...], hidden=[...])."""
    c = cfg["vision_config"]
    diff = cfg["model_type"] == "diffclip"
    g = lambda n: sd[n].astype(np.float64)  # noqa: E731
    P, S, D = c["patch_size"], c["image_size"], c["width"]
    G = S // P
    px = np.asarray(pixels, dtype=np.float64)
    patches = px.reshape(3, G, P, G, P).transpose(1, 3, 0, 2, 4).reshape(G * G, 3 * P * P)
    x = patches @ g("visual.patch_embed.proj.weight").reshape(D, -1).T + g("visual.patch_embed.proj.bias")
    x = np.concatenate([g("visual.cls_token").reshape(1, D), x]) + g("visual.pos_embed").reshape(-1, D)
    eps = c["layer_norm_eps"]
    layers, hidden = [], []
    for l in range(c["layers"]):
        pre = "visual.blocks.%d." % l
        h = layernorm(x, g(pre + "norm1.weight"), g(pre + "norm1.bias"), eps)
        a, maps = attention(sd, pre, h, c["heads"], diff, c.get("lambda_init", 0), False, "qkv")
        if pre + "ls1.gamma" in sd:
            a = a * g(pre + "ls1.gamma")
        x = x + a
        h = layernorm(x, g(pre + "norm2.weight"), g(pre + "norm2.bias"), eps)
        m = gelu(h @ g(pre + "mlp.fc1.weight").T + g(pre + "mlp.fc1.bias")) @ g(pre + "mlp.fc2.weight").T
        m = m + g(pre + "mlp.fc2.bias")
        if pre + "ls2.gamma" in sd:
            m = m * g(pre + "ls2.gamma")
        x = x + m
        layers.append(maps)
        hidden.append(x.copy())
    x = layernorm(x, g("visual.norm.weight"), g("visual.norm.bias"), eps)
    feat = x[0]
    return {"feature": feat, "embed": feat @ g("image_projection"), "layers": layers, "hidden": hidden}


def text_tower(sd, cfg, tokens):
    """tokens: ids up to and including the end-of-text token (the largest id) ->
    dict(feature, embed, layers, hidden). Padding after it changes nothing (causal)."""
    c = cfg["text_config"]
    diff = cfg["model_type"] == "diffclip"
    g = lambda n: sd[n].astype(np.float64)  # noqa: E731
    tok = np.asarray(tokens)
    T = len(tok)
    x = g("token_embedding.weight")[tok] + g("positional_embedding")[:T]
    eps = c["layer_norm_eps"]
    layers, hidden = [], []
    for l in range(c["layers"]):
        pre = "transformer.resblocks.%d." % l
        h = layernorm(x, g(pre + "ln_1.weight"), g(pre + "ln_1.bias"), eps)
        a, maps = attention(sd, pre, h, c["heads"], diff, c.get("lambda_init", 0), True, "in_proj")
        x = x + a
        h = layernorm(x, g(pre + "ln_2.weight"), g(pre + "ln_2.bias"), eps)
        m = quick_gelu(h @ g(pre + "mlp.c_fc.weight").T + g(pre + "mlp.c_fc.bias"))
        x = x + m @ g(pre + "mlp.c_proj.weight").T + g(pre + "mlp.c_proj.bias")
        layers.append(maps)
        hidden.append(x.copy())
    x = layernorm(x, g("ln_final.weight"), g("ln_final.bias"), eps)
    feat = x[int(np.argmax(tok))]
    return {"feature": feat, "embed": feat @ g("text_projection"), "layers": layers, "hidden": hidden}


def scores(sd, image_embed, text_embeds):
    """(similarities exp(logit_scale)·cos, softmax over the captions)."""
    i = image_embed / np.linalg.norm(image_embed)
    t = np.asarray(text_embeds) / np.linalg.norm(text_embeds, axis=-1, keepdims=True)
    sim = np.exp(float(sd["logit_scale"])) * (t @ i)
    return sim, softmax(sim)
