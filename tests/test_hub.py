#!/usr/bin/python3
"""probe --model ORG/NAME[@REVISION] through the Hugging Face cache (lib/model/hub.h).
The cache is built here the way huggingface_hub's file_download.py lays it out: the
files' contents in blobs/ (named by their sha256, as LFS files are), snapshots/HASH/FILE
as relative symlinks into blobs/, refs/REVISION holding the commit hash. The dump of a
cached model equals the dump of the same files in a plain folder, for each variable
that chooses the cache (HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, XDG_CACHE_HOME,
HOME) in huggingface_hub's order of precedence; revisions by ref and by hash; a sharded
checkpoint with its index; the tokenizer files for text prompts; clear errors naming the
paths tried; and no network call (strace)."""
import hashlib
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

BIN = os.path.abspath(os.environ.get("BIN", os.path.join(ROOT, "bin")))
PROBE = os.path.join(BIN, "probe")
TOK_DIR = os.path.join(ROOT, ".npm-deps", "node_modules", "@lenml", "tokenizer-llama3", "models")
HF_VARS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


def add_to_cache(cache, repo_id, folder, commit, refs=()):
    """Put folder's files into cache as snapshot `commit` of repo_id; refs name it."""
    repo = os.path.join(cache, "models--" + repo_id.replace("/", "--"))
    snap = os.path.join(repo, "snapshots", commit)
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(snap, exist_ok=True)
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        blob = hashlib.sha256(data).hexdigest()
        with open(os.path.join(repo, "blobs", blob), "wb") as f:
            f.write(data)
        os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snap, name))
    for ref in refs:
        path = os.path.join(repo, "refs", ref)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(commit)  # huggingface_hub writes the hash without a newline
    return repo


