#!/usr/bin/python3
"""test_dump_schema.py — checks that bin/probe writes what docs/format.md "Dump
(contract, format_version 1)" lists for the core probe: root attributes, /model/lambda,
per-sample tokens, segments, token_text, attn maps with their dimension scales, logits,
nll, argmax; that xarray (h5netcdf engine) opens a sample's attn group with named
dimensions; that --maps none writes no maps; and that no temporary files are left.

The schema itself (class Schema): lib/dump/dump_schema.h and docs/format.md's dump
tables name the same datasets and attributes (with the same dtype, dimensions and
Diff-only marks where the doc states one), and every dump bin/probe writes for llama,
diff_transformer and diffllama holds exactly what the header declares: every entry it
always writes present, nothing undeclared, dtype, rank and known dimensions as declared.

Run from the repo root:  /usr/bin/python3 tests/test_dump_schema.py   (BIN=bin by default)
"""
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
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

import h5py  # noqa: E402

ROOT = os.path.dirname(HERE)
BIN = os.environ.get("BIN", "bin")
SCHEMA_H = os.path.join(ROOT, "lib", "dump", "dump_schema.h")
FORMAT_MD = os.path.join(ROOT, "docs", "format.md")
PROBE = os.path.join(BIN, "probe")

VOCAB = 97
L = 2
SEG = {"context": 0, "bos": 1, "answer": 2, "query": 3, "distractor": 4, "target": 5}


def prompts(vocab=VOCAB):
    """Three prompts: full (text with non-ASCII strings, every span kind, depth), tokens
    only, and "bos": false with a span but no text and no depth."""
    rng = np.random.default_rng(5)
    a = [0] + [int(x) for x in rng.integers(1, vocab, 18)]
    text = ["<bos>"] + ["tok%d" % t for t in a[1:]]
    text[2] = " café"
    text[3] = "→ 東京"
    text[4] = ""
    p0 = {"id": "full-0", "tokens": a, "text": text, "answer": [[4, 7]],
          "distractor": [[8, 10], [11, 12]], "query": [[12, 15]], "target": [[15, 18]],
          "bos": True, "depth": 0.5}
    p1 = {"id": "plain-1", "tokens": [int(x) for x in rng.integers(0, vocab, 11)]}
    p2 = {"id": "nobos-2", "tokens": [int(x) for x in rng.integers(0, vocab, 9)],
          "answer": [[0, 2]], "bos": False}
    return [p0, p1, p2]


def expected_segments(p):
    seg = np.zeros(len(p["tokens"]), np.uint8)
    if p.get("bos", True):
        seg[0] = SEG["bos"]
    for kind in ("answer", "query", "distractor", "target"):
        for s, e in p.get(kind, []):
            seg[s:e] = SEG[kind]
    return seg


def as_str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray) and v.shape == ():
        return as_str(v[()])
    return v


# ---------------------------------------------------------------- the schema

