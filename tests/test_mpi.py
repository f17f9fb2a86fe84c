#!/usr/bin/python3
"""probe under MPI: `mpirun -np 2 bin/probe` writes the dump a single process writes
(every dataset, attribute and dimension scale, bit for bit) for the three model types
with maps and statistics; outliers and noise read both alike; a rank with no prompt;
the other ranks' warnings printed by rank 0, each once; a bad prompt, a failing rank, a
killed rank, Ctrl-C and a full disk (while the ranks write, and while rank 0 joins) end
the job with one line, no dump and no parts left behind (or left for the next run to
clean); a disk too small for the job is refused before any work; the usage text names
mpirun."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.abspath(os.path.join(BIN, "probe"))
MPIRUN = shutil.which("mpirun")
# Open MPI refuses root unless told; leak checks would report Open MPI's own allocations.
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", OMP_NUM_THREADS="1")
ROOT_FLAGS = ["--allow-run-as-root"] if os.geteuid() == 0 else []
TYPES = {"llama": dict(heads=4, kv_heads=2), "diff_transformer": dict(heads=2, kv_heads=1),
         "diffllama": dict(heads=4, kv_heads=2)}


def mpirun(n, *args, **kw):
    if not MPIRUN:
        raise AssertionError("mpirun not found: install openmpi-bin (scripts/deps.sh)")
    cmd = [MPIRUN, "-np", str(n), "--oversubscribe", *ROOT_FLAGS, PROBE, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600, **kw)


def plain(*args):
    return subprocess.run([PROBE, *args], capture_output=True, text=True, env=ENV, timeout=600)


def write_prompts(path, lengths, vocab=97, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i, T in enumerate(lengths):
            toks = [0] + [int(x) for x in rng.integers(1, vocab, T - 1)]
            f.write(json.dumps({"id": "p%d" % i, "tokens": toks, "text": ["t%d" % j for j in range(T)],
                                "answer": [[2, 5]], "distractor": [[6, 8]], "query": [[T - 5, T - 3]],
                                "target": [[T - 3, T - 1]], "depth": i / max(1, len(lengths) - 1)}) + "\n")


def objects(f):
    out = {}
    f.visititems(lambda name, obj: out.__setitem__(name, obj))
    return out


def same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind == "O":  # variable-length strings: the values, not their pointers
        return y.dtype.kind == "O" and x.shape == y.shape and x.tolist() == y.tolist()
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def assert_same_dump(tc, one, many):
    """Every object, attribute, value (bit for bit), chunking and scale alike."""
    skip = ("DIMENSION_LIST", "REFERENCE_LIST")  # object references: compared as scale names
    with h5py.File(one, "r") as a, h5py.File(many, "r") as b:
        oa, ob = objects(a), objects(b)
        tc.assertEqual(sorted(oa), sorted(ob))
        tc.assertEqual(list(a["samples"]), list(b["samples"]))  # prompt order
        for name in [""] + sorted(oa):
            x, y = (a, b) if name == "" else (oa[name], ob[name])
            ka = sorted(k for k in x.attrs if k not in skip)
            tc.assertEqual(ka, sorted(k for k in y.attrs if k not in skip), name)
            for k in ka:
                tc.assertTrue(same(x.attrs[k], y.attrs[k]), "%s attr %s" % (name, k))
            if isinstance(x, h5py.Dataset):
                tc.assertTrue(same(x[()], y[()]), name)
                tc.assertEqual((x.chunks, x.compression, x.shuffle), (y.chunks, y.compression, y.shuffle), name)
                for d in range(x.ndim):
                    tc.assertEqual(x.dims[d].label, y.dims[d].label, name)
                    tc.assertEqual([s.name for s in x.dims[d].values()], [s.name for s in y.dims[d].values()],
                                   "%s dim %d" % (name, d))


class MpiProbe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl_mpi_")
        cls.models = {}
        for t, kw in TYPES.items():
            d = os.path.join(cls.tmp, t)
            make_model.make_model(d, t, layers=2, hidden=32, vocab=97, seed=3, **kw)
            cls.models[t] = d
        cls.prompts = os.path.join(cls.tmp, "p.jsonl")
        write_prompts(cls.prompts, [40, 17, 63, 25, 33])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def leftovers(self, out):
        base = os.path.basename(out)
        return [f for f in os.listdir(os.path.dirname(out)) if ".%s.part" % base in f]

    def the_one_error(self, r, warnings_too=False):
        """A failed job's error: it exited non-zero with exactly one line of its own on
        stderr (warnings_too: warnings beside it are allowed)."""
        self.assertNotEqual(r.returncode, 0, r.stderr)
        ours = [l for l in r.stderr.splitlines() if l.startswith("probe:") and not (warnings_too and "warning:" in l)]
        self.assertEqual(len(ours), 1, r.stderr)
        return ours[0]

    def test_two_ranks_write_the_one_process_dump(self):
        for t, model in self.models.items():
            with self.subTest(model=t):
                one, two = self.path(t + "_1.h5"), self.path(t + "_2.h5")
                flags = ["--model", model, "--prompts", self.prompts, "--maps", "all", "--save-logits",
                         "--threads", "1", "--quiet", "--force"]
                r = plain(*flags, "--out", one)
                self.assertEqual(r.returncode, 0, r.stderr)
                r = mpirun(2, *flags, "--out", two)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                assert_same_dump(self, one, two)
                self.assertEqual(self.leftovers(two), [])
                # pooled results of the tools, from both dumps
                for tool, extra in (("outliers", ["--per-layer"]), ("noise", ["--by", "depth"])):
                    outs = [subprocess.run([os.path.join(BIN, tool), f, "--format", "json", "--labels", "x",
                                            *extra], capture_output=True, text=True, env=ENV) for f in (one, two)]
                    self.assertEqual(outs[0].returncode, 0, outs[0].stderr)
                    self.assertIn('"data"', outs[0].stdout)
                    texts = [o.stdout.replace(f, "DUMP") for o, f in zip(outs, (one, two))]
                    self.assertEqual(texts[0], texts[1], tool)

    def test_more_ranks_than_prompts(self):
        few = self.path("few.jsonl")
        write_prompts(few, [30, 12])
        one, three = self.path("few_1.h5"), self.path("few_3.h5")
        flags = ["--model", self.models["diffllama"], "--prompts", few, "--maps", "all", "--threads", "1",
                 "--quiet", "--force"]
        self.assertEqual(plain(*flags, "--out", one).returncode, 0)
        r = mpirun(3, *flags, "--out", three)
        self.assertEqual(r.returncode, 0, r.stderr)
        assert_same_dump(self, one, three)

    def test_progress_and_summary_come_from_rank_0_only(self):
        out = self.path("summary.h5")
        r = mpirun(2, "--model", self.models["llama"], "--prompts", self.prompts, "--out", out, "--threads", "1",
                   "--force", "--log-every", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.startswith("probe: wrote")]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("5 samples, 178 tokens", lines[0])
        # progress lines count every rank's samples and tokens; the last one all of them
        progress = [l for l in r.stderr.splitlines() if " samples, " in l and "tok/s" in l and "wrote" not in l]
        self.assertTrue(progress, r.stderr)
        self.assertRegex(progress[-1], r"^probe: 5/5 samples, 178/178 tokens, [0-9]+ tok/s")
        done = [int(l.split()[1].split("/")[0]) for l in progress]
        self.assertEqual(done, sorted(done))  # one stream of totals: rank 0 alone prints

    def test_warnings_of_every_rank_reach_rank_0_once(self):
        model = self.path("nan_row")
        make_model.make_model(model, "llama", layers=2, hidden=32, heads=4, kv_heads=2, vocab=97, seed=3)
        # token 96's embedding is NaN: only the prompt holding it (the second, rank 1's share) turns
        # non-finite
        st = os.path.join(model, "model.safetensors")
        with open(st, "rb") as f:
            raw = bytearray(f.read())
        n = int.from_bytes(raw[:8], "little")
        emb = json.loads(raw[8:8 + n])["model.embed_tokens.weight"]
        self.assertEqual(emb["dtype"], "F32")
        at = 8 + n + emb["data_offsets"][0] + 96 * 32 * 4
        raw[at:at + 4] = np.float32(np.nan).tobytes()
        with open(st, "wb") as f:
            f.write(raw)
        prompts = self.path("nan_row.jsonl")
        with open(prompts, "w") as f:  # no BOS first: a file-wide warning every rank finds
            f.write(json.dumps({"id": "long", "tokens": [5 + i % 90 for i in range(30)]}) + "\n")
            f.write(json.dumps({"id": "bad", "tokens": [7, 8, 96, 9, 10]}) + "\n")
        one, two = self.path("nan_1.h5"), self.path("nan_2.h5")
        flags = ["--model", model, "--prompts", prompts, "--threads", "1", "--force"]
        r1 = plain(*flags, "--out", one)
        r2 = mpirun(2, *flags, "--out", two)
        self.assertEqual(r2.returncode, 0, r2.stderr)
        warn = [l for l in r2.stderr.splitlines() if l.startswith("probe: warning:")]
        self.assertEqual(len([l for l in warn if "bos_token_id" in l]), 1, r2.stderr)
        nan = [l for l in warn if "first non-finite" in l]
        self.assertEqual(len(nan), 1, r2.stderr)
        self.assertRegex(nan[0], r"^probe: warning: rank 1: .*nan_row\.jsonl:2: sample bad: first non-finite")
        self.assertIn("(1 with NaN/Inf: see above)", r2.stderr)
        # the same warnings as one process gives, the rank named
        self.assertEqual(sorted(l.replace("rank 1: ", "") for l in warn),
                         sorted(l for l in r1.stderr.splitlines() if l.startswith("probe: warning:")))
        assert_same_dump(self, one, two)

    def test_failing_rank_names_itself_and_leaves_nothing(self):
        out = self.path("fail.h5")
        # rank 1 cannot put its part in place: a folder stands at its name
        blocker = self.path(".fail.h5.part1of2.h5")
        os.makedirs(blocker)
        open(os.path.join(blocker, "keep"), "w").close()
        try:
            r = mpirun(2, "--model", self.models["llama"], "--prompts", self.prompts, "--out", out,
                       "--threads", "1", "--quiet")
        finally:
            shutil.rmtree(blocker)
        self.assertRegex(self.the_one_error(r), r"^probe: rank 1: .*part1of2\.h5.*Is a directory")
        self.assertFalse(os.path.exists(out))
        self.assertEqual(self.leftovers(out), [])

    def test_bad_prompt_fails_every_rank_before_work(self):
        bad = self.path("bad.jsonl")
        with open(self.prompts) as f:
            lines = f.read().splitlines()
        lines[2] = '{"id": "broken", "tokens": [1, 2, 500]}'  # token 500 is outside the vocabulary of 97
        with open(bad, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = self.path("bad.h5")
        r = mpirun(2, "--model", self.models["llama"], "--prompts", bad, "--out", out, "--threads", "1", "--quiet")
        self.assertRegex(self.the_one_error(r), r"^probe: rank 0: .*bad\.jsonl:3: .*500")
        self.assertFalse(os.path.exists(out))
        self.assertEqual(self.leftovers(out), [])

    def test_existing_output_fails_before_work(self):
        out = self.path("exists.h5")
        with open(out, "w") as f:
            f.write("not a dump")
        r = mpirun(2, "--model", self.models["llama"], "--prompts", self.prompts, "--out", out, "--quiet")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exists (use --force", r.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "not a dump")

    def test_directory_out_fails_before_work_even_with_force(self):
        out = self.path("adir.h5")
        os.makedirs(out)
        try:
            r = mpirun(2, "--model", self.models["llama"], "--prompts", self.prompts, "--out", out, "--force",
                       "--threads", "1")
        finally:
            os.rmdir(out)
        self.assertEqual(r.returncode, 2, r.stderr)
        # refused by rank 0's output check, before any rank ran a prompt (no progress, no summary)
        self.assertRegex(self.the_one_error(r), r"^probe: .*adir\.h5.*Is a directory")
        self.assertNotIn("tok/s", r.stderr + r.stdout)
        self.assertEqual(self.leftovers(out), [])

    def test_killed_rank_ends_the_job_and_a_rerun_cleans_up(self):
        model, slow = self.slow_model(), self.slow_prompts()
        out = self.path("killed.h5")
        cmd = [MPIRUN, "-np", "2", "--oversubscribe", *ROOT_FLAGS, PROBE, "--model", model, "--prompts", slow,
               "--out", out, "--maps", "all", "--threads", "1", "--quiet"]
        job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        victim = None
        for _ in range(600):  # until rank 1 is up and has begun writing its part
            victim = self.rank_pid(out, 1)
            if victim and self.leftovers(out):
                break
            time.sleep(0.05)
        self.assertIsNotNone(victim, "rank 1 never started")
        os.kill(victim, signal.SIGKILL)
        _, err = job.communicate(timeout=600)
        self.assertNotEqual(job.returncode, 0)
        self.assertRegex(err, r"rank 1 .*signal 9")
        self.assertFalse(os.path.exists(out))
        # the next run to the same output removes the killed job's parts
        r = mpirun(2, "--model", self.models["llama"], "--prompts", self.prompts, "--out", out, "--threads", "1",
                   "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.leftovers(out), [])

    def test_ctrl_c_stops_every_rank(self):
        out = self.path("interrupted.h5")
        job = subprocess.Popen([MPIRUN, "-np", "2", "--oversubscribe", *ROOT_FLAGS, PROBE, "--model", self.slow_model(),
                                "--prompts", self.slow_prompts(40), "--out", out, "--maps", "all", "--threads", "1",
                                "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        for _ in range(600):  # until both ranks have begun writing their parts
            if len(self.leftovers(out)) == 2 and self.rank_pid(out, 1):
                break
            time.sleep(0.05)
        self.assertEqual(len(self.leftovers(out)), 2, "the ranks never started")
        job.send_signal(signal.SIGINT)  # what Ctrl-C sends to mpirun
        _, err = job.communicate(timeout=600)
        self.assertNotEqual(job.returncode, 0)
        self.assertIn("not written", err, "exit %d" % job.returncode)
        self.assertFalse(os.path.exists(out))
        self.assertEqual(self.leftovers(out), [])
        self.assertIsNone(self.rank_pid(out, 0))
        self.assertIsNone(self.rank_pid(out, 1))

    def test_full_disk_names_the_rank_and_leaves_nothing(self):
        if os.geteuid() != 0:
            raise AssertionError("this test mounts a small tmpfs: run make test as root (CI does)")
        src = self.path("disk_src.h5")
        flags = ["--model", self.models["llama"], "--prompts", self.prompts, "--maps", "all", "--threads", "1",
                 "--quiet", "--force"]
        self.assertEqual(plain(*flags, "--out", src).returncode, 0)
        size = os.path.getsize(src) // 1024
        # full while the ranks write (a quarter of the dump), and while rank 0 joins (the
        # parts fit; the joined copy does not)
        for kib in (size // 4, size + size // 4):
            with self.subTest(kib=kib):
                mnt = tempfile.mkdtemp(dir=self.tmp)
                subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dk" % kib, "tmpfs", mnt], check=True)
                try:
                    out = os.path.join(mnt, "o.h5")
                    r = mpirun(2, *flags, "--out", out)
                    self.assertRegex(self.the_one_error(r, warnings_too=True),
                                     r"^probe: rank [01]: .*No space left on device")
                    self.assertEqual(os.listdir(mnt), [])
                finally:
                    subprocess.run(["umount", mnt], check=True)

    def test_too_little_room_is_refused_before_work(self):
        if os.geteuid() != 0:
            raise AssertionError("this test mounts a small tmpfs: run make test as root (CI does)")
        flags = ["--model", self.models["llama"], "--prompts", self.prompts, "--maps", "all", "--threads", "1"]
        mnt = tempfile.mkdtemp(dir=self.tmp)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], check=True)
        try:
            out = os.path.join(mnt, "o.h5")
            r = mpirun(2, *flags, "--out", out)
            self.assertRegex(self.the_one_error(r), r"^probe: rank 0: .*o\.h5: the job is projected to take up to "
                                                    r".* rank 0 joins .* free on its file system .*--force")
            self.assertEqual(os.listdir(mnt), [])
            # --force: one warning, then the disk really fills
            r = mpirun(2, *flags, "--out", out, "--force")
            self.assertNotEqual(r.returncode, 0)
            warn = [l for l in r.stderr.splitlines() if "projected" in l]
            self.assertEqual(len(warn), 1, r.stderr)
            self.assertIn("(--force: trying)", warn[0])
            self.assertEqual(os.listdir(mnt), [])
        finally:
            subprocess.run(["umount", mnt], check=True)

    def slow_model(self):
        model = self.path("slow")
        if not os.path.exists(model):
            make_model.make_model(model, "llama", layers=4, hidden=128, heads=4, vocab=97, seed=1)
        return model

    def slow_prompts(self, n=6):
        slow = self.path("slow%d.jsonl" % n)
        write_prompts(slow, [1200] * n)
        return slow

    @staticmethod
    def rank_pid(out, rank):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().split(b"\0")
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"probe") and out.encode() in cmd and \
                    ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in env:
                return int(pid)
        return None

    def test_usage_text(self):
        r = plain("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("mpirun -np N probe", r.stdout)
        self.assertIn("docs/cluster.md", r.stdout)
        r = mpirun(2, "--no-such-flag")
        self.assertEqual(r.stderr.count("usage: probe"), 1, r.stderr)  # rank 0 alone speaks


if __name__ == "__main__":
    unittest.main(verbosity=2)