class Hub(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl_hub_")
        cls.c1, cls.c2, cls.c3 = ("1" * 40, "2" * 40, "abcdef0123456789abcdef0123456789abcdef01")
        cls.v_main = os.path.join(cls.tmp, "main")
        cls.v_old = os.path.join(cls.tmp, "old")
        cls.v_sharded = os.path.join(cls.tmp, "sharded")
        for path, seed, shards in ((cls.v_main, 5, 1), (cls.v_old, 6, 1), (cls.v_sharded, 7, 2)):
            make_model.make_model(path, "llama", layers=2, hidden=16, heads=2, ffn=24, vocab=128256, max_pos=64,
                                  seed=seed, shards=shards)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(TOK_DIR, name), path)
        cls.cache = os.path.join(cls.tmp, "cache")
        add_to_cache(cls.cache, "org/tiny", cls.v_main, cls.c1, refs=("main",))
        add_to_cache(cls.cache, "org/tiny", cls.v_old, cls.c2, refs=("v1", "refs/pr/1"))
        add_to_cache(cls.cache, "org/tiny", cls.v_sharded, cls.c3)
        cls.prompts = os.path.join(cls.tmp, "p.jsonl")
        with open(cls.prompts, "w") as f:
            f.write(json.dumps({"id": "t", "input": "The capital of France is Paris.", "answer": ["Paris"]}) + "\n")
            f.write(json.dumps({"id": "k", "tokens": [128000, 791, 6864]}) + "\n")
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def env(self, **kw):
        env = {k: v for k, v in os.environ.items() if k not in HF_VARS}
        env["HOME"] = os.path.join(self.tmp, "no-home")
        env.update(kw)
        return env

    def probe(self, model, env, extra=(), cwd=None):
        Hub.n += 1
        out = os.path.join(self.tmp, "d%d.h5" % Hub.n)
        r = subprocess.run([PROBE, "--model", model, "--prompts", self.prompts, "--out", out, "--save-logits",
                            "--quiet", *extra], capture_output=True, text=True, env=env, cwd=cwd)
        return r, out

    def dump(self, path):
        with h5py.File(path, "r") as f:
            return {(k, d): np.asarray(f["samples"][k][d][()]) for k in f["samples"] for d in ("tokens", "logits")}

    def same_as(self, model, folder, env, **kw):
        r, out = self.probe(model, env, **kw)
        self.assertEqual(r.returncode, 0, r.stderr)
        want_r, want = self.probe(folder, self.env())
        self.assertEqual(want_r.returncode, 0, want_r.stderr)
        a, b = self.dump(out), self.dump(want)
        self.assertEqual(sorted(a), sorted(b))
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=str(k))
        return out

    def test_each_variable_that_names_the_cache(self):
        # HF_HUB_CACHE, its old name, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub
        home = os.path.join(self.tmp, "home")
        os.makedirs(os.path.join(home, ".cache", "huggingface"), exist_ok=True)
        xdg = os.path.join(self.tmp, "xdg")
        os.makedirs(os.path.join(xdg, "huggingface"), exist_ok=True)
        hf_home = os.path.join(self.tmp, "hf_home")
        os.makedirs(hf_home, exist_ok=True)
        for d in (os.path.join(home, ".cache", "huggingface", "hub"), os.path.join(xdg, "huggingface", "hub"),
                  os.path.join(hf_home, "hub")):
            if not os.path.lexists(d):
                os.symlink(self.cache, d)
        for env in (self.env(HF_HUB_CACHE=self.cache), self.env(HUGGINGFACE_HUB_CACHE=self.cache),
                    self.env(HF_HOME=hf_home), self.env(XDG_CACHE_HOME=xdg), self.env(HOME=home),
                    self.env(HF_HUB_CACHE="~/cache-link", HOME=self.tmp + "/homelink")):
            if env["HF_HUB_CACHE" if "HF_HUB_CACHE" in env else "HOME"].startswith("~"):
                os.makedirs(env["HOME"], exist_ok=True)
                if not os.path.lexists(env["HOME"] + "/cache-link"):
                    os.symlink(self.cache, env["HOME"] + "/cache-link")
            self.same_as("org/tiny", self.v_main, env)

    def test_precedence_is_huggingface_hubs(self):
        empty = os.path.join(self.tmp, "empty-cache")
        os.makedirs(empty, exist_ok=True)
        hf_home = os.path.join(self.tmp, "hf_home2")
        os.makedirs(hf_home, exist_ok=True)
        if not os.path.lexists(os.path.join(hf_home, "hub")):
            os.symlink(self.cache, os.path.join(hf_home, "hub"))
        # HF_HUB_CACHE wins over HF_HOME: only that cache is looked in, as huggingface_hub does
        r, out = self.probe("org/tiny", self.env(HF_HUB_CACHE=empty, HF_HOME=hf_home))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("HF_HUB_CACHE", r.stderr)
        self.assertFalse(os.path.exists(out))
        self.same_as("org/tiny", self.v_main, self.env(HF_HUB_CACHE=self.cache, HF_HOME=empty))
        # HF_HOME wins over XDG_CACHE_HOME and HOME
        self.same_as("org/tiny", self.v_main, self.env(HF_HOME=hf_home, XDG_CACHE_HOME=empty, HOME=empty))
        # an empty variable counts as unset
        self.same_as("org/tiny", self.v_main, self.env(HF_HUB_CACHE="", HF_HOME=hf_home))

    def test_revisions(self):
        env = self.env(HF_HUB_CACHE=self.cache)
        self.same_as("org/tiny@main", self.v_main, env)
        self.same_as("org/tiny@v1", self.v_old, env)
        self.same_as("org/tiny@refs/pr/1", self.v_old, env)
        self.same_as("org/tiny@" + self.c2, self.v_old, env)   # a hash with a ref
        self.same_as("org/tiny@" + self.c3, self.v_sharded, env)  # a hash without one; shards + index
        # the dump names the snapshot it read
        out = self.same_as("org/tiny@v1", self.v_old, env)
        with h5py.File(out, "r") as f:
            attrs = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f.attrs.items()}
        self.assertTrue(any(os.path.join("snapshots", self.c2) in v for v in attrs.values()), attrs)

    def test_a_local_folder_of_that_name_comes_first(self):
        cwd = os.path.join(self.tmp, "cwd")
        os.makedirs(os.path.join(cwd, "org"), exist_ok=True)
        if not os.path.exists(os.path.join(cwd, "org", "tiny")):
            shutil.copytree(self.v_old, os.path.join(cwd, "org", "tiny"))
        self.same_as("org/tiny", self.v_old, self.env(HF_HUB_CACHE=self.cache), cwd=cwd)

    def expect_error(self, model, env, needles):
        r, out = self.probe(model, env)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertFalse(os.path.exists(out))

    def test_errors_name_the_paths_tried(self):
        env = self.env(HF_HUB_CACHE=self.cache)
        repo = os.path.join(self.cache, "models--org--tiny")
        self.expect_error("org/absent", env, [
            "org/absent: not in the Hugging Face cache", self.cache, "(from HF_HUB_CACHE)", "never downloads",
            os.path.join(self.cache, "models--org--absent", "refs", "main"),
            os.path.join(self.cache, "models--org--absent", "snapshots", "main")])
        self.expect_error("org/tiny@v9", env, [os.path.join(repo, "refs", "v9"), os.path.join(repo, "snapshots", "v9")])
        self.expect_error("org/tiny@" + "3" * 40, env, [os.path.join(repo, "snapshots", "3" * 40)])
        home = os.path.join(self.tmp, "home-empty")
        self.expect_error("org/tiny", self.env(HOME=home),
                          ["(from default)", os.path.join(home, ".cache", "huggingface", "hub", "models--org--tiny")])

    def test_missing_files_and_blobs(self):
        cache = os.path.join(self.tmp, "broken")
        repo = add_to_cache(cache, "org/part", self.v_main, self.c1, refs=("main",))
        add_to_cache(cache, "org/noconf", self.v_main, self.c1, refs=("main",))
        os.remove(os.path.join(cache, "models--org--noconf", "snapshots", self.c1, "config.json"))
        env = self.env(HF_HUB_CACHE=cache)
        self.expect_error("org/noconf", env, ["config.json (missing)"])
        # a blob not (or no longer) there: the symlink dangles
        weights = os.path.join(repo, "snapshots", self.c1, "model.safetensors")
        os.remove(os.path.join(os.path.dirname(weights), os.readlink(weights)))
        self.expect_error("org/part", env, ["no weights", weights + " (a symlink to a missing blob)",
                                            "model.safetensors.index.json (missing)"])
        # a ref that does not hold a hash
        with open(os.path.join(repo, "refs", "bad"), "w") as f:
            f.write("not-a-hash\n")
        self.expect_error("org/part@bad", env, [os.path.join(repo, "refs", "bad"), "40-hex commit hash"])

    def test_not_a_hub_name_is_a_path(self):
        # "--" and ".." are not allowed in repo ids: these stay (missing) paths
        for model in ("org--x/tiny", "../tiny", "org/tiny/extra"):
            r, _ = self.probe(model, self.env(HF_HUB_CACHE=self.cache))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertNotIn("Hugging Face cache", r.stderr)

    def test_no_network_access(self):
        trace = os.path.join(self.tmp, "strace.txt")
        out = os.path.join(self.tmp, "net.h5")
        r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=%network", "-o", trace, PROBE, "--model", "org/tiny",
                            "--prompts", self.prompts, "--out", out, "--quiet"],
                           capture_output=True, text=True,
                           # LeakSanitizer (make asan) stops itself under a tracer: no leak check here
                           env=dict(self.env(HF_HUB_CACHE=self.cache),
                                    ASAN_OPTIONS=":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                                        "detect_leaks=0"]))))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(trace) as f:
            calls = [line for line in f if "(" in line and "exited" not in line]
        self.assertTrue(os.path.exists(out))
        self.assertEqual(calls, [])
        self.assertIn("no network access", subprocess.run([PROBE, "--help"], capture_output=True, text=True).stdout)


if __name__ == "__main__":
    unittest.main()
