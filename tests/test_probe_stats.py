#!/usr/bin/python3
"""Every statistic probe writes, against brute force on small random models of all
three types: outlier top lists and their positions, histogram medians against exact
medians, float64 moments, channel counts; noise shares for every --rows rule from
the stored full maps; map selections against the full maps; logit quantization
against the numpy reference with fake quantization applied directly; and a
4096-token run that exercises the streaming path end to end."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402
import reference  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
TYPES = {"llama": dict(heads=4, kv_heads=2), "diff_transformer": dict(heads=2, kv_heads=1),
         "diffllama": dict(heads=4, kv_heads=2)}
WORST = {}


def note(key, value):
    WORST[key] = max(WORST.get(key, 0.0), value)


def probe(model, prompts, out, *extra, check=True):
    r = subprocess.run([PROBE, "--model", model, "--prompts", prompts, "--out", out, "--quiet", "--force",
                        *extra], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("probe failed: %s" % r.stderr)
    return r


def prompt_rows(T, rng, vocab=97):
    """Two prompts with every span kind; the second has two queries and targets."""
    toks = [0] + [int(x) for x in rng.integers(1, vocab, T - 1)]
    p0 = {"id": "a", "tokens": toks, "answer": [[4, 8]], "distractor": [[10, 12]],
          "query": [[T - 8, T - 6]], "target": [[T - 6, T - 3]], "depth": 0.1}
    toks1 = [0] + [int(x) for x in rng.integers(1, vocab, T - 3)]
    p1 = {"id": "b", "tokens": toks1, "answer": [[9, 12]], "query": [[3, 5], [T - 9, T - 7]],
          "target": [[5, 6], [T - 7, T - 5]], "depth": 0.9}
    return [p0, p1]


def score_at(r, mtype, l, head, mp, q, k):
    """Reference logit at a top_index position (head, map, query, key)."""
    S = r["scores"][l]
    if mtype == "llama":
        return S[head, q, k]
    if mtype == "diff_transformer":
        return S[mp * (S.shape[0] // 2) + head, q, k]
    return S[head + mp * (S.shape[0] // 2), q, k]


def hist_median(counts, edges):
    """The rule of docs/format.md: midpoint of the bin holding rank floor((n-1)/2)."""
    n = counts.sum()
    rank = (n - 1) // 2
    b = int(np.searchsorted(np.cumsum(counts), rank, side="right"))
    return 0.0 if b == 0 else 0.5 * (edges[b] + edges[b + 1])


def exact_median(v):
    return float(np.median(np.abs(v)))


class ProbeStatistics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="dfl_stats_")
        cls.rng = np.random.default_rng(11)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)
        print("\n  largest errors: " + " ".join("%s %.1e" % kv for kv in sorted(WORST.items())))

    def setup_case(self, mtype, T=40, layers=2, **kw):
        d = os.path.join(self.root, "%s-%d-%d" % (mtype, T, layers))
        if not os.path.exists(d):
            make_model.make_model(d, mtype, layers=layers, hidden=32, ffn=48, vocab=97, seed=5,
                                  max_pos=8192, **{**TYPES[mtype], **kw})
        rows = prompt_rows(T, self.rng)
        p = os.path.join(self.root, "p-%s-%d.jsonl" % (mtype, T))
        with open(p, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        return d, p, rows

    # ---------------------------------------------------------- outliers
    def test_outliers_against_brute_force(self):
        for mtype in TYPES:
            d, p, rows = self.setup_case(mtype)
            out = os.path.join(self.root, "o-%s.h5" % mtype)
            probe(d, p, out, "--topk", "30", "--alpha", "1.5")
            m = reference.load_model(d)
            with h5py.File(out, "r") as f:
                self.assertEqual(f.attrs["topk"], 30)
                for si, prompt in enumerate(rows):
                    s = f["samples/%06d" % si]
                    r = reference.forward(m, prompt["tokens"])
                    T = len(prompt["tokens"])
                    causal = np.tril(np.ones((T, T), bool))
                    edges = s["outliers/logits/hist"].attrs["edges"]
                    self.assertEqual(len(edges), s["outliers/logits/hist"].shape[1] + 1)
                    for l in range(m.L):
                        S = r["scores"][l][:, causal]                 # [maps, causal entries]
                        top = s["outliers/logits/top"][l]
                        idx = s["outliers/logits/top_index"][l]
                        want = np.sort(np.abs(S).ravel())[::-1][:30]
                        note("logit top (rel)", np.abs(top - want).max() / want[0])
                        self.assertLess(np.abs(top - want).max() / want[0], 1e-4)
                        for v, (h, mp, q, k) in zip(top, idx):
                            self.assertLessEqual(k, q)
                            self.assertAlmostEqual(abs(score_at(r, mtype, l, h, mp, q, k)), v, delta=1e-4 * want[0])
                        hist = s["outliers/logits/hist"][l]
                        self.assertEqual(int(hist.sum()), S.size)
                        med, ex = hist_median(hist, edges), exact_median(S)
                        note("logit median (rel)", abs(med / ex - 1))
                        self.assertLess(abs(med / ex - 1), 0.01)
                        mom = s["outliers/logits/moments"][l]
                        x = S.ravel()
                        want_m = [x.size, x.sum(), (x ** 2).sum(), (x ** 3).sum(), (x ** 4).sum(), np.abs(x).max()]
                        self.assertEqual(mom[0], x.size)
                        for j in range(1, 6):
                            scale = (np.abs(x) ** (j if j < 5 else 1)).sum() if j < 5 else want_m[5]
                            note("logit moments (rel)", abs(mom[j] - want_m[j]) / scale)
                            self.assertLess(abs(mom[j] - want_m[j]) / scale, 1e-5)
                        # hidden states
                        Hh = r["hidden"][l]                               # [T, D]
                        top = s["outliers/hidden/top"][l]
                        idx = s["outliers/hidden/top_index"][l]
                        want = np.sort(np.abs(Hh).ravel())[::-1][:30]
                        self.assertLess(np.abs(top - want).max() / want[0], 1e-4)
                        for v, (t, c) in zip(top, idx):
                            self.assertAlmostEqual(abs(Hh[t, c]), v, delta=1e-4 * want[0])
                        hist = s["outliers/hidden/hist"][l]
                        med, ex = hist_median(hist, s["outliers/hidden/hist"].attrs["edges"]), exact_median(Hh)
                        note("hidden median (rel)", abs(med / ex - 1))
                        self.assertLess(abs(med / ex - 1), 0.01)
                        mom = s["outliers/hidden/moments"][l]
                        self.assertEqual(mom[0], Hh.size)
                        self.assertLess(abs(mom[2] - (Hh ** 2).sum()) / (Hh ** 2).sum(), 1e-5)
                        self.assertLess(abs(mom[4] - (Hh ** 4).sum()) / (Hh ** 4).sum(), 1e-5)
                        cnt = s["outliers/hidden/channel_count"][l]
                        want_c = (np.abs(Hh) >= 1.5).sum(axis=0)
                        near = np.abs(np.abs(Hh) - 1.5) < 1e-5                 # f32 vs f64 at the edge
                        self.assertLessEqual(np.abs(cnt - want_c).max(), near.sum())
                    self.assertEqual(s["outliers/hidden/channel_count"].attrs["alpha"], 1.5)

    def test_topk_longer_than_the_data_is_padded(self):
        d, _, _ = self.setup_case("llama", T=40, layers=1)
        p = os.path.join(self.root, "short.jsonl")
        with open(p, "w") as f:
            f.write(json.dumps({"tokens": [0, 5, 6, 7, 8, 9]}) + "\n")
        out = os.path.join(self.root, "pad.h5")
        probe(d, p, out, "--topk", "200")
        with h5py.File(out, "r") as f:
            s = f["samples/000000"]
            n = 4 * 6 * 7 // 2                                            # heads × causal entries
            top = s["outliers/logits/top"][0]
            self.assertTrue(np.all(np.isfinite(top[:n])))
            self.assertTrue(np.all(np.diff(top[:n]) <= 0))
            self.assertTrue(np.all(np.isnan(top[n:])))
            self.assertTrue(np.all(s["outliers/logits/top_index"][0, n:] == -1))
            self.assertTrue(np.all(np.isnan(s["outliers/hidden/top"][0, 6 * 32:])))

    # ------------------------------------------------------------- noise
    def test_rows_rules_from_full_maps(self):
        for mtype in TYPES:
            d, p, rows = self.setup_case(mtype)
            for rule in ("last", "query", "target", "all"):
                out = os.path.join(self.root, "rows-%s-%s.h5" % (mtype, rule))
                probe(d, p, out, "--rows", rule, "--maps", "all", "--map-dtype", "f32")
                with h5py.File(out, "r") as f:
                    self.assertEqual(f.attrs["rows"], rule)
                    for si, prompt in enumerate(rows):
                        s = f["samples/%06d" % si]
                        T = len(prompt["tokens"])
                        if rule == "last":
                            want_rows = [prompt["query"][-1][1] - 1]
                        elif rule == "query":
                            want_rows = sorted({t for a, b in prompt["query"] for t in range(a, b)})
                        elif rule == "target":
                            want_rows = sorted({t - 1 for a, b in prompt["target"] for t in range(a, b)})
                        else:
                            want_rows = list(range(T))
                        self.assertEqual(list(s["noise/rows"][:]), want_rows)
                        seg = s["segments"][:]
                        masks = reference.share_masks(seg).astype(np.float64)
                        names = ["map1", "map2", "diff"] if mtype != "llama" else ["map1"]
                        for mi, name in enumerate(names):
                            A = s["attn/" + name][:][:, :, want_rows, :].astype(np.float64)  # [L, H, R, T]
                            part = A @ masks.T
                            tot = A.sum(axis=-1, keepdims=True)
                            shares = (part / tot).mean(axis=2)
                            err = np.abs(s["noise/shares"][mi] - shares).max()
                            note("shares from maps", err)
                            self.assertLess(err, 1e-4)
                            ab = np.abs(A) @ masks.T
                            err = np.abs(s["noise/shares_abs"][mi] - (ab / ab.sum(-1, keepdims=True)).mean(2)).max()
                            self.assertLess(err, 1e-4)
                            self.assertLess(np.abs(s["noise/raw"][mi] - part.mean(axis=2)).max(), 1e-4)
                        sh = s["noise/shares"][:]
                        self.assertLess(np.abs(sh.sum(axis=-1) - 1).max(), 1e-3)

    # -------------------------------------------------------- selection
    def test_map_selection_matches_full_maps(self):
        d, p, rows = self.setup_case("diff_transformer", layers=3)
        full = os.path.join(self.root, "full.h5")
        sel = os.path.join(self.root, "sel.h5")
        probe(d, p, full, "--maps", "all", "--map-dtype", "f32", "--rows", "query")
        probe(d, p, sel, "--maps", "layers=0,2;heads=1;rows=analysis", "--map-dtype", "f32", "--rows", "query")
        with h5py.File(full, "r") as F, h5py.File(sel, "r") as S:
            for si in range(len(rows)):
                a, b = F["samples/%06d" % si], S["samples/%06d" % si]
                R = b["noise/rows"][:]
                self.assertEqual(list(b["attn/layers"][:]), [0, 2])
                self.assertEqual(list(b["attn/heads"][:]), [1])
                self.assertEqual(list(b["attn/rows"][:]), list(R))
                for name in ("map1", "map2", "diff"):
                    want = a["attn/" + name][:][[0, 2]][:, [1]][:, :, R, :]
                    self.assertEqual(b["attn/" + name].shape, want.shape)
                    self.assertEqual(np.abs(b["attn/" + name][:] - want).max(), 0.0)
                    self.assertEqual([dd.label for dd in b["attn/" + name].dims], ["layer", "head", "query", "key"])
                # statistics do not depend on the selection
                self.assertEqual(np.abs(a["noise/shares"][:] - b["noise/shares"][:]).max(), 0.0)
        r = probe(d, p, os.path.join(self.root, "bad.h5"), "--maps", "layers=7", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("layer 7 is out of range", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.root, "bad.h5")))
        for spec in ("layers=1-", "heads=x", "rows=3;rows=4", "cols=1", "layers"):
            r = probe(d, p, os.path.join(self.root, "bad.h5"), "--maps", spec, check=False)
            self.assertEqual(r.returncode, 2, spec)
            self.assertIn("--maps", r.stderr)

    # ----------------------------------------------------- quantization
    def test_logit_quantization_against_formula(self):
        for mtype in TYPES:
            for gran in ("tensor", "head", "row"):
                d, p, rows = self.setup_case(mtype)
                out = os.path.join(self.root, "q-%s-%s.h5" % (mtype, gran))
                probe(d, p, out, "--quantize-logits", "4:" + gran, "--save-logits", "--maps", "all",
                      "--map-dtype", "f32")
                m = reference.load_model(d)
                with h5py.File(out, "r") as f:
                    self.assertEqual(f.attrs["logit_quant_bits"], 4)
                    self.assertEqual(f.attrs["logit_quant_granularity"], gran)
                    for si, prompt in enumerate(rows):
                        s = f["samples/%06d" % si]
                        r = reference.forward(m, prompt["tokens"], quant=(4, gran))
                        plain = reference.forward(m, prompt["tokens"])
                        lg = s["logits"][:]
                        err = np.abs(lg - r["logits"]).max() / np.abs(r["logits"]).max()
                        moved = np.abs(plain["logits"] - r["logits"]).max() / np.abs(r["logits"]).max()
                        note("quantized logits (rel)", err)
                        self.assertLess(err, 1e-4, "%s %s" % (mtype, gran))
                        self.assertGreater(moved, 100 * err)            # the intervention did something
                        err = np.abs(s["attn/map1"][:] - r["map1"]).max()
                        self.assertLess(err, 1e-4)
        r = probe(d, p, out, "--quantize-logits", "1", check=False)
        self.assertEqual(r.returncode, 2)
        r = probe(d, p, out, "--quantize-logits", "8:col", check=False)
        self.assertEqual(r.returncode, 2)

    # -------------------------------------------------------- streaming
    def test_future_tiles_are_not_stored(self):
        """Maps are tiled 32 rows x 512 keys; tiles wholly above the diagonal are never written
        (no space, nothing to inflate) and read back as the masked zeros."""
        T = 1100
        d, _, _ = self.setup_case("diff_transformer", T=8)
        # 24 heads: blocks of 1024 / 24 = 42 rows end inside tiles of 32 rows
        d24 = os.path.join(self.root, "llama-24-heads")
        make_model.make_model(d24, "llama", layers=1, hidden=48, heads=24, ffn=48, vocab=97, seed=5, max_pos=8192)
        toks = [0] + [int(x) for x in self.rng.integers(1, 90, T - 1)]
        p = os.path.join(self.root, "tiles.jsonl")
        with open(p, "w") as f:
            f.write(json.dumps({"tokens": toks, "answer": [[10, 12]], "query": [[T - 4, T - 2]],
                                "target": [[T - 2, T]]}) + "\n")
        # a tile is stored when its first key is visible to its last row
        want = sum(1 for r0 in range(0, T, 32) for k0 in range(0, T, 512) if k0 <= min(r0 + 31, T - 1))
        self.assertLess(want, ((T + 31) // 32) * ((T + 511) // 512))
        for model, names in ((d, ("map1", "map2", "diff")), (d24, ("map1",))):
            out = os.path.join(self.root, "tiles.h5")
            probe(model, p, out, "--maps", "all", "--rows", "all", "--force")
            with h5py.File(out, "r") as f:
                m = f["samples/000000/attn/map1"]
                L, H = m.shape[0], m.shape[1]
                self.assertEqual(m.chunks, (1, 1, 32, 512))
                for name in names:
                    self.assertEqual(f["samples/000000/attn/" + name].id.get_num_chunks(), L * H * want)
                a = m[0, H - 1].astype(np.float64)
                self.assertEqual(np.abs(np.triu(a, 1)).max(), 0.0)
                self.assertLess(np.abs(a.sum(axis=1) - 1).max(), 2e-3)

    def test_4096_tokens_stream(self):
        d = os.path.join(self.root, "long")
        make_model.make_model(d, "diff_transformer", layers=1, hidden=16, heads=1, ffn=16, vocab=50,
                              seed=2, max_pos=8192)
        T = 4096
        toks = [0] + [int(x) for x in self.rng.integers(1, 50, T - 1)]
        p = os.path.join(self.root, "long.jsonl")
        with open(p, "w") as f:
            f.write(json.dumps({"tokens": toks, "answer": [[100, 104]], "query": [[T - 5, T - 3]],
                                "target": [[T - 3, T]]}) + "\n")
        out = os.path.join(self.root, "long.h5")
        probe(d, p, out, "--maps", "layers=0;heads=0;rows=analysis")
        with h5py.File(out, "r") as f:
            s = f["samples/000000"]
            self.assertEqual(s["attn/diff"].shape, (1, 1, 1, T))
            self.assertEqual(s["attn/diff"].dtype, np.float16)
            self.assertEqual(s["attn/diff"].chunks, (1, 1, 1, 512))  # one row: 512-key tiles
            self.assertEqual(s["attn/diff"].compression, "gzip")
            self.assertEqual(int(s["outliers/logits/hist"][0].sum()), 2 * T * (T + 1) // 2)
            row = s["attn/map1"][0, 0, 0, :].astype(np.float64)
            self.assertAlmostEqual(row.sum(), 1.0, delta=2e-3)
            self.assertEqual(np.abs(row[T - 3:]).max(), 0.0)                 # masked future keys
            self.assertLess(abs(s["noise/shares"][0].sum() - 1), 1e-3)
            self.assertEqual(s["nll"].shape, (T,))
            self.assertIn("target_correct", s)


if __name__ == "__main__":
    unittest.main(verbosity=1)
