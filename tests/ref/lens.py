#!/usr/bin/python3
"""lens.py — float64 readouts on top of reference.forward, from the published maths:

- the logit lens (nostalgebraist, "interpreting GPT: the logit lens", 2020; TransformerLens
  accumulated_resid + apply_ln_to_stack): the residual stream after the embedding and
  after every layer, put through the model's final norm and unembedding (and Gemma 2's
  final soft-cap c·tanh(z/c)), softmax over the vocabulary;
- direct logit attribution (Elhage et al. 2021, "A Mathematical Framework for
  Transformer Circuits"; TransformerLens decompose_resid / stack_head_results): the final
  residual x_L is a sum of parts (token embedding, learned positions, each head's
  output through its slice of the output projection, each MLP's output, the biases);
  with the final norm's scale s frozen at its clean value each part c contributes
  u·(g ⊙ c)/s (RMSNorm) or u·(g ⊙ (c − mean c))/s (LayerNorm, the centring applied to
  each part), u the unembedding row of the token (or the difference of two rows). Post-
  norms of the attention output (Gemma, OLMo 2) have their scale frozen at its clean
  value too: head h then writes g_n ⊙ a_h / s_n with s_n the RMS of the whole Σ_h a_h.

    import lens
    out, r = lens.logit_lens(m, tokens, K)    # top_ids, top_prob [L+1, T, K]; target_* [L+1, T]
    d = lens.dla(m, tokens, rows, diff=None)  # heads [R, L, H], mlp [R, L], embed, bias, logit [R]

Model types: llama (and its family), diff_transformer, gpt2, gemma2 / gemma3_text, olmo2.
"""
import math

import numpy as np

import families  # noqa: E402
import reference  # noqa: E402


def _is(m, *archs):
    return getattr(m, "arch", None) in archs


def final_norm(m):
    """(kind, gain, bias, eps) of the model's last norm: kind "rms" or "ln"; Gemma's
    stored w becomes its gain 1 + w."""
    t = m.t
    if _is(m, "gpt2"):
        return "ln", t[m.prefix + "ln_f.weight"], t[m.prefix + "ln_f.bias"], m.eps
    if _is(m, "gemma2", "gemma3_text"):
        return "rms", 1.0 + t["model.norm.weight"], None, m.eps
    if _is(m, "olmo2") or m.arch not in families.TYPES:
        return "rms", t["model.norm.weight"], None, m.eps
    raise ValueError("lens.py has no final norm for %r" % m.arch)


def normed(m, x):
    """The final norm of rows x[..., D]."""
    kind, g, b, eps = final_norm(m)
    if kind == "ln":
        mu = x.mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps) * g + b
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * g


def unembedding(m):
    """W_U [V, D]."""
    t = m.t
    if _is(m, "gpt2"):
        return t[m.prefix + "wte.weight"] if m.tied else t["lm_head.weight"]
    return t["model.embed_tokens.weight"] if m.tied else t["lm_head.weight"]


def embedding(m, tokens):
    """(token part [T, D], learned-position part [T, D]) of the residual before layer 0."""
    t, tokens = m.t, np.asarray(tokens, dtype=np.int64)
    if _is(m, "gpt2"):
        return t[m.prefix + "wte.weight"][tokens], t[m.prefix + "wpe.weight"][:len(tokens)]
    e = t["model.embed_tokens.weight"][tokens]
    if _is(m, "gemma2", "gemma3_text"):
        e = e * float(np.float32(math.sqrt(m.D)))        # Gemma's normalizer in the model dtype
    return e, np.zeros_like(e)


def capped(m, z):
    cap = getattr(m, "final_cap", None)
    return cap * np.tanh(z / cap) if cap else z


def logit_lens(m, tokens, K):
    """dict top_ids [L+1, T, K] (descending probability, ties by lower id), top_prob,
    target_rank [L+1, T] (tokens with a strictly larger logit than tokens[t+1]; −1 at
    T−1), target_prob (NaN at T−1); and the reference run."""
    r = reference.forward(m, tokens)
    e, pos = embedding(m, tokens)
    W = unembedding(m)
    T = len(tokens)
    xs = [e + pos] + list(r["hidden"])
    out = {"top_ids": [], "top_prob": [], "target_rank": [], "target_prob": []}
    for x in xs:
        z = capped(m, normed(m, x) @ W.T)                        # [T, V]
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        ids = np.argsort(-z, axis=1, kind="stable")[:, :K]
        rank = np.full(T, -1)
        tp = np.full(T, np.nan)
        for i in range(T - 1):
            y = tokens[i + 1]
            rank[i] = int((z[i] > z[i, y]).sum())
            tp[i] = p[i, y]
        out["top_ids"].append(ids)
        out["top_prob"].append(np.take_along_axis(p, ids, axis=1))
        out["target_rank"].append(rank)
        out["target_prob"].append(tp)
    return {k: np.array(v) for k, v in out.items()}, r


