#!/usr/bin/python3
"""reference.py — an independent numpy (float64) forward pass of the difflens model
types, written from docs/format.md and the Hugging Face model definitions (not from
the C code), to check bin/probe against. qwen2 (q/k/v biases), qwen3 (per-head q/k
RMSNorm) and mistral are Llama-family: softmax heads, with a sliding window where the
config asks for one (query i sees keys j with i − W < j <= i). The families with
another layout (gpt2: Hugging Face modeling_gpt2.py) are in families.py.

    import reference
    m = reference.load_model("model_dir")          # config + float64 tensors
    r = reference.forward(m, [0, 17, 93, ...])
    r["logits"]                     # [T, V]
    r["map1"]                       # [L, Hd, T, T] softmax map (map 1 for Diff)
    r["map2"], r["diff"]            # Diff only: map 2, map1 − λ·map2
    r["lambda"], r["lambda_init"]   # Diff only: [L] (not DIFF V2)
    r["noise"]                      # Motif GDA: [L, Gn, T, T] each group's noise map
    r["sigma"]                      # DIFF V2: [L, T, H] σ(lambda_proj(x)), the factor on map 2
    r["heads_out"]                  # llama, diff_transformer, gpt2, gemma, olmo2: [L, T, Hd, w]
                                    # each head's output before o_proj (Diff: after its sub-norm
                                    # and (1 − λ_init)); tests/ref/lens.py attributes logits to it

Hd = H (llama, diff_transformer, diff_transformer_v2), H/2 (diffllama, Motif V1) or
H − Gn (Motif GDA: the signal heads). Masked (future) entries are 0. Motif follows vLLM's
motif.py and the MLX port (docs/format.md "Motif"); DIFF V2 follows unilm's
multihead_flashdiffv2.py.
Also usable as a tool: reference.py MODEL_DIR TOKEN... prints logits' argmax and λ.
"""
import json
import math
import os
import struct
import sys

import numpy as np

import families  # noqa: E402  (published families beyond the Llama layout)

# ---------------------------------------------------------------------------
# safetensors reading
# ---------------------------------------------------------------------------

_ST_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2), "F64": ("<f8", 8),
              "I64": ("<i8", 8), "I32": ("<i4", 4), "I16": ("<i2", 2), "I8": ("i1", 1),
              "U8": ("u1", 1), "BOOL": ("?", 1)}


def read_safetensors(path, as_float64=True):
    """dict name -> numpy array of every tensor in a safetensors file. F32/F16/BF16
    become float64 when as_float64 (else float32 for BF16, native for the others).
    Raises ValueError on a malformed file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: too short" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError("%s: header length %d past end of file" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        np_dtype, size = _ST_DTYPES[e["dtype"]]
        shape = tuple(int(s) for s in e["shape"])
        b, end = e["data_offsets"]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= b <= end <= len(data)) or end - b != count * size:
            raise ValueError("%s: tensor %s has bad offsets" % (path, name))
        a = np.frombuffer(data[b:end], dtype=np_dtype).reshape(shape)
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32).reshape(-1) << 16).view(np.float32).reshape(shape)   # 0-d too
        if as_float64 and e["dtype"] in ("F32", "F16", "BF16", "F64"):
            a = a.astype(np.float64)
        else:
            a = a.copy()
        out[name] = a
    return out


def read_tensors(model_dir, as_float64=True):
    """All tensors of a model directory: model.safetensors, or the shards listed in
    model.safetensors.index.json (every listed name must be in its shard)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(index):
        with open(index) as f:
            wmap = json.load(f)["weight_map"]
        out = {}
        for fname in sorted(set(wmap.values())):
            part = read_safetensors(os.path.join(model_dir, fname), as_float64)
            for name, file_of in wmap.items():
                if file_of == fname:
                    if name not in part:
                        raise ValueError("%s: %s listed but absent" % (fname, name))
                    out[name] = part[name]
        return out
    return read_safetensors(single, as_float64)


# ---------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------

