#!/usr/bin/python3
"""Reliability of every tool that writes (issue 18): signals stop it cleanly (no
temporary file, exit 128 + signal, one line); a temporary left by kill -9 is removed by
the next writer; a second writer to the same output fails at once; a full disk gives
exit 1 and one line naming it, no crash and no file at the final name; an output that
is one of the inputs is refused even with --force."""
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

BIN = os.environ.get("BIN", "bin")
TOOL = {t: os.path.join(BIN, t) for t in ("probe", "attnmap", "outliers", "noise", "train")}
TRAIN_TINY = ["--layers", "2", "--hidden", "32", "--heads", "4", "--ffn", "64", "--seq", "48", "--needles", "2",
              "--digits", "2", "--batch", "4", "--eval-samples", "8", "--warmup", "3", "--lr", "3e-3", "--quiet"]


def temps(folder):
    """Temporary files of our naming (".NAME.tmp.PID.XXXXXX") in folder."""
    return glob.glob(os.path.join(folder, ".*.tmp.*"))


def writing(proc, folder):
    """The temporaries in folder that proc holds open as its dump, still held 0.2 s later
    (probe also makes and removes one at once when it checks --out can be written: a
    signal sent then would reach it before it writes anything)."""
    def held():
        try:
            fds = os.listdir("/proc/%d/fd" % proc.pid)
        except OSError:
            return set()
        out = set()
        for fd in fds:
            try:
                t = os.readlink("/proc/%d/fd/%s" % (proc.pid, fd))
            except OSError:
                continue
            if os.path.dirname(t) == os.path.realpath(folder) and ".tmp." in os.path.basename(t):
                out.add(t)
        return out
    first = held()
    if not first:
        return []
    time.sleep(0.2)
    return sorted(first & held())


def wait_for(pred, proc, what):
    """Poll until pred() holds (the process still running); no wall-clock limit: a
    process that ends first fails the wait."""
    while not pred():
        if proc.poll() is not None:
            raise AssertionError("%s: the process ended (%s) before %s" % (proc.args[0], proc.returncode, what))
        time.sleep(0.002)


def one_line(test, stderr, *needles):
    lines = stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, stderr)
    for n in needles:
        test.assertIn(n, lines[0])
    return lines[0]


class Fixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="dfl_rel_")
        cls.model = os.path.join(cls.root, "m")
        make_model.make_model(cls.model, "diff_transformer", layers=2, hidden=16, heads=2, ffn=24, vocab=30,
                              max_pos=128, seed=3)
        cls.small = cls.prompts("small.jsonl", 4, 8)
        cls.big = cls.prompts("big.jsonl", 4000, 64)   # a run of several seconds
        cls.dump = os.path.join(cls.root, "maps.h5")
        r = subprocess.run([TOOL["probe"], "--model", cls.model, "--prompts", cls.small, "--out", cls.dump,
                            "--maps", "all", "--quiet"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    @classmethod
    def prompts(cls, name, n, T):
        path = os.path.join(cls.root, name)
        with open(path, "w") as f:
            for i in range(n):
                toks = [0] + [5 + (i + j) % 20 for j in range(T - 1)]
                f.write(json.dumps({"id": "s%d" % i, "tokens": toks, "answer": [[1, 3]]}) + "\n")
        return path

    def folder(self):
        return tempfile.mkdtemp(dir=self.root)

    def start_probe(self, out, prompts=None):
        return subprocess.Popen([TOOL["probe"], "--model", self.model, "--prompts", prompts or self.big,
                                 "--out", out, "--quiet", "--threads", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Signals(Fixture):
    def test_probe_signals(self):
        for sig, code, name in ((signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM"),
                                (signal.SIGHUP, 129, "SIGHUP")):
            d = self.folder()
            out = os.path.join(d, "out.h5")
            p = self.start_probe(out)
            wait_for(lambda: writing(p, d), p, "it is writing its temporary file")
            p.send_signal(sig)
            _, err = p.communicate()
            self.assertEqual(p.returncode, code, err)
            one_line(self, err, "probe: ", name)
            self.assertEqual(temps(d), [], name)
            self.assertFalse(os.path.exists(out))

    def test_noise_prompts_signal(self):
        d = self.folder()
        out = os.path.join(d, "p.jsonl")
        p = subprocess.Popen([TOOL["noise"], "prompts", "-o", out, "--length", "4096", "--samples", "100",
                              "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: writing(p, d), p, "it is writing its temporary file")
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate()
        self.assertEqual(p.returncode, 143, err)
        one_line(self, err, "noise: ", "SIGTERM")
        self.assertEqual(temps(d), [])
        self.assertFalse(os.path.exists(out))

    def test_attnmap_signal(self):
        d = self.folder()
        out = os.path.join(d, "a.png")
        p = subprocess.Popen([TOOL["attnmap"], self.dump, "-o", out, "--layer", "all", "--size", "8192",
                              "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: writing(p, d), p, "it is writing its temporary file")
        p.send_signal(signal.SIGINT)
        _, err = p.communicate()
        self.assertEqual(p.returncode, 130, err)
        one_line(self, err, "attnmap: ", "SIGINT")
        self.assertEqual(temps(d), [])
        self.assertFalse(os.path.exists(out))

    def test_outliers_signal(self):
        # outliers blocked writing its report (> 64 KiB) into a pipe nobody reads
        wide = os.path.join(self.root, "wide")
        make_model.make_model(wide, "llama", layers=4, hidden=64, heads=2, ffn=24, vocab=30, max_pos=64, seed=1)
        dump = os.path.join(self.root, "wide.h5")
        r = subprocess.run([TOOL["probe"], "--model", wide, "--prompts", self.small, "--out", dump, "--quiet"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        args = [TOOL["outliers"]] + [dump] * 16 + ["--channels", "--per-layer", "--format", "csv"]
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def blocked():
            # asleep in a pipe write: the kernel's wait channel says so, or (where it
            # is hidden) a sleeping process that has written a full pipe's worth
            with open("/proc/%d/wchan" % p.pid) as f:
                if "pipe_write" in f.read():
                    return True
            with open("/proc/%d/stat" % p.pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open("/proc/%d/io" % p.pid) as f:
                wchar = int([l for l in f if l.startswith("wchar")][0].split()[1])
            return state == "S" and wchar >= 65536
        wait_for(blocked, p, "it blocked on stdout")
        p.send_signal(signal.SIGHUP)
        err = p.stderr.read().decode()
        p.wait()
        p.stdout.close()
        p.stderr.close()
        self.assertEqual(p.returncode, 129, err)
        one_line(self, err, "outliers: ", "SIGHUP")

    def test_kill9_then_next_run_cleans(self):
        d = self.folder()
        p = self.start_probe(os.path.join(d, "out.h5"))
        wait_for(lambda: writing(p, d), p, "it is writing its temporary file")
        p.kill()
        p.communicate()
        stale = temps(d)
        self.assertEqual(len(stale), 1)
        self.assertIn(".tmp.%d." % p.pid, stale[0])   # the pid is in the name
        # the next writer in the same folder (another output) removes it
        r = subprocess.run([TOOL["probe"], "--model", self.model, "--prompts", self.small, "--out",
                            os.path.join(d, "other.h5"), "--quiet"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(temps(d), [])

    def test_second_writer_fails_at_once(self):
        d = self.folder()
        out = os.path.join(d, "out.h5")
        p = self.start_probe(out)
        try:
            wait_for(lambda: writing(p, d), p, "it is writing its temporary file")
            r = subprocess.run([TOOL["probe"], "--model", self.model, "--prompts", self.small, "--out", out,
                                "--quiet"], capture_output=True, text=True)
            # the first one is still running: the second did not wait for it
            self.assertIsNone(p.poll())
            self.assertEqual(r.returncode, 1, r.stderr)
            one_line(self, r.stderr, "being written by process %d" % p.pid)
            # the same with --force: a lock, not an overwrite check
            r = subprocess.run([TOOL["probe"], "--model", self.model, "--prompts", self.small, "--out", out,
                                "--quiet", "--force"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("being written", r.stderr)
        finally:
            p.kill()
            p.communicate()


class InputsAreNotOutputs(Fixture):
    def check_refused(self, args, victim):
        with open(victim, "rb") as f:
            before = f.read()
        r = subprocess.run(args, capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        one_line(self, r.stderr, "an output never replaces an input")
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), before, " ".join(args))

    def test_every_tool(self):
        d = self.folder()
        # dumps named like figures, so that the figure-extension check passes and the
        # input check is what refuses them
        dump = os.path.join(d, "in.svg")
        shutil.copy(self.dump, dump)
        link = os.path.join(d, "link.svg")
        os.symlink(dump, link)
        hard = os.path.join(d, "hard.svg")
        os.link(dump, hard)
        model = os.path.join(d, "model")
        shutil.copytree(self.model, model)
        prompts = os.path.join(d, "p.jsonl")
        shutil.copy(self.small, prompts)
        probe = [TOOL["probe"], "--model", model, "--prompts", prompts, "--quiet", "--force", "--out"]
        self.check_refused(probe + [os.path.join(model, "model.safetensors")], os.path.join(model, "model.safetensors"))
        self.check_refused(probe + [os.path.join(d, "model", "..", "model", "config.json")],
                           os.path.join(model, "config.json"))
        self.check_refused(probe + [prompts], prompts)
        for out in (dump, link, hard, os.path.join(d, ".", "in.svg")):
            self.check_refused([TOOL["attnmap"], dump, "-o", out, "--force", "--quiet"], dump)
            self.check_refused([TOOL["outliers"], dump, "--plot", out, "--force"], dump)
            self.check_refused([TOOL["noise"], dump, "--plot", out, "--force", "--quiet"], dump)
            self.check_refused([TOOL["noise"], dump, "--plot-depth", out, "--force", "--quiet"], dump)
        self.check_refused([TOOL["attnmap"], self.dump, "--vs", dump, "-o", hard, "--force", "--quiet"], dump)
        tmpl = os.path.join(d, "t.json")
        with open(tmpl, "w") as f:
            json.dump({"haystack": [5, 6, 7], "needle": [8, 9], "answer": [0, 1], "query": [10], "target": [9],
                       "bos": 0, "vocab_size": 30}, f)
        self.check_refused([TOOL["noise"], "prompts", "--template", tmpl, "-o", tmpl, "--force", "--quiet"], tmpl)
        # a new file beside the inputs is fine
        r = subprocess.run(probe + [os.path.join(model, "new.h5")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


class FullDisk(Fixture):
    """A small tmpfs when root (it is mounted and unmounted here), else a file-size
    limit (RLIMIT_FSIZE with SIGXFSZ ignored: writes then fail with EFBIG)."""

    def setUp(self):
        self.mnt = None

    def tearDown(self):
        if self.mnt:
            subprocess.run(["umount", self.mnt], check=True)

    def small_disk(self, kib):
        d = self.folder()
        if self.mnt:
            subprocess.run(["umount", self.mnt], check=True)
            self.mnt = None
        if os.geteuid() == 0:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dk" % kib, "tmpfs", d], capture_output=True)
            if r.returncode == 0:
                self.mnt = d
                return d, None
        limit = kib * 1024

        def pre():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        return d, pre

    def expect_full(self, args, kib, out, tool, lines=1):
        d, pre = self.small_disk(kib)
        args = [a.replace("@", d) for a in args]
        r = subprocess.run(args, capture_output=True, text=True, preexec_fn=pre)
        self.assertEqual(r.returncode, 1, "%s at %d KiB: %s" % (tool, kib, r.stderr))
        err = r.stderr.strip().splitlines()
        self.assertLessEqual(len(err), lines, r.stderr)
        self.assertTrue(err[-1].startswith(tool + ": "), r.stderr)
        self.assertRegex(err[-1], "No space left on device|File too large", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, out)), "%s at %d KiB" % (tool, kib))
        self.assertEqual(temps(d), [], "%s at %d KiB" % (tool, kib))

    def test_probe(self):
        # full at creation, among the samples, with maps, and at the close (--force: past
        # the projected-size check, to the real ENOSPC)
        for kib, maps in ((4, "none"), (40, "none"), (120, "none"), (200, "all")):
            self.expect_full([TOOL["probe"], "--model", self.model, "--prompts", self.big, "--out", "@/o.h5",
                              "--maps", maps, "--quiet", "--force", "--threads", "1"], kib, "o.h5", "probe", lines=2)

    def test_probe_projected_size(self):
        d, pre = self.small_disk(256)
        out = os.path.join(d, "o.h5")
        r = subprocess.run([TOOL["probe"], "--model", self.model, "--prompts", self.big, "--out", out, "--quiet"],
                           capture_output=True, text=True, preexec_fn=pre)
        self.assertEqual(r.returncode, 1, r.stderr)
        line = one_line(self, r.stderr, "projected to take up to", "free on its file system", "--force")
        self.assertEqual(os.listdir(d), [], line)
        # a run that fits is not refused
        r = subprocess.run([TOOL["probe"], "--model", self.model, "--prompts", self.small, "--out", out, "--quiet"],
                           capture_output=True, text=True, preexec_fn=pre)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_projection_bounds_the_dump(self):
        # the projected size is an upper bound of what probe writes: on a disk that holds
        # the dump exactly (rounded down to a page), the projection refuses the run
        model = os.path.join(self.root, "llama_room")
        if not os.path.exists(model):
            make_model.make_model(model, "llama", layers=2, hidden=32, heads=4, kv_heads=2, vocab=30, max_pos=2048,
                                  seed=4)
        prompts = self.prompts("room.jsonl", 3, 1100)
        with open(prompts, "a") as f:  # one more, not a whole number of tiles long
            f.write(json.dumps({"id": "short", "tokens": [0] + [5 + j % 20 for j in range(700)], "answer": [[1, 3]]})
                    + "\n")
        cases = [(self.model, ["--maps", "all"]), (model, ["--maps", "all", "--map-dtype", "f32"]),
                 (model, ["--maps", "rows=analysis", "--save-logits"]),
                 (self.model, ["--maps", "layers=1;heads=0;rows=3,40,600,690"]), (model, ["--maps", "none"])]
        for m, extra in cases:
            with self.subTest(model=os.path.basename(m), flags=extra):
                d = self.folder()
                out = os.path.join(d, "full.h5")
                r = subprocess.run([TOOL["probe"], "--model", m, "--prompts", prompts, "--out", out, "--quiet",
                                    "--threads", "1", *extra], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                size = os.path.getsize(out)
                small, _ = self.small_disk(size // 4096 * 4)
                self.assertIsNotNone(self.mnt, "needs root for a tmpfs of the dump's size")
                r = subprocess.run([TOOL["probe"], "--model", m, "--prompts", prompts, "--out",
                                    os.path.join(small, "o.h5"), "--quiet", "--threads", "1", *extra],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 1, "not refused: the dump is %d bytes; %s" % (size, r.stderr))
                self.assertIn("projected to take up to", r.stderr)
                self.assertEqual(os.listdir(small), [])

    def test_png_and_jsonl_writers(self):
        self.expect_full([TOOL["attnmap"], self.dump, "-o", "@/a.png", "--quiet"], 4, "a.png", "attnmap")
        self.expect_full([TOOL["outliers"], self.dump, "--plot", "@/o.png"], 4, "o.png", "outliers")
        self.expect_full([TOOL["noise"], self.dump, "--plot", "@/n.png", "--quiet"], 4, "n.png", "noise")
        self.expect_full([TOOL["noise"], "prompts", "-o", "@/p.jsonl", "--quiet"], 4, "p.jsonl", "noise prompts")

    def test_train_checkpoint(self):
        # the plot may warn first; the checkpoint failure is the error
        self.expect_full([TOOL["train"], "--out", "@/t", "--steps", "4", "--eval-every", "2"] + TRAIN_TINY, 100,
                         "t/checkpoint.safetensors", "train", lines=2)


class Parsers(Fixture):
    """Ambiguous input read as Python's json (Hugging Face) reads it, or refused with
    the real reason."""

    def model_with(self, name, config_text=None):
        d = os.path.join(self.root, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.model, d)
        if config_text is not None:
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write(config_text)
        return d

    def probe(self, model, prompts=None):
        out = os.path.join(self.root, "parse.h5")
        return subprocess.run([TOOL["probe"], "--model", model, "--prompts", prompts or self.small, "--out", out,
                               "--force", "--quiet", "--threads", "1"], capture_output=True, text=True), out

    def config(self):
        with open(os.path.join(self.model, "config.json")) as f:
            return json.load(f)

    def test_config_duplicate_keys_last_wins(self):
        cfg = self.config()
        layers = cfg.pop("num_hidden_layers")
        text = json.dumps(cfg)[:-1] + ', "num_hidden_layers": 7, "num_hidden_layers": %d}' % layers
        self.assertEqual(json.loads(text)["num_hidden_layers"], layers)   # the reference
        r, out = self.probe(self.model_with("dup", text))
        self.assertEqual(r.returncode, 0, r.stderr)
        import h5py
        with h5py.File(out) as f:
            self.assertEqual(f.attrs["num_layers"], json.loads(text)["num_hidden_layers"])

    def test_config_refusals(self):
        cfg = self.config()
        text = json.dumps(cfg)
        cases = [(text + "\n{}", "text after the JSON document"),
                 (json.dumps(dict(cfg, model_type=5)), '"model_type" must be a string'),
                 (json.dumps(dict(cfg, rope_scaling={"type": "linear"})), 'needs "factor"'),
                 (json.dumps(dict(cfg, rope_scaling={"rope_type": "llama3", "low_freq_factor": 1})), 'needs "factor"')]
        for i, (t, needle) in enumerate(cases):
            r, out = self.probe(self.model_with("bad%d" % i, t))
            self.assertEqual(r.returncode, 1, r.stderr)
            one_line(self, r.stderr, "config.json", needle)
            with self.assertRaises(ValueError if i == 0 else AssertionError):
                json.loads(t)
                if i:
                    raise AssertionError   # valid JSON: the refusal is about content

    def test_weights_not_a_file(self):
        d = self.model_with("fifo")
        os.remove(os.path.join(d, "model.safetensors"))
        os.mkfifo(os.path.join(d, "model.safetensors"))
        r = subprocess.run([TOOL["probe"], "--model", d, "--prompts", self.small, "--out",
                            os.path.join(self.root, "f.h5"), "--quiet"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 1, r.stderr)
        one_line(self, r.stderr, "model.safetensors: not a regular file")
        d = self.model_with("loop")
        os.remove(os.path.join(d, "model.safetensors"))
        os.symlink("model.safetensors", os.path.join(d, "model.safetensors"))
        r, _ = self.probe(d)
        self.assertEqual(r.returncode, 1, r.stderr)
        one_line(self, r.stderr, "model.safetensors: " + os.strerror(40))   # ELOOP

    def test_prompts(self):
        path = os.path.join(self.root, "u8.jsonl")
        bad = b'{"tokens": [0, 5], "text": ["a", "\xff"]}'
        with open(path, "wb") as f:
            f.write(b'{"tokens": [0, 5]}\n' + bad + b'\n')
        r, _ = self.probe(self.model, path)
        self.assertEqual(r.returncode, 1, r.stderr)
        one_line(self, r.stderr, "u8.jsonl:2: invalid UTF-8 at byte %d" % (bad.index(b"\xff") + 1))
        line = '{"tokens": [0, 5], "id": "first", "id": "second", "tokens": [0, 6, 7]}'
        with open(path, "w") as f:
            f.write(line + "\n")
        r, out = self.probe(self.model, path)
        self.assertEqual(r.returncode, 0, r.stderr)
        ref = json.loads(line)
        import h5py
        with h5py.File(out) as f:
            self.assertEqual(list(f["samples/000000/tokens"][:]), ref["tokens"])
            self.assertEqual(f["samples/000000"].attrs["id"], ref["id"])

    def test_attnmap_quotes_what_was_typed(self):
        r = subprocess.run([TOOL["attnmap"], self.dump, "-o", os.path.join(self.root, "c.png"), "--cols", "70:80",
                            "--force"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        one_line(self, r.stderr, "--cols 70:80 selects no keys")


class TrainResume(Fixture):
    def train(self, *args):
        e = dict(os.environ, OMP_NUM_THREADS="2")
        # args after the tiny defaults: a later flag wins
        return subprocess.run([TOOL["train"]] + TRAIN_TINY + ["--threads", "2", *args], capture_output=True, text=True,
                              env=e)

    @staticmethod
    def csv_numbers(path):
        """step, lr, loss, eval_loss, eval_acc of every row (the timing columns differ)."""
        with open(path) as f:
            return [line.split(",")[:5] for line in f.read().splitlines()]

    def test_csv_continues_exactly(self):
        base = ["--type", "diff_transformer", "--steps", "12", "--eval-every", "5", "--ckpt-every", "0"]
        a, b = os.path.join(self.root, "tra"), os.path.join(self.root, "trb")
        r = self.train("--out", a, *base)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.train("--out", b, "--stop-at", "7", *base)   # stops inside the window 6..10
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.train("--out", b, "--resume", *base)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.csv_numbers(os.path.join(b, "train.csv")), self.csv_numbers(os.path.join(a, "train.csv")))

    def test_signals(self):
        for sig, code in ((signal.SIGTERM, 143), (signal.SIGHUP, 129)):
            d = os.path.join(self.root, "trsig%d" % code)
            e = dict(os.environ, OMP_NUM_THREADS="1")
            p = subprocess.Popen([TOOL["train"]] + TRAIN_TINY + ["--out", d, "--steps", "100000", "--eval-every", "0",
                                                                  "--ckpt-every", "0", "--threads", "1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
            wait_for(lambda: os.path.isdir(d), p, "it made its folder")
            p.send_signal(sig)
            _, err = p.communicate()
            self.assertEqual(p.returncode, code, err)
            one_line(self, err, "stopped; continue with --resume")
            self.assertTrue(os.path.exists(os.path.join(d, "checkpoint.safetensors")))
            self.assertEqual(temps(d), [])

    def test_schedule_and_failed_resume(self):
        base = ["--type", "llama", "--eval-every", "0", "--ckpt-every", "0"]
        d = os.path.join(self.root, "trs")
        r = self.train("--out", d, "--steps", "10", "--stop-at", "3", *base)
        self.assertEqual(r.returncode, 0, r.stderr)
        for other in (["--steps", "20"], ["--steps", "10", "--lr", "1e-3"], ["--steps", "10", "--warmup", "5"]):
            r = self.train("--out", d, "--resume", "--stop-at", "4", *(base + other))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--force-schedule", r.stderr)
        r = self.train("--out", d, "--resume", "--force-schedule", "--steps", "20", "--stop-at", "4", *base)
        self.assertEqual(r.returncode, 0, r.stderr)
        # a --resume into a folder that does not exist fails and makes none
        missing = os.path.join(self.root, "nothing", "here")
        r = self.train("--out", missing, "--resume", "--steps", "10", *base)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no checkpoint", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.root, "nothing")))


class DumpSize(Fixture):
    def test_per_sample_overhead(self):
        # 100 and 300 two-token prompts: the difference is 200 samples' worth
        sizes = []
        for n in (100, 300):
            path = os.path.join(self.root, "two%d.jsonl" % n)
            with open(path, "w") as f:
                for i in range(n):
                    f.write(json.dumps({"tokens": [0, 5 + i % 20]}) + "\n")
            out = os.path.join(self.root, "two%d.h5" % n)
            r = subprocess.run([TOOL["probe"], "--model", self.model, "--prompts", path, "--out", out, "--quiet",
                                "--threads", "1"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            sizes.append(os.path.getsize(out))
        per_sample = (sizes[1] - sizes[0]) / 200
        self.assertLessEqual(per_sample, 16 * 1024, per_sample)


if __name__ == "__main__":
    unittest.main(verbosity=1)
