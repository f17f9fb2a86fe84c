#!/usr/bin/python3
"""gguf.py — a numpy GGUF writer, block quantizers and dequantizers, and a converter
from the Hugging Face tensors of tests/ref/make_model.py to a GGUF file as llama.cpp's
convert_hf_to_gguf.py lays it out.

Written from the GGUF specification (ggml's docs/gguf.md) and the block layouts of
ggml-common.h as docs/format.md "GGUF" restates them, not from difflens' C: the
dequantizers index each value from its block's bytes in float32 arithmetic (every
product and difference rounded to float32, in the order ggml's dequantize_row_*
evaluates them), so they must agree with the C bit for bit.

The quantizers are plain round-to-nearest encoders (the dequantizer is what must match;
any valid encoding serves): per-block absmax or min/max scales, K-quant sub-block
scales quantized to their 4/6/8-bit fields against an f16 super-block scale.
`random_blocks` makes arbitrary valid blocks (every bit pattern, finite f16 scales).
"""
import struct

import math

import numpy as np

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 0, 1, 2, 3, 6, 7, 8
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, BF16 = 10, 11, 12, 13, 14, 30
IQ2_XXS = 16

# ggml type -> (name, values per block, bytes per block)
TYPES = {F32: ("F32", 1, 4), F16: ("F16", 1, 2), BF16: ("BF16", 1, 2),
         Q4_0: ("Q4_0", 32, 18), Q4_1: ("Q4_1", 32, 20), Q5_0: ("Q5_0", 32, 22),
         Q5_1: ("Q5_1", 32, 24), Q8_0: ("Q8_0", 32, 34), Q2_K: ("Q2_K", 256, 84),
         Q3_K: ("Q3_K", 256, 110), Q4_K: ("Q4_K", 256, 144), Q5_K: ("Q5_K", 256, 176),
         Q6_K: ("Q6_K", 256, 210), IQ2_XXS: ("IQ2_XXS", 256, 66)}
BY_NAME = {v[0]: k for k, v in TYPES.items()}
QUANT_NAMES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, FLOAT32, BOOL, STRING, ARRAY, U64, I64, FLOAT64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", FLOAT32: "<f",
           BOOL: "<?", U64: "<Q", I64: "<q", FLOAT64: "<d"}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def f16(x):
    """float32 -> the f16 bytes' uint16 (round to nearest even, as ggml's FP32_TO_FP16)."""
    return np.asarray(x, np.float32).astype(np.float16).view(np.uint16)


def f16_val(u16):
    return np.asarray(u16, np.uint16).view(np.float16).astype(np.float32)