class Model:
    """A parsed config (with docs/format.md defaults filled in) and float64 tensors."""

    def __init__(self, cfg, tensors):
        self.raw = cfg
        self.t = tensors
        self.arch = cfg["model_type"]
        if self.arch in families.TYPES:
            families.init(self, cfg)        # families.py: GPT-2...
            return
        if self.arch not in ("llama", "diff_transformer", "diffllama", "qwen2", "qwen3", "mistral",
                             "Motif", "motif", "diff_transformer_v2"):
            raise ValueError("unknown model_type %r" % self.arch)
        self.type = "llama" if self.arch in ("qwen2", "qwen3", "mistral") else self.arch
        if self.arch in ("Motif", "motif"):
            self.type = "motif"
        self.qkv_bias = self.arch == "qwen2"        # Qwen2Attention: q/k/v Linear(bias=True)
        self.qk_norm = self.arch == "qwen3"         # Qwen3Attention: q_norm, k_norm over head_dim
        if cfg.get("attention_bias") or cfg.get("mlp_bias"):
            raise ValueError("attention_bias / mlp_bias are not supported")
        if cfg.get("hidden_act", "silu") != ("poly_norm" if self.type == "motif" else "silu"):
            raise ValueError("hidden_act must be silu (Motif: poly_norm)")
        if self.type == "motif":
            _motif_config(self, cfg)
        self.V = cfg["vocab_size"]
        self.D = cfg["hidden_size"]
        self.F = cfg["intermediate_size"]
        self.L = cfg["num_hidden_layers"]
        self.H = cfg["num_attention_heads"]
        self.Hkv = cfg.get("num_key_value_heads") or self.H
        hd = cfg.get("head_dim")
        if hd is None and self.arch == "qwen3":
            hd = 128                                # Qwen3Config default
        if hd is None:
            hd = self.D // self.H // 2 if self.type == "diff_transformer" else self.D // self.H
        self.hd = hd
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        interleaved = cfg.get("rope_interleaved")
        self.interleaved = (self.type in ("diff_transformer", "diff_transformer_v2")) \
            if interleaved is None else interleaved
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        self.kv_pairing = cfg.get("diff_kv_pairing") or "flash"
        if self.kv_pairing not in ("flash", "naive"):
            raise ValueError("diff_kv_pairing must be flash or naive")
        # rope: rope_scaling (older) or rope_parameters (newer, may hold rope_theta)
        rp = cfg.get("rope_parameters")
        rs = cfg.get("rope_scaling")
        theta = cfg.get("rope_theta")
        if isinstance(rp, dict) and theta is None:
            theta = rp.get("rope_theta")
        self.theta = 10000.0 if theta is None else float(theta)
        scaling = rs if isinstance(rs, dict) else (rp if isinstance(rp, dict) else None)
        kind = "none"
        if scaling is not None:
            kind = scaling.get("rope_type", scaling.get("type", "default"))
            if kind == "default":
                kind = "none"
        if kind not in ("none", "linear", "llama3", "dynamic"):
            raise ValueError("rope scaling %r is not supported" % kind)
        self.rope_kind = kind
        self.rope = scaling or {}
        # dynamic NTK: the frequencies change only past the original context
        self.rope_limit = None
        if kind == "dynamic":
            self.rope_limit = int(self.rope.get("original_max_position_embeddings")
                                  or cfg["max_position_embeddings"])
        # sliding window per layer (Hugging Face MistralConfig / Qwen2Config)
        self.windows = [0] * self.L
        if self.arch == "mistral" and cfg.get("sliding_window"):
            self.windows = [int(cfg["sliding_window"])] * self.L
        if self.arch in ("qwen2", "qwen3") and cfg.get("use_sliding_window") and cfg.get("sliding_window"):
            types = cfg.get("layer_types")
            if types is None:
                first = cfg.get("max_window_layers", 28)
                types = ["sliding_attention" if l >= first else "full_attention" for l in range(self.L)]
            self.windows = [int(cfg["sliding_window"]) if t == "sliding_attention" else 0 for t in types]
        if self.H % self.Hkv and self.type != "motif":   # GDA: 40 q heads over 16 kv heads
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.type == "diffllama" and self.H % 2:
            raise ValueError("diffllama needs an even num_attention_heads")

    def diff_heads(self):
        """Heads as the dump counts them: differential heads for Diff models (Motif:
        H/2 pairs, or the H − Gn signal heads of GDA)."""
        if self.type == "motif":
            return self.H - self.Gn if self.Gn else self.H // 2
        return self.H // 2 if self.type == "diffllama" else self.H

    def lambda_init(self, l):
        li = self.raw.get("diff_lambda_init")
        if li is not None:
            return float(li)
        if self.type == "motif":
            # vLLM motif.py / MLX: lambda_init_fn(depth) = 0.8 − 0.6·exp(−0.3·(depth − 1))
            return 0.8 - 0.6 * math.exp(-0.3 * (l - 1))
        return 0.8 - 0.6 * math.exp(-0.3 * l)


def _motif_config(m, cfg):
    """Motif's own keys (the ports' ModelArgs): num_noise_heads (GDA), k_ratio,
    attn_rms_norm_eps (default 1e-5); head_dim defaults to D/H; rotate-half RoPE."""
    m.Gn = cfg.get("num_noise_heads") or 0
    m.sub_eps = cfg.get("attn_rms_norm_eps", 1e-5)
    if cfg.get("use_bias"):
        raise ValueError("use_bias is not supported")
    if m.Gn and cfg.get("k_ratio", 1) != 1:
        raise ValueError("k_ratio must be 1")


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    return Model(cfg, read_tensors(model_dir))