def header_schema(path=SCHEMA_H):
    """dump_schema.h as {(kind, object or path, attribute name or None): entry}, entry a
    dict of dtype, dims, diff, always; and the macros {name: string}."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    macros = dict(re.findall(r'#define\s+(DFL_(?:DS|ATTR)_\w+)\s+"([^"]*)"', text))

    def value(tok):
        tok = tok.strip()
        if tok.startswith('"'):
            return tok.strip('"')
        if tok not in macros:
            raise AssertionError("dump_schema.h: %s is not a DFL_DS_/DFL_ATTR_ macro" % tok)
        return macros[tok]

    entries = {}
    arg = r'\s*("[^"]*"|\w+)\s*'
    rows = re.sub(r"^#define(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.M)   # the table, without the macros
    # a row may be wrapped over lines (clang-format): up to the ")," that ends it
    for kind, args in re.findall(r"\b(DFL_DS_|DFL_AT_)\((.*?)\),[ \t]*$", rows, flags=re.M | re.S):
        args = " ".join(args.split())
        parts = re.findall(arg + r"(?:,|$)", args)
        if kind == "DFL_DS_":
            path, dtype, dims, models, presence = parts[:5]
            key = ("dataset", value(path), None)
        else:
            obj, name, dtype, dims, models, presence = parts[:6]
            key = ("attribute", value(obj), value(name))
        if key in entries:
            raise AssertionError("dump_schema.h: %s twice" % (key,))
        entries[key] = dict(dtype=value(dtype), dims=value(dims), diff=models == "DFL_MODELS_DIFF",
                            always=presence == "DFL_ALWAYS")
    return entries, macros


def expand(item, prev):
    """A path cell item of format.md: '…/a/b' -> 'a/b' (sample-relative), '/x' stays,
    a bare name is a sibling of the previous item; {a,b} braces expand."""
    m = re.search(r"\{([^}]*)\}", item)
    if m:
        return [p for alt in m.group(1).split(",")
                for p in expand(item[:m.start()] + alt + item[m.end():], prev)]
    if item.startswith("…/"):
        return [item[2:]]
    if item.startswith("/"):
        return [item]
    return [(prev.rsplit("/", 1)[0] + "/" if prev and "/" in prev else "") + item]


def attr_names(cell):
    """Identifiers in backticks after 'attr' / 'attrs' in a table cell."""
    m = re.search(r"\battrs?\b", cell)
    return [] if not m else [n for n in re.findall(r"`([^`]+)`", cell[m.end():]) if re.fullmatch(r"[a-z_]+", n)]


def doc_schema(path=FORMAT_MD):
    """docs/format.md's dump tables as {key: entry}, entry a dict of dtype and dims (None
    where the doc's cell does not state one type for the path) and diff."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index("## Dump (HDF5)")
    sec = text[start:text.index("\n## ", start + 5)]

    def rows(title):
        part = sec[sec.index(title):]
        out = []
        for line in part.splitlines()[1:]:
            if line.startswith("### "):
                break
            if line.startswith("|") and not line.startswith("|---"):
                out.append([c.strip() for c in line.replace("\\|", "\x00").strip("|").split("|")])
        return out[1:]  # without the header row

    entries = {}

    def add(key, e):
        if key in entries:
            raise AssertionError("docs/format.md: %s twice" % (key,))
        entries[key] = e

    for name, typ, _ in rows("### Root attributes"):
        add(("attribute", "/", name.strip("`")), dict(dtype=typ, dims="", diff=False))
    prev_type = None
    for path_cell, typ, meaning in rows("### Datasets"):
        items = re.findall(r"`([^`]+)`", path_cell)
        diff = "Diff" in meaning and "only" in meaning
        if items[0].endswith("NNNNNN/"):          # the sample group: its attributes only
            for n in attr_names(typ) + attr_names(meaning):
                add(("attribute", "", n), dict(dtype=None, dims=None, diff=False))
            continue
        paths, prev = [], None
        for it in items:
            for p in expand(it, prev):
                paths.append(p)
            prev = paths[-1]
        typ = prev_type if typ == "same" else typ
        prev_type = typ
        # "f32 [L, K]" (every path), "i32 [Ls], [Hs], [R], [T]" (one shape per path),
        # "u8, f32 scalars" (one type per path); other cells state no single type
        types, shapes = [None] * len(paths), [None] * len(paths)
        m = re.fullmatch(r"(f16 or f32|[a-z0-9]+) ((?:\[[^\]]*\](?:, )?)+)", typ)
        s = re.fullmatch(r"([a-z0-9]+(?:, [a-z0-9]+)*) scalars?", typ)
        if m:
            dims = [d.replace(" ", "") for d in re.findall(r"\[([^\]]*)\]", m.group(2))]
            if len(dims) in (1, len(paths)):
                types = [m.group(1).replace(" or ", "|")] * len(paths)
                shapes = dims * len(paths) if len(dims) == 1 else dims
        elif s and len(s.group(1).split(", ")) == len(paths):
            types, shapes = s.group(1).split(", "), [""] * len(paths)
        for p, dtype, dims in zip(paths, types, shapes):
            add(("dataset", p, None), dict(dtype=dtype, dims=dims, diff=diff))
            group_attrs = "group attrs" in meaning
            for n in attr_names(meaning):
                obj = p.rsplit("/", 1)[0] if group_attrs else p
                if ("attribute", obj, n) not in entries:
                    add(("attribute", obj, n), dict(dtype=None, dims=None, diff=False))
    return entries


