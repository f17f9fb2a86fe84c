#!/usr/bin/python3
"""families.py — the published families beyond the Llama layout, for the reference
(reference.py dispatches to these) and for make_model.py (configs and weights).

Each family is written from the published Hugging Face modelling code, in float64:

  gpt2   transformers src/transformers/models/gpt2/modeling_gpt2.py (GPT2Model,
         GPT2Block, GPT2Attention, GPT2MLP, eager_attention_forward) and
         configuration_gpt2.py (GPT2Config: n_embd, n_layer, n_head, n_inner = 4·n_embd
         when null, n_positions, layer_norm_epsilon 1e-5, activation_function gelu_new,
         scale_attn_weights, scale_attn_by_inverse_layer_idx, tie_word_embeddings true).
         pytorch_utils.py Conv1D: y = x @ W + b with W stored [in, out].
         activations.py NewGELUActivation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).

  gpt_neox  transformers src/transformers/models/gpt_neox/modeling_gpt_neox.py
         (GPTNeoXLayer, GPTNeoXAttention, GPTNeoXMLP, apply_rotary_pos_emb with
         rotary_ndims = int(head_size · rotary_pct)) and configuration_gpt_neox.py
         (rotary_pct 0.25, rotary_emb_base 10000, use_parallel_residual true,
         layer_norm_eps 1e-5, attention_bias true, tie_word_embeddings false, gelu).
         query_key_value's output viewed [T, H, 3·hd] and chunked into q, k, v.

  gemma2 transformers src/transformers/models/gemma2/modeling_gemma2.py (Gemma2RMSNorm:
         x/√(mean(x²)+eps)·(1 + w); Gemma2MLP: down(act(gate)·up), act =
         hidden_activation; Gemma2Attention: scaling query_pre_attn_scalar^−½, soft-cap
         c·tanh(s/c) before the mask, sliding window on even layers; Gemma2DecoderLayer:
         norms before and after attention and MLP; Gemma2Model: embeddings × √D (the
         normalizer in the compute dtype: f32 here); Gemma2ForCausalLM: final soft-cap)
         and configuration_gemma2.py (head_dim 256, attn_logit_softcapping 50,
         final_logit_softcapping 30, sliding_window 4096, tied).

  gemma3_text transformers src/transformers/models/gemma3/modeling_gemma3.py
         (Gemma3Attention: q_norm, k_norm = Gemma3RMSNorm over each head before RoPE;
         sliding layers with rotary_emb_local, base rope_local_base_freq; Gemma3TextModel)
         and configuration_gemma3.py (Gemma3TextConfig: rope_theta 1e6,
         rope_local_base_freq 10000, sliding_window_pattern 6: layer l slides when
         (l + 1) % 6 != 0, no soft-capping, query_pre_attn_scalar 256).

  olmo2  transformers src/transformers/models/olmo2/modeling_olmo2.py (Olmo2Attention:
         q_norm, k_norm = Olmo2RMSNorm over the whole q and k projections before the
         head split and RoPE; Olmo2DecoderLayer: x += post_attention_layernorm(attn(x)),
         x += post_feedforward_layernorm(mlp(x)); SwiGLU) and configuration_olmo2.py.

  phi3   transformers src/transformers/models/phi3/modeling_phi3.py (Phi3Attention:
         qkv_proj output sliced q | k | v at H·hd and H·hd + Hkv·hd; Phi3MLP: gate_up_proj
         output chunked gate | up, down(up · silu(gate)); sliding_window on every layer)
         and modeling_rope_utils.py _compute_longrope_parameters with the longrope
         frequency update (short_factor up to original_max_position_embeddings tokens,
         long_factor past it; cos, sin × attention_factor [√(1 + ln s / ln original)]).

Not from difflens's C code.
"""
import math

import numpy as np

TYPES = ("gpt2", "gpt_neox", "gemma2", "gemma3_text", "olmo2", "phi3")

# config.json names of the common keys, per family (GPT2Config.attribute_map); None:
# the family's published config has no such key.
KEY_NAMES = {
    "gpt2": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head", "hidden_size": "n_embd",
             "intermediate_size": "n_inner", "num_key_value_heads": None, "head_dim": None},
    "gpt_neox": {"num_key_value_heads": None, "head_dim": None},
    "olmo2": {"head_dim": None},
    "phi3": {"head_dim": None},
}


# ---------------------------------------------------------------------------
# kernels (float64)
# ---------------------------------------------------------------------------

