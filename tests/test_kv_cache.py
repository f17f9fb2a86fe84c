#!/usr/bin/python3
"""test_kv_cache.py — KV-cached passes against full forward passes, every model type.

For each case a random model (tests/ref/make_model.py, the published configs for Motif)
runs through tests/kv_cache_harness.c: the prompt appended to a KV cache at once, then
greedy steps of one token, then three tokens at once; after each append the new rows'
logits and maps (every layer, head and map, over all keys) must equal a full
dfl_forward over the sequence so far within test_reference.py's tolerances (the check
a cached eager attention with stale or misplaced keys fails). Sliding windows shorter
than the sequence, learned positions (GPT-2), longrope past its original context,
soft-caps, q/k norms, GQA and DIFF V2's per-token λ are among the cases. The harness
also checks the cache's error paths.

Run from the repo root:  /usr/bin/python3 tests/test_kv_cache.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
TOL_LOGITS_REL = 1e-4  # as tests/test_reference.py
TOL_MAP = 1e-5
VOCAB = 97

# name, model type (or "published"), keywords, dtype, prompt length, greedy steps
CASES = [
    ("llama-gqa-bf16", "llama", dict(heads=4, kv_heads=2), "bf16", 11, 6),
    ("llama-multiblock-f32", "llama", dict(heads=8, kv_heads=2), "f32", 150, 3),
    ("qwen2-window-from-layer1", "qwen2", dict(heads=4, kv_heads=2, sliding_window=6, max_window_layers=1),
     "f32", 9, 6),
    ("qwen3-qknorm", "qwen3", dict(heads=4, kv_heads=2, head_dim=24), "bf16", 9, 4),
    ("mistral-window", "mistral", dict(heads=4, kv_heads=2, sliding_window=7), "f16", 10, 6),
    ("difft-gqa-flash", "diff_transformer", dict(heads=4, kv_heads=2, kv_pairing="flash"), "f32", 12, 5),
    ("diffllama-gqa", "diffllama", dict(heads=4, kv_heads=2), "bf16", 10, 5),
    ("diff-v2", "diff_transformer_v2", dict(heads=4, kv_heads=2), "f32", 10, 5),
    ("gpt2-learned-positions", "gpt2", dict(heads=4), "f32", 10, 5),
    ("neox", "gpt_neox", dict(heads=4), "f32", 10, 5),
    ("gemma2-caps-window", "gemma2",
     dict(heads=4, family_keys={"num_key_value_heads": 2, "attn_logit_softcapping": 4.0,
                                "final_logit_softcapping": 3.0, "sliding_window": 5,
                                "query_pre_attn_scalar": 8}), "f32", 9, 5),
    ("gemma3-local-rope", "gemma3_text",
     dict(heads=4, family_keys={"num_key_value_heads": 1, "sliding_window": 6, "sliding_window_pattern": 3,
                                "rope_local_base_freq": 20.0}), "f32", 9, 5),
    ("olmo2", "olmo2", dict(heads=4, family_keys={"num_key_value_heads": 2}), "f32", 9, 4),
    # longrope: the original context is 32 — all long factors, and all short ones
    ("phi3-longrope-long", "phi3", dict(heads=4, family_keys={"num_key_value_heads": 2, "sliding_window": 9}),
     "f32", 34, 4),
    ("phi3-longrope-short", "phi3", dict(heads=4, family_keys={"num_key_value_heads": 2}), "f32", 12, 4),
    ("motif-v1", "published", dict(name="Motif-2.6B", sizes=dict(heads=4, head_dim=8)), "f32", 10, 4),
    ("motif-gda", "published", dict(name="Motif-2-12.7B-Base", sizes=dict(heads=10, head_dim=8)), "f32", 10, 4),
]


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "--eval", "print-%: ; @echo $($*)",
                        "print-" + name], capture_output=True, text=True, check=True)
    return r.stdout.split()


class KVCacheAgainstFullForward(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-kv-")
        lib = os.path.join(BUILD, "libdifflens.a")
        subprocess.run(["make", "-s", "-C", ROOT, lib], check=True)
        cls.exe = os.path.join(cls.tmp, "kv_cache_harness")
        cmd = (make_var("CC") + make_var("CPPFLAGS") + make_var("CFLAGS") +
               [os.path.join(HERE, "kv_cache_harness.c"), lib, "-o", cls.exe] + make_var("LDFLAGS") +
               make_var("LDLIBS"))
        cmd = [a if not a.startswith("-I") or os.path.isabs(a[2:]) else "-I" + os.path.join(ROOT, a[2:])
               for a in cmd]
        subprocess.run(cmd, check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_case(self, idx, name, mtype, kw, dtype, T0, steps):
        d = os.path.join(self.tmp, name)
        if mtype == "published":
            cfg, shards = make_model.published_config(kw["name"], layers=2, vocab=VOCAB, **kw["sizes"])
            make_model.write_model(d, cfg, make_model.make_weights(cfg, seed=300 + idx, hub=True), dtype, shards,
                                   hub=True)
        else:
            make_model.make_model(d, mtype, layers=2, hidden=64, ffn=96, vocab=VOCAB, dtype=dtype,
                                  seed=300 + idx, **kw)
        r = subprocess.run([self.exe, d, str(T0), str(steps), str(7 + idx)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        self.assertTrue(res["errors_ok"], res)
        self.assertEqual(res["rows"], T0 + steps + 3)
        self.assertEqual(len(res["generated"]), steps)
        self.assertLess(res["logits_rel"], TOL_LOGITS_REL, "%s: %s" % (name, res))
        self.assertLess(res["maps"], TOL_MAP, "%s: %s" % (name, res))
        print("%-26s logits rel %.2g  maps %.2g  %d B/token" % (name, res["logits_rel"], res["maps"],
                                                               res["bytes_per_token"]), file=sys.stderr)


def _make(idx, case):
    def test(self):
        self.run_case(idx, *case)
    test.__name__ = "test_" + case[0].replace("-", "_")
    return test


for _i, _c in enumerate(CASES):
    setattr(KVCacheAgainstFullForward, "test_" + _c[0].replace("-", "_"), _make(_i, _c))

if __name__ == "__main__":
    unittest.main()
