#!/usr/bin/python3
"""Writes the binary seed inputs of the safetensors fuzzer (kept out of git: no
binary fixtures). Usage: make_seeds.py CORPUS_DIR"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import make_model  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
make_model.write_safetensors(os.path.join(out, "f32.safetensors"),
                             [("a", rng.normal(size=(2, 3))), ("b", rng.normal(size=(4,)))], "f32")
make_model.write_safetensors(os.path.join(out, "f16.safetensors"),
                             [("w", rng.normal(size=(1, 3, 1))), ("s", np.float64(2.5))], "f16",
                             metadata={"format": "pt"})
make_model.write_safetensors(os.path.join(out, "bf16.safetensors"),
                             [("x", rng.normal(size=(2, 2))), ("empty", np.zeros((0, 3)))], "bf16")