def roundf(x):
    """C roundf: halves away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _u16col(u):
    u = np.asarray(u, np.uint16).reshape(-1)
    return np.stack([u & 0xFF, u >> 8], 1).astype(np.uint8)


def _blocks(raw, t):
    _, qk, bs = TYPES[t]
    b = np.frombuffer(bytes(raw), np.uint8)
    assert b.size % bs == 0
    return b.reshape(-1, bs)


def _h(b, at):
    """f16 field at byte `at` of each block, as float32 [nb, 1]."""
    return f16_val(b[:, at].astype(np.uint16) | (b[:, at + 1].astype(np.uint16) << 8))[:, None]


# ---------------------------------------------------------------------------
# dequantizers (float32, from the layouts)
# ---------------------------------------------------------------------------

def _k_index():
    """For the 256 values of a Q2_K/Q3_K/Q6_K super-block: half h, quarter s, lane l."""
    j = np.arange(256)
    h, w = j // 128, j % 128
    return h, w // 32, w % 32


def _scale_min_k4(sc):
    """Q4_K/Q5_K: eight 6-bit scales and mins from the 12 bytes [nb, 12]."""
    sc = sc.astype(np.int32)
    d = np.zeros((sc.shape[0], 8), np.int32)
    m = np.zeros_like(d)
    for j in range(8):
        if j < 4:
            d[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            d[:, j] = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return d, m


def _q3_scales(s):
    s = s.astype(np.int32)
    out = np.zeros((s.shape[0], 16), np.int32)
    for k in range(16):
        lo = s[:, k] & 0xF if k < 8 else s[:, k - 8] >> 4
        hi = (s[:, 8 + k % 4] >> (2 * (k // 4))) & 3
        out[:, k] = (lo | (hi << 4)) - 32
    return out


def dequantize(raw, t, n):
    """The n float32 values of the bytes `raw` of ggml type t."""
    if t == F32:
        return np.frombuffer(bytes(raw), "<f4", n).astype(np.float32)
    if t == F16:
        return np.frombuffer(bytes(raw), "<f2", n).astype(np.float32)
    if t == BF16:
        return (np.frombuffer(bytes(raw), "<u2", n).astype(np.uint32) << 16).view(np.float32)
    b = _blocks(raw, t)
    f = np.float32
    if t in (Q4_0, Q4_1):
        o = 2 if t == Q4_0 else 4
        qs = b[:, o:o + 16].astype(np.int32)
        q = np.concatenate([qs & 0xF, qs >> 4], 1)
        y = (q - 8).astype(f) * _h(b, 0) if t == Q4_0 else q.astype(f) * _h(b, 0) + _h(b, 2)
    elif t in (Q5_0, Q5_1):
        o = 2 if t == Q5_0 else 4
        qh = b[:, o:o + 4].copy().view("<u4").astype(np.int64)          # [nb, 1]
        qs = b[:, o + 4:o + 20].astype(np.int32)
        hb = ((qh >> np.arange(32)) & 1).astype(np.int32)
        q = np.concatenate([qs & 0xF, qs >> 4], 1) | (hb << 4)
        y = (q - 16).astype(f) * _h(b, 0) if t == Q5_0 else q.astype(f) * _h(b, 0) + _h(b, 2)
    elif t == Q8_0:
        y = b[:, 2:34].view(np.int8).astype(f) * _h(b, 0)
    elif t == Q2_K:
        h, s, l = _k_index()
        sc = b[:, 0:16].astype(np.int32)[:, 8 * h + 2 * s + l // 16]
        q = (b[:, 16:80].astype(np.int32)[:, 32 * h + l] >> (2 * s)) & 3
        dl = _h(b, 80) * (sc & 0xF).astype(f)
        ml = _h(b, 82) * (sc >> 4).astype(f)
        y = dl * q.astype(f) - ml
    elif t == Q3_K:
        h, s, l = _k_index()
        sc = _q3_scales(b[:, 96:108])[:, 8 * h + 2 * s + l // 16]
        q = (b[:, 32:96].astype(np.int32)[:, 32 * h + l] >> (2 * s)) & 3
        high = (b[:, 0:32].astype(np.int32)[:, l] >> (4 * h + s)) & 1
        y = (_h(b, 108) * sc.astype(f)) * (q - 4 * (1 - high)).astype(f)
    elif t in (Q4_K, Q5_K):
        j = np.arange(256)
        g, u = j // 64, j % 64
        k, l = u // 32, u % 32
        d, m = _scale_min_k4(b[:, 4:16])
        qs = b[:, 48:176] if t == Q5_K else b[:, 16:144]
        byte = qs.astype(np.int32)[:, 32 * g + l]
        q = np.where(k == 1, byte >> 4, byte & 0xF)
        if t == Q5_K:
            q = q + ((b[:, 16:48].astype(np.int32)[:, l] >> (2 * g + k)) & 1) * 16
        d1 = _h(b, 0) * d[:, 2 * g + k].astype(f)
        m1 = _h(b, 2) * m[:, 2 * g + k].astype(f)
        y = d1 * q.astype(f) - m1
    elif t == Q6_K:
        h, s, l = _k_index()
        lob = b[:, 0:128].astype(np.int32)[:, 64 * h + l + 32 * (s & 1)]
        lo = np.where(s < 2, lob & 0xF, lob >> 4)
        hi = (b[:, 128:192].astype(np.int32)[:, 32 * h + l] >> (2 * s)) & 3
        q = (lo | (hi << 4)) - 32
        sc = b[:, 192:208].view(np.int8).astype(np.int32)[:, 8 * h + l // 16 + 2 * s]
        y = (_h(b, 208) * sc.astype(f)) * q.astype(f)
    else:
        raise ValueError("no dequantizer for type %d" % t)
    assert y.dtype == np.float32
    return y.reshape(-1)[:n]


# ---------------------------------------------------------------------------
# quantizers (round to nearest; any valid encoding would do)
# ---------------------------------------------------------------------------

def _safe_inv(d):
    d = np.asarray(d, np.float32)
    return np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)


def _pack2(L):
    """[nb, 256] 2-bit values -> qs[nb, 64]: byte 32h + l holds values 128h + l + 32s at bits 2s."""
    qs = np.zeros((L.shape[0], 64), np.uint8)
    for h in range(2):
        for s in range(4):
            qs[:, 32 * h:32 * h + 32] |= (L[:, 128 * h + 32 * s:128 * h + 32 * s + 32] << (2 * s)).astype(np.uint8)
    return qs


def _pack_k4(sc, mn):
    """Eight 6-bit scales and mins -> 12 bytes (the inverse of get_scale_min_k4)."""
    out = np.zeros((sc.shape[0], 12), np.uint8)
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    for j in range(8):
        if j < 4:
            out[:, j] |= sc[:, j]
            out[:, j + 4] |= mn[:, j]
        else:
            out[:, j + 4] = (sc[:, j] & 0xF) | ((mn[:, j] & 0xF) << 4)
            out[:, j - 4] |= (sc[:, j] >> 4) << 6
            out[:, j] |= (mn[:, j] >> 4) << 6
    return out


def quantize(x, t):
    """float32 values x (a multiple of the block) -> bytes of ggml type t."""
    x = np.asarray(x, np.float32).reshape(-1)
    if t == F32:
        return x.astype("<f4").tobytes()
    if t == F16:
        return x.astype("<f2").tobytes()
    if t == BF16:
        u = x.view(np.uint32)
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
        return r.tobytes()
    _, qk, bs = TYPES[t]
    xb = x.reshape(-1, qk)
    nb = xb.shape[0]
    out = np.zeros((nb, bs), np.uint8)
    if t in (Q8_0, Q4_0, Q5_0):
        if t == Q8_0:
            d = np.abs(xb).max(1) / np.float32(127)
        else:
            idx = np.abs(xb).argmax(1)
            d = xb[np.arange(nb), idx] / np.float32(-8 if t == Q4_0 else -16)
        dh = f16(d)
        out[:, 0:2] = _u16col(dh)
        inv = _safe_inv(f16_val(dh))[:, None]
        if t == Q8_0:
            out[:, 2:34] = np.clip(roundf(xb * inv), -127, 127).astype(np.int8).view(np.uint8)
        else:
            top = 15 if t == Q4_0 else 31
            q = np.clip(np.floor(xb * inv + top // 2 + 1 + 0.5), 0, top).astype(np.int32)
            o = 2
            if t == Q5_0:
                hb = (q >> 4) & 1
                qh = (hb.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype("<u4")
                out[:, 2:6] = qh.view(np.uint8).reshape(nb, 4)
                o = 6
            out[:, o:o + 16] = ((q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)).astype(np.uint8)
        return out.tobytes()
    if t in (Q4_1, Q5_1):
        top = 15 if t == Q4_1 else 31
        mn, mx = xb.min(1), xb.max(1)
        dh, mh = f16((mx - mn) / np.float32(top)), f16(mn)
        out[:, 0:2], out[:, 2:4] = _u16col(dh), _u16col(mh)
        inv = _safe_inv(f16_val(dh))[:, None]
        q = np.clip(np.floor((xb - f16_val(mh)[:, None]) * inv + 0.5), 0, top).astype(np.int32)
        o = 4
        if t == Q5_1:
            qh = (((q >> 4) & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype("<u4")
            out[:, 4:8] = qh.view(np.uint8).reshape(nb, 4)
            o = 8
        out[:, o:o + 16] = ((q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)).astype(np.uint8)
        return out.tobytes()
    if t in (Q2_K, Q4_K, Q5_K):
        sub = 16 if t == Q2_K else 32
        top = {Q2_K: 3, Q4_K: 15, Q5_K: 31}[t]
        smax = 15 if t == Q2_K else 63
        xs = xb.reshape(nb, 256 // sub, sub)
        lo = np.minimum(xs.min(2), 0)
        scale = (xs.max(2) - lo) / np.float32(top)
        dh, mh = f16(scale.max(1) / np.float32(smax)), f16((-lo).max(1) / np.float32(smax))
        sc = np.clip(roundf(scale * _safe_inv(f16_val(dh))[:, None]), 0, smax).astype(np.int32)
        mn = np.clip(roundf(-lo * _safe_inv(f16_val(mh))[:, None]), 0, smax).astype(np.int32)
        dsub = f16_val(dh)[:, None] * sc.astype(np.float32)
        msub = f16_val(mh)[:, None] * mn.astype(np.float32)
        L = np.clip(roundf((xs + msub[:, :, None]) * _safe_inv(dsub)[:, :, None]), 0, top)
        L = L.astype(np.int32).reshape(nb, 256)
        if t == Q2_K:
            out[:, 0:16] = (sc | (mn << 4)).astype(np.uint8)
            out[:, 16:80] = _pack2(L)
            out[:, 80:82], out[:, 82:84] = _u16col(dh), _u16col(mh)
            return out.tobytes()
        out[:, 0:2], out[:, 2:4] = _u16col(dh), _u16col(mh)
        out[:, 4:16] = _pack_k4(sc, mn)
        qs = np.zeros((nb, 128), np.uint8)
        qh = np.zeros((nb, 32), np.uint8)
        for g in range(4):
            a, c = L[:, 64 * g:64 * g + 32], L[:, 64 * g + 32:64 * g + 64]
            qs[:, 32 * g:32 * g + 32] = ((a & 0xF) | ((c & 0xF) << 4)).astype(np.uint8)
            qh |= (((a >> 4) & 1) << (2 * g) | ((c >> 4) & 1) << (2 * g + 1)).astype(np.uint8)
        if t == Q4_K:
            out[:, 16:144] = qs
        else:
            out[:, 16:48], out[:, 48:176] = qh, qs
        return out.tobytes()
    if t == Q3_K:
        xs = xb.reshape(nb, 16, 16)
        s = np.abs(xs).max(2) / np.float32(4)
        dh = f16(s.max(1) / np.float32(31))
        sc = np.clip(roundf(s * _safe_inv(f16_val(dh))[:, None]), -32, 31).astype(np.int32)
        dsub = f16_val(dh)[:, None] * sc.astype(np.float32)
        L = (np.clip(roundf(xs * _safe_inv(dsub)[:, :, None]), -4, 3) + 4).astype(np.int32).reshape(nb, 256)
        u = sc + 32
        sb = np.zeros((nb, 12), np.uint8)
        for k in range(16):
            if k < 8:
                sb[:, k] |= (u[:, k] & 0xF).astype(np.uint8)
            else:
                sb[:, k - 8] |= ((u[:, k] & 0xF) << 4).astype(np.uint8)
            sb[:, 8 + k % 4] |= ((u[:, k] >> 4) << (2 * (k // 4))).astype(np.uint8)
        hm = np.zeros((nb, 32), np.uint8)
        for j in range(256):
            h, w = j // 128, j % 128
            hm[:, w % 32] |= ((L[:, j] >> 2) << (4 * h + w // 32)).astype(np.uint8)
        out[:, 0:32], out[:, 32:96] = hm, _pack2(L & 3)
        out[:, 96:108], out[:, 108:110] = sb, _u16col(dh)
        return out.tobytes()
    if t == Q6_K:
        xs = xb.reshape(nb, 16, 16)
        s = np.abs(xs).max(2) / np.float32(32)
        dh = f16(s.max(1) / np.float32(127))
        sc = np.clip(roundf(s * _safe_inv(f16_val(dh))[:, None]), -128, 127).astype(np.int32)
        dsub = f16_val(dh)[:, None] * sc.astype(np.float32)
        L = (np.clip(roundf(xs * _safe_inv(dsub)[:, :, None]), -32, 31) + 32).astype(np.int32).reshape(nb, 256)
        ql = np.zeros((nb, 128), np.uint8)
        qh = np.zeros((nb, 64), np.uint8)
        for h in range(2):
            for s4 in range(4):
                v = L[:, 128 * h + 32 * s4:128 * h + 32 * s4 + 32]
                ql[:, 64 * h + 32 * (s4 & 1):64 * h + 32 * (s4 & 1) + 32] |= \
                    ((v & 0xF) << (4 if s4 >= 2 else 0)).astype(np.uint8)
                qh[:, 32 * h:32 * h + 32] |= ((v >> 4) << (2 * s4)).astype(np.uint8)
        out[:, 0:128], out[:, 128:192] = ql, qh
        out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
        out[:, 208:210] = _u16col(dh)
        return out.tobytes()
    raise ValueError("no quantizer for type %d" % t)


def random_blocks(t, nb, rng):
    """nb arbitrary blocks of type t: random bytes, the f16 scale fields replaced by
    random finite f16 values (zero, subnormals and negatives included)."""
    _, qk, bs = TYPES[t]
    b = rng.integers(0, 256, (nb, bs), dtype=np.uint8)
    fields = {Q4_0: [0], Q4_1: [0, 2], Q5_0: [0], Q5_1: [0, 2], Q8_0: [0], Q2_K: [80, 82],
              Q3_K: [108], Q4_K: [0, 2], Q5_K: [0, 2], Q6_K: [208]}[t]
    for at in fields:
        v = rng.standard_normal(nb).astype(np.float32) * np.float32(0.05)
        v[::7] = 0
        v[3::11] = np.float32(3e-6)     # an f16 subnormal
        b[:, at:at + 2] = _u16col(f16(v))
    return b.tobytes()


# ---------------------------------------------------------------------------
# the container
# ---------------------------------------------------------------------------

def _str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _value(vt, v):
    if vt == STRING:
        return _str(v)
    if vt == ARRAY:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        return out + b"".join(_value(et, x) for x in items)
    return struct.pack(_SCALAR[vt], v)


def gguf_bytes(kvs, tensors, alignment=32, version=3):
    """A GGUF image. kvs: [(key, value type, value)] (arrays: (elem type, list));
    tensors: [(name, ggml type, ne list (ne[0] fastest), raw bytes)]. Tensors are laid
    out in order, each at the next multiple of the alignment."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for k, vt, v in kvs:
        out += _str(k) + struct.pack("<I", vt) + _value(vt, v)
    off = 0
    offs = []
    for name, t, ne, raw in tensors:
        offs.append(off)
        out += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", t, off)
        off += (len(raw) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for (name, t, ne, raw), o in zip(tensors, offs):
        out += raw + b"\0" * (-len(raw) % alignment)
    return bytes(out)


def write_gguf(path, kvs, tensors, alignment=32):
    with open(path, "wb") as f:
        f.write(gguf_bytes(kvs, tensors, alignment))


def write_split(prefix, kvs, tensors, n):
    """PREFIX-0000k-of-0000N.gguf as llama.cpp's gguf-split writes them: the metadata in
    the first, split.no/split.count/split.tensors.count in each. Returns the paths."""
    groups = np.array_split(np.arange(len(tensors)), n)
    paths = []
    for i, g in enumerate(groups):
        split_kv = [("split.no", U16, i), ("split.count", U16, n), ("split.tensors.count", I32, len(tensors))]
        p = "%s-%05d-of-%05d.gguf" % (prefix, i + 1, n)
        write_gguf(p, (kvs if i == 0 else []) + split_kv, [tensors[j] for j in g])
        paths.append(p)
    return paths


# ---------------------------------------------------------------------------
# Hugging Face tensors -> GGUF (convert_hf_to_gguf.py's names and permutation)
# ---------------------------------------------------------------------------

ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2",
        "gemma3_text": "gemma3", "phi3": "phi3", "olmo2": "olmo2"}


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: rotate-half pairs (i, i + hd/2) of each
    head become adjacent rows (2i, 2i + 1) for ggml's interleaved RoPE."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_name(hf, gemma=False, arch=None):
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if hf in top:
        return top[hf]
    parts = hf.split(".")
    l, rest = parts[2], ".".join(parts[3:])
    if gemma:   # Gemma's four norms (gguf-py tensor_mapping.py: ATTN_POST_NORM, FFN_NORM, FFN_POST_NORM)
        stem, kind = rest.rsplit(".", 1)
        g = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
             "post_feedforward_layernorm": "post_ffw_norm"}
        if stem in g:
            return "blk.%s.%s.%s" % (l, g[stem], kind)
    if arch == "olmo2":   # OLMo 2's norms come after the sub-layers (ATTN_POST_NORM, FFN_POST_NORM)
        stem, kind = rest.rsplit(".", 1)
        g = {"post_attention_layernorm": "post_attention_norm", "post_feedforward_layernorm": "post_ffw_norm"}
        if stem in g:
            return "blk.%s.%s.%s" % (l, g[stem], kind)
    sub = {"self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up",   # Phi-3's fused projections
           "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
           "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
           "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}
    stem, kind = rest.rsplit(".", 1)
    return "blk.%s.%s.%s" % (l, sub[stem], kind)


def config_kvs(cfg):
    """GGUF metadata for a make_model config (the keys convert_hf_to_gguf.py writes)."""
    arch = ARCH[cfg["model_type"]]
    H = cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    kv = [("general.architecture", STRING, arch), ("general.name", STRING, "difflens test"),
          ("general.file_type", U32, 1),
          (arch + ".block_count", U32, cfg["num_hidden_layers"]),
          (arch + ".context_length", U32, cfg.get("max_position_embeddings", 2048)),
          (arch + ".embedding_length", U32, cfg["hidden_size"]),
          (arch + ".feed_forward_length", U32, cfg["intermediate_size"]),
          (arch + ".attention.head_count", U32, H),
          (arch + ".attention.head_count_kv", U32, cfg.get("num_key_value_heads") or H),
          (arch + ".rope.freq_base", FLOAT32, float(cfg.get("rope_theta", 10000.0))),
          (arch + ".attention.layer_norm_rms_epsilon", FLOAT32, float(cfg.get("rms_norm_eps", 1e-6))),
          (arch + ".rope.dimension_count", U32, hd)]
    if hd != cfg["hidden_size"] // H:
        kv += [(arch + ".attention.key_length", U32, hd), (arch + ".attention.value_length", U32, hd)]
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "linear":
        kv += [(arch + ".rope.scaling.type", STRING, "linear"),
               (arch + ".rope.scaling.factor", FLOAT32, float(rs["factor"]))]
    if arch == "gemma2":   # Gemma2Model.set_gguf_parameters: no rope keys, the caps and the window
        kv = [x for x in kv if ".rope." not in x[0]]
        kv += [(arch + ".attn_logit_softcapping", FLOAT32, float(cfg["attn_logit_softcapping"])),
               (arch + ".final_logit_softcapping", FLOAT32, float(cfg["final_logit_softcapping"])),
               (arch + ".attention.sliding_window", U32, int(cfg["sliding_window"]))]
    if arch == "phi3":     # Phi3MiniModel.set_gguf_parameters
        D = cfg["hidden_size"]
        rd = int(cfg.get("partial_rotary_factor", 1.0) * D) // H
        orig = cfg.get("original_max_position_embeddings") or cfg.get("max_position_embeddings")
        kv = [x for x in kv if not x[0].endswith(".rope.dimension_count")]
        kv += [(arch + ".rope.dimension_count", U32, rd),
               (arch + ".rope.scaling.original_context_length", U32, orig),
               (arch + ".attention.sliding_window", U32, cfg.get("sliding_window") or 0)]
        if rs.get("long_factor"):
            scale = cfg["max_position_embeddings"] / orig
            af = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
            kv.append((arch + ".rope.scaling.attn_factor", FLOAT32, af))
    if arch == "gemma3":   # Gemma3Model: the global layers' base, the window, a final cap when set
        if cfg.get("final_logit_softcapping"):
            kv.append((arch + ".final_logit_softcapping", FLOAT32, float(cfg["final_logit_softcapping"])))
        kv.append((arch + ".attention.sliding_window", U32, int(cfg["sliding_window"])))
    return kv


def rope_freqs(cfg):
    """Llama 3's rope_scaling as the converter stores it (LlamaModel.generate_extra_tensors):
    one float32 factor per frequency, by which llama.cpp divides it; None without llama3."""
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) != "llama3":
        return None
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    base = float(cfg.get("rope_theta", 10000.0))
    freqs = (1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))).astype(np.float32)
    factor, lo, hi = rs.get("factor", 8.0), rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    lo_wave, hi_wave = old / lo, old / hi
    out = []
    for f in freqs:
        wave = 2 * math.pi / float(f)
        if wave < hi_wave:
            out.append(1.0)
        elif wave > lo_wave:
            out.append(factor)
        else:
            smooth = (old / wave - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def convert(cfg, tensors, wtype, path=None, split=0, embd_type=None):
    """Write the model (cfg, [(hf name, float32 array)]) as GGUF: 2-D weights in ggml
    type wtype (embedding in embd_type, default wtype), 1-D ones F32; Q/K rows permuted
    for llama/mistral as the converter does. Returns (paths, hf tensors as float64
    dequantized by numpy and un-permuted: what the file holds, in Hugging Face terms)."""
    permuted = ARCH[cfg["model_type"]] == "llama"
    gemma = ARCH[cfg["model_type"]].startswith("gemma")
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    out, back = [], {}
    for name, a in tensors:
        a = np.asarray(a, np.float32)
        heads = H if "q_proj" in name else Hkv if "k_proj" in name else 0
        if permuted and heads:
            a = permute(a, heads)
        shift = gemma and name.endswith("norm.weight")   # Gemma*Model.modify_tensors: + 1, in float32
        if shift:
            a = a + np.float32(1)
        t = (embd_type if embd_type is not None and "embed_tokens" in name else wtype) if a.ndim == 2 else F32
        raw = quantize(a, t)
        ne = list(a.shape[::-1])
        out.append((gguf_name(name, gemma, ARCH[cfg["model_type"]]), t, ne, raw))
        deq = dequantize(raw, t, a.size).reshape(a.shape)
        if permuted and heads:
            deq = unpermute(deq, heads)
        back[name] = deq.astype(np.float64) - (1.0 if shift else 0.0)
    ff = rope_freqs(cfg)
    if ff is not None:
        out.append(("rope_freqs.weight", F32, [ff.size], quantize(ff, F32)))
    rs = cfg.get("rope_scaling") or {}
    if ARCH[cfg["model_type"]] == "phi3" and rs.get("long_factor"):   # Phi3MiniModel.generate_extra_tensors
        for key in ("long", "short"):
            f = np.array(rs[key + "_factor"], np.float32)
            out.append(("rope_factors_%s.weight" % key, F32, [f.size], quantize(f, F32)))
    kvs = config_kvs(cfg)
    if path is None:
        return None, back
    if split:
        return write_split(path, kvs, out, split), back
    write_gguf(path, kvs, out)
    return [path], back


# ---------------------------------------------------------------------------
# tokenizer.json -> GGUF tokenizer metadata (convert_hf_to_gguf.py's _set_vocab_gpt2)
# ---------------------------------------------------------------------------

TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6


def tokenizer_kvs(tok, pre, add_bos=None):
    """The tokenizer.ggml.* keys llama.cpp's converter writes for a byte-level BPE
    tokenizer.json (a dict): every id's token ([PADi] for holes, UNUSED), added tokens
    CONTROL when special else USER_DEFINED, merges as "a b"; bos/eos from the
    post-processor's template (add_bos_token when it adds one) or the named tokens."""
    m = tok["model"]
    assert m["type"] == "BPE"
    ids = dict(m["vocab"])
    kinds = {}
    for a in tok.get("added_tokens", []):
        ids[a["content"]] = a["id"]
        kinds[a["id"]] = TOKEN_CONTROL if a.get("special") else TOKEN_USER_DEFINED
    n = max(ids.values()) + 1
    tokens = ["[PAD%d]" % i for i in range(n)]
    types = [TOKEN_UNUSED] * n
    for s, i in ids.items():
        tokens[i] = s
        types[i] = kinds.get(i, TOKEN_NORMAL)
    merges = [" ".join(x) if isinstance(x, list) else x for x in m["merges"]]
    kv = [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, pre),
          ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
          ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
          ("tokenizer.ggml.merges", ARRAY, (STRING, merges))]
    pp = tok.get("post_processor") or {}
    bos = None
    if pp.get("type") == "TemplateProcessing" and "SpecialToken" in pp["single"][0]:
        bos = pp["special_tokens"][pp["single"][0]["SpecialToken"]["id"]]["ids"][0]
    if add_bos is None:
        add_bos = bos is not None
    for name in ("<|begin_of_text|>", "<s>"):
        if bos is None and name in ids:
            bos = ids[name]
    if bos is not None:
        kv.append(("tokenizer.ggml.bos_token_id", U32, bos))
    for name in ("<|end_of_text|>", "<|endoftext|>", "</s>"):
        if name in ids:
            kv.append(("tokenizer.ggml.eos_token_id", U32, ids[name]))
            break
    kv.append(("tokenizer.ggml.add_bos_token", BOOL, bool(add_bos)))
    return kv


