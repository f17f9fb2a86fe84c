#!/usr/bin/python3
"""test_hostile_dumps.py — a dump cannot reach outside itself (issue 24). From a real
bin/probe dump, h5py builds one hostile dump per kind of HDF5 object that would make a
reader take data from another file or load code: an external link (a whole extra
sample, a sample's tokens, datasets deep in a sample), a soft link (to another
sample's tokens, a sample's attn group), external storage, a virtual dataset and a
filter HDF5 does not ship (h5py's LZF). Every dump-reading tool (attnmap, outliers,
noise, view) runs on each: it refuses, exit 1, one line naming the object and the kind,
and nothing of the outside file comes out (the outside data holds values no real dump
has: token ids 4242, shares 42.0, segment 77). A last case has the viewer start (the
hostile dataset is read only on request) and leave it out of its answer.

Run from the repo root:  /usr/bin/python3 tests/test_hostile_dumps.py   (BIN=bin)
"""
import http.client
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

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
TOOL = {t: os.path.join(BIN, t) for t in ("probe", "attnmap", "outliers", "noise", "view")}
MAGIC_TOKEN = 4242   # what the outside file holds instead of token ids
MAGIC_SHARE = 42.0   # ... instead of attention shares
MAGIC_SEGMENT = 77   # ... and instead of segment ids
REFUSED = {"external link": "an external link", "soft link": "a soft link",
           "external storage": "its data is in an external file", "virtual": "a virtual dataset",
           "filter": "filter 32000 ('lzf') is not one HDF5 ships"}


def datasets(group):
    """Paths of every dataset under group (h5py), in visiting order."""
    out = []
    group.visititems(lambda n, o: out.append(n) if isinstance(o, h5py.Dataset) else None)
    return out


def copy_attrs(src, dst):
    for k, v in src.attrs.items():
        if k not in ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"):
            dst.attrs[k] = v