def head_parts(m, r, l):
    """What each head of layer l adds to the residual stream, [T, H, D], and the
    attention's output bias [D] (zeros when none)."""
    out = r["heads_out"][l]                                      # [T, H, w]
    T, H, w = out.shape
    t = m.t
    if _is(m, "gpt2"):
        p = m.prefix + "h.%d.attn.c_proj." % l
        W = t[p + "weight"]                                      # Conv1D [in, out]
        parts = np.stack([out[:, h] @ W[h * w:(h + 1) * w, :] for h in range(H)], axis=1)
        return parts, t[p + "bias"]
    a = "model.layers.%d.self_attn." % l
    W = t[a + ("out_proj.weight" if m.type == "diff_transformer" else "o_proj.weight")]   # [D, H·w]
    parts = np.stack([out[:, h] @ W[:, h * w:(h + 1) * w].T for h in range(H)], axis=1)
    bias = np.zeros(W.shape[0])
    if _is(m, "gemma2", "gemma3_text", "olmo2"):
        g = t["model.layers.%d.post_attention_layernorm.weight" % l]
        g = 1.0 + g if not _is(m, "olmo2") else g
        whole = parts.sum(axis=1)
        s = np.sqrt((whole * whole).mean(axis=-1, keepdims=True) + m.eps)     # frozen
        parts = parts * g / s[:, None, :]
    return parts, bias


def mlp_bias(m, l, D):
    if _is(m, "gpt2"):
        return m.t[m.prefix + "h.%d.mlp.c_proj.bias" % l]
    return np.zeros(D)


def dla(m, tokens, rows, diff=None):
    """Direct logit attribution at rows for the next token (or logit[A] − logit[B] with
    diff = (A, B)): heads [R, L, H], mlp [R, L], embed [R], bias [R], logit [R] (the
    logit before any final soft-cap); NaN where a row has no next token."""
    r = reference.forward(m, tokens)
    e, pos = embedding(m, tokens)
    W = unembedding(m)
    kind, g, b, eps = final_norm(m)
    L, D = m.L, e.shape[1]
    x_prev = e + pos
    heads, mlps, biases = [], [], [pos.copy()]
    for l in range(L):
        parts, ba = head_parts(m, r, l)
        bm = mlp_bias(m, l, D)
        mid = x_prev + parts.sum(axis=1) + ba
        mlp = r["hidden"][l] - mid - bm                          # the MLP without its bias
        heads.append(parts)
        mlps.append(mlp)
        biases += [np.broadcast_to(ba, e.shape), np.broadcast_to(bm, e.shape)]
        x_prev = r["hidden"][l]
    bias_sum = sum(biases)
    xL = r["hidden"][-1]
    R = len(rows)
    H = heads[0].shape[1]
    res = {"heads": np.full((R, L, H), np.nan), "mlp": np.full((R, L), np.nan), "embed": np.full(R, np.nan),
           "bias": np.full(R, np.nan), "logit": np.full(R, np.nan)}
    for k, row in enumerate(rows):
        if diff is None and row + 1 >= len(tokens):
            continue
        u = W[diff[0]] - W[diff[1]] if diff is not None else W[tokens[row + 1]]
        x = xL[row]
        if kind == "ln":
            s = math.sqrt(((x - x.mean()) ** 2).mean() + eps)

            def term(c):
                return float((u * g) @ (c - c.mean()) / s)
        else:
            s = math.sqrt((x * x).mean() + eps)

            def term(c):
                return float((u * g) @ c / s)
        for l in range(L):
            for h in range(H):
                res["heads"][k, l, h] = term(heads[l][row, h])
            res["mlp"][k, l] = term(mlps[l][row])
        res["embed"][k] = term(e[row])
        res["bias"][k] = term(bias_sum[row]) + (float(u @ b) if b is not None else 0.0)
        res["logit"][k] = float(normed(m, x) @ u)
    return res
