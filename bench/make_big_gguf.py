#!/usr/bin/python3
"""make_big_gguf.py — a full-size GGUF model of a published llama shape for the
benchmarks (bench/gguf.sh), streaming: every 2-D weight in one ggml type (default
Q4_K), norms F32, written tensor by tensor from a pool of rows quantized once per width
(values repeat: a benchmark model, not a test fixture). RoPE scaling is left out (GGUF
keeps llama3 frequency factors as a tensor that difflens refuses); the speed and memory
of the forward pass do not depend on it.

    make_big_gguf.py OUT.gguf --shape Llama-3.2-1B [--type Q4_K] [--seed 1]
"""
import argparse
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ref"))
import gguf  # noqa: E402
import make_model  # noqa: E402

POOL_ROWS = 256


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="Llama-3.2-1B")
    ap.add_argument("--type", default="Q4_K")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    cfg = dict(make_model.PUBLISHED[a.shape][1])
    cfg.pop("rope_scaling", None)
    t = gguf.BY_NAME[a.type]
    rng = np.random.default_rng(a.seed)
    D, F, V, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or D // H
    names = [("token_embd.weight", (V, D))]
    for l in range(L):
        p = "blk.%d." % l
        names += [(p + "attn_norm.weight", (D,)), (p + "ffn_norm.weight", (D,)), (p + "attn_q.weight", (H * hd, D)),
                  (p + "attn_k.weight", (Hkv * hd, D)), (p + "attn_v.weight", (Hkv * hd, D)),
                  (p + "attn_output.weight", (D, H * hd)), (p + "ffn_gate.weight", (F, D)),
                  (p + "ffn_up.weight", (F, D)), (p + "ffn_down.weight", (D, F))]
    names.append(("output_norm.weight", (D,)))
    if not cfg.get("tie_word_embeddings"):
        names.append(("output.weight", (V, D)))
    pools = {}

    def pool(cols):
        if cols not in pools:
            w = (rng.standard_normal((POOL_ROWS, cols)) / np.sqrt(cols)).astype(np.float32)
            pools[cols] = gguf.quantize(w, t)
        return pools[cols]

    kvs = gguf.config_kvs(cfg)
    infos, off = [], 0
    for n, shape in names:
        ty = t if len(shape) == 2 else gguf.F32
        _, qk, bs = gguf.TYPES[ty]
        size = (shape[-1] // qk) * bs * (shape[0] if len(shape) == 2 else 1)
        infos.append((n, ty, list(shape[::-1]), size, off))
        off += (size + 31) // 32 * 32
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kvs)))
        for k, vt, v in kvs:
            head += gguf._str(k) + struct.pack("<I", vt) + gguf._value(vt, v)
        for n, ty, ne, size, o in infos:
            head += gguf._str(n) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
            head += struct.pack("<IQ", ty, o)
        head += b"\0" * (-len(head) % 32)
        f.write(head)
        for (n, ty, ne, size, o), (_, shape) in zip(infos, names):
            if ty == gguf.F32:
                f.write((1 + 0.1 * rng.standard_normal(shape[0])).astype("<f4").tobytes())
            else:
                p = pool(shape[1])
                rows, prow = shape[0], POOL_ROWS
                for r0 in range(0, rows, prow):
                    k = min(prow, rows - r0)
                    f.write(p[:len(p) * k // prow])
            f.write(b"\0" * (-size % 32))
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