class HostileDumps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for t in TOOL.values():
            if not os.access(t, os.X_OK):
                raise AssertionError("no %s (run make first)" % t)
        cls.root = tempfile.mkdtemp(prefix="dfl_hostile_")
        model = os.path.join(cls.root, "m")
        make_model.make_model(model, "diff_transformer", layers=2, hidden=32, heads=2, ffn=48, vocab=128,
                              max_pos=256, seed=5)
        prompts = os.path.join(cls.root, "p.jsonl")
        r = subprocess.run([os.path.join(BIN, "noise"), "prompts", "-o", prompts, "--length", "64", "--samples", "1",
                            "--quiet"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        cls.base = os.path.join(cls.root, "base.h5")
        r = subprocess.run([TOOL["probe"], "--model", model, "--prompts", prompts, "--out", cls.base, "--maps", "all",
                            "--quiet"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        # the outside file: a dump of the same shape whose values no real dump has
        cls.outside = os.path.join(cls.root, "outside.h5")
        shutil.copy(cls.base, cls.outside)
        with h5py.File(cls.outside, "r+") as f:
            for s in f["samples"].values():
                s["tokens"][...] = MAGIC_TOKEN
                s["noise/shares"][...] = MAGIC_SHARE
                s["segments"][...] = MAGIC_SEGMENT
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    # ------------------------------------------------------------ building dumps

    def hostile(self, edit):
        """A copy of the probed dump changed by edit(h5py file, folder); its path."""
        HostileDumps.n += 1
        folder = os.path.join(self.root, "h%d" % self.n)
        os.mkdir(folder)
        shutil.copy(self.outside, os.path.join(folder, "outside.h5"))
        path = os.path.join(folder, "hostile.h5")
        shutil.copy(self.base, path)
        with h5py.File(path, "r+") as f:
            edit(f, folder)
        return path

    @staticmethod
    def replace(f, name, make):
        """Replace dataset name by make(group, leaf, data, old dataset)."""
        old = f[name]
        data, group, leaf = old[...], old.parent, name.rsplit("/", 1)[-1]
        attrs = dict((k, v) for k, v in old.attrs.items()
                     if k not in ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"))
        del group[leaf]
        make(group, leaf, data)
        if leaf in group:
            for k, v in attrs.items():
                group[leaf].attrs[k] = v

    # ---------------------------------------------------------------- running

    def refuses(self, dump, objects, kind, tools=("attnmap", "outliers", "noise", "view")):
        """Each tool exits 1 with one line naming dump, one of objects and the kind."""
        out = os.path.join(os.path.dirname(dump), "out.png")
        args = {"attnmap": [dump, "--sample", "0", "--layer", "0", "--head", "0", "-o", out, "--quiet"],
                "outliers": [dump], "noise": [dump, "--quiet"], "view": [dump, "--port", "0", "--quiet"]}
        for t in tools:
            r = self.view(args[t]) if t == "view" else subprocess.run([TOOL[t]] + args[t], capture_output=True,
                                                                         text=True, timeout=120)
            with self.subTest(tool=t, kind=kind):
                self.assertEqual(r.returncode, 1, "%s: %s%s" % (t, r.stdout[:300], r.stderr))
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("%s: %s: " % (t, dump)), lines[0])
                self.assertIn(REFUSED[kind], lines[0])
                self.assertTrue(any("%s: %s: " % (dump, o) in lines[0] for o in objects),
                                "%s names none of %s" % (lines[0], objects))
                self.assertNotIn(str(MAGIC_TOKEN), r.stdout)
                self.assertFalse(os.path.exists(out), "%s wrote %s" % (t, out))

    @staticmethod
    def view(args):
        """bin/view args: when it starts serving instead of refusing, what it serves for
        sample 0 becomes its stdout (and its exit status 0), and it is stopped."""
        p = subprocess.Popen([TOOL["view"]] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = p.stdout.readline().strip()
        served = ""
        if url.startswith("http://"):
            port = int(url.rsplit(":", 1)[1].strip("/"))
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            for q in ("/api/dumps", "/api/sample?d=0&s=0"):
                c.request("GET", q)
                served += c.getresponse().read().decode() + "\n"
            c.close()
            p.terminate()
        out, err = p.communicate(timeout=120)
        return subprocess.CompletedProcess(p.args, 0 if served else p.returncode, url + out + served, err)

    # ------------------------------------------------------------------ links

    def test_external_link_as_a_sample(self):
        def edit(f, folder):
            f["samples/000099"] = h5py.ExternalLink("outside.h5", "/samples/000000")
        self.refuses(self.hostile(edit), ["samples/000099"], "external link")

    def test_external_link_tokens(self):
        def edit(f, folder):
            del f["samples/000000/tokens"]
            f["samples/000000/tokens"] = h5py.ExternalLink("outside.h5", "/samples/000000/tokens")
        self.refuses(self.hostile(edit), ["samples/000000/tokens"], "external link")

    def test_external_links_deep_in_a_sample(self):
        """Links below a sample's groups are refused when a reader looks a path up;
        every dataset under attn/, noise/ and outliers/ of sample 0 is one, so each
        tool meets one."""
        names = []

        def edit(f, folder):
            for sub in ("attn", "noise", "outliers"):
                for n in datasets(f["samples/000000/" + sub]):
                    name = "samples/000000/%s/%s" % (sub, n)
                    names.append(name)
                    del f[name]
                    f[name] = h5py.ExternalLink("outside.h5", "/" + name)
        self.refuses(self.hostile(edit), names, "external link")

    def test_external_link_at_the_root(self):
        def edit(f, folder):
            f["elsewhere"] = h5py.ExternalLink("outside.h5", "/samples")
        self.refuses(self.hostile(edit), ["elsewhere"], "external link")

    def test_soft_link_tokens(self):
        """A soft link to another sample's tokens stays inside the file, but difflens
        never writes links: refused like any other."""
        def edit(f, folder):
            del f["samples/000000/tokens"]
            f["samples/000000/tokens"] = h5py.SoftLink("/samples/000001/tokens")
        self.refuses(self.hostile(edit), ["samples/000000/tokens"], "soft link")

    def test_soft_link_group(self):
        def edit(f, folder):
            del f["samples/000000/attn"]
            f["samples/000000/attn"] = h5py.SoftLink("/samples/000001/attn")
        self.refuses(self.hostile(edit), ["samples/000000/attn"], "soft link")

    def test_soft_link_in_model(self):
        def edit(f, folder):
            f["model/elsewhere"] = h5py.SoftLink("/samples")
        self.refuses(self.hostile(edit), ["model/elsewhere"], "soft link")

    # ---------------------------------------------------------------- storage

    def every_dataset_of_sample0(self, make):
        """An edit that rebuilds every dataset of sample 0 with make; and their names."""
        names = []

        def edit(f, folder):
            for n in datasets(f["samples/000000"]):
                name = "samples/000000/" + n
                if f[name].dtype.kind in "OS":
                    continue  # strings: h5py keeps them in the file's heap
                names.append(name)
                self.replace(f, name, lambda g, leaf, data: make(g, leaf, data, folder, name))
        return edit, names

    def test_external_storage(self):
        def make(g, leaf, data, folder, name):
            raw = os.path.join(folder, name.replace("/", "_") + ".bin")
            nbytes = max(data.nbytes, 1)
            g.create_dataset(leaf, shape=data.shape, dtype=data.dtype, external=[(raw, 0, nbytes)])
            # the bytes live in raw, beside the dump; fill them with the outside's values
            fill = np.full(data.shape, MAGIC_TOKEN if data.dtype.kind in "iu" else MAGIC_SHARE, data.dtype)
            g[leaf][...] = fill
        edit, names = self.every_dataset_of_sample0(make)
        dump = self.hostile(edit)
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(dump), "samples_000000_tokens.bin")))
        self.refuses(dump, names, "external storage")

    def test_virtual_dataset(self):
        def make(g, leaf, data, folder, name):
            layout = h5py.VirtualLayout(shape=data.shape, dtype=data.dtype)
            layout[...] = h5py.VirtualSource("outside.h5", "/" + name, shape=data.shape)
            g.create_virtual_dataset(leaf, layout)
        edit, names = self.every_dataset_of_sample0(make)
        self.refuses(self.hostile(edit), names, "virtual")

    def test_unknown_filter(self):
        """LZF (filter 32000) is h5py's: HDF5 does not ship it, so reading it would load
        a plugin from disk."""
        def make(g, leaf, data, folder, name):
            if data.ndim == 0:
                g.create_dataset(leaf, data=data)  # scalars cannot be chunked: left as they are
            else:
                g.create_dataset(leaf, data=data, compression="lzf")
        edit, names = self.every_dataset_of_sample0(make)
        self.refuses(self.hostile(edit), names, "filter")

    def test_own_filters_are_read(self):
        """The writer's filters and others HDF5 ships (fletcher32, and scaleoffset
        for integers) are read: every tool runs on a dump whose sample 0 uses them."""
        def make(g, leaf, data, folder, name):
            if data.ndim == 0:
                g.create_dataset(leaf, data=data)
            elif data.dtype.kind in "iu":
                g.create_dataset(leaf, data=data, compression="gzip", shuffle=True, scaleoffset=0)
            else:
                g.create_dataset(leaf, data=data, compression="gzip", shuffle=True, fletcher32=True)
        edit, names = self.every_dataset_of_sample0(make)
        dump = self.hostile(edit)
        out = os.path.join(os.path.dirname(dump), "ok.png")
        for args in (["attnmap", dump, "--sample", "0", "--layer", "0", "--head", "0", "-o", out, "--quiet"],
                     ["outliers", dump], ["noise", dump, "--quiet"]):
            r = subprocess.run([TOOL[args[0]]] + args[1:], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, "%s: %s" % (args[0], r.stderr))

    # ------------------------------------------------------------------ view

    def test_later_samples_are_checked_too(self):
        """outliers reads samples after the first through their open groups (a faster
        path than the path-based reads): the same refusals hold there, for storage and
        links deep in a later sample."""
        model = os.path.join(self.root, "m")
        prompts = os.path.join(self.root, "p3.jsonl")
        r = subprocess.run([os.path.join(BIN, "noise"), "prompts", "-o", prompts, "--length", "64", "--samples", "3",
                            "--quiet"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        base = os.path.join(self.root, "three.h5")
        r = subprocess.run([TOOL["probe"], "--model", model, "--prompts", prompts, "--out", base, "--quiet"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        last = "samples/%06d" % (len(h5py.File(base, "r")["samples"]) - 1)
        def storage(f, folder, name):
            def make(g, leaf, data):
                raw = os.path.join(folder, "raw.bin")
                np.full(data.shape, MAGIC_SHARE if data.dtype.kind == "f" else MAGIC_TOKEN, data.dtype).tofile(raw)
                g.create_dataset(leaf, shape=data.shape, dtype=data.dtype, external=[(raw, 0, max(data.nbytes, 1))])
            self.replace(f, name, make)

        def soft(f, folder, name):
            del f[name]
            f[name] = h5py.SoftLink("/samples/000000/" + name.split("/", 2)[2])

        def external(f, folder, name):
            del f[name]
            f[name] = h5py.ExternalLink("outside.h5", "/" + name)

        cases = {"external storage": storage, "soft link": soft, "external link": external}
        for kind, edit in cases.items():
            for leaf in ("outliers/hidden/top", "outliers/logits/moments", "tokens"):
                name = "%s/%s" % (last, leaf)
                folder = tempfile.mkdtemp(dir=self.root)
                shutil.copy(self.outside, os.path.join(folder, "outside.h5"))
                dump = os.path.join(folder, "hostile.h5")
                shutil.copy(base, dump)
                with h5py.File(dump, "r+") as f:
                    edit(f, folder, name)
                self.refuses(dump, [name], kind, tools=("outliers",))

    def test_view_serves_nothing_from_outside(self):
        """The viewer reads a sample's noise shares only when /api/sample asks, and leaves
        out a statistic it cannot read: it starts, and the answer has no shares, none of
        the outside's values; the other statistics are there as before."""
        def edit(f, folder):
            del f["samples/000000/noise/shares"]
            f["samples/000000/noise/shares"] = h5py.ExternalLink("outside.h5", "/samples/000000/noise/shares")
        dump = self.hostile(edit)
        p = subprocess.Popen([TOOL["view"], dump, "--port", "0", "--quiet"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            url = p.stdout.readline().strip()
            self.assertTrue(url.startswith("http://127.0.0.1:"), (url, p.poll()))
            port = int(url.rsplit(":", 1)[1].strip("/"))
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/api/sample?d=0&s=0")
            r = c.getresponse()
            body = json.loads(r.read())
            self.assertEqual(r.status, 200, body)
            self.assertNotIn("noise/shares", body["stats"])
            self.assertIn("noise/entropy", body["stats"])
            with h5py.File(self.base, "r") as f:
                np.testing.assert_array_equal(body["tokens"], f["samples/000000/tokens"][...])
            c.close()
        finally:
            p.terminate()
            _, err = p.communicate(timeout=60)
        self.assertNotIn("HDF5-DIAG", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
