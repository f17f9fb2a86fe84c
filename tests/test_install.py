#!/usr/bin/python3
"""make install / make uninstall into a temporary DESTDIR (Makefile "install"): what is
installed (tools, libdifflens.a, libdifflens.so with its soname, the public headers,
difflens.pc, man pages, bash completion, docs); a C program built against the installed
library with `pkg-config --cflags --libs difflens` (statically and against the shared
library) that loads a model, runs the forward pass on a prompt and reads the dump back,
its logits checked against the float64 reference (tests/ref/reference.py); `man -l`
renders every page and each page names every option of the tool's --help; make uninstall
leaves nothing behind."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402
import reference  # noqa: E402

TOOLS = ["attnmap", "compare", "effects", "noise", "outliers", "probe", "tokenize", "train", "view"]
PREFIX = "/opt/difflens-test"

PROGRAM = r"""
/* Links against the installed libdifflens: model + prompt -> dump -> logits back. */
#include <stdio.h>
#include <stdlib.h>

#include "analysis/probe.h"
#include "base/version.h"
#include "dump/dump_read.h"

int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    dfl_probe_params p = dfl_probe_params_default();
    p.model_dir = argv[1];
    p.prompts_path = argv[2];
    p.out_path = argv[3];
    p.save_logits = 1;
    dfl_error err = {DFL_OK, ""};
    dfl_probe_report rep;
    dfl_status s = dfl_probe_run(&p, &rep, &err);
    if (s) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    dfl_dump_reader *r = NULL;
    dfl_dump_dset_info info;
    float *logits = NULL;
    size_t n = 0;
    if ((s = dfl_dump_open(argv[3], &r, &err)) ||
        (s = dfl_dump_dataset_info(r, "samples/000000/logits", &info, &err)) ||
        (s = dfl_dump_read_alloc(r, "samples/000000/logits", DFL_H5_F32, (void **)&logits, &n, &err))) {
        fprintf(stderr, "%s\n", err.msg);
        dfl_dump_close(r);
        return 1;
    }
    printf("{\"version\": \"%s\", \"samples\": %zu, \"tokens\": %lld, \"shape\": [%lld, %lld], \"logits\": [",
           DFL_VERSION, rep.samples, (long long)rep.tokens, (long long)info.dims[0], (long long)info.dims[1]);
    for (size_t i = 0; i < n; i++) printf("%s%.9g", i ? ", " : "", logits[i]);
    printf("]}\n");
    free(logits);
    dfl_dump_close(r);
    return 0;
}
"""


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    return r


def all_files(root):
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(out)


def sanitizers():
    """The Makefile's SAN flags (make asan builds and installs a sanitized library, and a
    program linked against it is built with the same flags); none in a plain build."""
    r = run(["make", "-s", "--no-print-directory", "-C", ROOT, "--eval", "print-%: ; @echo $($*)", "print-SAN"])
    return r.stdout.split()


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl_install_")
        cls.dest = os.path.join(cls.tmp, "dest")
        r = run(["make", "-C", ROOT, "install", "PREFIX=" + PREFIX, "DESTDIR=" + cls.dest])
        assert r.returncode == 0, r.stdout + r.stderr
        cls.top = cls.dest + PREFIX
        with open(os.path.join(ROOT, "lib", "base", "version.h")) as f:
            cls.version = re.search(r'DFL_VERSION "([^"]+)"', f.read()).group(1)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def pkg(self, *args):
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.top, "lib", "pkgconfig"))
        r = run(["pkg-config", "--define-variable=prefix=" + self.top, *args, "difflens"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def test_what_is_installed(self):
        for t in TOOLS:
            exe = os.path.join(self.top, "bin", t)
            self.assertTrue(os.access(exe, os.X_OK), t)
            self.assertEqual(run([exe, "--version"]).stdout, "%s (difflens) %s\n" % (t, self.version))
            self.assertTrue(os.path.isfile(os.path.join(self.top, "share", "man", "man1", t + ".1")), t)
            self.assertTrue(os.path.isfile(os.path.join(self.top, "share", "bash-completion", "completions", t)), t)
        lib = os.path.join(self.top, "lib")
        major = self.version.split(".")[0]
        self.assertTrue(os.path.isfile(os.path.join(lib, "libdifflens.a")))
        self.assertEqual(os.readlink(os.path.join(lib, "libdifflens.so")), "libdifflens.so." + major)
        self.assertEqual(os.readlink(os.path.join(lib, "libdifflens.so." + major)), "libdifflens.so." + self.version)
        dyn = run(["readelf", "-d", os.path.join(lib, "libdifflens.so." + self.version)]).stdout
        self.assertIn("Library soname: [libdifflens.so.%s]" % major, dyn)
        # the public headers: no *_internal.h, nothing that declares only dfl__ names
        inc = os.path.join(self.top, "include", "difflens")
        headers = all_files(inc)
        want = [h[len("lib/"):] for h in run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "public_headers.py")])
                .stdout.split()]
        self.assertEqual(headers, sorted(want))
        self.assertIn("analysis/probe.h", headers)
        self.assertFalse([h for h in headers if h.endswith("_internal.h")])
        self.assertNotIn("base/jsondoc.h", headers)
        self.assertEqual(self.pkg("--modversion"), [self.version])
        doc = os.path.join(self.top, "share", "doc", "difflens")
        for name in ("README.md", "probe.md", "format.md", "exit-codes.md"):
            self.assertTrue(os.path.isfile(os.path.join(doc, name)), name)

    def test_every_public_header_compiles_alone(self):
        cflags = self.pkg("--cflags")
        for h in all_files(os.path.join(self.top, "include", "difflens")):
            src = os.path.join(self.tmp, "h.c")
            with open(src, "w") as f:
                f.write('#include "%s"\nint main(void) { return 0; }\n' % h)
            r = run(["cc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-fsyntax-only", *cflags, src])
            self.assertEqual(r.returncode, 0, (h, r.stderr))

    def build_and_run(self, static):
        src = os.path.join(self.tmp, "use_difflens.c")
        with open(src, "w") as f:
            f.write(PROGRAM)
        exe = os.path.join(self.tmp, "use_static" if static else "use_shared")
        flags = self.pkg("--cflags", *(["--static"] if static else []), "--libs")
        if static:  # the archive, not the .so beside it
            flags = ["-Wl,-Bstatic" if f == "-ldifflens" else f for f in flags]
            flags.insert(flags.index("-Wl,-Bstatic") + 1, "-ldifflens")
            flags.insert(flags.index("-Wl,-Bstatic") + 2, "-Wl,-Bdynamic")
        r = run(["cc", "-std=c11", "-Wall", "-Werror", *sanitizers(), src, "-o", exe, *flags])
        self.assertEqual(r.returncode, 0, r.stderr)
        needed = run(["readelf", "-d", exe]).stdout
        self.assertEqual("libdifflens.so" in needed, not static, needed)
        model = os.path.join(self.tmp, "model")
        if not os.path.isdir(model):
            make_model.make_model(model, "llama", layers=2, hidden=16, heads=2, ffn=24, vocab=30, max_pos=64, seed=5)
        tokens = [0, 5, 9, 3, 17]
        prompts = os.path.join(self.tmp, "p.jsonl")
        with open(prompts, "w") as f:
            f.write(json.dumps({"tokens": tokens}) + "\n")
        out = os.path.join(self.tmp, "dump-%s.h5" % ("static" if static else "shared"))
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(self.top, "lib"))
        r = run([exe, model, prompts, out], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual((got["version"], got["samples"], got["tokens"]), (self.version, 1, len(tokens)))
        self.assertEqual(got["shape"], [len(tokens), 30])
        ref = reference.forward(reference.load_model(model), tokens)["logits"]
        np.testing.assert_allclose(np.array(got["logits"]).reshape(ref.shape), ref, rtol=1e-4, atol=1e-5)

    def test_a_program_linked_statically(self):
        self.build_and_run(static=True)

    def test_a_program_linked_against_the_shared_library(self):
        self.build_and_run(static=False)

    def test_man_pages_render_and_name_every_option(self):
        for t in TOOLS:
            page = os.path.join(self.top, "share", "man", "man1", t + ".1")
            r = run(["man", "-l", page], env=dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0"))
            self.assertEqual(r.returncode, 0, (t, r.stderr))
            self.assertEqual(r.stderr, "", t)
            text = re.sub(r".\x08", "", r.stdout)
            for head in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"):
                self.assertRegex(text, r"(?m)^%s$" % head, t)
            self.assertIn("difflens %s" % self.version, text)
            flat = " ".join(text.replace("\u2010", "-").split())
            self.assertIn("128+N stopped by signal N", flat)
            opts = run([os.path.join(self.top, "bin", t), "--list-options"]).stdout.split()
            for o in opts:
                self.assertIn(o.rstrip("="), flat, (t, o))
        noise = run(["man", "-l", os.path.join(self.top, "share", "man", "man1", "noise.1")],
                    env=dict(os.environ, MANWIDTH="100")).stdout
        self.assertIn("NOISE PROMPTS", noise)
        self.assertIn("--needles", noise)

    def test_uninstall_removes_everything(self):
        dest = os.path.join(self.tmp, "dest2")
        r = run(["make", "-C", ROOT, "install", "PREFIX=/usr", "DESTDIR=" + dest])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(len(all_files(dest)), 50)
        os.makedirs(os.path.join(dest, "usr", "bin", "keep"), exist_ok=True)
        with open(os.path.join(dest, "usr", "bin", "other-tool"), "w") as f:
            f.write("not ours\n")
        r = run(["make", "-C", ROOT, "uninstall", "PREFIX=/usr", "DESTDIR=" + dest])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(all_files(dest), ["usr/bin/other-tool"])
        links = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if os.path.islink(os.path.join(d, f))]
        self.assertEqual(links, [])


if __name__ == "__main__":
    unittest.main()