# ---------------------------------------------------------------------------
# SentencePiece tokenizer.json -> GGUF "llama" vocabulary (convert_hf_to_gguf.py's
# _set_vocab_sentencepiece / llama.cpp's LLAMA_VOCAB_TYPE_SPM)
# ---------------------------------------------------------------------------

def spm_tokenizer_kvs(tok, add_space_prefix):
    """The tokenizer.ggml.* keys of a SentencePiece vocabulary, from a tokenizer.json
    that Hugging Face's converter made from one (a BPE model with byte_fallback whose
    merges are every split of a piece into two pieces). The real converter reads the
    pieces' scores from tokenizer.model, which is not here: each piece's score is minus
    the rank of the first merge that makes it, so that ordering merges by score (as the
    SentencePiece extractor and llama.cpp do) gives back tokenizer.json's order. Types:
    added special tokens CONTROL, other added tokens USER_DEFINED, <0xXX> BYTE, the
    unk_token UNKNOWN, the rest NORMAL."""
    m = tok["model"]
    assert m["type"] == "BPE" and m.get("byte_fallback")
    ids = dict(m["vocab"])
    for a in tok.get("added_tokens", []):   # Gemma 3 adds one past its vocabulary
        ids.setdefault(a["content"], a["id"])
    n = max(ids.values()) + 1
    tokens = [None] * n
    for s, i in ids.items():
        tokens[i] = s
    assert all(t is not None for t in tokens), "SentencePiece vocabularies have no holes"
    types = [TOKEN_NORMAL] * n
    for i, t in enumerate(tokens):
        if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types[i] = TOKEN_BYTE
    if m.get("unk_token") in ids:
        types[ids[m["unk_token"]]] = TOKEN_UNKNOWN
    for a in tok.get("added_tokens", []):
        types[a["id"]] = TOKEN_CONTROL if a.get("special") else TOKEN_USER_DEFINED
    scores = [0.0] * n
    made = set()
    for r, x in enumerate(m["merges"]):
        a, b = x if isinstance(x, list) else x.split(" ", 1)
        i = ids[a + b]
        if i not in made:
            made.add(i)
            scores[i] = -float(r)
    kv = [("tokenizer.ggml.model", STRING, "llama"),
          ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
          ("tokenizer.ggml.scores", ARRAY, (FLOAT32, scores)),
          ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
          ("tokenizer.ggml.add_space_prefix", BOOL, bool(add_space_prefix))]
    pp = tok.get("post_processor") or {}
    if pp.get("type") == "TemplateProcessing" and "SpecialToken" in pp["single"][0]:
        kv.append(("tokenizer.ggml.bos_token_id", U32, pp["special_tokens"][pp["single"][0]["SpecialToken"]["id"]]["ids"][0]))
        kv.append(("tokenizer.ggml.add_bos_token", BOOL, True))
    else:
        kv.append(("tokenizer.ggml.add_bos_token", BOOL, False))
    for name in ("</s>", "<eos>"):
        if name in ids:
            kv.append(("tokenizer.ggml.eos_token_id", U32, ids[name]))
            break
    if m.get("unk_token") in ids:
        kv.append(("tokenizer.ggml.unknown_token_id", U32, ids[m["unk_token"]]))
    return kv


