#!/usr/bin/python3
"""Text prompts end to end: a tiny random Llama-3-shaped model (vocabulary 128256)
with the real Llama 3 tokenizer.json in its folder; text prompts go through
bin/probe (no Python in the user's path) into a dump whose tokens and token_offsets
equal Hugging Face tokenizers' ids and offsets (the node reference), whose token_text
is the decoded pieces and whose segments follow the character spans; bin/attnmap draws
it with labels; bin/tokenize --prompts writes the same token prompts; bad spans and
invalid UTF-8 are one-line errors with nothing written."""
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
sys.path.insert(0, HERE)
import h5py  # noqa: E402
import make_model  # noqa: E402
import test_tokenizer_ref as ref  # noqa: E402

BIN = os.environ.get("BIN", "bin")
TOK = os.path.join(ref.MODULES, ref.TOKENIZERS["llama3"])

TEXT = "The capital of France is Paris. Remember: Paris. What is the capital of France?"
PROMPTS = [
    {"id": "subs", "input": TEXT, "answer": ["Paris"], "query": ["What is the capital of France?"],
     "target": [{"text": "Paris", "occurrence": 2}], "depth": 0.25},
    {"id": "chars", "input": "naïve café 日本語 😀 done", "answer": [[6, 10]], "distractor": [[11, 14]]},
]


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


