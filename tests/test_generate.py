#!/usr/bin/python3
"""test_generate.py — probe --generate against the float64 reference (tests/ref/reference.py).

- greedy generation: every generated token is the argmax of the reference's logits over
  the prompt and the tokens generated before it (full forwards, no cache), the stored
  log-probability and top alternatives are the reference's log-softmax;
- the maps of generated rows (one map with the prompt's rows, keys up to the last
  generated row) equal the reference's rows of the whole sequence;
- the lookback ratio (Lookback Lens, Chuang et al. 2024: the mean attention magnitude
  on the prompt over that plus the mean on the generated tokens) and the shares of
  generated rows recomputed with numpy from the reference's maps;
- EOS from config.json and generation_config.json ends the generation ("stop": "eos");
  a prompt's "generate" overrides --generate; "expect" is scored by exact match;
- sampling: identical with the same --seed and threads, different with another seed,
  --top-k 1 is greedy, every token sampled under --top-k 3 / --top-p 0.6 lies in the
  set the reference's probabilities define; the choice itself (tests/gen_choose_harness.c)
  over an even grid of draws gives each token numpy's probability after temperature,
  top-k and top-p;
- a dump with generation and without maps holds exactly what dump_schema.h declares.

Run from the repo root:  /usr/bin/python3 tests/test_generate.py   (BIN=bin by default)
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
sys.path.insert(0, HERE)
import make_model  # noqa: E402
import reference  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
VOCAB = 97
TOL_LOGPROB = 1e-4
TOL_MAP = 1e-5
TOL_RATIO = 1e-4
TIE = 1e-4  # a step whose two best logits are closer than this is not compared


def run_probe(*args, ok=True):
    args = [str(a) for a in args]
    if "--threads" not in args:
        args += ["--threads", "1"]
    r = subprocess.run([PROBE] + args, capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise AssertionError("probe exited %d: %s" % (r.returncode, r.stderr))
    return r


def prompts(path, lengths, seed, extra=None):
    rng = np.random.default_rng(seed)
    out = []
    for i, T in enumerate(lengths):
        toks = [0] + [int(x) for x in rng.integers(5, VOCAB, T - 1)]
        p = {"id": "g%d" % i, "tokens": toks, "answer": [[2, 4]], "query": [[T - 3, T - 1]]}
        p.update((extra or {}).get(i, {}))
        out.append(p)
    with open(path, "w") as f:
        for p in out:
            f.write(json.dumps(p) + "\n")
    return out


def greedy_reference(m, toks, n):
    """n greedy tokens by full reference forwards; the logits of each choosing row."""
    seq, rows = list(toks), []
    for _ in range(n):
        lg = reference.forward(m, seq)["logits"][-1]
        rows.append(lg)
        seq.append(int(lg.argmax()))
    return seq[len(toks):], np.array(rows)


def log_softmax(z):
    z = np.asarray(z, dtype=np.float64)
    mx = z.max()
    return z - (mx + np.log(np.exp(z - mx).sum()))


class Generate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl-generate-")
        if not os.access(PROBE, os.X_OK):
            raise AssertionError("%s not found or not executable (build it, or set BIN)" % PROBE)
        cls.models = {}
        for name, mtype, kw in (("llama", "llama", dict(heads=4, kv_heads=2)),
                                ("difft", "diff_transformer", dict(heads=2)),
                                ("mistral", "mistral", dict(heads=4, kv_heads=2, sliding_window=6))):
            d = os.path.join(cls.tmp, name)
            make_model.make_model(d, mtype, layers=2, hidden=64, ffn=96, vocab=VOCAB, seed=11, **kw)
            cls.models[name] = d

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def greedy_case(self, name, N=6):
        d = self.models[name]
        pf = os.path.join(self.tmp, name + ".jsonl")
        ps = prompts(pf, (12, 9), seed=3)
        out = os.path.join(self.tmp, name + ".h5")
        run_probe("--model", d, "--prompts", pf, "--out", out, "--maps", "all", "--map-dtype", "f32",
                  "--generate", N, "--alternatives", 4, "--force", "--quiet")
        m = reference.load_model(d)
        diff = m.type != "llama"
        with h5py.File(out, "r") as f:
            for si, p in enumerate(ps):
                s = f["samples/%06d" % si]
                g = s["generated"]
                T = len(p["tokens"])
                got = g["tokens"][()]
                self.assertEqual(len(got), N)
                self.assertEqual(g["tokens"].attrs["stop"], "length")
                self.assertEqual(g["tokens"].attrs["decoding"], "greedy")
                # greedy tokens, log-probabilities and alternatives from the reference,
                # fed the tokens probe chose (a near-tie may go either way)
                seq = list(p["tokens"])
                for i in range(N):
                    lg = reference.forward(m, seq)["logits"][-1]
                    lp = log_softmax(lg)
                    top2 = np.sort(lg)[-2:]
                    if top2[1] - top2[0] > TIE:
                        self.assertEqual(got[i], int(lg.argmax()), "%s sample %d step %d" % (name, si, i))
                        np.testing.assert_array_equal(g["top_ids"][i], np.argsort(-lg, kind="stable")[:4])
                    self.assertLess(abs(g["logprob"][i] - lp[got[i]]), TOL_LOGPROB)
                    np.testing.assert_allclose(g["top_logprobs"][i], lp[g["top_ids"][i]], atol=TOL_LOGPROB)
                    seq.append(int(got[i]))
                # argmax stays the prompt's teacher-forced prediction
                self.assertEqual(s["argmax"].shape, (T,))
                # one map: prompt rows, then generated rows 0..N-2 over keys 0..T+N-2
                r = reference.forward(m, seq[:T + N - 1])
                at = s["attn"]
                np.testing.assert_array_equal(at["rows"][()], np.arange(T + N - 1))
                np.testing.assert_array_equal(at["keys"][()], np.arange(T + N - 1))
                keys = ("map1", "map2", "diff") if diff else ("map1",)
                for key in keys:
                    e = float(np.abs(at[key][()] - r[key]).max())
                    self.assertLess(e, TOL_MAP, "%s sample %d %s" % (name, si, key))
                # lookback ratio and shares of each step's choosing row (T - 1 + i)
                seg = s["segments"][()]
                masks = reference.share_masks(seg)
                lb, sh = g["lookback"][()], g["noise/shares_abs"][()]
                self.assertEqual(lb.shape, (len(keys), m.L, m.diff_heads() if diff else m.H, N))
                self.assertTrue(np.isnan(lb[..., 0]).all(), "step 0 has no generated keys")
                for mi, key in enumerate(keys):
                    for i in range(N):
                        q = T - 1 + i
                        A = np.abs(r[key][:, :, q, :q + 1])          # [L, H, q+1]
                        if i > 0:
                            ctx, new = A[..., :T].mean(-1), A[..., T:].mean(-1)
                            np.testing.assert_allclose(lb[mi, :, :, i], ctx / (ctx + new), atol=TOL_RATIO)
                        part = np.concatenate([A[..., :T] @ masks.T.astype(float),
                                               A[..., T:].sum(-1, keepdims=True)], -1)
                        np.testing.assert_allclose(sh[mi, :, :, i], part / A.sum(-1, keepdims=True),
                                                   atol=TOL_RATIO)
        return out

    def test_greedy_llama(self):
        self.greedy_case("llama")

    def test_greedy_diff_transformer(self):
        self.greedy_case("difft")

    def test_greedy_sliding_window(self):
        self.greedy_case("mistral", N=8)

    def test_eos_and_prompt_counts(self):
        d = os.path.join(self.tmp, "eos")
        shutil.copytree(self.models["llama"], d)
        pf = os.path.join(self.tmp, "eos.jsonl")
        ps = prompts(pf, (10, 8, 7), seed=4, extra={1: {"generate": 3}, 2: {"generate": 0}})
        m = reference.load_model(d)
        gen, _ = greedy_reference(m, ps[0]["tokens"], 4)
        # the third greedy token becomes an EOS id (config.json), then the second (a list
        # in generation_config.json): generation stops there, EOS included
        for where, eos, stop_at in (("config.json", gen[2], 3), ("generation_config.json", [90, gen[1]], 2)):
            path = os.path.join(d, where)
            cfg = {}
            if where == "config.json":
                with open(path) as f:
                    cfg = json.load(f)
            cfg["eos_token_id"] = eos
            with open(path, "w") as f:
                json.dump(cfg, f)
            out = os.path.join(self.tmp, "eos.h5")
            r = run_probe("--model", d, "--prompts", pf, "--out", out, "--generate", 5, "--force")
            with h5py.File(out, "r") as f:
                g = f["samples/000000/generated"]
                if gen[1] != gen[2] or where == "generation_config.json":
                    self.assertEqual(g["tokens"][()].tolist(), gen[:stop_at], where)
                    self.assertEqual(g["tokens"].attrs["stop"], "eos")
                self.assertLessEqual(len(f["samples/000001/generated/tokens"]), 3)
                self.assertNotIn("generated", f["samples/000002"])
            self.assertIn("generated", r.stderr)

    def test_expect_scored(self):
        d = self.models["llama"]
        m = reference.load_model(d)
        pf = os.path.join(self.tmp, "expect.jsonl")
        base = prompts(pf, (11,), seed=6)[0]
        gen, _ = greedy_reference(m, base["tokens"], 2)
        ps = [dict(base, expect=gen), dict(base, id="g1", expect=[gen[0], (gen[1] + 1) % VOCAB])]
        with open(pf, "w") as f:
            for p in ps:
                f.write(json.dumps(p) + "\n")
        out = os.path.join(self.tmp, "expect.h5")
        r = run_probe("--model", d, "--prompts", pf, "--out", out, "--generate", 2, "--force")
        with h5py.File(out, "r") as f:
            self.assertEqual(f["samples/000000/generated/correct"][()], 1)
            self.assertEqual(f["samples/000001/generated/correct"][()], 0)
            self.assertEqual(f["samples/000001/generated/expect"][()].tolist(), ps[1]["expect"])
        self.assertIn("expected answers generated 1/2", r.stderr)

    def sampled(self, pf, *flags, name="s"):
        out = os.path.join(self.tmp, name + ".h5")
        run_probe("--model", self.models["llama"], "--prompts", pf, "--out", out, "--force", "--quiet", *flags)
        with h5py.File(out, "r") as f:
            return [f["samples/%s/generated/tokens" % k][()].tolist() for k in sorted(f["samples"])]

    def test_sampling(self):
        pf = os.path.join(self.tmp, "sample.jsonl")
        ps = prompts(pf, (9, 10, 11), seed=8)
        flags = ("--generate", 8, "--temperature", 1.5, "--top-k", 40, "--top-p", 0.95, "--threads", 2)
        a = self.sampled(pf, *flags, "--seed", 5)
        self.assertEqual(a, self.sampled(pf, *flags, "--seed", 5), "same seed, same tokens")
        self.assertNotEqual(a, self.sampled(pf, *flags, "--seed", 6), "another seed, other tokens")
        greedy = self.sampled(pf, "--generate", 8)
        self.assertEqual(self.sampled(pf, "--generate", 8, "--top-k", 1, "--seed", 3), greedy)
        self.assertEqual(self.sampled(pf, "--generate", 8, "--temperature", 0), greedy)
        m = reference.load_model(self.models["llama"])
        for flags, allowed in ((("--top-k", 3), lambda p: np.argsort(-p, kind="stable")[:3]),
                               (("--top-p", 0.6), nucleus)):
            got = self.sampled(pf, "--generate", 5, "--seed", 9, *flags)
            for p, toks in zip(ps, got):
                seq = list(p["tokens"])
                for t in toks:
                    prob = np.exp(log_softmax(reference.forward(m, seq)["logits"][-1]))
                    self.assertIn(t, set(allowed(prob).tolist()), flags)
                    seq.append(t)

    def test_choice_distribution(self):
        """dfl__gen_choose on fixed logits with 20000 draws on an even grid of u: each
        token's share equals numpy's probability after temperature, top-k and top-p (Hugging
        Face's order: TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper) within
        1 / 20000; greedy is the first maximum."""
        exe = build_harness(self.tmp, "gen_choose_harness")
        rng = np.random.default_rng(2)
        z = rng.normal(0, 2, 50)
        z[7] = z[9] = z.max() + 1           # a tie for the first place
        draws = 20000
        for temp, k, p in ((1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.8), (2.0, 10, 0.5), (0.5, 3, 0.3), (0, 0, 1.0)):
            r = subprocess.run([exe, str(temp), str(k), str(p), str(draws)], input="\n".join(map(repr, z.tolist())),
                               capture_output=True, text=True, check=True)
            got = np.array([int(x) for x in r.stdout.split()]) / draws
            want = np.zeros(len(z))
            if temp == 0:
                want[7] = 1
            else:
                w = z.astype(np.float32).astype(np.float64) / temp
                order = np.argsort(-w, kind="stable")
                keep = order[:k] if k else order
                pr = np.exp(w[keep] - w[keep].max())
                pr /= pr.sum()
                if p < 1:
                    n = int(np.searchsorted(np.cumsum(pr), p) + 1)
                    keep, pr = keep[:n], pr[:n] / pr[:n].sum()
                want[keep] = pr
            np.testing.assert_allclose(got, want, atol=1.5 / draws, err_msg="T %g top-k %d top-p %g" % (temp, k, p))

    def test_noise_lookback(self):
        """noise --lookback's tables against numpy over the dumps' generated/lookback, right
        vs wrong answers by generated/correct; both figures written."""
        d = self.models["llama"]
        pf = os.path.join(self.tmp, "lb.jsonl")
        ps = prompts(pf, (10, 9, 12), seed=14, extra={0: {"expect": [1]}, 1: {"expect": [2]}})
        out = os.path.join(self.tmp, "lb.h5")
        run_probe("--model", d, "--prompts", pf, "--out", out, "--generate", 5, "--force", "--quiet")
        with h5py.File(out, "r") as f:   # expect the first generated token of sample 1: right
            first = int(f["samples/000001/generated/tokens"][0])
        ps[1]["expect"] = [first]
        with open(pf, "w") as f:
            for p in ps:
                f.write(json.dumps(p) + "\n")
        run_probe("--model", d, "--prompts", pf, "--out", out, "--generate", 5, "--force", "--quiet")
        png, heads = os.path.join(self.tmp, "lb.png"), os.path.join(self.tmp, "lbh.svg")
        r = subprocess.run([os.path.join(BIN, "noise"), "--lookback", out, "--format", "json", "--plot-lookback", png,
                            "--plot-lookback-heads", heads], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        tables = {t["name"]: t for t in json.loads(r.stdout)["tables"]}
        with h5py.File(out, "r") as f:
            lb = [f["samples/%06d/generated/lookback" % i][0][..., 1:] for i in range(3)]   # map1: [L, H, n-1]
            correct = [int(f["samples/%06d/generated/correct" % i][()]) for i in range(2)]
        allv = np.concatenate([x.reshape(-1) for x in lb])
        row = tables["lookback"]["data"][0]
        self.assertEqual(row[1], 3)
        self.assertAlmostEqual(row[2], allv.mean(), places=6)
        self.assertEqual(correct, [int(first == 1), 1] if first != 1 else [1, 1])
        right = [lb[i].mean() for i in range(2) if correct[i]]
        self.assertAlmostEqual(row[3], np.mean(right), places=6)
        self.assertEqual(row[4], len(right))
        lh = np.concatenate([x for x in lb], axis=-1).mean(-1)                          # [L, H]
        got = np.array([x[2] for x in tables["lookback_by_head"]["data"]]).reshape(lh.shape)
        np.testing.assert_allclose(got, lh, atol=1e-6)
        np.testing.assert_allclose([x[1] for x in tables["lookback_by_layer"]["data"]], lh.mean(1), atol=1e-6)
        steps = [np.concatenate([x[..., k].reshape(-1) for x in lb]).mean() for k in range(4)]
        np.testing.assert_allclose([x[1] for x in tables["lookback_by_step"]["data"]], steps, atol=1e-6)
        self.assertGreater(os.path.getsize(png), 1000)
        self.assertIn("<svg", open(heads).read(200))
        plain = os.path.join(self.tmp, "plain.h5")
        run_probe("--model", d, "--prompts", pf, "--out", plain, "--force", "--quiet")
        r = subprocess.run([os.path.join(BIN, "noise"), "--lookback", plain], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("probe --generate", r.stderr)

    def test_attnmap_and_view(self):
        """attnmap draws a generating sample's map (prompt and generated rows) with the
        generation rule, which a plain dump's figure lacks; view serves the generated
        tokens, their labels and the cells of generated rows."""
        from PIL import Image
        import test_view
        d = self.models["llama"]
        pf = os.path.join(self.tmp, "am.jsonl")
        ps = prompts(pf, (12,), seed=16, extra={0: {"text": ["w%d" % i for i in range(12)]}})
        T, N = 12, 4
        out, plain = os.path.join(self.tmp, "am.h5"), os.path.join(self.tmp, "am-plain.h5")
        run_probe("--model", d, "--prompts", pf, "--out", out, "--maps", "all", "--generate", N, "--force", "--quiet")
        run_probe("--model", d, "--prompts", pf, "--out", plain, "--maps", "all", "--force", "--quiet")
        rule = (213, 94, 0)
        counts = []
        for dump in (out, plain):
            png = dump + ".png"
            r = subprocess.run([os.path.join(BIN, "attnmap"), dump, "--layer", "1", "--head", "0", "-o", png,
                                "--force"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            img = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3)
            counts.append(int((img == rule).all(1).sum()))
        self.assertGreater(counts[0], 100, "no generation rule or band")
        self.assertEqual(counts[1], 0)
        p, url = test_view.start_server(out)
        try:
            j = test_view.get_json(url, "/api/sample?d=0&s=0")
            with h5py.File(out, "r") as f:
                gen = f["samples/000000/generated/tokens"][()].tolist()
            self.assertEqual(j["T"], T + N - 1)
            self.assertEqual(j["generated"]["start"], T)
            self.assertEqual(j["generated"]["tokens"], gen)
            self.assertEqual(j["segments"][T:], [6] * (N - 1))
            self.assertEqual(j["tokens"][T:], gen[:N - 1])
            c = test_view.get_json(url, "/api/cell?d=0&s=0&l=1&h=0&q=%d&k=%d" % (T + 1, T))
            self.assertEqual(c["query"]["token"], gen[1])
            self.assertEqual(c["key"]["segment"], 6)
            with h5py.File(out, "r") as f:
                self.assertEqual(np.float32(c["map1"]), f["samples/000000/attn/map1"][1, 0, T + 1, T])
            labels = dict(zip(ps[0]["tokens"], ps[0]["text"]))   # no tokenizer: the prompt's label of the id
            self.assertEqual(c["query"]["text"], labels.get(gen[1], "#%d" % gen[1]))
        finally:
            p.kill()
            p.wait()

    def test_noise_prompts_free_form(self):
        """noise prompts --free-form: each line is the plain prompt cut before its last
        target span, whose tokens are its expect, their count its generate."""
        plain, free = os.path.join(self.tmp, "np.jsonl"), os.path.join(self.tmp, "npf.jsonl")
        flags = ["--length", "64", "--needles", "3", "--queries", "2", "--digits", "3", "--samples", "3",
                 "--depths", "0,1", "--seed", "5", "--force", "--quiet"]
        noise = os.path.join(BIN, "noise")
        subprocess.run([noise, "prompts", "-o", plain] + flags, check=True)
        subprocess.run([noise, "prompts", "-o", free, "--free-form"] + flags, check=True)
        with open(plain) as a, open(free) as b:
            for la, lb in zip(a, b):
                p, q = json.loads(la), json.loads(lb)
                t0, t1 = max(p["target"])
                self.assertEqual(t1, len(p["tokens"]))
                self.assertEqual(q["tokens"], p["tokens"][:t0])
                self.assertEqual(q["expect"], p["tokens"][t0:t1])
                self.assertEqual(q["generate"], t1 - t0)
                self.assertEqual(q["target"], [s for s in p["target"] if s[1] <= t0])
                self.assertEqual(q["text"], p["text"][:t0])

    def test_schema_without_maps(self):
        import test_dump_schema
        pf = os.path.join(self.tmp, "schema.jsonl")
        prompts(pf, (10, 9), seed=12)
        for name in ("llama", "difft"):
            out = os.path.join(self.tmp, "schema-%s.h5" % name)
            run_probe("--model", self.models[name], "--prompts", pf, "--out", out, "--generate", 3, "--force",
                      "--quiet")
            checker = type("C", (test_dump_schema.DumpChecks, unittest.TestCase), {"runTest": lambda s: None})()
            checker.check_dump(out, name != "llama")

    def test_flag_errors(self):
        pf = os.path.join(self.tmp, "err.jsonl")
        prompts(pf, (6,), seed=1)
        out = os.path.join(self.tmp, "err.h5")
        for flags in (("--generate", -1), ("--top-p", 0), ("--top-p", 1.5), ("--top-k", -2),
                      ("--alternatives", 65), ("--temperature", -1)):
            r = run_probe("--model", self.models["llama"], "--prompts", pf, "--out", out, *flags, ok=False)
            self.assertEqual(r.returncode, 2, flags)
            self.assertIn(flags[0], r.stderr)
        r = run_probe("--model", self.models["llama"], "--prompts", pf, "--out", out, "--generate", 2,
                      "--quantize-logits", "8", ok=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("granularity row", r.stderr)
        run_probe("--model", self.models["llama"], "--prompts", pf, "--out", out, "--generate", 2,
                  "--quantize-logits", "8:row", "--force", "--quiet")
        with open(pf, "w") as f:
            f.write(json.dumps({"tokens": [0, 5, 6], "generate": 2.5}) + "\n")
        r = run_probe("--model", self.models["llama"], "--prompts", pf, "--out", out, "--force", ok=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('"generate" is not an integer', r.stderr)


def make_var(name):
    root = os.path.dirname(HERE)
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", root, "--eval", "print-%: ; @echo $($*)",
                        "print-" + name], capture_output=True, text=True, check=True)
    return r.stdout.split()


def build_harness(tmp, name):
    """tests/NAME.c linked against build/libdifflens.a, in tmp."""
    root = os.path.dirname(HERE)
    lib = os.path.join(os.environ.get("BUILD", os.path.join(root, "build")), "libdifflens.a")
    subprocess.run(["make", "-s", "-C", root, lib], check=True)
    exe = os.path.join(tmp, name)
    cmd = (make_var("CC") + make_var("CPPFLAGS") + make_var("CFLAGS") + [os.path.join(HERE, name + ".c"), lib,
           "-o", exe] + make_var("LDFLAGS") + make_var("LDLIBS"))
    cmd = [a if not a.startswith("-I") or os.path.isabs(a[2:]) else "-I" + os.path.join(root, a[2:]) for a in cmd]
    subprocess.run(cmd, check=True)
    return exe


def nucleus(prob, p=0.6):
    order = np.argsort(-prob, kind="stable")
    cum = np.cumsum(prob[order])
    keep = int(np.searchsorted(cum, p) + 1)
    return order[:keep]


if __name__ == "__main__":
    unittest.main()
