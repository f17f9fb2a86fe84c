#!/usr/bin/python3
"""What every tool shares (lib/base/cli.c, docs/exit-codes.md): --version from
lib/base/version.h; bash completion generated from the getopt tables (scripts/completion.py)
that completes what the tools accept, run through bash's own completion machinery; the
progress bar only on a terminal (a pty here) and never with NO_COLOR or --quiet; the
exit codes of docs/exit-codes.md."""
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

BIN = os.path.abspath(os.environ.get("BIN", os.path.join(ROOT, "bin")))
TOOLS = ["attnmap", "compare", "effects", "noise", "outliers", "probe", "tokenize", "train", "view"]


def version_h():
    with open(os.path.join(ROOT, "lib", "base", "version.h")) as f:
        return re.search(r'#define DFL_VERSION "([^"]+)"', f.read()).group(1)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def help_options(text):
    """Every --flag named in a --help text's usage lines and option lines."""
    found = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        usage = line.startswith("usage:") or (i < 6 and line.startswith("       "))
        m = re.match(r"^ {1,4}(-.*?)(?:  |$)", line)
        part = line if usage else (m.group(1) if m else "")
        found |= set(re.findall(r"--[a-z0-9][a-z0-9-]*", part))
    return found


class Version(unittest.TestCase):
    def test_every_tool_answers_version_from_version_h(self):
        v = version_h()
        self.assertRegex(v, r"^\d+\.\d+\.\d+$")
        for tool in TOOLS:
            r = run([os.path.join(BIN, tool), "--version"])
            self.assertEqual(r.returncode, 0, tool)
            self.assertEqual(r.stdout, "%s (difflens) %s\n" % (tool, v))
            self.assertEqual(r.stderr, "")
        r = run([os.path.join(BIN, "noise"), "prompts", "--version"])
        self.assertEqual((r.returncode, r.stdout), (0, "noise prompts (difflens) %s\n" % v))

    def test_help_names_version(self):
        for tool in TOOLS:
            self.assertIn("--version", run([os.path.join(BIN, tool), "--help"]).stdout, tool)


class Completion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl_cli_")
        cls.comp = os.path.join(cls.tmp, "completions")
        r = run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "completion.py"), BIN, cls.comp])
        assert r.returncode == 0, r.stderr
        cls.files = os.path.join(cls.tmp, "files")
        os.makedirs(cls.files)
        for name in ("model.safetensors", "prompts.jsonl"):
            open(os.path.join(cls.files, name), "w").close()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def complete(self, tool, words):
        """COMPREPLY of the generated function for the command line `words` (the last
        one is the word being completed), computed by bash itself."""
        line = " ".join(["'%s'" % w for w in words])
        script = ('source "%s"; COMP_WORDS=(%s); COMP_CWORD=%d; fn=$(complete -p %s | sed "s/.*-F \\([^ ]*\\).*/\\1/");'
                  ' $fn; printf "%%s\\n" "${COMPREPLY[@]}"' % (os.path.join(self.comp, tool), line, len(words) - 1, tool))
        r = run(["bash", "--norc", "--noprofile", "-c", script], cwd=self.files)
        self.assertEqual(r.returncode, 0, r.stderr)
        return sorted(x for x in r.stdout.splitlines() if x)

    def test_one_file_per_tool_naming_the_version(self):
        self.assertEqual(sorted(os.listdir(self.comp)), TOOLS)
        with open(os.path.join(self.comp, "probe")) as f:
            self.assertIn("difflens %s" % version_h(), f.read())

    def test_options_are_the_getopt_table_and_the_help(self):
        for tool in TOOLS:
            table = run([os.path.join(BIN, tool), "--list-options"]).stdout.split()
            offered = self.complete(tool, [tool, "--"])
            self.assertEqual(offered, sorted(o.rstrip("=") for o in table), tool)
            self.assertIn("--version", offered)
            self.assertNotIn("--list-options", offered)
            # the table, the completion and the --help text name the same options
            self.assertEqual(set(offered), help_options(run([os.path.join(BIN, tool), "--help"]).stdout), tool)
            # and the tool accepts each one (getopt does not call it unrecognized)
            for opt in table:
                r = run([os.path.join(BIN, tool), opt + ("x" if opt.endswith("=") else ""), "--help"],
                        stdin=subprocess.DEVNULL)
                self.assertNotRegex(r.stderr, "unrecognized|unknown or incomplete", (tool, opt))

    def test_prefixes_values_and_subcommands(self):
        self.assertEqual(self.complete("probe", ["probe", "--mo"]), ["--model"])
        self.assertEqual(self.complete("probe", ["probe", "--save"]), ["--save-hidden", "--save-logits"])
        # a value: file names, not options
        self.assertEqual(self.complete("probe", ["probe", "--model", "mo"]), ["model.safetensors"])
        self.assertEqual(self.complete("probe", ["probe", "--prompts", ""]), ["model.safetensors", "prompts.jsonl"])
        # a flag without a value is followed by options or files again
        self.assertEqual(self.complete("probe", ["probe", "--quiet", "--fo"]), ["--force"])
        # noise prompts has its own table
        self.assertEqual(self.complete("noise", ["noise", "pro"]), ["prompts", "prompts.jsonl"])
        self.assertEqual(self.complete("noise", ["noise", "prompts", "--len"]), ["--length"])
        self.assertEqual(self.complete("noise", ["noise", "--len"]), [])
        self.assertEqual(self.complete("noise", ["noise", "--no"]), ["--norm"])