# ---------------------------------------------------------------------------
# kernels (float64)
# ---------------------------------------------------------------------------

def rmsnorm(x, w, eps):
    """x / sqrt(mean(x²) + eps) · w over the last axis; w None = no gain."""
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def inv_freq(m, dim):
    """RoPE inverse frequencies [dim/2]: theta^(−2j/dim), then the rope scaling rule
    (linear: /factor; llama3: Hugging Face _compute_llama3_parameters)."""
    f = 1.0 / (m.theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    if m.rope_kind == "linear":
        f = f / float(m.rope["factor"])
    elif m.rope_kind == "llama3":
        factor = float(m.rope["factor"])
        low = float(m.rope["low_freq_factor"])
        high = float(m.rope["high_freq_factor"])
        old = float(m.rope["original_max_position_embeddings"])
        low_wl = old / low
        high_wl = old / high
        wl = 2 * math.pi / f
        g = np.where(wl > low_wl, f / factor, f)
        smooth = (old / wl - low) / (high - low)
        smoothed = (1 - smooth) * g / factor + smooth * g
        medium = ~(wl < high_wl) & ~(wl > low_wl)
        f = np.where(medium, smoothed, g)
    return f


def rope(x, freqs, interleaved):
    """Rotate x [T, nh, dim] by position t·freqs[j]. Interleaved pairs
    (x[2j], x[2j+1]); rotate-half pairs (x[j], x[j+dim/2])."""
    T, _, dim = x.shape
    ang = np.arange(T, dtype=np.float64)[:, None] * freqs[None, :]   # [T, dim/2]
    c = np.cos(ang)[:, None, :]
    s = np.sin(ang)[:, None, :]
    y = np.empty_like(x)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        y[..., 0::2] = a * c - b * s
        y[..., 1::2] = a * s + b * c
    else:
        h = dim // 2
        a, b = x[..., :h], x[..., h:]
        y[..., :h] = a * c - b * s
        y[..., h:] = b * c + a * s
    return y


def fake_quant(x, maxabs, bits):
    """Symmetric absmax fake quantization: scale = maxabs / (2^(bits-1) - 1),
    x -> round(x / scale) * scale, rounding half away from zero (C's roundf)."""
    if maxabs <= 0:
        return x
    scale = maxabs / (2 ** (bits - 1) - 1)
    return np.sign(x) * np.floor(np.abs(x) / scale + 0.5) * scale


def visible(T, window=0):
    """[T, T] bool: key j visible to query i (j <= i, and i − W < j under window W)."""
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    v = j <= i
    if window:
        v &= j > i - window
    return v


def causal_softmax(q, k, scale, quant=None, window=0):
    """Softmax map [T, T] of q [T, d] against k [T, d] with a causal mask (and a sliding
    window of W keys when window = W > 0); masked entries exactly 0. Also returns the
    raw scaled scores (before quantization), 0 where masked.
    quant: None, or (bits, "row" | "head" | a number = the layer's absmax) applies
    fake quantization to the causal logits before the softmax."""
    T = q.shape[0]
    s = (q @ k.T) * scale
    mask = ~visible(T, window)
    sq = s
    if quant is not None:
        bits, gran = quant
        causal = np.where(mask, 0.0, s)
        if gran == "row":
            sq = np.stack([fake_quant(s[i], np.abs(causal[i]).max(), bits) for i in range(T)])
        else:
            sq = fake_quant(s, np.abs(causal).max() if gran == "head" else float(gran), bits)
    cut = mask | IV.knocked(T)            # knockout: more keys masked, renormalised over the rest
    s_m = np.where(cut, -np.inf, sq)
    e = np.exp(s_m - s_m.max(axis=1, keepdims=True))
    a = e / e.sum(axis=1, keepdims=True)
    a[cut] = 0.0
    return a, np.where(mask, 0.0, s)


# ---------------------------------------------------------------------------
# interventions (docs/probe.md "Interventions"), from their definitions:
#   head output z_h: the head's attention-weighted values (after a Diff head's sub-layer
#   norm and (1 − λ_init)), the input of the output projection (TransformerLens hook_z);
#   ablation replaces z_h (zero, a mean, another run's z_h); λ override replaces λ (σ(λ)
#   per token for DIFF V2); map choice replaces A1 − λ·A2 by A1 or by A2; knockout cuts
#   the (query in `rows`, key in `keys`) entries before the softmax (never the diagonal);
#   patching replaces resid_pre (the layer's input), attn_out / mlp_out (what the
#   sub-layer adds to the residual stream) or z_h at chosen positions by a source run's.
# ---------------------------------------------------------------------------

class Interventions:
    """What forward(iv=...) applies. Lists of tuples:
    ablate (layer, head | None, mode, src, pos): mode "zero" | "mean" (src [L, Hh, w]) |
        "resample" (src = a recorded run, src["head"][l] [T, Hh, w]); pos bool [T] | None;
    lam (layer, head | None, "value" | "scale", x); maps (layer, head | None, 1 | 2);
    knockout (layer, rows bool [T], keys bool [T]);
    patch (site, layer, head | None, pos, src): site "resid_pre" | "attn_out" | "mlp_out" |
        "head", src a recorded run (src[site][l]).
    After the run, record[site] holds this run's values per layer."""

    def __init__(self, ablate=(), lam=(), maps=(), knockout=(), patch=()):
        self.ablate, self.lam, self.maps = list(ablate), list(lam), list(maps)
        self.knockout, self.patch = list(knockout), list(patch)
        self.record = {"resid_pre": [], "attn_out": [], "mlp_out": [], "head": []}
        self.layer = None

    def knocked(self, T):
        cut = np.zeros((T, T), bool)
        for l, rows, keys in self.knockout:
            if l == self.layer:
                cut |= np.asarray(rows, bool)[:, None] & np.asarray(keys, bool)[None, :]
        cut[np.arange(T), np.arange(T)] = False
        return cut

    def lam_of(self, h, lam):
        for l, head, kind, x in self.lam:
            if l == self.layer and head in (None, h):
                lam = lam * x if kind == "scale" else x
        return lam

    def map_of(self, h):
        use = 0
        for l, head, which in self.maps:
            if l == self.layer and head in (None, h):
                use = which
        return use

    def combine(self, h, a1, a2, lam):
        """A head's differential combination of a1 and a2 (maps, or their value sums)."""
        use = self.map_of(h)
        return a1 if use == 1 else a2 if use == 2 else a1 - self.lam_of(h, lam) * a2

    def site(self, name, v):
        v = np.array(v, dtype=np.float64)
        for site, l, head, pos, src in self.patch:
            if site == name and l == self.layer:
                sel = slice(None) if pos is None else np.asarray(pos, bool)
                v[sel] = src.record[name][l][sel]
        self.record[name].append(v.copy())
        return v

    def heads(self, z):
        """z [T, Hh, w] → the intervened head outputs."""
        z = np.array(z, dtype=np.float64)
        for l, head, mode, src, pos in self.ablate:
            if l != self.layer:
                continue
            hs = range(z.shape[1]) if head is None else [head]
            sel = np.ones(z.shape[0], bool) if pos is None else np.asarray(pos, bool)
            for h in hs:
                if mode == "zero":
                    z[sel, h] = 0.0
                elif mode == "mean":
                    z[sel, h] = src[l][h]
                else:
                    z[sel, h] = src.record["head"][l][sel, h]
        for site, l, head, pos, src in self.patch:
            if site == "head" and l == self.layer:
                sel = np.ones(z.shape[0], bool) if pos is None else np.asarray(pos, bool)
                for h in (range(z.shape[1]) if head is None else [head]):
                    z[sel, h] = src.record["head"][l][sel, h]
        self.record["head"].append(z.copy())
        return z


IV = Interventions()   # the one forward() is running with (none by default)


# ---------------------------------------------------------------------------
# attention, per model type
# ---------------------------------------------------------------------------

def _lambda(m, a, l):
    li = m.lambda_init(l)
    lam = (math.exp(float(np.dot(m.t[a + "lambda_q1"], m.t[a + "lambda_k1"])))
           - math.exp(float(np.dot(m.t[a + "lambda_q2"], m.t[a + "lambda_k2"]))) + li)
    return lam, li


def attn_llama(m, l, h, quant=None):
    a = "model.layers.%d.self_attn." % l
    T = h.shape[0]
    H, Hkv, hd = m.H, m.Hkv, m.hd
    n_rep = H // Hkv
    fr = inv_freq(m, hd)

    def proj(name, heads):
        y = h @ m.t[a + name + ".weight"].T
        if m.qkv_bias:
            y = y + m.t[a + name + ".bias"]
        return y.reshape(T, heads, hd)

    q, k, v = proj("q_proj", H), proj("k_proj", Hkv), proj("v_proj", Hkv)
    if m.qk_norm:
        q = rmsnorm(q, m.t[a + "q_norm.weight"], m.eps)
        k = rmsnorm(k, m.t[a + "k_norm.weight"], m.eps)
    q, k = rope(q, fr, m.interleaved), rope(k, fr, m.interleaved)
    maps = np.zeros((H, T, T))
    scores = np.zeros((H, T, T))
    out = np.zeros((T, H, hd))
    for i in range(H):
        kv = i // n_rep
        maps[i], scores[i] = causal_softmax(q[:, i], k[:, kv], hd ** -0.5, quant, m.windows[l])
        out[:, i] = maps[i] @ v[:, kv]
    out = IV.heads(out)
    y = out.reshape(T, H * hd) @ m.t[a + "o_proj.weight"].T
    return y, {"map1": maps, "scores": scores, "heads_out": out}


def attn_diff_transformer(m, l, h, quant=None):
    a = "model.layers.%d.self_attn." % l
    T = h.shape[0]
    H, Hkv, d = m.H, m.Hkv, m.hd
    n_rep = H // Hkv
    fr = inv_freq(m, d)
    q = rope((h @ m.t[a + "q_proj.weight"].T).reshape(T, 2 * H, d), fr, m.interleaved)
    k = rope((h @ m.t[a + "k_proj.weight"].T).reshape(T, 2 * Hkv, d), fr, m.interleaved)
    v = (h @ m.t[a + "v_proj.weight"].T).reshape(T, Hkv, 2 * d)
    lam, li = _lambda(m, a, l)
    gain = m.t.get(a + "subln.weight")
    if gain is None:
        gain = np.ones(2 * d)
    maps = np.zeros((2, H, T, T))
    scores = np.zeros((2, H, T, T))
    out = np.zeros((T, H, 2 * d))
    for i in range(H):
        for t in range(2):
            if m.kv_pairing == "flash":
                ks = 2 * (i // n_rep) + t
            else:
                ks = (2 * i + t) // n_rep
            maps[t, i], scores[t, i] = causal_softmax(q[:, 2 * i + t], k[:, ks], d ** -0.5, quant)
        A = IV.combine(i, maps[0, i], maps[1, i], lam)
        out[:, i] = rmsnorm(A @ v[:, i // n_rep], gain, 1e-5) * (1 - li)
    out = IV.heads(out)
    y = out.reshape(T, H * 2 * d) @ m.t[a + "out_proj.weight"].T
    return y, {"map1": maps[0], "map2": maps[1], "diff": maps[0] - lam * maps[1],
               "lambda": lam, "lambda_init": li, "scores": scores.reshape(2 * H, T, T), "heads_out": out}


def attn_diffllama(m, l, h, quant=None):
    a = "model.layers.%d.self_attn." % l
    T = h.shape[0]
    H, Hkv, hd = m.H, m.Hkv, m.hd
    n_rep = H // Hkv
    Hd = H // 2
    fr = inv_freq(m, hd)
    q = rope((h @ m.t[a + "q_proj.weight"].T).reshape(T, H, hd), fr, m.interleaved)
    k = rope((h @ m.t[a + "k_proj.weight"].T).reshape(T, Hkv, hd), fr, m.interleaved)
    v = (h @ m.t[a + "v_proj.weight"].T).reshape(T, Hkv, hd)
    lam, li = _lambda(m, a, l)
    maps = np.zeros((H, T, T))
    scores = np.zeros((H, T, T))
    for i in range(H):
        maps[i], scores[i] = causal_softmax(q[:, i], k[:, i // n_rep], hd ** -0.5, quant)
    out = np.zeros((T, Hd, 2 * hd))
    for j in range(Hd):
        A = IV.combine(j, maps[j], maps[j + Hd], lam)
        val = np.concatenate([v[:, j // n_rep], v[:, (j + Hd) // n_rep]], axis=1)  # [T, 2hd]
        out[:, j] = rmsnorm(A @ val, None, m.eps) * (1 - li)
    out = IV.heads(out)
    y = out.reshape(T, Hd * 2 * hd) @ m.t[a + "o_proj.weight"].T
    return y, {"map1": maps[:Hd], "map2": maps[Hd:], "diff": maps[:Hd] - lam * maps[Hd:],
               "lambda": lam, "lambda_init": li, "scores": scores}


def _motif_qkv(m, l, h):
    a = "model.layers.%d.self_attn." % l
    T = h.shape[0]
    fr = inv_freq(m, m.hd)
    q = rope((h @ m.t[a + "q_proj.weight"].T).reshape(T, m.H, m.hd), fr, m.interleaved)
    k = rope((h @ m.t[a + "k_proj.weight"].T).reshape(T, m.Hkv, m.hd), fr, m.interleaved)
    v = (h @ m.t[a + "v_proj.weight"].T).reshape(T, m.Hkv, m.hd)
    lam, li = _lambda(m, a, l)
    gain = m.t.get(a + "subln.weight")
    return a, q, k, v, lam, li, np.ones(2 * m.hd) if gain is None else gain


def attn_motif_v1(m, l, h, quant=None):
    """Motif-2.6B (vLLM DIFFERENTIAL_FLASH_ATTN split_heads): q, k and v heads split in
    stripes, map 1 from the even heads, map 2 from the odd; differential head i uses
    q heads 2i, 2i+1 and kv pair i // n_rep (flash-attention GQA over H/2 and Hkv/2
    heads); its value concatenates the pair's two v heads (attn11 | attn12)."""
    a, q, k, v, lam, li, gain = _motif_qkv(m, l, h)
    T, d = h.shape[0], m.hd
    q1, q2 = q[:, 0::2], q[:, 1::2]
    k1, k2 = k[:, 0::2], k[:, 1::2]
    v1, v2 = v[:, 0::2], v[:, 1::2]
    Hd, n_rep = m.H // 2, m.H // m.Hkv
    maps = np.zeros((2, Hd, T, T))
    scores = np.zeros((2, Hd, T, T))
    out = np.zeros((T, Hd, 2 * d))
    for i in range(Hd):
        g = i // n_rep
        maps[0, i], scores[0, i] = causal_softmax(q1[:, i], k1[:, g], d ** -0.5, quant)
        maps[1, i], scores[1, i] = causal_softmax(q2[:, i], k2[:, g], d ** -0.5, quant)
        A1, A2 = maps[0, i], maps[1, i]
        attn1 = np.concatenate([A1 @ v1[:, g], A1 @ v2[:, g]], axis=1)
        attn2 = np.concatenate([A2 @ v1[:, g], A2 @ v2[:, g]], axis=1)
        out[:, i] = rmsnorm(IV.combine(i, attn1, attn2, lam), gain, m.sub_eps) * (1 - li)
    out = IV.heads(out)
    y = out.reshape(T, Hd * 2 * d) @ m.t[a + "o_proj.weight"].T
    return y, {"map1": maps[0], "map2": maps[1], "diff": maps[0] - lam * maps[1],
               "lambda": lam, "lambda_init": li, "scores": scores.reshape(2 * Hd, T, T)}


def attn_motif_gda(m, l, h, quant=None):
    """Motif-2-12.7B grouped differential attention (MLX port _forward_grouped, k_ratio
    1): q heads in Gn groups of gr signal heads then one noise head; k and v heads in
    (signal, noise) pairs. Signal head s of group s // gr: softmax(q_s, k1) − λ·
    softmax(q_noise(group), k2), values (v1 | v2) of its kv pair; the noise map is
    computed once per group. Returns map2 per signal head and "noise" [Gn, T, T]."""
    a, q, k, v, lam, li, gain = _motif_qkv(m, l, h)
    T, d, Gn = h.shape[0], m.hd, m.Gn
    gr = (m.H - Gn) // Gn
    qg = q.reshape(T, Gn, gr + 1, d)
    q1 = qg[:, :, :gr].reshape(T, Gn * gr, d)
    q2 = qg[:, :, gr]
    kp, vp = k.reshape(T, m.Hkv // 2, 2, d), v.reshape(T, m.Hkv // 2, 2, d)
    k1, k2, v1, v2 = kp[:, :, 0], kp[:, :, 1], vp[:, :, 0], vp[:, :, 1]
    ns, kg = Gn * gr, m.Hkv // 2
    noise = np.zeros((Gn, T, T))
    nscores = np.zeros((Gn, T, T))
    nout = np.zeros((T, Gn, 2 * d))
    for g in range(Gn):
        kv = g // (Gn // kg)                      # repeat_interleave of k2 over noise heads
        noise[g], nscores[g] = causal_softmax(q2[:, g], k2[:, kv], d ** -0.5, quant)
        nout[:, g] = np.concatenate([noise[g] @ v1[:, kv], noise[g] @ v2[:, kv]], axis=1)
    maps = np.zeros((2, ns, T, T))
    scores = np.zeros((ns, T, T))
    out = np.zeros((T, ns, 2 * d))
    for s_ in range(ns):
        kv = s_ // (ns // kg)
        maps[0, s_], scores[s_] = causal_softmax(q1[:, s_], k1[:, kv], d ** -0.5, quant)
        maps[1, s_] = noise[s_ // gr]
        sig = np.concatenate([maps[0, s_] @ v1[:, kv], maps[0, s_] @ v2[:, kv]], axis=1)
        out[:, s_] = rmsnorm(IV.combine(s_, sig, nout[:, s_ // gr], lam), gain, m.sub_eps) * (1 - li)
    out = IV.heads(out)
    y = out.reshape(T, ns * 2 * d) @ m.t[a + "o_proj.weight"].T
    return y, {"map1": maps[0], "map2": maps[1], "diff": maps[0] - lam * maps[1], "noise": noise,
               "lambda": lam, "lambda_init": li, "scores": np.concatenate([scores, nscores])}


def attn_motif(m, l, h, quant=None):
    return (attn_motif_gda if m.Gn else attn_motif_v1)(m, l, h, quant)


def attn_diff_v2(m, l, h, quant=None):
    """DIFF Transformer V2 (unilm Diff-Transformer-V2/multihead_flashdiffv2.py): 2H q heads
    under flash attention's GQA (q head j reads kv head j // (2H/Hkv)), interleaved
    RoPE; per token t and output head i, attn_i = A_2i·v − sigmoid(lambda_proj(x))_ti ·
    A_2i+1·v; no λ_init, no sub-layer norm. "lambda" here is σ(λ) [T, H]."""
    a = "model.layers.%d.self_attn." % l
    T, H, Hkv, d = h.shape[0], m.H, m.Hkv, m.hd
    fr = inv_freq(m, d)
    q = rope((h @ m.t[a + "q_proj.weight"].T).reshape(T, 2 * H, d), fr, m.interleaved)
    k = rope((h @ m.t[a + "k_proj.weight"].T).reshape(T, Hkv, d), fr, m.interleaved)
    v = (h @ m.t[a + "v_proj.weight"].T).reshape(T, Hkv, d)
    sig = 1.0 / (1.0 + np.exp(-(h @ m.t[a + "lambda_proj.weight"].T)))      # [T, H]
    A = np.zeros((2 * H, T, T))
    scores = np.zeros((2 * H, T, T))
    o = np.zeros((T, 2 * H, d))
    for j in range(2 * H):
        kv = j // (2 * H // Hkv)
        A[j], scores[j] = causal_softmax(q[:, j], k[:, kv], d ** -0.5, quant)
        o[:, j] = A[j] @ v[:, kv]
    out = np.stack([IV.combine(i, o[:, 2 * i], o[:, 2 * i + 1], sig[:, i:i + 1]) for i in range(H)], axis=1)
    out = IV.heads(out)
    y = out.reshape(T, H * d) @ m.t[a + "o_proj.weight"].T
    diff = A[0::2] - sig.T[:, :, None] * A[1::2]
    return y, {"map1": A[0::2], "map2": A[1::2], "diff": diff, "sigma": sig,
               "scores": scores}


def polynorm(x, w, b, eps=1e-6):
    """PolyNorm (arXiv 2411.03884; vLLM PolyNorm, eps 1e-6): w0·n(x³) + w1·n(x²) +
    w2·n(x) + b, n(z) = z / sqrt(mean(z²) + eps) over the last axis."""
    def n(z):
        return z / np.sqrt(np.mean(z * z, axis=-1, keepdims=True) + eps)
    return w[0] * n(x ** 3) + w[1] * n(x ** 2) + w[2] * n(x) + b[0]


def mlp_act(m, p, g):
    """The gate activation of layer prefix p: silu, or Motif's PolyNorm."""
    if m.type == "motif":
        return polynorm(g, m.t[p + "mlp.act_fn.weight"], m.t[p + "mlp.act_fn.bias"])
    return silu(g)


_ATTN = {"llama": attn_llama, "diff_transformer": attn_diff_transformer,
         "diffllama": attn_diffllama, "motif": attn_motif, "diff_transformer_v2": attn_diff_v2}


# ---------------------------------------------------------------------------
# the forward pass
# ---------------------------------------------------------------------------

def forward(m, tokens, quant=None, iv=None):
    """Run model m over token ids; returns a dict with logits [T, V], map1 [L, Hd, T, T]
    (+ map2, diff, lambda [L], lambda_init [L] for Diff models), hidden [L, T, D]
    (each layer's output after both residual additions) and scores [L, M, T, T]: the
    scaled attention logits q·k/√d of every softmax map (M = H, or 2H for
    diff_transformer), 0 where masked. quant = (bits,
    "tensor" | "head" | "row") fake-quantizes the attention logits (probe
    --quantize-logits). iv: an Interventions (probe --intervene), None = none."""
    global IV
    saved, IV = IV, iv if iv is not None else Interventions()
    try:
        return _forward(m, tokens, quant)
    finally:
        IV = saved


def _forward(m, tokens, quant):
    if m.arch in families.TYPES:
        return families.forward(m, tokens, quant)
    tokens = np.asarray(tokens, dtype=np.int64)
    if m.rope_limit is not None and len(tokens) > m.rope_limit:
        raise ValueError("dynamic rope scaling past the original context is not implemented")
    t = m.t
    x = t["model.embed_tokens.weight"][tokens].copy()            # [T, D]
    per = {}
    hidden = []
    for l in range(m.L):
        p = "model.layers.%d." % l
        IV.layer = l
        x = IV.site("resid_pre", x)
        hn = rmsnorm(x, t[p + "input_layernorm.weight"], m.eps)
        q = quant
        if quant is not None and quant[1] == "tensor":
            # the layer's absmax over every map's causal logits, from an unquantized pass
            _, raw = _ATTN[m.type](m, l, hn)
            q = (quant[0], float(np.abs(raw["scores"]).max()))
        y, maps = _ATTN[m.type](m, l, hn, q)
        x = x + IV.site("attn_out", y)
        hh = rmsnorm(x, t[p + "post_attention_layernorm.weight"], m.eps)
        g = hh @ t[p + "mlp.gate_proj.weight"].T
        u = hh @ t[p + "mlp.up_proj.weight"].T
        x = x + IV.site("mlp_out", (mlp_act(m, p, g) * u) @ t[p + "mlp.down_proj.weight"].T)
        hidden.append(x.copy())
        for key, val in maps.items():
            per.setdefault(key, []).append(val)
    x = rmsnorm(x, t["model.norm.weight"], m.eps)
    head = t["model.embed_tokens.weight"] if m.tied else t["lm_head.weight"]
    r = {"logits": x @ head.T, "hidden": np.stack(hidden),
         "visible": np.stack([visible(len(tokens), w) for w in m.windows])}
    for key, vals in per.items():
        r[key] = np.array(vals, dtype=np.float64)
    return r


def nll(logits, tokens):
    """−log softmax(logits[t])[tokens[t+1]] for t < T−1; NaN at T−1."""
    logits = np.asarray(logits, dtype=np.float64)
    mx = logits.max(axis=1, keepdims=True)
    lse = (mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True)))[:, 0]
    T = len(tokens)
    out = np.full(T, np.nan)
    idx = np.arange(T - 1)
    out[:-1] = lse[:-1] - logits[idx, np.asarray(tokens)[1:]]
    return out


# ---------------------------------------------------------------------------
# derived quantities of the dump (noise shares, outliers), from docs/format.md's table
# ---------------------------------------------------------------------------

SHARE_ORDER = ("bos", "context_before", "answer", "context_after", "query", "distractor",
               "target")


def share_masks(seg):
    """[7, T] key masks in SHARE_ORDER for segment codes seg (0 context, 1 bos, 2 answer,
    3 query, 4 distractor, 5 target). Context before/after = context tokens before the
    first / after the last answer token; needs at least one answer token."""
    seg = np.asarray(seg)
    idx = np.arange(len(seg))
    ans = np.nonzero(seg == 2)[0]
    if not len(ans):
        raise ValueError("share masks need an answer span")
    ctx = seg == 0
    return np.stack([seg == 1, ctx & (idx < ans[0]), seg == 2, ctx & (idx > ans[-1]),
                     seg == 3, seg == 4, seg == 5])


def noise_stats(r, seg, rows):
    """The dump's noise/ datasets for analysis rows `rows` of forward() result r:
    shares, raw, shares_abs [M, L, H, 7]; entropy [M', L, H]; negative_mass [L, H]
    (Diff only)."""
    masks = share_masks(seg).astype(np.float64)                  # [7, T]
    diff = "diff" in r
    maps = [r["map1"], r["map2"], r["diff"]] if diff else [r["map1"]]
    out = {"shares": [], "raw": [], "shares_abs": [], "entropy": []}
    for mi, M in enumerate(maps):
        A = M[:, :, rows, :]                                      # [L, H, R, T]
        part = A @ masks.T                                        # [L, H, R, 7]
        part_abs = np.abs(A) @ masks.T
        out["raw"].append(part.mean(axis=2))
        out["shares"].append((part / A.sum(-1, keepdims=True)).mean(axis=2))
        out["shares_abs"].append((part_abs / np.abs(A).sum(-1, keepdims=True)).mean(axis=2))
        if mi < 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                plogp = np.where(A > 0, A * np.log(np.where(A > 0, A, 1.0)), 0.0)
            out["entropy"].append((-plogp.sum(-1)).mean(axis=2))
    out = {k: np.array(v) for k, v in out.items()}
    if diff:
        D = r["diff"][:, :, rows, :]
        out["negative_mass"] = np.minimum(D, 0).sum(-1).mean(axis=2)
    return out


def top_abs(values, k):
    """The k largest abs values of an array, descending."""
    v = np.sort(np.abs(np.ravel(values)))[::-1]
    return v[:k]


def qk_top(r, layer, k):
    """K largest abs(q·k/√d) of one layer over all maps, visible entries only (causal,
    and inside the sliding window)."""
    S = r["scores"][layer]                                        # [M, T, T]
    return top_abs(S[:, r["visible"][layer]], k)


def main(argv):
    if len(argv) < 3:
        print("usage: reference.py MODEL_DIR TOKEN...", file=sys.stderr)
        return 2
    m = load_model(argv[1])
    r = forward(m, [int(s) for s in argv[2:]])
    print("argmax", r["logits"].argmax(axis=1).tolist())
    if "lambda" in r:
        print("lambda", r["lambda"].tolist(), "lambda_init", r["lambda_init"].tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
