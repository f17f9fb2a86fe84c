#!/usr/bin/python3
"""End-to-end bad-input tests of bin/probe: each bad input gives one line on stderr
that names the file and what is wrong, exit 1 (2 for usage errors), no crash, and no
output file (nor temporary file) left behind."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")


def read_st(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_st(path, header, data, header_len=None):
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h) if header_len is None else header_len))
        f.write(h)
        f.write(data)


class ProbeErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="dfl_err_")
        cls.good = os.path.join(cls.root, "good")
        make_model.make_model(cls.good, "llama", layers=1, hidden=16, heads=2, ffn=24, vocab=30,
                              max_pos=64, seed=3)
        cls.prompts = cls.write_prompts("ok.jsonl", [{"tokens": [0, 5, 6, 7], "answer": [[1, 3]]}])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    @classmethod
    def write_prompts(cls, name, rows, raw=None):
        path = os.path.join(cls.root, name)
        with open(path, "w") as f:
            if raw is not None:
                f.write(raw)
            else:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
        return path

    def model_copy(self, name):
        d = os.path.join(self.root, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.good, d)
        return d

    def run_probe(self, *args):
        return subprocess.run([PROBE, *args, "--quiet"], capture_output=True, text=True)

    def expect_error(self, model, prompts, needles, code=1, extra=()):
        outdir = tempfile.mkdtemp(dir=self.root)
        out = os.path.join(outdir, "out.h5")
        r = self.run_probe("--model", model, "--prompts", prompts, "--out", out, *extra)
        self.assertEqual(r.returncode, code, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("probe: "), lines[0])
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertEqual(os.listdir(outdir), [], "output or temporary file left behind")
        return lines[0]

    def corrupt(self, name, edit):
        d = self.model_copy(name)
        st = os.path.join(d, "model.safetensors")
        header, data = read_st(st)
        edit(st, header, data)
        return d

    # ---- the good path, as a baseline for every case below
    def test_good_model_runs(self):
        out = os.path.join(self.root, "good.h5")
        r = self.run_probe("--model", self.good, "--prompts", self.prompts, "--out", out, "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(out))

    # ---- safetensors
    def test_missing_safetensors(self):
        d = self.model_copy("nost")
        os.remove(os.path.join(d, "model.safetensors"))
        self.expect_error(d, self.prompts, [d, "model.safetensors"])

    def test_truncated_safetensors(self):
        def edit(st, h, data):
            raw = Path(st).read_bytes()
            Path(st).write_bytes(raw[: len(raw) - 100])
        d = self.corrupt("trunc", edit)
        self.expect_error(d, self.prompts, ["model.safetensors"])

    def test_tiny_file(self):
        def edit(st, h, data):
            Path(st).write_bytes(b"\x01\x02")
        d = self.corrupt("tiny", edit)
        self.expect_error(d, self.prompts, ["model.safetensors"])

    def test_header_length_past_end(self):
        def edit(st, h, data):
            write_st(st, h, data, header_len=10 ** 9)
        d = self.corrupt("hlen", edit)
        self.expect_error(d, self.prompts, ["model.safetensors"])

    def test_header_invalid_json(self):
        def edit(st, h, data):
            bad = b"{not json at all"
            bad += b" " * ((-len(bad)) % 8)
            Path(st).write_bytes(struct.pack("<Q", len(bad)) + bad + data)
        d = self.corrupt("json", edit)
        self.expect_error(d, self.prompts, ["model.safetensors"])

    def test_offsets_overlap(self):
        def edit(st, h, data):
            names = [k for k in h if k != "__metadata__"]
            a, b = sorted(names, key=lambda k: h[k]["data_offsets"][0])[:2]
            h[b]["data_offsets"][0] -= 4
            h[b]["data_offsets"][1] -= 4
            write_st(st, h, data)
        d = self.corrupt("overlap", edit)
        self.expect_error(d, self.prompts, ["model.safetensors", "overlap"])

    def test_offsets_past_end(self):
        def edit(st, h, data):
            last = max((k for k in h if k != "__metadata__"), key=lambda k: h[k]["data_offsets"][1])
            h[last]["data_offsets"][0] += 64
            h[last]["data_offsets"][1] += 64
            write_st(st, h, data)
        d = self.corrupt("past", edit)
        self.expect_error(d, self.prompts, ["model.safetensors"])

    def test_tensor_missing(self):
        def edit(st, h, data):
            del h["model.layers.0.mlp.up_proj.weight"]
            write_st(st, h, data)
        d = self.corrupt("missing", edit)
        self.expect_error(d, self.prompts, ["model.layers.0.mlp.up_proj.weight", "missing"])

    def test_wrong_dtype(self):
        def edit(st, h, data):
            h["model.norm.weight"]["dtype"] = "I32"
            write_st(st, h, data)
        d = self.corrupt("dtype", edit)
        self.expect_error(d, self.prompts, ["model.norm.weight", "I32"])

    def test_wrong_shape(self):
        def edit(st, h, data):
            t = h["model.layers.0.self_attn.q_proj.weight"]
            t["shape"] = [8, 32]
            write_st(st, h, data)
        d = self.corrupt("shape", edit)
        self.expect_error(d, self.prompts, ["q_proj", "shape [8, 32]", "[16, 16]"])

    # ---- config
    def config_edit(self, name, change):
        d = self.model_copy(name)
        p = os.path.join(d, "config.json")
        cfg = json.loads(Path(p).read_text())
        change(cfg)
        Path(p).write_text(json.dumps(cfg))
        return d

    def test_config_inconsistent_heads(self):
        d = self.config_edit("heads", lambda c: c.update(num_key_value_heads=3))
        self.expect_error(d, self.prompts, ["config.json", "num_key_value_heads"])

    def test_config_missing_key(self):
        d = self.config_edit("nokey", lambda c: c.pop("hidden_size"))
        self.expect_error(d, self.prompts, ["config.json", "hidden_size"])

    def test_config_unsupported_activation(self):
        d = self.config_edit("act", lambda c: c.update(hidden_act="gelu"))
        self.expect_error(d, self.prompts, ["config.json", "gelu"])

    def test_config_not_json(self):
        d = self.model_copy("cfgjson")
        Path(d, "config.json").write_text("{oops")
        self.expect_error(d, self.prompts, ["config.json", "JSON"])

    # ---- prompts
    def test_token_out_of_vocab(self):
        p = self.write_prompts("oov.jsonl", [{"tokens": [0, 1]}, {"tokens": [0, 30, 2]}])
        self.expect_error(self.good, p, ["oov.jsonl:2", "30"])

    def test_empty_prompt(self):
        p = self.write_prompts("empty.jsonl", [{"tokens": []}])
        self.expect_error(self.good, p, ["empty.jsonl:1", "empty"])

    def test_span_out_of_range(self):
        p = self.write_prompts("span.jsonl", [{"tokens": [0, 1, 2], "answer": [[1, 9]]}])
        self.expect_error(self.good, p, ["span.jsonl:1", "answer"])

    def test_span_reversed(self):
        p = self.write_prompts("rev.jsonl", [{"tokens": [0, 1, 2]}, {"tokens": [0, 1, 2], "query": [[2, 1]]}])
        self.expect_error(self.good, p, ["rev.jsonl:2", "reversed"])

    def test_malformed_jsonl(self):
        p = self.write_prompts("bad.jsonl", None, raw='{"tokens": [0, 1]}\n\n{"tokens": [0, 1\n')
        self.expect_error(self.good, p, ["bad.jsonl:3"])

    def test_no_samples(self):
        p = self.write_prompts("none.jsonl", None, raw="\n\n")
        self.expect_error(self.good, p, ["none.jsonl"])

    def test_missing_prompts(self):
        self.expect_error(self.good, os.path.join(self.root, "nope.jsonl"), ["nope.jsonl"])

    # ---- outputs
    def test_existing_output_needs_force(self):
        outdir = tempfile.mkdtemp(dir=self.root)
        out = os.path.join(outdir, "out.h5")
        Path(out).write_text("precious")
        r = self.run_probe("--model", self.good, "--prompts", self.prompts, "--out", out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--force", r.stderr)
        self.assertEqual(Path(out).read_text(), "precious")
        self.assertEqual(os.listdir(outdir), ["out.h5"])
        r = self.run_probe("--model", self.good, "--prompts", self.prompts, "--out", out, "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(Path(out).read_bytes()[:8], b"\x89HDF\r\n\x1a\n")

    def test_unwritable_output_folder(self):
        out = os.path.join(self.root, "no", "such", "dir", "out.h5")
        r = self.run_probe("--model", self.good, "--prompts", self.prompts, "--out", out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("out.h5", r.stderr)

    # ---- --out is checked before any work (a bad one used to fail after the whole run).
    # The model given is broken: an error about the output, not the model, shows that
    # the output was checked first.
    def broken_model(self):
        d = self.model_copy("broken_for_out")
        os.remove(os.path.join(d, "model.safetensors"))
        return d

    def one_line_error(self, r, code, needles, broken=True):
        self.assertEqual(r.returncode, code, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        if broken:
            self.assertNotIn("safetensors", lines[0], "the model was loaded before the output was checked")

    def test_out_is_a_directory(self):
        outdir = tempfile.mkdtemp(dir=self.root)
        Path(outdir, "keep.txt").write_text("mine")
        for force in ((), ("--force",)):
            r = self.run_probe("--model", self.broken_model(), "--prompts", self.prompts, "--out", outdir, *force)
            self.one_line_error(r, 2, [outdir, "Is a directory"])
            self.assertEqual(os.listdir(outdir), ["keep.txt"])
        # with a good model too: refused at once, not after the run
        r = self.run_probe("--model", self.good, "--prompts", self.prompts, "--out", outdir, "--force")
        self.one_line_error(r, 2, ["Is a directory"])
        self.assertEqual(os.listdir(outdir), ["keep.txt"])

    def test_out_folder_missing(self):
        out = os.path.join(self.root, "no", "such", "dir", "out.h5")
        r = self.run_probe("--model", self.broken_model(), "--prompts", self.prompts, "--out", out, "--force")
        self.one_line_error(r, 1, [out, "cannot create a file in its folder"])

    def test_out_folder_is_a_file(self):
        f = os.path.join(self.root, "plainfile")
        Path(f).write_text("x")
        out = os.path.join(f, "out.h5")
        r = self.run_probe("--model", self.broken_model(), "--prompts", self.prompts, "--out", out, "--force")
        self.one_line_error(r, 1, [out, "cannot create a file in its folder"])
        self.assertEqual(Path(f).read_text(), "x")

    def test_out_is_an_input(self):
        d = self.model_copy("input_model")
        cfg = os.path.join(d, "config.json")
        weights = os.path.join(d, "model.safetensors")
        before = {x: Path(x).read_bytes() for x in (cfg, weights, self.prompts)}
        link = os.path.join(self.root, "prompts_link.jsonl")   # the prompts under another name: same inode
        if os.path.exists(link):
            os.remove(link)
        os.link(self.prompts, link)
        for out in (cfg, weights, link):
            r = self.run_probe("--model", d, "--prompts", self.prompts, "--out", out, "--force")
            self.one_line_error(r, 2, [out, "is the input", "an output never replaces an input"], broken=False)
        # the tokenizer is an input too (a BPE tokenizer.json of the model's 30 ids)
        tok = os.path.join(self.root, "tok.json")
        Path(tok).write_text(json.dumps({"model": {"type": "BPE", "merges": [],
                                                   "vocab": {"t%d" % i: i for i in range(30)}}}))
        before[tok] = Path(tok).read_bytes()
        r = self.run_probe("--model", d, "--prompts", self.prompts, "--tokenizer", tok, "--out", tok, "--force")
        self.one_line_error(r, 2, [tok, "is the input"], broken=False)
        for x, data in before.items():
            self.assertEqual(Path(x).read_bytes(), data, x + " changed")
        os.remove(link)

    def test_long_prompt_warns(self):
        p = self.write_prompts("long.jsonl", [{"tokens": [1] * 70}])
        out = os.path.join(self.root, "long.h5")
        r = subprocess.run([PROBE, "--model", self.good, "--prompts", p, "--out", out, "--force"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("warning", r.stderr)
        self.assertIn("max_position_embeddings (64)", r.stderr)

    # ---- progress
    def test_progress_bar_on_a_terminal_only(self):
        import pty
        p = self.write_prompts("three.jsonl", [{"tokens": [0, 5, 6, 7] * 8}] * 3)
        out = os.path.join(self.root, "progress.h5")
        for quiet in (False, True):
            master, slave = pty.openpty()
            args = [PROBE, "--model", self.good, "--prompts", p, "--out", out, "--force"] + (["--quiet"] if quiet else [])
            proc = subprocess.Popen(args, stderr=slave, stdout=subprocess.DEVNULL)
            os.close(slave)
            chunks = []
            while True:
                try:
                    data = os.read(master, 4096)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            os.close(master)
            self.assertEqual(proc.wait(), 0)
            text = b"".join(chunks).decode(errors="replace")
            if quiet:
                self.assertEqual(text, "")
            else:
                for needle in ("probe layer 1/1", "samples", "tok/s", "ETA", "wrote"):
                    self.assertIn(needle, text)
        # not a terminal: no bar, only the summary line
        r = subprocess.run([PROBE, "--model", self.good, "--prompts", p, "--out", out, "--force"],
                           capture_output=True, text=True)
        self.assertEqual(r.stderr.count("\r"), 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        self.assertIn("3 samples", r.stderr)

    # ---- usage
    def test_usage_errors(self):
        for args in (["--prompts", self.prompts, "--out", "x.h5"],
                     ["--model", self.good, "--prompts", self.prompts, "--out", "x.h5", "--maps", "some"],
                     ["--model", self.good, "--prompts", self.prompts, "--out", "x.h5", "--threads", "0"],
                     ["--model", self.good, "--prompts", self.prompts, "--out", "x.h5", "--threads", "2x"],
                     ["--model", self.good, "--prompts", self.prompts, "--out", "x.h5", "--map-dtype", "f8"],
                     ["--bogus"], ["stray"]):
            r = self.run_probe(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("probe", r.stderr)
        self.assertFalse(os.path.exists("x.h5"))

    def test_help_lists_every_flag(self):
        r = subprocess.run([PROBE, "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        for flag in ("--model", "--prompts", "--out", "--maps", "--map-dtype", "--save-logits",
                     "--threads", "--force", "--quiet", "--help"):
            self.assertIn(flag, r.stdout)
        self.assertIn("default: f16", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=1)