H5DS_ATTRS = {"CLASS", "NAME", "REFERENCE_LIST", "DIMENSION_LIST", "DIMENSION_LABELS"}
NP_NAMES = {np.dtype(k): v for k, v in (("<f2", "f16"), ("<f4", "f32"), ("<f8", "f64"), ("<i4", "i32"),
                                         ("<i8", "i64"), ("u1", "u8"), ("<u4", "u32"), ("<u8", "u64"))}


def dtype_name(dt):
    if h5py.check_string_dtype(dt) is not None:
        return "str"
    return NP_NAMES.get(np.dtype(dt), str(dt))


def dump_entries(path):
    """What a dump holds: {(kind, path-or-object, name): (dtype, shape, sample or None)}
    with sample paths made relative to their group; also the sample names."""
    found = {}
    with h5py.File(path, "r") as f:
        def where(name):
            m = re.match(r"samples/(\d{6})(?:/(.*))?$", name)
            return (m.group(2) or "", m.group(1)) if m else ("/" + name, None)

        def attrs(obj, rel, smp):
            for k in obj.attrs:
                if k in H5DS_ATTRS:
                    continue
                v = obj.attrs[k]
                if isinstance(v, (str, bytes)):
                    found.setdefault(("attribute", rel, k), []).append(("str", (), smp))
                else:
                    a = np.asarray(v)
                    found.setdefault(("attribute", rel, k), []).append((dtype_name(a.dtype), a.shape, smp))

        attrs(f, "/", None)

        def visit(name, obj):
            rel, smp = where(name)
            if isinstance(obj, h5py.Dataset):
                found.setdefault(("dataset", rel, None), []).append((dtype_name(obj.dtype), obj.shape, smp))
            if name == "samples":
                return
            attrs(obj, rel if rel != "/" + name or smp else "/" + name, smp)
        f.visititems(visit)
        samples = sorted(f["samples"])
        sizes = dict(L=int(f.attrs["num_layers"]), H=int(f.attrs["num_heads"]), K=int(f.attrs["topk"]),
                     D=json.loads(f.attrs["config"])["hidden_size"], V=json.loads(f.attrs["config"])["vocab_size"],
                     B=3074)
    return found, samples, sizes


class Schema(unittest.TestCase):
    """dump_schema.h against docs/format.md, and against real dumps."""

    @classmethod
    def setUpClass(cls):
        cls.header, cls.macros = header_schema()
        cls.doc = doc_schema()

    def test_parsers_see_the_tables(self):
        # guards against a parser that silently reads nothing
        self.assertGreater(len(self.header), 60)
        self.assertGreater(len(self.doc), 55)
        self.assertIn(("dataset", "noise/entropy", None), self.header)
        self.assertIn(("dataset", "outliers/hidden/hist", None), self.doc)
        self.assertIn(("attribute", "noise", "rows_rule"), self.doc)

    def test_header_and_doc_name_the_same_entries(self):
        only_h = sorted(k for k in self.header if k not in self.doc)
        only_d = sorted(k for k in self.doc if k not in self.header)
        self.assertEqual(only_h, [], "in lib/dump/dump_schema.h, not in docs/format.md")
        self.assertEqual(only_d, [], "in docs/format.md, not in lib/dump/dump_schema.h")

    def test_header_and_doc_agree_on_types(self):
        for key, d in self.doc.items():
            h = self.header.get(key)
            if h is None:
                continue
            if d["dtype"] is not None:
                self.assertEqual(h["dtype"], d["dtype"], key)
                self.assertEqual(h["dims"], d["dims"], key)
            if key[0] == "dataset":
                self.assertEqual(h["diff"], d["diff"], "%s: Diff only in one of header and doc" % (key,))

    def test_every_macro_in_the_table(self):
        used = {k[1] for k in self.header} | {k[2] for k in self.header if k[2]}
        groups = {"samples", "samples/%06zu", "noise", "attn", "text/%03zu"}
        unused = sorted(m for m, v in self.macros.items() if v not in used and v not in groups)
        self.assertEqual(unused, [], "macros of dump_schema.h that its table does not list")