def layernorm(x, w, b, eps):
    """torch.nn.LayerNorm over the last axis: biased variance, gain w, bias b."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    """NewGELUActivation (gelu_new) = GELUActivation(approximate="tanh")."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    """GELUActivation (gelu): 0.5·x·(1 + erf(x/√2))."""
    from math import erf
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


def activation(name):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return gelu_tanh
    if name == "gelu":
        return gelu_erf
    raise ValueError("activation %r is not supported" % name)


# ---------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------

def init(m, cfg):
    """Fill reference.Model m from a config of one of TYPES."""
    if m.arch == "gpt2":
        m.type = "llama"                    # softmax heads (the dump's model_type)
        if cfg.get("add_cross_attention"):
            raise ValueError("add_cross_attention is not supported")
        m.V = cfg["vocab_size"]
        m.D = cfg["n_embd"]
        m.F = cfg.get("n_inner") or 4 * m.D
        m.L = cfg["n_layer"]
        m.H = m.Hkv = cfg["n_head"]
        m.hd = m.D // m.H
        m.eps = cfg.get("layer_norm_epsilon", 1e-5)
        m.act = activation(cfg.get("activation_function", "gelu_new"))
        m.tied = bool(cfg.get("tie_word_embeddings", True))
        m.P = cfg["n_positions"]
        m.scale_weights = cfg.get("scale_attn_weights", True)
        m.scale_by_layer = bool(cfg.get("scale_attn_by_inverse_layer_idx", False))
        m.prefix = "transformer." if "transformer.wte.weight" in m.t else ""
        m.windows = [0] * m.L
        m.rope_limit = None
        return
    if m.arch == "gpt_neox":
        m.type = "llama"
        m.V, m.D, m.F = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
        m.L, m.H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        m.Hkv = m.H
        m.hd = m.D // m.H
        m.eps = cfg.get("layer_norm_eps", 1e-5)
        m.act = activation(cfg.get("hidden_act", "gelu"))
        m.tied = bool(cfg.get("tie_word_embeddings", False))
        pct = cfg.get("rotary_pct", cfg.get("partial_rotary_factor", 0.25))
        m.rd = int(m.hd * pct)
        m.theta = float(cfg.get("rotary_emb_base", cfg.get("rope_theta", 10000)))
        m.rope_kind, m.rope = "none", {}
        if cfg.get("rope_scaling"):
            raise ValueError("gpt_neox rope_scaling is not in this reference")
        m.parallel = cfg.get("use_parallel_residual", True)
        m.bias = cfg.get("attention_bias", True)
        m.windows = [0] * m.L
        m.rope_limit = None
        return
    if m.arch in ("gemma2", "gemma3_text"):
        _init_gemma(m, cfg)
        return
    if m.arch == "phi3":
        m.type = "llama"
        m.V, m.D, m.F = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
        m.L, m.H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        m.Hkv = cfg.get("num_key_value_heads") or m.H
        m.hd = cfg.get("head_dim") or m.D // m.H
        m.eps = cfg.get("rms_norm_eps", 1e-5)
        m.tied = bool(cfg.get("tie_word_embeddings", False))
        m.theta = float(cfg.get("rope_theta", 10000.0))
        if cfg.get("partial_rotary_factor", 1.0) != 1.0 or cfg.get("attention_bias"):
            raise ValueError("partial_rotary_factor / attention_bias are not in this reference for phi3")
        m.rope = cfg.get("rope_scaling") or {}
        m.rope_kind = "none"
        if m.rope:
            m.rope_kind = m.rope.get("rope_type", m.rope.get("type"))
            if m.rope_kind != "longrope":
                raise ValueError("only longrope is in this reference for phi3")
        W = cfg.get("sliding_window")
        m.windows = [int(W) if W else 0] * m.L
        m.rope_limit = None
        return
    if m.arch == "olmo2":
        m.type = "llama"
        m.V, m.D, m.F = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
        m.L, m.H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        m.Hkv = cfg.get("num_key_value_heads") or m.H
        m.hd = cfg.get("head_dim") or m.D // m.H
        m.eps = cfg.get("rms_norm_eps", 1e-5)
        m.tied = bool(cfg.get("tie_word_embeddings", False))
        m.theta = float(cfg.get("rope_theta", 10000.0))
        m.rope_kind, m.rope = "none", {}
        if cfg.get("rope_scaling") or cfg.get("attention_bias") or cfg.get("hidden_act", "silu") != "silu":
            raise ValueError("rope_scaling / attention_bias / hidden_act are not in this reference for olmo2")
        m.windows = [0] * m.L
        m.rope_limit = None
        return
    raise ValueError("unknown model_type %r" % m.arch)


def _init_gemma(m, cfg):
    """Gemma2Config (and Gemma3TextConfig) with their defaults."""
    gemma2 = m.arch == "gemma2"
    m.type = "llama"
    m.V, m.D, m.F = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    m.L, m.H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    m.Hkv = cfg.get("num_key_value_heads") or m.H
    m.hd = cfg.get("head_dim") or 256
    m.eps = cfg.get("rms_norm_eps", 1e-6)
    m.act = activation(cfg.get("hidden_activation") or "gelu_pytorch_tanh")
    m.tied = bool(cfg.get("tie_word_embeddings", True))
    m.scale = float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5

    def cap(key, default):
        v = cfg.get(key, default) if key in cfg else default
        return float(v) if v else None

    m.attn_cap = cap("attn_logit_softcapping", 50.0 if gemma2 else None)
    m.final_cap = cap("final_logit_softcapping", 30.0 if gemma2 else None)
    m.theta = float(cfg.get("rope_theta", 10000.0 if gemma2 else 1e6))
    m.local_theta = None if gemma2 else float(cfg.get("rope_local_base_freq", 10000.0))
    rs = cfg.get("rope_scaling")
    m.rope_kind, m.rope = "none", {}
    if isinstance(rs, dict) and rs.get("rope_type", rs.get("type")) not in (None, "default"):
        if rs.get("rope_type", rs.get("type")) != "linear":
            raise ValueError("only linear rope_scaling is in this reference for Gemma")
        m.rope_kind, m.rope = "linear", rs
    pattern = 2 if gemma2 else int(cfg.get("sliding_window_pattern", 6))
    W = cfg.get("sliding_window", 4096)
    m.windows = [int(W) if W and (l + 1) % pattern else 0 for l in range(m.L)]
    m.qk_norm = not gemma2
    m.rope_limit = None


# ---------------------------------------------------------------------------
# forward passes
# ---------------------------------------------------------------------------

def forward(m, tokens, quant=None):
    """reference.forward for the families here (same result keys)."""
    import reference
    if m.arch == "gpt2":
        return forward_gpt2(m, tokens, quant, reference)
    if m.arch == "gpt_neox":
        return forward_neox(m, tokens, quant, reference)
    if m.arch in ("gemma2", "gemma3_text"):
        return forward_gemma(m, tokens, quant, reference)
    if m.arch == "olmo2":
        return forward_olmo2(m, tokens, quant, reference)
    if m.arch == "phi3":
        return forward_phi3(m, tokens, quant, reference)
    raise ValueError("unknown model_type %r" % m.arch)


def _quant_for_layer(quant, run_raw):
    """quant as reference.causal_softmax takes it; "tensor" needs the layer's absmax
    over every map's causal logits from an unquantized pass."""
    if quant is not None and quant[1] == "tensor":
        return (quant[0], float(np.abs(run_raw()).max()))
    return quant