class Progress(unittest.TestCase):
    """The bar is "\\r... [###---]" redrawn on stderr: only when stderr is a terminal."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl_bar_")
        cls.model = os.path.join(cls.tmp, "m")
        make_model.make_model(cls.model, "llama", layers=1, hidden=16, heads=2, ffn=24, vocab=30, max_pos=64, seed=3)
        cls.prompts = os.path.join(cls.tmp, "p.jsonl")
        with open(cls.prompts, "w") as f:
            for i in range(3):
                f.write(json.dumps({"tokens": [0, 5, 6, 7 + i], "answer": [[1, 3]]}) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def probe_stderr(self, tty, extra=(), env_extra=None):
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        env.update(env_extra or {})
        out = os.path.join(tempfile.mkdtemp(dir=self.tmp), "o.h5")
        args = [os.path.join(BIN, "probe"), "--model", self.model, "--prompts", self.prompts, "--out", out, *extra]
        if not tty:
            r = subprocess.run(args, capture_output=True, env=env, stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stderr.decode()
        master, slave = pty.openpty()
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        os.close(master)
        self.assertEqual(p.wait(), 0)
        return b"".join(chunks).decode()

    def test_bar_only_on_a_terminal(self):
        bar = re.compile(r"\rprobe[^\n]*\[[#-]{24}\]")
        self.assertRegex(self.probe_stderr(True), bar)
        self.assertNotRegex(self.probe_stderr(False), bar)
        self.assertNotIn("\r", self.probe_stderr(False))

    def test_no_bar_with_no_color_or_quiet(self):
        for env, extra in (({"NO_COLOR": "1"}, ()), ({"NO_COLOR": "yes"}, ()), ({}, ("--quiet",))):
            err = self.probe_stderr(True, extra, env)
            self.assertNotIn("[#", err, (env, extra))
            self.assertNotIn("[-", err, (env, extra))
        # an empty NO_COLOR is unset (no-color.org)
        self.assertIn("[", self.probe_stderr(True, (), {"NO_COLOR": ""}))


class ExitCodes(unittest.TestCase):
    def table(self):
        with open(os.path.join(ROOT, "docs", "exit-codes.md")) as f:
            return [m.group(1) for m in re.finditer(r"^\| ([0-9][0-9+N]*) \|", f.read(), re.M)]

    def test_the_one_table(self):
        self.assertEqual(self.table(), ["0", "1", "2", "128+N"])

    def test_each_tool_keeps_it(self):
        missing = os.path.join(tempfile.gettempdir(), "dfl-no-such-file.h5")
        runtime = {"attnmap": [missing, "-o", missing + ".png"], "compare": [missing, missing], "effects": ["heads", missing], "noise": [missing],
                   "outliers": [missing],
                   "probe": ["--model", missing, "--prompts", missing, "--out", missing + ".out"],
                   "tokenize": ["--tokenizer", missing], "train": ["--plot-only", "--plot", missing + ".png",
                                                                   "--out", missing],
                   "view": [missing]}
        for tool in TOOLS:
            exe = os.path.join(BIN, tool)
            self.assertEqual(run([exe, "--help"]).returncode, 0, tool)
            self.assertEqual(run([exe, "--no-such-flag"]).returncode, 2, tool)
            r = run([exe, *runtime[tool]], stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 1, (tool, r.stderr))
            # a tool's own "Exit status" line names only codes of the table
            text = run([exe, "--help"]).stdout
            m = re.search(r"(?is)exit status:(.*?)(\n\n|$)", text)
            if m:
                for code in re.findall(r"\b(\d+)\b(?= (?:ok|done|runtime|usage|stopped))", m.group(1)):
                    self.assertTrue(code in ("0", "1", "2") or int(code) > 128, (tool, code))
    # 128+N on a signal: tests/test_reliability.py and tests/test_train.py stop tools with signals.


if __name__ == "__main__":
    unittest.main()