class DumpChecks:
    """Real dumps against the header (mixed into DumpSchema, which writes the dumps)."""

    def check_dump(self, path, diff):
        header = header_schema()[0]
        found, samples, sizes = dump_entries(path)
        self.assertTrue(samples)
        undeclared = sorted(k for k in found if k not in header)
        self.assertEqual(undeclared, [], "%s holds entries dump_schema.h does not declare" % path)
        for key, e in header.items():
            applies = diff or not e["diff"]
            got = found.get(key, [])
            if not applies:
                self.assertEqual(got, [], "%s: %s is Diff only" % (path, key))
                continue
            is_sample = not key[1].startswith("/")
            if e["always"]:
                want = len(samples) if is_sample else 1
                self.assertEqual(len(got), want, "%s: %s missing (declared always written)" % (path, key))
            for dtype, shape, smp in got:
                self.assertIn(dtype, e["dtype"].split("|"), "%s: %s dtype" % (path, key))
                dims = e["dims"].split(",") if e["dims"] else []
                self.assertEqual(len(shape), len(dims), "%s: %s rank of %s" % (path, key, shape))
                known = dict(sizes, M=3 if diff else 1, **{"M'": 2 if diff else 1})
                if smp is not None:
                    with h5py.File(path, "r") as f:
                        g = f["samples/" + smp]
                        known["T"] = g["tokens"].shape[0]
                        if "attn" in g and "rows" in g["attn"]:
                            known.update(Ls=g["attn/layers"].shape[0], Hs=g["attn/heads"].shape[0],
                                         R=g["attn/rows"].shape[0])
                for n, sym in zip(shape, dims):
                    want = int(sym) if sym.isdigit() else known.get(sym)
                    if sym == "B+1":
                        want = sizes["B"] + 1
                    if want is not None:
                        self.assertEqual(n, want, "%s: %s dimension %s" % (path, key, sym))

    def test_dump_llama(self):
        self.check_dump(self.h5_llama, False)
        self.check_dump(self.h5_nomaps, False)

    def test_dump_diff_transformer(self):
        self.check_dump(self.h5_difft, True)

    def test_dump_diffllama(self):
        self.check_dump(self.h5_diffllama, True)