def attn_gpt2(m, l, h, quant, ref):
    """GPT2Attention: c_attn (Conv1D) → q | k | v split along the columns, heads of
    hd = D/H; scores q·k · (1/√hd if scale_attn_weights) · (1/(l+1) if
    scale_attn_by_inverse_layer_idx); causal softmax; c_proj (Conv1D)."""
    p = m.prefix + "h.%d.attn." % l
    T, D, H, hd = h.shape[0], m.D, m.H, m.hd
    qkv = h @ m.t[p + "c_attn.weight"] + m.t[p + "c_attn.bias"]          # [T, 3D]
    q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, H, hd) for i in range(3))
    scale = hd ** -0.5 if m.scale_weights else 1.0
    if m.scale_by_layer:
        scale /= float(l + 1)
    maps = np.zeros((H, T, T))
    scores = np.zeros((H, T, T))
    out = np.zeros((T, H, hd))
    for i in range(H):
        maps[i], scores[i] = ref.causal_softmax(q[:, i], k[:, i], scale, quant)
        out[:, i] = maps[i] @ v[:, i]
    out = ref.IV.heads(out)
    y = out.reshape(T, D) @ m.t[p + "c_proj.weight"] + m.t[p + "c_proj.bias"]
    return y, {"map1": maps, "scores": scores, "heads_out": out}


