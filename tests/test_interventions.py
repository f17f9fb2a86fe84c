#!/usr/bin/python3
"""test_interventions.py — bin/probe's interventions (--intervene, --patch-sweep,
docs/probe.md "Interventions") against the float64 reference's (tests/ref/reference.py
Interventions) on tiny random models of five types (llama GQA, diff_transformer,
diffllama, gpt2, DIFF V2): head ablation (zero, mean, resample), λ override (value,
scale), map choice, attention knockout, patching at resid_pre, attn_out, mlp_out and
one head, and a layer × position patch sweep cell by cell; and the properties that
hold exactly: patching a prompt with itself changes nothing (bit for bit), zero-
ablating every head of a layer equals a model whose output projection of that layer
is zero (bit for bit), λ := the model's own λ changes nothing (bit for bit), and the
reference's λ within float rounding.

Run from the repo root:  /usr/bin/python3 tests/test_interventions.py   (BIN=bin by default)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402
import reference  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")

TOL_LOGITS_REL = 1e-4  # as tests/test_reference.py
TOL_METRIC = 1e-4
VOCAB, HIDDEN, FFN, LAYERS, T = 97, 64, 96, 2, 14

CASES = [
    ("llama-gqa", "llama", dict(heads=4, kv_heads=2)),
    ("difft", "diff_transformer", dict(heads=2)),
    ("diffllama", "diffllama", dict(heads=4)),
    ("gpt2", "gpt2", dict(heads=4)),
    ("diffv2", "diff_transformer_v2", dict(heads=4, kv_heads=2)),
]
DIFF = ("diff_transformer", "diffllama", "diff_transformer_v2")

ANSWER, QUERY, TARGET = (3, 6), (8, 10), (11, 13)

# (spec, diff only)
SPECS = [
    ("ablate:layer=1,head=1,mode=zero", False),
    ("ablate:layer=0,mode=mean,pos=query", False),
    ("ablate:layer=1,head=0,mode=resample,source=corrupt", False),
    ("knockout:layer=0-1,from=target+last,to=answer", False),
    ("knockout:layer=1,from=query,to=answer+query", False),  # the query rows keep their own key
    ("patch:site=resid_pre,layer=1,pos=answer,source=clean", False),
    ("patch:site=attn_out,layer=0,pos=3-6,source=clean", False),
    ("patch:site=mlp_out,layer=1,source=clean", False),
    ("patch:site=head,layer=1,head=1,source=clean", False),
    ("lambda:layer=all,value=0", True),
    ("lambda:layer=1,head=0,scale=2", True),
    ("map:layer=0,use=map1", True),
    ("map:layer=1,head=1,use=map2", True),
]


def prompts():
    rng = np.random.default_rng(5)
    clean = [0] + [int(x) for x in rng.integers(1, VOCAB, T - 1)]
    corrupt = list(clean)
    corrupt[4] = clean[4] % (VOCAB - 1) + 1
    spans = {"answer": [list(ANSWER)], "query": [list(QUERY)], "target": [list(TARGET)]}
    return [dict(id="clean", tokens=clean, **spans), dict(id="corrupt", tokens=corrupt, **spans)]


def mask(*ranges, last=False):
    m = np.zeros(T, bool)
    for a, b in ranges:
        m[a:b] = True
    if last:
        m[T - 1] = True
    return m


def ref_iv(spec, recs, mean):
    """The reference's Interventions for one spec string (written from the spec's
    meaning, not from probe's parser). recs: recorded runs by prompt id."""
    kind, rest = spec.split(":", 1)
    kv = dict(x.split("=", 1) for x in rest.split(","))
    lay = kv.get("layer", "all")
    layers = range(LAYERS) if lay == "all" else (
        range(int(lay.split("-")[0]), int(lay.split("-")[1]) + 1) if "-" in lay else [int(lay)])
    head = None if kv.get("head", "all") == "all" else int(kv["head"])
    spans = {"answer": mask(ANSWER), "query": mask(QUERY), "3-6": mask((3, 7)), "all": None,
             "target+last": mask(TARGET, last=True), "answer+query": mask(ANSWER, QUERY)}
    pos = spans[kv.get("pos", "all")]
    iv = reference.Interventions()
    for l in layers:
        if kind == "ablate":
            src = mean if kv["mode"] == "mean" else recs.get(kv.get("source"))
            iv.ablate.append((l, head, kv["mode"], src, pos))
        elif kind == "lambda":
            which = "scale" if "scale" in kv else "value"
            iv.lam.append((l, head, which, float(kv[which])))
        elif kind == "map":
            iv.maps.append((l, head, int(kv["use"][-1])))
        elif kind == "knockout":
            iv.knockout.append((l, spans[kv["from"]], spans[kv["to"]]))
        elif kind == "patch":
            iv.patch.append((kv["site"], l, head, pos, recs[kv["source"]]))
    return iv