class DumpSchema(DumpChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(PROBE, os.X_OK):
            raise AssertionError("%s not found or not executable (build it, or set BIN)" % PROBE)
        cls.tmp = tempfile.mkdtemp(prefix="dfl-schema-")
        cls.prompts = prompts()
        cls.pfile = os.path.join(cls.tmp, "prompts.jsonl")
        with open(cls.pfile, "w") as f:
            for p in cls.prompts:
                f.write(json.dumps(p, ensure_ascii=False) + "\n")
        cls.models = {}
        for name, mtype, kw in (("llama", "llama", dict(heads=4, kv_heads=2)),
                                ("difft", "diff_transformer", dict(heads=2)),
                                ("diffllama", "diffllama", dict(heads=4))):
            d = os.path.join(cls.tmp, name)
            cls.models[name] = (d, make_model.make_model(d, mtype, layers=L, hidden=32,
                                                         ffn=48, vocab=VOCAB, seed=11, **kw))
        cls.out = os.path.join(cls.tmp, "out")
        os.makedirs(cls.out)
        # llama: default map dtype (f16), logits saved
        cls.h5_llama = cls.probe("llama.h5", "llama", "--maps", "all", "--save-logits")
        # diff_transformer: f32 maps, logits saved
        cls.h5_difft = cls.probe("difft.h5", "difft", "--maps", "all", "--map-dtype", "f32",
                                 "--save-logits")
        # diffllama: heads are differential heads (H/2)
        cls.h5_diffllama = cls.probe("diffllama.h5", "diffllama", "--maps", "all")
        # llama: no maps, no logits
        cls.h5_nomaps = cls.probe("nomaps.h5", "llama", "--maps", "none")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def probe(cls, outname, model, *extra):
        out = os.path.join(cls.out, outname)
        cmd = [PROBE, "--model", cls.models[model][0], "--prompts", cls.pfile, "--out", out,
               "--quiet"] + list(extra)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if r.returncode != 0:
            raise AssertionError("%s exited %d: %s" % (" ".join(cmd), r.returncode,
                                                      r.stderr.decode(errors="replace")))
        return out

    # ---- root and /model ----

    def check_root(self, path, model, num_heads, head_dim, diff):
        mdir, cfg = self.models[model]
        with open(os.path.join(mdir, "config.json")) as fh:
            cfg_text = fh.read()
        with h5py.File(path, "r") as f:
            a = f.attrs
            for k in ("format", "format_version", "model_type", "config", "model",
                      "num_layers", "num_heads", "head_dim", "logit_quant_bits",
                      "logit_quant_granularity", "rows"):
                self.assertIn(k, a, "root attribute %s missing" % k)
            self.assertEqual(as_str(a["format"]), "difflens-dump")
            self.assertEqual(int(a["format_version"]), 1)
            self.assertTrue(np.issubdtype(np.asarray(a["format_version"]).dtype, np.integer))
            self.assertEqual(as_str(a["model_type"]), cfg["model_type"])
            self.assertEqual(as_str(a["config"]), cfg_text)
            self.assertEqual(as_str(a["model"]), mdir)
            self.assertEqual(int(a["num_layers"]), L)
            self.assertEqual(int(a["num_heads"]), num_heads)
            self.assertEqual(int(a["head_dim"]), head_dim)
            self.assertEqual(int(a["logit_quant_bits"]), 0)
            self.assertIsInstance(as_str(a["logit_quant_granularity"]), str)
            self.assertIsInstance(as_str(a["rows"]), str)
            self.assertTrue(as_str(a["rows"]))
            if diff:
                for k in ("lambda", "lambda_init"):
                    ds = f["model/" + k]
                    self.assertEqual(ds.dtype, np.float32, k)
                    self.assertEqual(ds.shape, (L,), k)
                li = f["model/lambda_init"][()]
                np.testing.assert_allclose(li, [0.8 - 0.6 * np.exp(-0.3 * l) for l in range(L)],
                                           atol=1e-6)
            else:
                self.assertFalse("model" in f and "lambda" in f["model"],
                                 "/model/lambda must be absent for llama")
                self.assertFalse("model" in f and "lambda_init" in f["model"])

    def test_root_llama(self):
        self.check_root(self.h5_llama, "llama", 4, 8, False)

    def test_root_diff_transformer(self):
        self.check_root(self.h5_difft, "difft", 2, 8, True)   # d = 32/2/2

    def test_root_diffllama(self):
        self.check_root(self.h5_diffllama, "diffllama", 2, 8, True)  # H/2 heads, hd 32/4

    # ---- samples ----

    def check_samples(self, path, nheads, maps, map_dtype, logits):
        with h5py.File(path, "r") as f:
            self.assertEqual(sorted(f["samples"].keys()),
                             ["%06d" % i for i in range(len(self.prompts))])
            for i, p in enumerate(self.prompts):
                s = f["samples/%06d" % i]
                T = len(p["tokens"])
                self.assertIsInstance(s, h5py.Group)
                self.assertEqual(as_str(s.attrs["id"]), p["id"])
                if "depth" in p:
                    self.assertAlmostEqual(float(s.attrs["depth"]), p["depth"])
                elif "depth" in s.attrs:   # no depth given: absent or NaN
                    self.assertTrue(np.isnan(float(s.attrs["depth"])),
                                    "sample %d has no depth but depth=%r" % (i, s.attrs["depth"]))
                # tokens, segments
                self.assertEqual(s["tokens"].dtype, np.int32)
                self.assertEqual(s["tokens"].shape, (T,))
                np.testing.assert_array_equal(s["tokens"][()], p["tokens"])
                self.assertEqual(s["segments"].dtype, np.uint8)
                np.testing.assert_array_equal(s["segments"][()], expected_segments(p),
                                              err_msg="segments of sample %d" % i)
                # token_text
                if "text" in p:
                    ds = s["token_text"]
                    info = h5py.check_string_dtype(ds.dtype)
                    self.assertIsNotNone(info, "token_text must be a string dataset")
                    self.assertEqual(info.encoding, "utf-8")
                    self.assertIsNone(info.length, "token_text must be variable-length")
                    self.assertEqual(ds.shape, (T,))
                    self.assertEqual([as_str(x) for x in ds[()]], p["text"])
                else:
                    self.assertNotIn("token_text", s)
                # logits, nll, argmax
                if logits:
                    self.assertEqual(s["logits"].dtype, np.float32)
                    self.assertEqual(s["logits"].shape, (T, VOCAB))
                    lg = s["logits"][()].astype(np.float64)
                    self.assertTrue(np.all(np.isfinite(lg)))
                else:
                    self.assertNotIn("logits", s)
                nll = s["nll"]
                self.assertEqual(nll.dtype, np.float32)
                self.assertEqual(nll.shape, (T,))
                nll = nll[()]
                self.assertTrue(np.isnan(nll[-1]))
                self.assertTrue(np.all(np.isfinite(nll[:-1])) and np.all(nll[:-1] >= 0))
                am = s["argmax"]
                self.assertEqual(am.dtype, np.int32)
                self.assertEqual(am.shape, (T,))
                am = am[()]
                self.assertTrue(np.all((am >= 0) & (am < VOCAB)))
                if logits:
                    mx = lg.max(1, keepdims=True)
                    lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(1))
                    want = lse[:-1] - lg[np.arange(T - 1), p["tokens"][1:]]
                    np.testing.assert_allclose(nll[:-1], want, atol=1e-4)
                    np.testing.assert_array_equal(lg[np.arange(T), am], lg.max(1))
                # attention maps
                if maps is None:
                    if "attn" in s:
                        for k in ("map1", "map2", "diff"):
                            self.assertNotIn(k, s["attn"], "--maps none wrote attn/" + k)
                    continue
                at = s["attn"]
                for k in ("map1", "map2", "diff"):
                    if k not in maps:
                        self.assertNotIn(k, at)
                        continue
                    ds = at[k]
                    self.assertEqual(ds.shape, (L, nheads, T, T), k)
                    self.assertEqual(ds.dtype, map_dtype, k)
                    v = ds[()].astype(np.float64)
                    upper = np.triu(np.ones((T, T), bool), 1)
                    self.assertTrue(np.all(v[..., upper] == 0), "%s masked entries" % k)
                    if k != "diff":
                        tol = 1e-5 if map_dtype == np.float32 else 2e-3 * T
                        np.testing.assert_allclose(v.sum(-1), 1.0, atol=tol)
                    self.check_scales(at, ds, L, nheads, T)

    def check_scales(self, at, ds, nl, nh, T):
        for name, n in (("layers", nl), ("heads", nh), ("rows", T)):
            sc = at[name]
            self.assertEqual(sc.dtype, np.int32, name)
            self.assertEqual(sc.shape, (n,), name)
            np.testing.assert_array_equal(sc[()], np.arange(n), err_msg=name)
            self.assertTrue(h5py.h5ds.is_scale(sc.id), "attn/%s is not a dimension scale" % name)
        self.assertEqual([ds.dims[i].label for i in range(4)], ["layer", "head", "query", "key"])
        self.assertEqual(ds.dims[0][0].name, at["layers"].name)
        self.assertEqual(ds.dims[1][0].name, at["heads"].name)
        self.assertEqual(ds.dims[2][0].name, at["rows"].name)
        self.assertGreaterEqual(len(ds.dims[3]), 1, "no key-position scale on dim 3")
        key = ds.dims[3][0]
        self.assertEqual(key.shape, (T,))
        self.assertEqual(key.parent.name, at.name, "key scale outside the attn group")

    def test_samples_llama(self):
        self.check_samples(self.h5_llama, 4, ("map1",), np.float16, True)

    def test_samples_diff_transformer(self):
        self.check_samples(self.h5_difft, 2, ("map1", "map2", "diff"), np.float32, True)

    def test_samples_diffllama(self):
        self.check_samples(self.h5_diffllama, 2, ("map1", "map2", "diff"), np.float16, False)

    def test_samples_no_maps(self):
        self.check_samples(self.h5_nomaps, 4, None, None, False)

    def check_analysis(self, path, nheads, diff, D):
        """noise/*, outliers/*, target_* (probe-analyses issue): paths, shapes, dtypes, attrs."""
        with h5py.File(path, "r") as f:
            K = int(f.attrs["topk"])
            self.assertEqual(K, 100)
            M = 3 if diff else 1
            for key in sorted(f["samples"].keys()):
                s = f["samples"][key]
                want = {
                    "noise/shares": ((M, L, nheads, 7), np.float32),
                    "noise/raw": ((M, L, nheads, 7), np.float32),
                    "noise/shares_abs": ((M, L, nheads, 7), np.float32),
                    "noise/entropy": ((2 if diff else 1, L, nheads), np.float32),
                    "outliers/logits/top": ((L, K), np.float32),
                    "outliers/logits/top_index": ((L, K, 4), np.int32),
                    "outliers/logits/moments": ((L, 6), np.float64),
                    "outliers/hidden/top": ((L, K), np.float32),
                    "outliers/hidden/top_index": ((L, K, 2), np.int32),
                    "outliers/hidden/moments": ((L, 6), np.float64),
                    "outliers/hidden/channel_absmax": ((L, D), np.float32),
                    "outliers/hidden/channel_count": ((L, D), np.uint32),
                }
                if diff:
                    want["noise/negative_mass"] = ((L, nheads), np.float32)
                else:
                    self.assertNotIn("noise/negative_mass", s)
                for name, (shape, dtype) in want.items():
                    self.assertIn(name, s, name)
                    self.assertEqual(s[name].shape, shape, name)
                    self.assertEqual(s[name].dtype, dtype, name)
                for kind in ("logits", "hidden"):
                    h = s["outliers/%s/hist" % kind]
                    self.assertEqual(h.dtype, np.uint64)
                    self.assertEqual(h.shape[0], L)
                    edges = h.attrs["edges"]
                    self.assertEqual(edges.shape, (h.shape[1] + 1,))
                    self.assertTrue(np.all(np.diff(edges) > 0))
                    self.assertEqual(edges[0], 0.0)
                    self.assertTrue(np.isinf(edges[-1]))
                self.assertEqual(s["outliers/hidden/channel_count"].attrs["alpha"], 6.0)
                self.assertEqual(as_str(s["noise"].attrs["segments"]),
                                 "bos,context_before,answer,context_after,query,distractor,target")
                self.assertEqual(s["noise/rows"].dtype, np.int32)
                p = self.prompts[int(key)]
                if p.get("target"):
                    self.assertEqual(s["target_correct"].shape, ())
                    self.assertEqual(s["target_correct"].dtype, np.uint8)
                    self.assertEqual(s["target_nll"].dtype, np.float32)
                    self.assertIn(int(s["target_correct"][()]), (0, 1))
                else:
                    self.assertNotIn("target_correct", s)
            self.assertEqual(as_str(f.attrs["rows"]), "last")
            self.assertEqual(int(f.attrs["logit_quant_bits"]), 0)
            self.assertEqual(as_str(f.attrs["logit_quant_granularity"]), "none")

    def test_analysis_llama(self):
        self.check_analysis(self.h5_llama, 4, False, 32)

    def test_analysis_diff_transformer(self):
        self.check_analysis(self.h5_difft, 2, True, 32)

    def test_analysis_diffllama(self):
        self.check_analysis(self.h5_diffllama, 2, True, 32)

    def test_analysis_without_maps(self):
        self.check_analysis(self.h5_nomaps, 4, False, 32)

    def test_diff_relation(self):
        """diff = map1 − λ·map2 with the layer's λ (f32 maps)."""
        with h5py.File(self.h5_difft, "r") as f:
            lam = f["model/lambda"][()].astype(np.float64)
            at = f["samples/000000/attn"]
            m1, m2, d = (at[k][()].astype(np.float64) for k in ("map1", "map2", "diff"))
        np.testing.assert_allclose(d, m1 - lam[:, None, None, None] * m2, atol=1e-6)

    # ---- xarray ----

    def test_xarray_named_dims(self):
        import xarray
        for path, names in ((self.h5_llama, ("map1",)),
                            (self.h5_difft, ("map1", "map2", "diff"))):
            with h5py.File(path, "r") as f:
                ds = f["samples/000000/attn/map1"]
                want_dims = tuple(ds.dims[i][0].name.split("/")[-1] for i in range(4))
                T = ds.shape[-1]
                nh = ds.shape[1]
            x = xarray.open_dataset(path, group="samples/000000/attn", engine="h5netcdf",
                                    phony_dims="access")
            try:
                for k in names:
                    self.assertIn(k, x.data_vars)
                    dims = x[k].dims
                    self.assertEqual(dims, want_dims)
                    self.assertFalse(any(dname.startswith("phony_dim") for dname in dims),
                                     "unnamed dimension in %s: %s" % (k, dims))
                    self.assertEqual(x[k].shape, (L, nh, T, T))
                self.assertEqual(want_dims[:3], ("layers", "heads", "rows"))
                np.testing.assert_array_equal(x["rows"].values, np.arange(T))
            finally:
                x.close()

    # ---- files ----

    def test_no_leftover_files(self):
        self.assertEqual(sorted(os.listdir(self.out)),
                         ["diffllama.h5", "difft.h5", "llama.h5", "nomaps.h5"])

    def test_existing_output_not_overwritten(self):
        before = os.stat(self.h5_nomaps)
        with open(self.h5_nomaps, "rb") as fh:
            data = fh.read()
        r = subprocess.run([PROBE, "--model", self.models["llama"][0], "--prompts", self.pfile,
                            "--out", self.h5_nomaps, "--maps", "none", "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertNotEqual(r.returncode, 0, "probe overwrote an existing output")
        self.assertTrue(r.stderr.strip(), "no error message")
        with open(self.h5_nomaps, "rb") as fh:
            self.assertEqual(fh.read(), data)
        self.assertEqual(os.stat(self.h5_nomaps).st_mtime_ns, before.st_mtime_ns)
        self.assertEqual(sorted(os.listdir(self.out)),
                         ["diffllama.h5", "difft.h5", "llama.h5", "nomaps.h5"])


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
