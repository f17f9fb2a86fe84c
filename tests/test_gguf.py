#!/usr/bin/python3
"""test_gguf.py — the GGUF reader and the ggml dequantizers against the numpy writer and
dequantizer of tests/ref/gguf.py (written from the format's block layouts).

- every supported type, random blocks (every bit pattern, finite f16 scales) and
  quantized weights: the C row loops equal numpy bit for bit, and the C per-value twin
  equals the row loops (the harness exits 3 otherwise);
- metadata of every value type read back as written; split files; alignment;
- malformed images (every truncation, corrupted counts, offsets, types, names) are
  refused with a status and a message, never a crash, through both open paths;
- metadata and tensor tables cross-checked with a real parser, @huggingface/gguf (npm,
  installed by scripts/deps.sh into .npm-deps/);
- probe on GGUF: tests/test_gguf_model.py.

Run from the repo root:  /usr/bin/python3 tests/test_gguf.py
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import gguf  # noqa: E402

BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
TMP = tempfile.mkdtemp(prefix="dfl-gguf-")
EXE = None


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "--eval", "print-%: ; @echo $($*)",
                        "print-" + name], capture_output=True, text=True, check=True)
    return r.stdout.split()


def harness():
    global EXE
    if EXE:
        return EXE
    lib = os.path.join(BUILD, "libdifflens.a")
    subprocess.run(["make", "-s", "-C", ROOT, lib], check=True)
    exe = os.path.join(TMP, "gguf_harness")
    cmd = (make_var("CC") + make_var("CPPFLAGS") + make_var("CFLAGS") + [os.path.join(HERE, "gguf_harness.c"),
           lib, "-o", exe] + make_var("LDFLAGS") + make_var("LDLIBS"))
    cmd = [a if not a.startswith("-I") or os.path.isabs(a[2:]) else "-I" + os.path.join(ROOT, a[2:]) for a in cmd]
    subprocess.run(cmd, check=True)
    EXE = exe
    return exe


def dump(path):
    out = path + ".f32"
    r = subprocess.run([harness(), "dump", path, out], capture_output=True, text=True)
    return r, [json.loads(x) for x in r.stdout.splitlines()] if r.returncode in (0, 3) else [], out


def check_files(paths, mode="check"):
    r = subprocess.run([harness(), mode] + paths, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


class Dequantizers(unittest.TestCase):
    def test_every_type_bit_for_bit(self):
        rng = np.random.default_rng(1)
        tensors, want = [], []
        for name in gguf.QUANT_NAMES + ["F32", "F16", "BF16"]:
            t = gguf.BY_NAME[name]
            qk = gguf.TYPES[t][1]
            cols = 512 if qk == 256 else 96 if qk == 32 else 40
            rows = 3
            if qk > 1:
                raw = gguf.random_blocks(t, rows * cols // qk, rng)
                tensors.append(("rand." + name, t, [cols, rows], raw))
                want.append(gguf.dequantize(raw, t, rows * cols))
            x = (rng.standard_normal(rows * cols) * 0.3).astype(np.float32)
            x[5] = -x[5] * 4       # one outlier per tensor
            raw = gguf.quantize(x, t)
            tensors.append(("real." + name, t, [cols, rows], raw))
            want.append(gguf.dequantize(raw, t, rows * cols))
        p = os.path.join(TMP, "types.gguf")
        gguf.write_gguf(p, [("general.architecture", gguf.STRING, "llama")], tensors)
        r, lines, out = dump(p)
        self.assertEqual(r.returncode, 0, r.stderr)   # 3: the per-value twin differs
        got = np.fromfile(out, np.float32)
        at = 0
        for (name, t, ne, raw), w in zip(tensors, want):
            g = got[at:at + w.size]
            at += w.size
            bad = np.nonzero(g.view(np.uint32) != w.view(np.uint32))[0]
            self.assertEqual(len(bad), 0, "%s: %d values differ, first at %d: C %r numpy %r" % (
                name, len(bad), bad[0] if len(bad) else -1, g[bad[:1]], w[bad[:1]]))
        self.assertEqual(at, got.size)
        types = {x["tensor"]: x["type"] for x in lines if "tensor" in x}
        self.assertEqual(types["real.Q4_K"], "Q4_K")


MODULES = os.path.join(ROOT, ".npm-deps", "node_modules")


def hf_read(paths):
    """@huggingface/gguf's view of each file: (metadata, tensors)."""
    if not os.path.isdir(os.path.join(MODULES, "@huggingface", "gguf")):
        raise AssertionError("@huggingface/gguf is missing: run scripts/deps.sh (installs .npm-deps/)")
    r = subprocess.run(["node", os.path.join(HERE, "gguf_ref.js"), MODULES] + paths, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


class Container(unittest.TestCase):
    KVS = [("general.architecture", gguf.STRING, "llama"),
           ("a.u8", gguf.U8, 250), ("a.i8", gguf.I8, -100), ("a.u16", gguf.U16, 65000),
           ("a.i16", gguf.I16, -30000), ("a.u32", gguf.U32, 4000000000), ("a.i32", gguf.I32, -2000000000),
           ("a.f32", gguf.FLOAT32, 0.5), ("a.bool", gguf.BOOL, True), ("a.str", gguf.STRING, "h\u00e9\"llo"),
           ("a.u64", gguf.U64, 2 ** 63 + 5), ("a.i64", gguf.I64, -2 ** 62), ("a.f64", gguf.FLOAT64, 1e-300),
           ("a.arr_i32", gguf.ARRAY, (gguf.I32, [-1, 2, 3])),
           ("a.arr_str", gguf.ARRAY, (gguf.STRING, ["x", "", "yz"])),
           ("a.arr_f32", gguf.ARRAY, (gguf.FLOAT32, [1.5, -2.5])),
           ("a.empty", gguf.ARRAY, (gguf.U8, []))]

    def image(self, kvs=None, tensors=None, **kw):
        if tensors is None:
            tensors = [("w", gguf.Q8_0, [32, 2], gguf.quantize(np.arange(64, dtype=np.float32), gguf.Q8_0)),
                       ("v", gguf.F32, [5], np.arange(5, dtype="<f4").tobytes())]
        return gguf.gguf_bytes(self.KVS if kvs is None else kvs, tensors, **kw)

    def write(self, name, data):
        p = os.path.join(TMP, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_metadata_round_trip(self):
        p = self.write("meta.gguf", self.image())
        r, lines, _ = dump(p)
        self.assertEqual(r.returncode, 0, r.stderr)
        kv = {x["key"]: x for x in lines if "key" in x}
        self.assertEqual([x["key"] for x in lines if "key" in x], [k for k, _, _ in self.KVS])
        for k, vt, v in self.KVS:
            got = kv[k]["value"]
            if vt == gguf.ARRAY:
                et, items = v
                self.assertEqual(got["n"], len(items), k)
                if items and et != gguf.STRING:
                    self.assertEqual(got["first"], items[0], k)
                    self.assertEqual(got["last"], items[-1], k)
            elif vt == gguf.FLOAT32:
                self.assertEqual(got, float(np.float32(v)), k)
            else:
                self.assertEqual(got, v, k)
        t = {x["tensor"]: x for x in lines if "tensor" in x}
        self.assertEqual(t["w"]["ne"], [32, 2])
        self.assertEqual(t["w"]["nbytes"], 68)
        self.assertEqual(t["v"]["type"], "F32")

    def test_against_huggingface_gguf(self):
        rng = np.random.default_rng(9)
        tensors = []
        for name in gguf.QUANT_NAMES + ["F32", "F16", "BF16"]:
            t = gguf.BY_NAME[name]
            cols = 256 if gguf.TYPES[t][1] == 256 else 64
            tensors.append(("w." + name, t, [cols, 3], gguf.quantize(rng.standard_normal(cols * 3), t)))
        tensors.append(("v3d", gguf.F32, [4, 3, 2], np.zeros(24, "<f4").tobytes()))
        p = self.write("hf.gguf", self.image(tensors=tensors))
        r, lines, _ = dump(p)
        self.assertEqual(r.returncode, 0, r.stderr)
        (ref,) = hf_read([p])
        ours = {x["key"]: x["value"] for x in lines if "key" in x}
        meta = ref["metadata"]
        self.assertEqual(meta["version"], 3)
        self.assertEqual(int(meta["kv_count"]), len(ours))
        self.assertEqual(int(meta["tensor_count"]), len(tensors))
        for k, v in ours.items():
            self.assertIn(k, meta)
            h = meta[k]
            if isinstance(v, dict):      # an array: count, first and last element
                self.assertEqual(len(h), v["n"], k)
                if v["n"] and v["first"] is not None:
                    self.assertEqual([float(h[0]), float(h[-1])], [float(v["first"]), float(v["last"])], k)
                if v["elem"] == "string":
                    self.assertEqual(h, dict((a, (b, c)) for a, b, c in self.KVS)[k][1][1], k)
            elif isinstance(v, bool) or isinstance(v, str):
                self.assertEqual(h, v, k)
            else:
                self.assertEqual(float(h), float(v), k)
        got = [(x["tensor"], x["type"], x["ne"]) for x in lines if "tensor" in x]
        want = [(t["name"], gguf.TYPES[t["dtype"]][0], [int(n) for n in t["shape"]]) for t in ref["tensors"]]
        self.assertEqual(got, want)

    def test_alignment_and_version2(self):
        for align in (8, 64, 4096):
            data = self.image(kvs=[("general.alignment", gguf.U32, align)], alignment=align)
            self.assertEqual(check_files([self.write("al%d.gguf" % align, data)]), ["ok 2"])
        v2 = self.image(version=2)
        self.assertEqual(check_files([self.write("v2.gguf", v2)]), ["ok 2"])

    def test_split_files(self):
        rng = np.random.default_rng(4)
        tensors = [("t%d" % i, gguf.Q4_0, [64, 2], gguf.quantize(rng.standard_normal(128), gguf.Q4_0))
                   for i in range(5)]
        paths = gguf.write_split(os.path.join(TMP, "sp"), self.KVS, tensors, 3)
        # any split names the set
        for p in paths:
            r, lines, _ = dump(p)
            self.assertEqual(r.returncode, 0, r.stderr)
            names = [x["tensor"] for x in lines if "tensor" in x]
            self.assertEqual(names, ["t%d" % i for i in range(5)])
            files = {x["tensor"]: os.path.basename(x["file"]) for x in lines if "tensor" in x}
            self.assertEqual(files["t4"], "sp-00003-of-00003.gguf")
            self.assertIn("a.arr_str", [x["key"] for x in lines if "key" in x])
        # a split missing
        os.rename(paths[1], paths[1] + ".away")
        out = check_files([paths[0]])
        os.rename(paths[1] + ".away", paths[1])
        self.assertTrue(out[0].startswith("error i/o") and "split 2 of 3" in out[0], out)
        # a tensor in two splits
        dup = gguf.write_split(os.path.join(TMP, "dup"), self.KVS, tensors[:2] + tensors[:1], 3)
        out = check_files([dup[0]])
        self.assertTrue(out[0].startswith("error") and "'t0' appears twice" in out[0], out)
        # split.count disagreeing with the name
        bad = gguf.write_split(os.path.join(TMP, "cnt"), self.KVS, tensors, 2)
        os.rename(bad[0], os.path.join(TMP, "cnt-00001-of-00003.gguf"))
        os.rename(bad[1], os.path.join(TMP, "cnt-00002-of-00003.gguf"))
        gguf.write_gguf(os.path.join(TMP, "cnt-00003-of-00003.gguf"), [], [])
        out = check_files([os.path.join(TMP, "cnt-00001-of-00003.gguf")])
        self.assertIn("split.count is 2", out[0])

    def test_every_truncation_refused(self):
        data = self.image()
        # the last tensor (5 f32 = 20 bytes) is followed by 12 bytes of padding: cutting
        # the padding leaves a valid file, cutting anything more does not
        end = len(data) - 12
        self.assertEqual(check_files([self.write("tr-end.gguf", data[:end])]), ["ok 2"])
        paths = [self.write("tr%04d.gguf" % n, data[:n]) for n in range(end)]
        for mode in ("check", "memory"):
            out = check_files(paths, mode)
            self.assertEqual(len(out), len(paths))
            for n, line in enumerate(out):
                self.assertTrue(line.startswith("error "), "%d bytes: %s" % (n, line))
                self.assertGreater(len(line.split(" ", 2)[-1]), 10, line)
        for p in paths:
            os.remove(p)

    def test_malformed_refused(self):
        good = self.image()
        hdr = 24
        cases = {}
        cases["magic"] = (b"GGUG" + good[4:], "not a GGUF file")
        cases["version1"] = (good[:4] + struct.pack("<I", 1) + good[8:], "version 1")
        cases["bigendian"] = (good[:4] + struct.pack(">I", 3) + good[8:], "big-endian")
        cases["n_kv huge"] = (good[:16] + struct.pack("<Q", 2 ** 60) + good[24:], "key count larger")
        cases["n_tensors huge"] = (good[:8] + struct.pack("<Q", 2 ** 62) + good[16:], "tensor table")
        # key length beyond the file
        cases["key length"] = (good[:hdr] + struct.pack("<Q", 2 ** 63) + good[hdr + 8:], "truncated")
        # value type 13
        k0 = hdr + 8 + len("general.architecture")
        cases["value type"] = (good[:k0] + struct.pack("<I", 13) + good[k0 + 4:], "unknown value type 13")
        one = lambda kvs, tensors=None, **kw: self.image(kvs=kvs, tensors=tensors, **kw)  # noqa: E731
        cases["dup key"] = (one([("x", gguf.U8, 1), ("x", gguf.U8, 2)]), "'x' appears twice")
        cases["bool 2"] = (one([("b", gguf.U8, 2)]).replace(struct.pack("<I", gguf.U8) + b"\x02",
                                                            struct.pack("<I", gguf.BOOL) + b"\x02"), "bool")
        cases["nested array"] = (one([("n", gguf.ARRAY, (gguf.U8, []))]).replace(
            struct.pack("<IIQ", gguf.ARRAY, gguf.U8, 0), struct.pack("<IIQ", gguf.ARRAY, gguf.ARRAY, 0)),
            "array of arrays")
        cases["alignment 3"] = (one([("general.alignment", gguf.U32, 3)]), "power of two")
        cases["alignment type"] = (one([("general.alignment", gguf.U64, 32)]), "power of two")
        nul = one([("a\0b", gguf.U8, 1)])
        cases["nul key"] = (nul, "NUL")
        q = lambda n, t=gguf.F32, ne=None: ("w", t, ne or [n], b"\0" * (n * 4 if t == gguf.F32 else 0))  # noqa
        cases["unknown type"] = (one([], [("w", 4, [32], b"\0" * 18)]), "unknown ggml type 4")
        cases["partial block"] = (one([], [("w", gguf.Q4_0, [48], b"\0" * 36)]), "not a multiple of Q4_0")
        cases["dims 5"] = (one([], [("w", gguf.F32, [1, 1, 1, 1, 1], b"\0" * 4)]), "5 dimensions")
        cases["dims 0"] = (one([], [("w", gguf.F32, [], b"")]), "0 dimensions")
        cases["dim overflow"] = (one([], [("w", gguf.F32, [2 ** 31, 2 ** 31, 2 ** 31], b"")]), "too large")
        cases["name long"] = (one([], [("n" * 64, gguf.F32, [1], b"\0" * 4)]), "at most 63")
        cases["dup tensor"] = (one([], [q(1), q(1)]), "'w' appears twice")
        cases["past end"] = (one([], [("w", gguf.F32, [8], b"\0" * 32)])[:-1], "run past")
        img = bytearray(one([], [("w", gguf.F32, [8], b"\0" * 32), ("u", gguf.F32, [8], b"\0" * 32)]))
        # tensor u's offset (the last 8 bytes of its info) moved to 16: misaligned
        at = img.index(b"\x01\x00\x00\x00u") if False else None
        info_u = bytes(struct.pack("<Q", 1) + b"u" + struct.pack("<IQI", 1, 8, 0))
        pos = bytes(img).index(info_u) + len(info_u)
        mis = img[:]
        mis[pos:pos + 8] = struct.pack("<Q", 16)
        cases["misaligned"] = (bytes(mis), "not a multiple of the alignment")
        ov = img[:]
        ov[pos:pos + 8] = struct.pack("<Q", 0)
        cases["overlap"] = (bytes(ov), "overlap")
        del at
        paths, names = [], []
        for name, (data, _) in cases.items():
            paths.append(self.write("bad-%s.gguf" % name.replace(" ", "_"), data))
            names.append(name)
        for mode in ("check", "memory"):
            out = check_files(paths, mode)
            for name, line in zip(names, out):
                self.assertTrue(line.startswith("error malformed input"), "%s: %s" % (name, line))
                self.assertIn(cases[name][1], line, name)
        # the same image without the corruption opens
        self.assertEqual(check_files([self.write("img.gguf", bytes(img))]), ["ok 2"])
        # not a regular file; too short; missing
        self.assertIn("not a regular file", check_files([TMP])[0])
        self.assertIn("too short", check_files([self.write("short.gguf", b"GGUF")])[0])
        self.assertTrue(check_files([os.path.join(TMP, "none.gguf")])[0].startswith("error i/o"))


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