def target_metrics(logits, tokens):
    rows = [p - 1 for p in range(*TARGET)]
    lg = np.asarray(logits, np.float64)
    mx = lg.max(1, keepdims=True)
    lp = lg - mx - np.log(np.exp(lg - mx).sum(1, keepdims=True))
    tok = [tokens[r + 1] for r in rows]
    return dict(target_nll=-np.mean([lp[r, t] for r, t in zip(rows, tok)]),
                target_prob=np.mean([np.exp(lp[r, t]) for r, t in zip(rows, tok)]),
                target_logit=np.mean([lg[r, t] for r, t in zip(rows, tok)]))


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


class Interventions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-iv-")
        cls.pfile = os.path.join(cls.tmp, "prompts.jsonl")
        cls.prompts = prompts()
        with open(cls.pfile, "w") as f:
            for p in cls.prompts:
                f.write(json.dumps(p) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def model(self, name, mtype, kw, seed=11):
        d = os.path.join(self.tmp, name)
        if not os.path.exists(d):
            make_model.make_model(d, mtype, layers=LAYERS, hidden=HIDDEN, ffn=FFN, vocab=VOCAB, seed=seed, **kw)
        return d

    def probe(self, mdir, out, *flags):
        cmd = [PROBE, "--model", mdir, "--prompts", self.pfile, "--out", out, "--force", "--quiet"] + list(flags)
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return h5py.File(out, "r")

    def check_case(self, name, mtype, kw):
        mdir = self.model(name, mtype, kw)
        m = reference.load_model(mdir)
        specs = [s for s, diff in SPECS if not diff or mtype in DIFF]
        flags = ["--save-logits", "--patch-sweep", "site=resid_pre,source=clean,metric=target_nll"]
        for s in specs:
            flags += ["--intervene", s]
        out = os.path.join(self.tmp, name + ".h5")
        recs = {}
        for p in self.prompts:
            iv = reference.Interventions()
            reference.forward(m, p["tokens"], iv=iv)
            recs[p["id"]] = iv
        # mean head outputs over every position of both prompts
        mean = [np.concatenate([recs[p["id"]].record["head"][l] for p in self.prompts]).mean(0)
                for l in range(LAYERS)]
        worst = 0.0
        with self.probe(mdir, out, *flags) as f:
            root = json.loads(f.attrs["interventions"])
            self.assertEqual(len(root["interventions"]), len(specs))
            for si, p in enumerate(self.prompts):
                g = f["samples/%06d" % si]
                names = [x.decode() if isinstance(x, bytes) else x for x in g["effects/names"][()]]
                self.assertEqual(names[0], "none")
                self.assertEqual(len(names), 1 + len(specs))
                lg = g["effects/logits"][()]
                np.testing.assert_array_equal(lg[0], g["logits"][()])  # "none" is the unmodified run
                for k, spec in enumerate([None] + specs):
                    iv = reference.Interventions() if spec is None else ref_iv(spec, recs, mean)
                    r = reference.forward(m, p["tokens"], iv=iv)["logits"]
                    e = rel(lg[k], r)
                    worst = max(worst, e)
                    self.assertLess(e, TOL_LOGITS_REL, "%s %s %s" % (name, p["id"], spec))
                    want = target_metrics(r, p["tokens"])
                    for key, v in want.items():
                        self.assertAlmostEqual(float(g["effects/" + key][k]), v, delta=TOL_METRIC * max(1, abs(v)),
                                               msg="%s %s %s %s" % (name, p["id"], spec, key))
                # self-patch: the clean prompt patched from itself is its own run, bit for bit
                if p["id"] == "clean":
                    for k, spec in enumerate(specs, 1):
                        if "source=clean" in spec:
                            np.testing.assert_array_equal(lg[k], lg[0], spec)
            # the sweep, on the corrupted prompt, cell by cell in the reference
            g = f["samples/000001/patch"]
            self.assertNotIn("patch", f["samples/000000"])
            self.assertEqual(g.attrs["site"], "resid_pre")
            self.assertEqual(g.attrs["source"], "clean")
            np.testing.assert_array_equal(g["layers"][()], np.arange(LAYERS))
            np.testing.assert_array_equal(g["positions"][()], np.arange(T))
            corrupt = self.prompts[1]["tokens"]
            clean = target_metrics(reference.forward(m, self.prompts[0]["tokens"])["logits"], corrupt)["target_nll"]
            corr = target_metrics(reference.forward(m, corrupt)["logits"], corrupt)["target_nll"]
            self.assertAlmostEqual(float(g["clean"][()]), clean, delta=TOL_METRIC * max(1, clean))
            self.assertAlmostEqual(float(g["corrupted"][()]), corr, delta=TOL_METRIC * max(1, corr))
            patched = g["patched"][()]
            for l in range(LAYERS):
                for t in range(T):
                    iv = reference.Interventions(patch=[("resid_pre", l, None, mask((t, t + 1)), recs["clean"])])
                    v = target_metrics(reference.forward(m, corrupt, iv=iv)["logits"], corrupt)["target_nll"]
                    self.assertAlmostEqual(float(patched[l, t]), v, delta=TOL_METRIC * max(1, v),
                                           msg="%s cell %d,%d" % (name, l, t))
            eff = (patched.astype(np.float64) - g["corrupted"][()]) / (g["clean"][()] - g["corrupted"][()])
            np.testing.assert_allclose(g["effect"][()], eff, rtol=1e-5, atol=1e-6)
            # patching layer 0 before the corrupted token, or after the last metric row: the corrupted run exactly
            self.assertEqual(float(patched[0, 0]), float(g["corrupted"][()]))
            self.assertEqual(float(patched[0, T - 1]), float(g["corrupted"][()]))
            # and at the corrupted token in layer 0 (the embedding): the clean run
            self.assertAlmostEqual(float(patched[0, 4]), float(g["clean"][()]), delta=1e-5)
        print("%-10s %2d interventions + sweep, logits rel error %.2e" % (name, len(specs), worst))

    def test_zero_ablation_of_every_head_is_no_attention(self):
        """ablate:layer=1,mode=zero equals a model whose layer-1 output projection is 0."""
        for name, mtype, kw, o_proj in [("llama-gqa", "llama", CASES[0][2], "model.layers.1.self_attn.o_proj.weight"),
                                        ("difft", "diff_transformer", CASES[1][2],
                                         "model.layers.1.self_attn.out_proj.weight")]:
            mdir = self.model(name, mtype, kw)
            cut = os.path.join(self.tmp, name + "-no-attn1")
            with open(os.path.join(mdir, "config.json")) as fh:
                cfg = json.load(fh)
            tensors = [(n, np.zeros_like(a) if n == o_proj else a)
                       for n, a in make_model.make_weights(cfg, seed=11)]
            self.assertIn(o_proj, [n for n, _ in tensors])
            make_model.write_model(cut, cfg, tensors)
            with self.probe(mdir, os.path.join(self.tmp, name + "-abl.h5"), "--save-logits", "--intervene",
                            "ablate:layer=1,mode=zero") as a, \
                    self.probe(cut, os.path.join(self.tmp, name + "-cut.h5"), "--save-logits") as b:
                for si in range(2):
                    lg = a["samples/%06d/effects/logits" % si][()]
                    np.testing.assert_array_equal(lg[1], b["samples/%06d/logits" % si][()], name)
                    self.assertFalse(np.array_equal(lg[1], lg[0]))

    def test_lambda_override_is_the_models_lambda(self):
        """λ := the model's λ (the dump's /model/lambda, f32) changes nothing bit for bit;
        λ := the reference's float64 λ matches within float rounding."""
        for name, mtype, kw in [c for c in CASES if c[1] in ("diff_transformer", "diffllama")]:
            mdir = self.model(name, mtype, kw)
            m = reference.load_model(mdir)
            with self.probe(mdir, os.path.join(self.tmp, name + "-l0.h5")) as f:
                lam32 = f["model/lambda"][()]
            lam64 = [reference._lambda(m, "model.layers.%d.self_attn." % l, l)[0] for l in range(LAYERS)]
            np.testing.assert_allclose(lam32, lam64, rtol=1e-6)
            flags = ["--save-logits"]
            for l in range(LAYERS):
                flags += ["--intervene", "lambda:layer=%d,value=%.9g" % (l, lam32[l])]
            flags += ["--intervene", "lambda:layer=0,value=%r" % lam64[0]]
            with self.probe(mdir, os.path.join(self.tmp, name + "-l1.h5"), *flags) as f:
                lg = f["samples/000000/effects/logits"][()]
                for k in range(1, LAYERS + 1):
                    np.testing.assert_array_equal(lg[k], lg[0], name)
                self.assertLess(rel(lg[LAYERS + 1], lg[0].astype(np.float64)), 1e-6)

    def test_apply_changes_the_main_pass(self):
        """--apply: the main pass (logits, nll, maps) is the modified model's, against the
        reference; effects/ entry none is that pass."""
        mdir = self.model("difft", "diff_transformer", CASES[1][2])
        m = reference.load_model(mdir)
        with self.probe(mdir, os.path.join(self.tmp, "apply.h5"), "--save-logits", "--maps", "all",
                        "--apply", "lambda:layer=all,value=0", "--apply", "ablate:layer=1,head=0,mode=zero",
                        "--intervene", "lambda:layer=1,scale=2") as f:
            self.assertEqual(json.loads(f.attrs["interventions"])["applied"],
                             ["lambda:layer=all,head=all,value=0", "ablate:layer=1,head=0,mode=zero,pos=all"])
            for si, p in enumerate(self.prompts):
                g = f["samples/%06d" % si]
                iv = reference.Interventions(lam=[(l, None, "value", 0.0) for l in range(LAYERS)],
                                             ablate=[(1, 0, "zero", None, None)])
                r = reference.forward(m, p["tokens"], iv=iv)
                self.assertLess(rel(g["logits"][()], r["logits"]), TOL_LOGITS_REL)
                np.testing.assert_allclose(g["attn/diff"][()], r["map1"], atol=1e-3)  # λ = 0: diff is map1
                np.testing.assert_array_equal(g["effects/logits"][0], g["logits"][()])
                iv.lam.append((1, None, "scale", 2.0))   # on top of the applied ones: 0 · 2
                r2 = reference.forward(m, p["tokens"], iv=iv)
                self.assertLess(rel(g["effects/logits"][1], r2["logits"]), TOL_LOGITS_REL)
        r = subprocess.run([PROBE, "--model", mdir, "--prompts", self.pfile, "--out", os.path.join(self.tmp, "x.h5"),
                            "--force", "--apply", "knockout:layer=0,from=last,to=answer"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--apply takes", r.stderr)
        # generation's one-row cached steps are not what the hooks index: refused
        r = subprocess.run([PROBE, "--model", mdir, "--prompts", self.pfile, "--out", os.path.join(self.tmp, "g.h5"),
                            "--force", "--quiet", "--generate", "2", "--apply", "lambda:layer=all,value=0"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("does not combine with generation", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "g.h5")))

    def test_effect_is_nan_where_the_corruption_changes_nothing(self):
        """The shipped Transformer answers the needle task by elimination: a corrupted copy
        asking for another key leaves its target probability unchanged to ~1e-5, and the
        normalised effect (rounding over rounding) is NaN, not noise; the Diff model's is
        defined (it follows the key)."""
        root = os.path.dirname(HERE)
        pf, cc = os.path.join(self.tmp, "needle.jsonl"), os.path.join(self.tmp, "cc.jsonl")
        subprocess.run([os.path.join(BIN, "noise"), "prompts", "-o", pf, "--length", "64", "--needles", "4",
                        "--queries", "4", "--digits", "2", "--samples", "1", "--seed", "2024", "--force",
                        "--quiet"], check=True)
        first = json.loads(open(pf).readline())["id"]
        subprocess.run(["/usr/bin/python3", os.path.join(root, "scripts", "demo_corrupt.py"), pf, first, cc],
                       check=True)
        for m, defined in (("transformer", False), ("diff", True)):
            out = os.path.join(self.tmp, m + "_sweep.h5")
            r = subprocess.run([PROBE, "--model", os.path.join(root, "demo", "models", m), "--prompts", cc, "--out",
                                out, "--force", "--quiet", "--patch-sweep", "site=head,source=clean"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with h5py.File(out, "r") as f:
                g = f["samples/000001/patch"]
                clean, bad = float(g["clean"][()]), float(g["corrupted"][()])
                eff = g["effect"][()]
                if defined:
                    self.assertGreater(abs(clean - bad), 1e-2, m)
                    self.assertFalse(np.isnan(eff).any(), m)
                else:
                    self.assertLess(abs(clean - bad), 1e-4 * max(abs(clean), abs(bad)), m)
                    self.assertTrue(np.isnan(eff).all(), m)
                    self.assertFalse(np.isnan(g["patched"][()]).any(), m)

    def test_bad_specs_are_refused(self):
        mdir = self.model("llama-gqa", "llama", CASES[0][2])
        for spec, words in [("ablate:layer=5,mode=zero", "layer out of range"),
                            ("ablate:layer=0,head=9,mode=zero", "head out of range"),
                            ("lambda:layer=0,value=0", "differential"),
                            ("patch:site=resid_pre,layer=0,source=nobody", "not in the prompt file"),
                            ("patch:site=elsewhere,layer=0,source=clean", "bad value for site"),
                            ("ablate:layer=0", "mode="),
                            ("frobnicate:layer=0", "kind"),
                            ("knockout:layer=0,from=answer", "to=SPAN")]:
            out = os.path.join(self.tmp, "bad.h5")
            r = subprocess.run([PROBE, "--model", mdir, "--prompts", self.pfile, "--out", out, "--force", "--quiet",
                                "--intervene", spec], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, spec + ": " + r.stderr)
            self.assertIn(words, r.stderr, spec)
            self.assertFalse(os.path.exists(out), spec)


def _add(name, mtype, kw):
    def test(self):
        self.check_case(name, mtype, kw)
    setattr(Interventions, "test_" + name.replace("-", "_"), test)


for _c in CASES:
    _add(*_c)

if __name__ == "__main__":
    unittest.main(verbosity=1)