# ---------------------------------------------------------------------------
# GPT-2 and GPT-NeoX (convert_hf_to_gguf.py's GPT2Model / GPTNeoXModel)
# ---------------------------------------------------------------------------

LN_NAMES = {
    "gpt2": {"wte": "token_embd", "wpe": "position_embd", "ln_f": "output_norm", "lm_head": "output",
             "ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
             "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"},
    "gpt_neox": {"gpt_neox.embed_in": "token_embd", "gpt_neox.final_layer_norm": "output_norm",
                 "embed_out": "output", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
                 "attention.query_key_value": "attn_qkv", "attention.dense": "attn_output",
                 "mlp.dense_h_to_4h": "ffn_up", "mlp.dense_4h_to_h": "ffn_down"},
}


def convert_ln(cfg, tensors, wtype, path):
    """Write a GPT-2 or GPT-NeoX model (cfg and [(hf name, float32 array)] as
    families.make_weights gives them) as GGUF the converter's way: GPT-2's Conv1D weights
    transposed to [out, in], NeoX's per-head q/k/v rows (and bias) regrouped as q | k | v,
    the causal-mask buffers dropped; 2-D weights in wtype, 1-D ones F32. Returns the hf
    tensors as the file holds them (float64, in Hugging Face layout) for the reference."""
    mt = cfg["model_type"]
    neox = mt == "gpt_neox"
    D = cfg["hidden_size"] if neox else cfg["n_embd"]
    H = cfg["num_attention_heads"] if neox else cfg["n_head"]
    L = cfg["num_hidden_layers"] if neox else cfg["n_layer"]
    out, back = [], {}
    for name, a in tensors:
        a = np.asarray(a, np.float32)
        if name.endswith((".attn.bias", ".attn.masked_bias", "attention.bias", "attention.masked_bias",
                          "rotary_emb.inv_freq")):
            continue
        stem, kind = name.rsplit(".", 1)
        stem = stem[len("transformer."):] if stem.startswith("transformer.") else stem
        parts = stem.split(".")
        layer = None
        if not neox and parts[0] == "h":
            layer, stem = parts[1], ".".join(parts[2:])
        if neox and stem.startswith("gpt_neox.layers."):
            layer, stem = parts[2], ".".join(parts[3:])
        gname = LN_NAMES[mt][stem]
        full = ("blk.%s.%s.%s" % (layer, gname, kind)) if layer is not None else "%s.%s" % (gname, kind)
        conv1d = not neox and kind == "weight" and stem in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
        stored = a.T.copy() if conv1d else a
        if neox and stem == "attention.query_key_value":
            hd = D // H
            if kind == "weight":
                q = stored.reshape(H, 3, hd, D)
                stored = np.concatenate([q[:, 0].reshape(-1, D), q[:, 1].reshape(-1, D), q[:, 2].reshape(-1, D)])
            else:
                q = stored.reshape(H, 3, hd)
                stored = np.concatenate([q[:, 0].reshape(-1), q[:, 1].reshape(-1), q[:, 2].reshape(-1)])
        t = wtype if stored.ndim == 2 else F32
        raw = quantize(np.ascontiguousarray(stored, np.float32), t)
        out.append((full, t, list(stored.shape[::-1]), raw))
        deq = dequantize(raw, t, stored.size).reshape(stored.shape).astype(np.float64)
        if conv1d:
            deq = deq.T
        if neox and stem == "attention.query_key_value":   # back to the per-head interleave
            hd = D // H
            if kind == "weight":
                q3 = deq.reshape(3, H, hd, D).transpose(1, 0, 2, 3)
                deq = q3.reshape(3 * D, D)
            else:
                deq = deq.reshape(3, H, hd).transpose(1, 0, 2).reshape(-1)
        back[name] = deq
    arch = "gptneox" if neox else "gpt2"
    kv = [("general.architecture", STRING, arch), ("general.name", STRING, "difflens test"),
          ("general.file_type", U32, 1), (arch + ".block_count", U32, L),
          (arch + ".embedding_length", U32, D), (arch + ".attention.head_count", U32, H)]
    if neox:   # GPTNeoXModel.set_gguf_parameters
        kv += [(arch + ".context_length", U32, cfg["max_position_embeddings"]),
               (arch + ".feed_forward_length", U32, cfg["intermediate_size"]),
               (arch + ".rope.dimension_count", U32, int(cfg["rotary_pct"] * (D // H))),
               (arch + ".use_parallel_residual", BOOL, bool(cfg.get("use_parallel_residual", True))),
               (arch + ".attention.layer_norm_epsilon", FLOAT32, float(cfg["layer_norm_eps"]))]
    else:      # GPT2Model.set_gguf_parameters: the MLP width is always 4·n_embd there
        kv += [(arch + ".context_length", U32, cfg["n_ctx"]),
               (arch + ".feed_forward_length", U32, 4 * D),
               (arch + ".attention.layer_norm_epsilon", FLOAT32, float(cfg["layer_norm_epsilon"]))]
    write_gguf(path, kv, out)
    return back