class TextPrompts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(os.path.join(ref.MODULES, "@anush008", "tokenizers")):
            raise RuntimeError("the reference is missing; run scripts/deps.sh (installs .npm-deps/)")
        cls.root = tempfile.mkdtemp(prefix="dfl_text_")
        cls.model = os.path.join(cls.root, "model")
        make_model.make_model(cls.model, "llama", layers=1, hidden=16, heads=2, ffn=24, vocab=128256,
                              max_pos=128, seed=5)
        shutil.copy(TOK, os.path.join(cls.model, "tokenizer.json"))
        cls.prompts = os.path.join(cls.root, "text.jsonl")
        with open(cls.prompts, "w", encoding="utf-8") as f:
            for p in PROMPTS:
                f.write(json.dumps(p, ensure_ascii=False) + "\n")
        cls.refs = ref.run_ref(TOK, [(p["input"], True) for p in PROMPTS])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def test_probe_dump_and_heatmap(self):
        dump = os.path.join(self.root, "d.h5")
        r = run(os.path.join(BIN, "probe"), "--model", self.model, "--prompts", self.prompts, "--out", dump,
                "--maps", "all", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        with h5py.File(dump, "r") as f:
            groups = sorted(k for k in f["samples"].keys())
            self.assertEqual(len(groups), 2)
            for i, p in enumerate(PROMPTS):
                g = f["samples"][groups[i]]
                want = self.refs[i]
                self.assertEqual(list(g["tokens"][()]), want["ids"])
                self.assertEqual(g["token_offsets"][()].tolist(), want["offsets"])
                self.assertEqual(g["input"][0].decode(), p["input"])
                text = [t.decode() for t in g["token_text"][()]]
                # the decoded pieces put back together are the text
                self.assertEqual("".join(text), p["input"])
                seg = g["segments"][()].tolist()
                offs = want["offsets"]
                # every token overlapping a span's characters carries its code
                spans = {2: "answer", 3: "query", 4: "distractor", 5: "target"}
                for code, key in spans.items():
                    if key not in p:
                        self.assertNotIn(code, seg)
                        continue
                    item = p[key][0]
                    if isinstance(item, list):
                        cs, ce = item
                    else:
                        s = item if isinstance(item, str) else item["text"]
                        occ = 1 if isinstance(item, str) else item["occurrence"]
                        at = -1
                        for _ in range(occ):
                            at = p["input"].index(s, at + 1)
                        cs, ce = at, at + len(s)
                    want_tok = [k for k, (a, b) in enumerate(offs) if a < b and a < ce and b > cs]
                    self.assertEqual([k for k, v in enumerate(seg) if v == code], want_tok, key)
        png = os.path.join(self.root, "map.png")
        r = run(os.path.join(BIN, "attnmap"), dump, "-o", png, "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.getsize(png) > 1000)

    def test_input_with_nul_round_trips(self):
        """A text with U+0000 keeps every byte in the dump's input dataset, read back by
        h5py: a fixed-length UTF-8 string of exactly the text's bytes with attr length
        (the variable-length type is a C string and ended at the first NUL); a text
        without one stays variable-length, as before. Tokens equal the reference's."""
        texts = ["ab\u0000cd", "\u0000 x\u0000\u0000 tail\u0000", "no nul here"]
        prompts = os.path.join(self.root, "nul.jsonl")
        with open(prompts, "w", encoding="utf-8") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": "n%d" % i, "input": t}) + "\n")
        refs = ref.run_ref(TOK, [(t, True) for t in texts])
        dump = os.path.join(self.root, "nul.h5")
        r = run(os.path.join(BIN, "probe"), "--model", self.model, "--prompts", prompts, "--out", dump, "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        with h5py.File(dump, "r") as f:
            groups = sorted(f["samples"].keys())
            self.assertEqual(len(groups), len(texts))
            for t, gname, want in zip(texts, groups, refs):
                with self.subTest(text=t):
                    g = f["samples"][gname]
                    self.assertEqual(list(g["tokens"][()]), want["ids"])
                    ds = g["input"]
                    self.assertEqual(ds.shape, (1,))
                    self.assertEqual(h5py.check_string_dtype(ds.dtype).encoding, "utf-8")
                    data = t.encode()
                    if "\u0000" in t:
                        self.assertEqual(h5py.check_string_dtype(ds.dtype).length, len(data))
                        self.assertEqual(int(ds.attrs["length"]), len(data))
                        self.assertEqual(ds[()].tobytes().decode(), t)
                        # numpy drops a fixed-length string's trailing NULs, never inner ones
                        self.assertEqual(ds[0].decode(), t.rstrip("\u0000"))
                    else:
                        self.assertIsNone(h5py.check_string_dtype(ds.dtype).length)
                        self.assertNotIn("length", ds.attrs)
                        self.assertEqual(ds[0].decode(), t)

    def test_tokenize_prompts_matches_probe_input(self):
        out = os.path.join(self.root, "tok.jsonl")
        r = run(os.path.join(BIN, "tokenize"), "--tokenizer", self.model, "--prompts", self.prompts, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            rows = [json.loads(l) for l in f]
        for row, want in zip(rows, self.refs):
            self.assertEqual(row["tokens"], want["ids"])
            self.assertEqual(row["offsets"], want["offsets"])
        # and the written file is a token prompt file probe reads without a tokenizer
        dump = os.path.join(self.root, "d2.h5")
        r = run(os.path.join(BIN, "probe"), "--model", self.model, "--prompts", out, "--out", dump, "--quiet",
                "--tokenizer", TOK)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_noise_prompts_from_text(self):
        needle = " The best thing to do in San Francisco is eat a sandwich in Dolores Park."
        answer = "eat a sandwich in Dolores Park"
        query = " What is the best thing to do in San Francisco? Answer: The best thing to do in San Francisco is"
        target = " eat a sandwich in Dolores Park."
        distractor = " The best thing to do in Paris is walk along the Seine."
        hay = "It was the best of times, it was the worst of times. " * 30
        with open(os.path.join(self.root, "essay.txt"), "w") as f:
            f.write(hay)
        tmpl = os.path.join(self.root, "sf.json")
        with open(tmpl, "w") as f:
            json.dump({"haystack": {"file": "essay.txt"}, "needle": needle, "answer": answer,
                       "distractors": [distractor], "query": query, "target": target}, f)
        out = os.path.join(self.root, "sf.jsonl")
        r = run(os.path.join(BIN, "noise"), "prompts", "--tokenizer", TOK, "--template", tmpl, "-o", out,
                "--length", "200", "--samples", "2", "--depths", "0,1", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        want = ref.run_ref(TOK, [(x, False) for x in (needle, query, target, distractor)])
        n_ids, q_ids, t_ids, d_ids = [w["ids"] for w in want]
        n_off = want[0]["offsets"]
        a0 = needle.index(answer)
        a1 = a0 + len(answer)
        ans = [n_ids[k] for k, (x, y) in enumerate(n_off) if x < a1 and y > a0]
        with open(out) as f:
            rows = [json.loads(l) for l in f]
        self.assertEqual(len(rows), 4)
        for row in rows:
            toks = row["tokens"]
            self.assertEqual(len(toks), 200)
            s, e = row["answer"][0]
            self.assertEqual(toks[s:e], ans)
            s, e = row["query"][0]
            self.assertEqual(toks[s:e], q_ids)
            s, e = row["target"][0]
            self.assertEqual(toks[s:e], t_ids)
            s, e = row["distractor"][0]
            self.assertEqual(toks[s:e], d_ids)
            self.assertEqual("".join(row["text"][-len(t_ids):]), target)
        # an answer that is not in the needle
        with open(tmpl, "w") as f:
            json.dump({"haystack": hay, "needle": needle, "answer": "pizza", "query": query, "target": target}, f)
        r = run(os.path.join(BIN, "noise"), "prompts", "--tokenizer", TOK, "--template", tmpl, "-o",
                os.path.join(self.root, "no.jsonl"))
        self.assertEqual(r.returncode, 1)
        self.assertIn('answer "pizza" is not in the needle', r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.root, "no.jsonl")))

    def bad(self, rows, raw=None, needle=""):
        path = os.path.join(self.root, "bad.jsonl")
        with open(path, "wb") as f:
            if raw is not None:
                f.write(raw)
            else:
                for p in rows:
                    f.write((json.dumps(p) + "\n").encode())
        dump = os.path.join(self.root, "bad.h5")
        r = run(os.path.join(BIN, "probe"), "--model", self.model, "--prompts", path, "--out", dump, "--quiet")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertFalse(os.path.exists(dump))
        out = os.path.join(self.root, "bad_out.jsonl")
        r = run(os.path.join(BIN, "tokenize"), "--tokenizer", TOK, "--prompts", path, "-o", out)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_errors(self):
        self.bad([{"input": "abc", "answer": ["zzz"]}], needle='"zzz" does not occur')
        self.bad([{"input": "abc abc", "answer": [{"text": "abc", "occurrence": 3}]}], needle="that many times")
        self.bad([{"input": "abc", "answer": [[1, 9]]}], needle="outside the input (3 characters)")
        self.bad([{"input": "abc", "answer": [[2, 1]]}], needle="reversed")
        self.bad([{"input": "", "answer": []}], needle="gives no tokens")
        self.bad(None, raw=b'{"input": "ok"}\n{"input": "a\xffb"}\n', needle="bad.jsonl:2: invalid UTF-8 at byte 1")

    def test_token_prompts_need_no_tokenizer(self):
        path = os.path.join(self.root, "tok_only.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"tokens": [128000, 791, 6864], "answer": [[1, 2]]}) + "\n")
        bare = os.path.join(self.root, "bare")
        if not os.path.exists(bare):
            shutil.copytree(self.model, bare)
            os.remove(os.path.join(bare, "tokenizer.json"))
        r = run(os.path.join(BIN, "probe"), "--model", bare, "--prompts", path, "--out",
                os.path.join(self.root, "tok.h5"), "--quiet", "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        # a text prompt without any tokenizer: one line that says what to do
        r = run(os.path.join(BIN, "probe"), "--model", bare, "--prompts", self.prompts, "--out",
                os.path.join(self.root, "t.h5"), "--quiet")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--tokenizer", r.stderr)


    def test_tokenize_never_overwrites_inputs(self):
        """tokenize -o with --force refuses an output that is one of its inputs: the
        prompts file, the tokenizer.json (given as a file or as its folder), through a
        link too; the victim is left byte for byte."""
        d = tempfile.mkdtemp(dir=self.root)
        model = os.path.join(d, "model")
        os.mkdir(model)
        tj = os.path.join(model, "tokenizer.json")
        shutil.copy(TOK, tj)
        prompts = os.path.join(d, "text.jsonl")
        shutil.copy(self.prompts, prompts)
        link = os.path.join(d, "link.jsonl")
        os.symlink(prompts, link)
        for tok, out, victim in [(tj, prompts, prompts), (tj, link, prompts), (model, tj, tj), (tj, tj, tj),
                                 (model, os.path.join(d, "model", "..", "model", "tokenizer.json"), tj)]:
            with open(victim, "rb") as f:
                before = f.read()
            r = run(os.path.join(BIN, "tokenize"), "--tokenizer", tok, "--prompts", prompts, "-o", out, "--force")
            self.assertEqual(r.returncode, 2, (out, r.stderr))
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn("an output never replaces an input", r.stderr)
            with open(victim, "rb") as f:
                self.assertEqual(f.read(), before, out)
        r = run(os.path.join(BIN, "tokenize"), "--tokenizer", model, "--prompts", prompts, "-o",
                os.path.join(model, "new.jsonl"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def probe_lines(self, lines, name):
        path = os.path.join(self.root, name + ".jsonl")
        with open(path, "w") as f:
            f.write("".join(l + "\n" for l in lines))
        out = os.path.join(self.root, name + ".h5")
        if os.path.exists(out):
            os.remove(out)
        return run(os.path.join(BIN, "probe"), "--model", self.model, "--prompts", path, "--out", out, "--quiet"), out

    def test_python_json_nonfinite(self):
        """Lines as Python's json.dumps writes them (allow_nan, its default): NaN depth is
        read as no depth (the dump's NaN), NaN in the text prompt too; Infinity depth and
        NaN tokens are refused naming the key; 1e309 is named out of range."""
        lines = [json.dumps({"id": "nan", "tokens": [128000, 791, 6864], "depth": float("nan"), "answer": [[1, 2]]}),
                 json.dumps({"id": "t", "input": "The capital", "depth": float("nan")}),
                 json.dumps({"id": "d", "tokens": [128000, 791], "depth": 0.5})]
        self.assertIn("NaN", lines[0])
        r, out = self.probe_lines(lines, "nan")
        self.assertEqual(r.returncode, 0, r.stderr)
        with h5py.File(out) as f:
            depths = [f["samples/%06d" % i].attrs["depth"] for i in range(3)]
        self.assertTrue(depths[0] != depths[0] and depths[1] != depths[1], depths)   # NaN: no depth
        self.assertEqual(depths[2], 0.5)
        for row, needle in [({"tokens": [128000, 791], "depth": float("inf")}, 'nf.jsonl:1: "depth" is Infinity'),
                            ({"tokens": [128000, float("nan")]}, "nf.jsonl:1: tokens[1] = NaN is not an integer"),
                            ({"tokens": [128000, 791], "depth": -float("inf")}, '"depth" is -Infinity')]:
            r, out = self.probe_lines([json.dumps(row)], "nf")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn(needle, r.stderr)
            self.assertFalse(os.path.exists(out))
        r, out = self.probe_lines(['{"tokens": [128000, 791], "depth": 1e309}'], "big")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("big.jsonl:1: number 1e309 at byte 36 is out of range", r.stderr)
        self.assertEqual(json.loads('{"depth": 1e309}')["depth"], float("inf"))   # what Python would do

    def test_prompt_keys(self):
        """A misspelt key is an error naming it with the nearest known key; notes and
        "_" keys are ignored; what noise prompts and tokenize write is read back."""
        r, out = self.probe_lines([json.dumps({"tokens": [128000, 791, 6864], "anwser": [[1, 2]]})], "keys")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn('keys.jsonl:1: unknown key "anwser" (did you mean "answer"?)', r.stderr)
        self.assertFalse(os.path.exists(out))
        r, out = self.probe_lines([json.dumps({"input": "The capital", "querry": ["capital"]})], "keys")
        self.assertIn('unknown key "querry" (did you mean "query"?)', r.stderr)
        r, out = self.probe_lines([json.dumps({"tokens": [128000, 791, 6864], "answer": [[1, 2]], "_seed": 3,
                                               "comment": "kept aside", "source": "hand"})], "keys")
        self.assertEqual(r.returncode, 0, r.stderr)
        # every key the writers use is read: noise prompts (synthetic task) and tokenize --prompts
        synth = os.path.join(self.root, "synth.jsonl")
        r = run(os.path.join(BIN, "noise"), "prompts", "-o", synth, "--length", "64", "--samples", "1", "--quiet",
                "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        tok = os.path.join(self.root, "keys_tok.jsonl")
        r = run(os.path.join(BIN, "tokenize"), "--tokenizer", TOK, "--prompts", self.prompts, "-o", tok, "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        written = set()
        for path in (synth, tok):
            with open(path) as f:
                for l in f:
                    written |= set(json.loads(l))
        self.assertTrue({"tokens", "text", "answer", "query", "target", "depth", "input", "offsets"} <= written,
                        written)
        r = run(os.path.join(BIN, "probe"), "--model", self.model, "--prompts", tok, "--out",
                os.path.join(self.root, "keys_tok.h5"), "--quiet", "--force")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_one_json_rule(self):
        """noise templates and tokenize --json lines follow the rule of every JSON reader
        (json.loads's): the last of a repeated key wins; text after the document and
        invalid UTF-8 are refused."""
        tmpl = os.path.join(self.root, "dup.json")
        text = '{"haystack": [5, 6, 7], "needle": [1], "query": [10], "target": [9], "needle": [8, 9]}'
        self.assertEqual(json.loads(text)["needle"], [8, 9])
        with open(tmpl, "w") as f:
            f.write(text)
        out = os.path.join(self.root, "dup.jsonl")
        r = run(os.path.join(BIN, "noise"), "prompts", "--template", tmpl, "-o", out, "--length", "16",
                "--samples", "1", "--depths", "0.5", "--quiet", "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            row = json.loads(f.readline())
        s, e = row["answer"][0]
        self.assertEqual(row["tokens"][s:e], [8, 9])
        for bad, needle in [(text + " {}", "text after the JSON document"), (text[:-1] + ', "x": "\xff"}', "UTF-8")]:
            with open(tmpl, "wb") as f:
                f.write(bad.encode("latin-1"))
            r = run(os.path.join(BIN, "noise"), "prompts", "--template", tmpl, "-o", out, "--quiet", "--force")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(needle, r.stderr)
        r = run(os.path.join(BIN, "tokenize"), "--tokenizer", TOK, "--json", "--no-special",
                input='{"input": "first", "input": "Hello"}\n')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["ids"], ref.run_ref(TOK, [("Hello", False)])[0]["ids"])

    def test_bounded_reads(self):
        """Every input read is a regular file within a bound, or a stream read with one:
        /dev/zero and a FIFO as config.json, prompts, tokenizer.json (a file, or the
        model folder's) and noise template fail at once with one line (they used to
        read until memory ran out, or wait for a writer forever); a sparse file beyond
        the bound is refused before it is read; tokenize's texts stop at 256 MiB."""
        d = tempfile.mkdtemp(dir=self.root)
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        tok = os.path.join(BIN, "tokenize")
        probe = os.path.join(BIN, "probe")
        out = os.path.join(d, "out.h5")
        token_prompts = os.path.join(d, "tok.jsonl")
        with open(token_prompts, "w") as f:
            f.write(json.dumps({"tokens": [128000, 791]}) + "\n")

        def refused(args, needle):
            r = run(*args)
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn(needle, r.stderr)
            self.assertFalse(os.path.exists(out))

        for bad, kind in [("/dev/zero", "a character device"), (fifo, "a FIFO")]:
            # config.json
            model = os.path.join(d, "model")
            shutil.rmtree(model, ignore_errors=True)
            shutil.copytree(self.model, model)
            os.remove(os.path.join(model, "config.json"))
            os.symlink(bad, os.path.join(model, "config.json"))
            refused([probe, "--model", model, "--prompts", token_prompts, "--out", out, "--quiet"],
                    "config.json: not a regular file (%s)" % kind)
            # the model folder's tokenizer.json, read for text prompts
            shutil.rmtree(model)
            shutil.copytree(self.model, model)
            os.remove(os.path.join(model, "tokenizer.json"))
            os.symlink(bad, os.path.join(model, "tokenizer.json"))
            refused([probe, "--model", model, "--prompts", self.prompts, "--out", out, "--quiet"],
                    "tokenizer.json: not a regular file (%s), cannot be read as a tokenizer.json" % kind)
            refused([tok, "--tokenizer", model, "--prompts", self.prompts, "-o", os.path.join(d, "o.jsonl")],
                    "not a regular file (%s)" % kind)
            # prompts
            refused([probe, "--model", self.model, "--prompts", bad, "--out", out, "--quiet"],
                    "%s: not a regular file (%s), cannot be read as a prompt file" % (bad, kind))
            refused([tok, "--tokenizer", TOK, "--prompts", bad, "-o", os.path.join(d, "o.jsonl")],
                    "not a regular file (%s), cannot be read as a prompt file" % kind)
            # tokenizer.json given as a path
            refused([tok, "--tokenizer", bad], "%s: not a regular file (%s)" % (bad, kind))
            refused([probe, "--model", self.model, "--prompts", self.prompts, "--tokenizer", bad, "--out", out,
                     "--quiet"], "not a regular file (%s), cannot be read as a tokenizer.json" % kind)
            # a noise template
            refused([os.path.join(BIN, "noise"), "prompts", "--template", bad, "-o", os.path.join(d, "n.jsonl"),
                     "--quiet"], "not a regular file (%s), cannot be read as a noise template" % kind)
        # a regular file beyond the bound (sparse: no disk used) is refused before it is read
        huge = os.path.join(d, "huge.jsonl")
        with open(huge, "wb") as f:
            f.truncate((1 << 30) + 1)
        refused([probe, "--model", self.model, "--prompts", huge, "--out", out, "--quiet"],
                "huge.jsonl: more than 1 GiB, the bound for a prompt file")
        os.remove(huge)
        # tokenize's own texts are streams (a FIFO or standard input is fine) with a bound
        refused([tok, "--tokenizer", TOK, "/dev/zero"], "/dev/zero:1: a line longer than 256 MiB, the bound for one text")
        refused([tok, "--tokenizer", TOK, "--whole", "/dev/zero"], "/dev/zero: more than 256 MiB, the bound for one text")
        r = subprocess.run("printf 'Hello\\n' > %s & %s --tokenizer %s --no-special %s; wait" % (fifo, tok, TOK, fifo),
                           shell=True, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["ids"], ref.run_ref(TOK, [("Hello", False)])[0]["ids"])

if __name__ == "__main__":
    unittest.main(verbosity=2)