def forward_gpt2(m, tokens, quant, ref):
    """GPT2Model: x = wte[tokens] + wpe[0..T); per block x += attn(ln_1(x)),
    x += mlp(ln_2(x)) with mlp = c_proj(act(c_fc(·))); ln_f; logits = x · wteᵀ (tied)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    T = len(tokens)
    if T > m.P:
        raise ValueError("longer than n_positions")
    t, pre = m.t, m.prefix
    x = t[pre + "wte.weight"][tokens] + t[pre + "wpe.weight"][:T]
    per, hidden = {}, []
    for l in range(m.L):
        p = pre + "h.%d." % l
        ref.IV.layer = l
        x = ref.IV.site("resid_pre", x)
        hn = layernorm(x, t[p + "ln_1.weight"], t[p + "ln_1.bias"], m.eps)
        q = _quant_for_layer(quant, lambda: attn_gpt2(m, l, hn, None, ref)[1]["scores"])
        y, maps = attn_gpt2(m, l, hn, q, ref)
        x = x + ref.IV.site("attn_out", y)
        hh = layernorm(x, t[p + "ln_2.weight"], t[p + "ln_2.bias"], m.eps)
        u = m.act(hh @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"])
        x = x + ref.IV.site("mlp_out", u @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"])
        hidden.append(x.copy())
        for key, val in maps.items():
            per.setdefault(key, []).append(val)
    x = layernorm(x, t[pre + "ln_f.weight"], t[pre + "ln_f.bias"], m.eps)
    head = t[pre + "wte.weight"] if m.tied else t["lm_head.weight"]
    r = {"logits": x @ head.T, "hidden": np.stack(hidden),
         "visible": np.stack([ref.visible(T, w) for w in m.windows])}
    for key, vals in per.items():
        r[key] = np.array(vals, dtype=np.float64)
    return r


def attn_neox(m, l, h, quant, ref):
    """GPTNeoXAttention: query_key_value → [T, H, 3·hd] → q, k, v; rotate-half RoPE on
    the first rotary_ndims of each head (frequencies base^(−2j/rotary_ndims)), the
    rest passed through; softmax(q·k/√hd) causal; dense."""
    p = "gpt_neox.layers.%d.attention." % l
    T, D, H, hd, rd = h.shape[0], m.D, m.H, m.hd, m.rd
    qkv = h @ m.t[p + "query_key_value.weight"].T
    if m.bias:
        qkv = qkv + m.t[p + "query_key_value.bias"]
    qkv = qkv.reshape(T, H, 3 * hd)
    q, k, v = qkv[..., :hd].copy(), qkv[..., hd:2 * hd].copy(), qkv[..., 2 * hd:]
    fr = 1.0 / (m.theta ** (np.arange(0, rd, 2, dtype=np.float64) / rd))
    q[..., :rd] = ref.rope(q[..., :rd], fr, False)
    k[..., :rd] = ref.rope(k[..., :rd], fr, False)
    maps = np.zeros((H, T, T))
    scores = np.zeros((H, T, T))
    out = np.zeros((T, H, hd))
    for i in range(H):
        maps[i], scores[i] = ref.causal_softmax(q[:, i], k[:, i], hd ** -0.5, quant)
        out[:, i] = maps[i] @ v[:, i]
    y = out.reshape(T, D) @ m.t[p + "dense.weight"].T
    if m.bias:
        y = y + m.t[p + "dense.bias"]
    return y, {"map1": maps, "scores": scores}


def forward_neox(m, tokens, quant, ref):
    """GPTNeoXModel: x = embed_in[tokens]; per layer a = attn(input_layernorm(x)),
    f = mlp(post_attention_layernorm(·)) with mlp = dense_4h_to_h(act(dense_h_to_4h(·)));
    use_parallel_residual: x = x + a + f(x); else x = x + a, x = x + f(x).
    final_layer_norm; logits = x · embed_outᵀ."""
    tokens = np.asarray(tokens, dtype=np.int64)
    T = len(tokens)
    t = m.t
    x = t["gpt_neox.embed_in.weight"][tokens].copy()
    per, hidden = {}, []

    def mlp(p, y):
        u = m.act(y @ t[p + "mlp.dense_h_to_4h.weight"].T + t[p + "mlp.dense_h_to_4h.bias"])
        return u @ t[p + "mlp.dense_4h_to_h.weight"].T + t[p + "mlp.dense_4h_to_h.bias"]

    for l in range(m.L):
        p = "gpt_neox.layers.%d." % l
        hn = layernorm(x, t[p + "input_layernorm.weight"], t[p + "input_layernorm.bias"], m.eps)
        q = _quant_for_layer(quant, lambda: attn_neox(m, l, hn, None, ref)[1]["scores"])
        a, maps = attn_neox(m, l, hn, q, ref)
        ln2 = (t[p + "post_attention_layernorm.weight"], t[p + "post_attention_layernorm.bias"], m.eps)
        if m.parallel:
            x = x + a + mlp(p, layernorm(x, *ln2))
        else:
            x = x + a
            x = x + mlp(p, layernorm(x, *ln2))
        hidden.append(x.copy())
        for key, val in maps.items():
            per.setdefault(key, []).append(val)
    x = layernorm(x, t["gpt_neox.final_layer_norm.weight"], t["gpt_neox.final_layer_norm.bias"], m.eps)
    head = t["gpt_neox.embed_in.weight"] if m.tied else t["embed_out.weight"]
    r = {"logits": x @ head.T, "hidden": np.stack(hidden),
         "visible": np.stack([ref.visible(T, w) for w in m.windows])}
    for key, vals in per.items():
        r[key] = np.array(vals, dtype=np.float64)
    return r


def rmsnorm_1p(x, w, eps):
    """Gemma2RMSNorm: x / √(mean(x²) + eps) · (1 + w)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def softmax_capped(q, k, scale, cap, quant, window, ref):
    """Like reference.causal_softmax, with Gemma 2's soft-cap c·tanh(s/c) on the scaled
    scores before the mask (and before any fake quantization). Returns the map and the
    raw (uncapped) scores, 0 where masked."""
    T = q.shape[0]
    s = (q @ k.T) * scale
    mask = ~ref.visible(T, window)
    sc = cap * np.tanh(s / cap) if cap else s
    if quant is not None:
        bits, gran = quant
        causal = np.where(mask, 0.0, sc)
        if gran == "row":
            sc = np.stack([ref.fake_quant(sc[i], np.abs(causal[i]).max(), bits) for i in range(T)])
        else:
            mx = np.abs(causal).max() if gran == "head" else float(gran)
            if gran != "head" and cap:
                mx = cap * math.tanh(mx / cap)     # the layer's absmax of raw scores, capped
            sc = ref.fake_quant(sc, mx, bits)
    s_m = np.where(mask, -np.inf, sc)
    e = np.exp(s_m - s_m.max(axis=1, keepdims=True))
    a = e / e.sum(axis=1, keepdims=True)
    a[mask] = 0.0
    return a, np.where(mask, 0.0, s)


def attn_gemma(m, l, h, quant, ref):
    """Gemma2Attention / Gemma3Attention: q, k, v projections; Gemma 3's q_norm, k_norm
    (Gemma3RMSNorm over each head) before RoPE; rotate-half RoPE with the local base on
    sliding layers (Gemma 3); scores × query_pre_attn_scalar^−½, soft-capped; o_proj."""
    a = "model.layers.%d.self_attn." % l
    T, H, Hkv, hd = h.shape[0], m.H, m.Hkv, m.hd
    n_rep = H // Hkv
    q = (h @ m.t[a + "q_proj.weight"].T).reshape(T, H, hd)
    k = (h @ m.t[a + "k_proj.weight"].T).reshape(T, Hkv, hd)
    v = (h @ m.t[a + "v_proj.weight"].T).reshape(T, Hkv, hd)
    if m.qk_norm:
        q = rmsnorm_1p(q, m.t[a + "q_norm.weight"], m.eps)
        k = rmsnorm_1p(k, m.t[a + "k_norm.weight"], m.eps)
    if m.local_theta and m.windows[l]:
        fr = 1.0 / (m.local_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    else:
        fr = ref.inv_freq(m, hd)
    q, k = ref.rope(q, fr, False), ref.rope(k, fr, False)
    maps = np.zeros((H, T, T))
    scores = np.zeros((H, T, T))
    out = np.zeros((T, H, hd))
    for i in range(H):
        maps[i], scores[i] = softmax_capped(q[:, i], k[:, i // n_rep], m.scale, m.attn_cap, quant, m.windows[l], ref)
        out[:, i] = maps[i] @ v[:, i // n_rep]
    y = out.reshape(T, H * hd) @ m.t[a + "o_proj.weight"].T
    return y, {"map1": maps, "scores": scores, "heads_out": out}


def forward_gemma(m, tokens, quant, ref):
    """Gemma2Model / Gemma3TextModel: x = embed[tokens] · √D; per layer
    x += post_attention_layernorm(attn(input_layernorm(x))),
    x += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))); final norm; tied
    head; Gemma 2's final soft-cap on the logits."""
    tokens = np.asarray(tokens, dtype=np.int64)
    T = len(tokens)
    t = m.t
    x = t["model.embed_tokens.weight"][tokens] * float(np.float32(math.sqrt(m.D)))
    per, hidden = {}, []
    for l in range(m.L):
        p = "model.layers.%d." % l
        hn = rmsnorm_1p(x, t[p + "input_layernorm.weight"], m.eps)
        q = _quant_for_layer(quant, lambda: attn_gemma(m, l, hn, None, ref)[1]["scores"])
        a, maps = attn_gemma(m, l, hn, q, ref)
        x = x + rmsnorm_1p(a, t[p + "post_attention_layernorm.weight"], m.eps)
        hh = rmsnorm_1p(x, t[p + "pre_feedforward_layernorm.weight"], m.eps)
        f = (m.act(hh @ t[p + "mlp.gate_proj.weight"].T) * (hh @ t[p + "mlp.up_proj.weight"].T)) \
            @ t[p + "mlp.down_proj.weight"].T
        x = x + rmsnorm_1p(f, t[p + "post_feedforward_layernorm.weight"], m.eps)
        hidden.append(x.copy())
        for key, val in maps.items():
            per.setdefault(key, []).append(val)
    x = rmsnorm_1p(x, t["model.norm.weight"], m.eps)
    head = t["model.embed_tokens.weight"] if m.tied else t["lm_head.weight"]
    logits = x @ head.T
    if m.final_cap:
        logits = m.final_cap * np.tanh(logits / m.final_cap)
    r = {"logits": logits, "hidden": np.stack(hidden),
         "visible": np.stack([ref.visible(T, w) for w in m.windows])}
    for key, vals in per.items():
        r[key] = np.array(vals, dtype=np.float64)
    return r


def attn_olmo2(m, l, h, quant, ref):
    """Olmo2Attention: q = q_norm(q_proj(h)), k = k_norm(k_proj(h)) (RMSNorm over all
    H·hd, resp. Hkv·hd values), then heads, rotate-half RoPE, softmax(q·k/√hd), o_proj."""
    a = "model.layers.%d.self_attn." % l
    T, H, Hkv, hd = h.shape[0], m.H, m.Hkv, m.hd
    n_rep = H // Hkv
    q = ref.rmsnorm(h @ m.t[a + "q_proj.weight"].T, m.t[a + "q_norm.weight"], m.eps).reshape(T, H, hd)
    k = ref.rmsnorm(h @ m.t[a + "k_proj.weight"].T, m.t[a + "k_norm.weight"], m.eps).reshape(T, Hkv, hd)
    v = (h @ m.t[a + "v_proj.weight"].T).reshape(T, Hkv, hd)
    fr = ref.inv_freq(m, hd)
    q, k = ref.rope(q, fr, False), ref.rope(k, fr, False)
    maps = np.zeros((H, T, T))
    scores = np.zeros((H, T, T))
    out = np.zeros((T, H, hd))
    for i in range(H):
        maps[i], scores[i] = ref.causal_softmax(q[:, i], k[:, i // n_rep], hd ** -0.5, quant)
        out[:, i] = maps[i] @ v[:, i // n_rep]
    y = out.reshape(T, H * hd) @ m.t[a + "o_proj.weight"].T
    return y, {"map1": maps, "scores": scores, "heads_out": out}


def forward_olmo2(m, tokens, quant, ref):
    """Olmo2Model: no norm before attention or MLP; their outputs normed, then added."""
    tokens = np.asarray(tokens, dtype=np.int64)
    T = len(tokens)
    t = m.t
    x = t["model.embed_tokens.weight"][tokens].copy()
    per, hidden = {}, []
    for l in range(m.L):
        p = "model.layers.%d." % l
        q = _quant_for_layer(quant, lambda: attn_olmo2(m, l, x, None, ref)[1]["scores"])
        a, maps = attn_olmo2(m, l, x, q, ref)
        x = x + ref.rmsnorm(a, t[p + "post_attention_layernorm.weight"], m.eps)
        f = (ref.silu(x @ t[p + "mlp.gate_proj.weight"].T) * (x @ t[p + "mlp.up_proj.weight"].T)) \
            @ t[p + "mlp.down_proj.weight"].T
        x = x + ref.rmsnorm(f, t[p + "post_feedforward_layernorm.weight"], m.eps)
        hidden.append(x.copy())
        for key, val in maps.items():
            per.setdefault(key, []).append(val)
    x = ref.rmsnorm(x, t["model.norm.weight"], m.eps)
    head = t["model.embed_tokens.weight"] if m.tied else t["lm_head.weight"]
    r = {"logits": x @ head.T, "hidden": np.stack(hidden),
         "visible": np.stack([ref.visible(T, w) for w in m.windows])}
    for key, vals in per.items():
        r[key] = np.array(vals, dtype=np.float64)
    return r


def longrope(m, T):
    """(inv_freq [hd/2], attention factor) of Phi-3's longrope for a sequence of T."""
    cfg, rs, dim = m.raw, m.rope, m.hd
    orig = cfg.get("original_max_position_embeddings")
    if orig is not None:
        factor = cfg["max_position_embeddings"] / orig
    else:
        orig, factor = cfg["max_position_embeddings"], rs["factor"]
    af = rs.get("attention_factor")
    if af is None:
        af = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    ext = np.asarray(rs["long_factor"] if T > orig else rs["short_factor"], dtype=np.float64)
    return 1.0 / (ext * m.theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)), af


def attn_phi3(m, l, h, quant, ref):
    a = "model.layers.%d.self_attn." % l
    T, H, Hkv, hd = h.shape[0], m.H, m.Hkv, m.hd
    n_rep = H // Hkv
    qkv = h @ m.t[a + "qkv_proj.weight"].T
    q = qkv[:, :H * hd].reshape(T, H, hd)
    k = qkv[:, H * hd:(H + Hkv) * hd].reshape(T, Hkv, hd)
    v = qkv[:, (H + Hkv) * hd:].reshape(T, Hkv, hd)
    if m.rope_kind == "longrope":
        fr, af = longrope(m, T)
    else:
        fr, af = 1.0 / (m.theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)), 1.0
    q, k = af * ref.rope(q, fr, False), af * ref.rope(k, fr, False)   # cos, sin × af
    maps = np.zeros((H, T, T))
    scores = np.zeros((H, T, T))
    out = np.zeros((T, H, hd))
    for i in range(H):
        maps[i], scores[i] = ref.causal_softmax(q[:, i], k[:, i // n_rep], hd ** -0.5, quant, m.windows[l])
        out[:, i] = maps[i] @ v[:, i // n_rep]
    y = out.reshape(T, H * hd) @ m.t[a + "o_proj.weight"].T
    return y, {"map1": maps, "scores": scores, "heads_out": out}


def forward_phi3(m, tokens, quant, ref):
    """Phi3Model: Llama's pre-norm block with the fused projections."""
    tokens = np.asarray(tokens, dtype=np.int64)
    T = len(tokens)
    t, F = m.t, m.F
    x = t["model.embed_tokens.weight"][tokens].copy()
    per, hidden = {}, []
    for l in range(m.L):
        p = "model.layers.%d." % l
        hn = ref.rmsnorm(x, t[p + "input_layernorm.weight"], m.eps)
        q = _quant_for_layer(quant, lambda: attn_phi3(m, l, hn, None, ref)[1]["scores"])
        a, maps = attn_phi3(m, l, hn, q, ref)
        x = x + a
        hh = ref.rmsnorm(x, t[p + "post_attention_layernorm.weight"], m.eps)
        gu = hh @ t[p + "mlp.gate_up_proj.weight"].T
        x = x + (gu[:, F:] * ref.silu(gu[:, :F])) @ t[p + "mlp.down_proj.weight"].T
        hidden.append(x.copy())
        for key, val in maps.items():
            per.setdefault(key, []).append(val)
    x = ref.rmsnorm(x, t["model.norm.weight"], m.eps)
    head = t["model.embed_tokens.weight"] if m.tied else t["lm_head.weight"]
    r = {"logits": x @ head.T, "hidden": np.stack(hidden),
         "visible": np.stack([ref.visible(T, w) for w in m.windows])}
    for key, vals in per.items():
        r[key] = np.array(vals, dtype=np.float64)
    return r


# ---------------------------------------------------------------------------
# make_model.py: configs and weights
# ---------------------------------------------------------------------------

def make_config(mtype, layers, hidden, heads, ffn=None, vocab=97, tied=None, max_pos=256, extra=None):
    """A config.json dict with the family's own key names (GPT2Config's)."""
    if mtype == "gpt2":
        cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": vocab,
               "n_embd": hidden, "n_layer": layers, "n_head": heads, "n_inner": ffn,
               "n_positions": max_pos, "n_ctx": max_pos, "layer_norm_epsilon": 1e-5,
               "activation_function": "gelu_new", "bos_token_id": 0, "eos_token_id": 1,
               "attn_pdrop": 0.1, "embd_pdrop": 0.1, "resid_pdrop": 0.1,
               "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
               "reorder_and_upcast_attn": False, "torch_dtype": "float32"}
        if tied is not None:
            cfg["tie_word_embeddings"] = bool(tied)
    elif mtype == "gpt_neox":
        cfg = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "vocab_size": vocab,
               "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
               "intermediate_size": ffn or 4 * hidden, "max_position_embeddings": max_pos,
               "layer_norm_eps": 1e-5, "hidden_act": "gelu", "rotary_pct": 0.25, "rotary_emb_base": 10000,
               "use_parallel_residual": True, "tie_word_embeddings": bool(tied), "bos_token_id": 0,
               "eos_token_id": 0, "torch_dtype": "float32"}
    elif mtype == "phi3":
        hd = hidden // heads
        cfg = {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "vocab_size": vocab,
               "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
               "num_key_value_heads": heads, "intermediate_size": ffn or 4 * hidden,
               "max_position_embeddings": 1024, "original_max_position_embeddings": 32, "rms_norm_eps": 1e-5,
               "hidden_act": "silu", "rope_theta": 10000.0, "sliding_window": None, "attention_bias": False,
               "rope_scaling": {"type": "longrope", "short_factor": longrope_factors(hd, 1.0),
                                "long_factor": longrope_factors(hd, 20.0)},
               "resid_pdrop": 0.0, "embd_pdrop": 0.0, "tie_word_embeddings": bool(tied), "bos_token_id": 1,
               "eos_token_id": 2, "torch_dtype": "float32"}
    elif mtype == "olmo2":
        cfg = {"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], "vocab_size": vocab,
               "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
               "num_key_value_heads": heads, "intermediate_size": ffn or 4 * hidden,
               "max_position_embeddings": max_pos, "rms_norm_eps": 1e-6, "hidden_act": "silu",
               "rope_theta": 500000, "rope_scaling": None, "attention_bias": False, "attention_dropout": 0.0,
               "tie_word_embeddings": bool(tied), "eos_token_id": 1, "pad_token_id": 2, "torch_dtype": "float32"}
    elif mtype == "gemma3_text":
        cfg = {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "vocab_size": vocab,
               "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
               "num_key_value_heads": heads, "head_dim": hidden // heads, "intermediate_size": ffn or 4 * hidden,
               "max_position_embeddings": max_pos, "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh",
               "query_pre_attn_scalar": hidden // heads, "attn_logit_softcapping": None,
               "final_logit_softcapping": None, "sliding_window": 4096, "sliding_window_pattern": 6,
               "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None,
               "attention_bias": False, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
               "torch_dtype": "float32"}
    elif mtype == "gemma2":
        cfg = {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "vocab_size": vocab,
               "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
               "num_key_value_heads": heads, "head_dim": hidden // heads, "intermediate_size": ffn or 4 * hidden,
               "max_position_embeddings": max_pos, "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh",
               "hidden_act": "gelu_pytorch_tanh", "query_pre_attn_scalar": hidden // heads,
               "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 4096,
               "rope_theta": 10000.0, "attention_bias": False, "bos_token_id": 2, "eos_token_id": 1,
               "pad_token_id": 0, "torch_dtype": "float32"}
    else:
        raise ValueError("unknown model_type %r" % mtype)
    cfg.update(extra or {})
    return cfg


def make_weights(cfg, seed=0, hub=False):
    """List of (name, float32 array) for a config of one of TYPES. hub: named and with
    the buffers as the published checkpoint ships them (gpt2: no prefix, the causal-mask
    buffers h.{l}.attn.bias); else as save_pretrained writes GPT2LMHeadModel
    ("transformer." prefix)."""
    rng = np.random.default_rng(seed)

    def lin(n_in, n_out):      # Conv1D: [in, out]
        return (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)

    def gain(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def bias(n, s=0.2):        # large enough that dropping one moves the logits
        return (s * rng.standard_normal(n)).astype(np.float32)

    mtype = cfg["model_type"]
    if mtype == "gpt_neox":
        return _neox_weights(cfg, rng, lin, gain, bias)
    if mtype in ("gemma2", "gemma3_text", "olmo2"):
        return _rms_weights(cfg, rng)
    if mtype == "phi3":
        return _phi3_weights(cfg, rng)
    if mtype != "gpt2":
        raise ValueError("unknown model_type %r" % mtype)
    V, D, L, P = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"], cfg["n_positions"]
    F = cfg.get("n_inner") or 4 * D
    pre = "" if hub else "transformer."
    t = [(pre + "wte.weight", rng.standard_normal((V, D)).astype(np.float32)),
         (pre + "wpe.weight", (0.5 * rng.standard_normal((P, D))).astype(np.float32))]
    for l in range(L):
        p = pre + "h.%d." % l
        t += [(p + "ln_1.weight", gain(D)), (p + "ln_1.bias", bias(D)),
              (p + "attn.c_attn.weight", lin(D, 3 * D)), (p + "attn.c_attn.bias", bias(3 * D)),
              (p + "attn.c_proj.weight", lin(D, D)), (p + "attn.c_proj.bias", bias(D)),
              (p + "ln_2.weight", gain(D)), (p + "ln_2.bias", bias(D)),
              (p + "mlp.c_fc.weight", lin(D, F)), (p + "mlp.c_fc.bias", bias(F)),
              (p + "mlp.c_proj.weight", lin(F, D)), (p + "mlp.c_proj.bias", bias(D))]
        if hub:   # the causal mask GPT2Attention registered as a buffer
            t.append((p + "attn.bias", np.tril(np.ones((P, P), np.float32))[None, None]))
        else:
            t.append((p + "attn.masked_bias", np.array(-1e4, np.float32)))
    t += [(pre + "ln_f.weight", gain(D)), (pre + "ln_f.bias", bias(D))]
    if not cfg.get("tie_word_embeddings", True):
        t.append(("lm_head.weight", (rng.standard_normal((V, D)) / np.sqrt(D)).astype(np.float32)))
    return t


def _neox_weights(cfg, rng, lin, gain, bias):
    """Pythia's tensors (Linear [out, in]: lin(in, out).T). query_key_value rows are
    per head [q, k, v] of hd each."""
    V, D, L, F = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    has_bias = cfg.get("attention_bias", True)
    t = [("gpt_neox.embed_in.weight", rng.standard_normal((V, D)).astype(np.float32))]
    for l in range(L):
        p = "gpt_neox.layers.%d." % l
        t += [(p + "input_layernorm.weight", gain(D)), (p + "input_layernorm.bias", bias(D)),
              (p + "post_attention_layernorm.weight", gain(D)), (p + "post_attention_layernorm.bias", bias(D)),
              (p + "attention.query_key_value.weight", lin(D, 3 * D).T.copy())]
        if has_bias:
            t.append((p + "attention.query_key_value.bias", bias(3 * D)))
        t.append((p + "attention.dense.weight", lin(D, D).T.copy()))
        if has_bias:
            t.append((p + "attention.dense.bias", bias(D)))
        t += [(p + "mlp.dense_h_to_4h.weight", lin(D, F).T.copy()), (p + "mlp.dense_h_to_4h.bias", bias(F)),
              (p + "mlp.dense_4h_to_h.weight", lin(F, D).T.copy()), (p + "mlp.dense_4h_to_h.bias", bias(D))]
    t += [("gpt_neox.final_layer_norm.weight", gain(D)), ("gpt_neox.final_layer_norm.bias", bias(D))]
    if not cfg.get("tie_word_embeddings", False):
        t.append(("embed_out.weight", (rng.standard_normal((V, D)) / np.sqrt(D)).astype(np.float32)))
    return t


def _rms_weights(cfg, rng):
    """Llama-named tensors with the norms of a Gemma (input_layernorm,
    post_attention_layernorm, pre_ and post_feedforward_layernorm; gains stored as w of
    1 + w) or OLMo 2 (post_attention_layernorm, post_feedforward_layernorm) block, and
    their q/k norms."""
    mtype = cfg["model_type"]
    V, D, L, F = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or D // H
    gemma = mtype != "olmo2"

    def lin(out_f, in_f):
        return (rng.standard_normal((out_f, in_f)) / np.sqrt(in_f)).astype(np.float32)

    def gain(n):     # Gemma stores w of (1 + w)
        return ((0.0 if gemma else 1.0) + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = [("model.embed_tokens.weight", rng.standard_normal((V, D)).astype(np.float32))]
    for l in range(L):
        p = "model.layers.%d." % l
        a = p + "self_attn."
        if gemma:
            t.append((p + "input_layernorm.weight", gain(D)))
        t += [(a + "q_proj.weight", lin(H * hd, D)), (a + "k_proj.weight", lin(Hkv * hd, D)),
              (a + "v_proj.weight", lin(Hkv * hd, D)), (a + "o_proj.weight", lin(D, H * hd))]
        if mtype == "gemma3_text":
            t += [(a + "q_norm.weight", gain(hd)), (a + "k_norm.weight", gain(hd))]
        if mtype == "olmo2":
            t += [(a + "q_norm.weight", gain(H * hd)), (a + "k_norm.weight", gain(Hkv * hd))]
        t.append((p + "post_attention_layernorm.weight", gain(D)))
        if gemma:
            t.append((p + "pre_feedforward_layernorm.weight", gain(D)))
        t += [(p + "post_feedforward_layernorm.weight", gain(D)), (p + "mlp.gate_proj.weight", lin(F, D)),
              (p + "mlp.up_proj.weight", lin(F, D)), (p + "mlp.down_proj.weight", lin(D, F))]
    t.append(("model.norm.weight", gain(D)))
    if not cfg.get("tie_word_embeddings", gemma):
        t.append(("lm_head.weight", lin(V, D)))
    return t


def longrope_factors(hd, top):
    """head_dim/2 factors rising from about 1 to `top` (the shape of Phi-3's lists: the low
    frequencies stretched most)."""
    n = hd // 2
    return [round(1.0 + (top - 1.0) * (j / max(1, n - 1)) ** 2 + 0.01 * j, 6) for j in range(n)]


def _phi3_weights(cfg, rng):
    """Phi-3's tensors: qkv_proj [H·hd + 2·Hkv·hd, D] (q | k | v rows), gate_up_proj
    [2F, D] (gate | up rows)."""
    V, D, L, F = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or D // H

    def lin(out_f, in_f):
        return (rng.standard_normal((out_f, in_f)) / np.sqrt(in_f)).astype(np.float32)

    def gain(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = [("model.embed_tokens.weight", rng.standard_normal((V, D)).astype(np.float32))]
    for l in range(L):
        p = "model.layers.%d." % l
        t += [(p + "input_layernorm.weight", gain(D)), (p + "self_attn.qkv_proj.weight", lin((H + 2 * Hkv) * hd, D)),
              (p + "self_attn.o_proj.weight", lin(D, H * hd)), (p + "post_attention_layernorm.weight", gain(D)),
              (p + "mlp.gate_up_proj.weight", lin(2 * F, D)), (p + "mlp.down_proj.weight", lin(D, F))]
    t.append(("model.norm.weight", gain(D)))
    if not cfg.get("tie_word_embeddings", False):
        t.append(("lm_head.weight", lin(V, D)))
    return t
