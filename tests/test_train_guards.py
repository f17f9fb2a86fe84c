#!/usr/bin/python3
"""test_train_guards.py — what bin/train refuses, end to end: a run that turns
non-finite stops with the step and the quantity named, exit 1, and leaves the last good
checkpoint, model and train.csv as they were; a --resume from a checkpoint edited on
disk (a byte flipped, a NaN weight, a negative second moment, a negative or too large
step, other flags) is refused by name and rewrites nothing (one without a checksum, from
before checksums, resumes with a warning); the checksum is computed
here from docs/train.md (zlib CRC-32) and must equal the stored one; a second train
into a folder whose lock is held (by this script, and by a live train) is refused
without touching the folder; sizes the machine cannot hold fail with one line before
anything is allocated or created."""
import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

BIN = os.environ.get("BIN", "bin")
TRAIN = os.path.join(BIN, "train")

TINY = ["--layers", "1", "--hidden", "32", "--heads", "2", "--ffn", "64", "--seq", "32", "--needles", "2",
        "--digits", "2", "--batch", "4", "--eval-samples", "4", "--warmup", "0", "--quiet", "--threads", "1",
        "--steps", "12", "--eval-every", "2", "--ckpt-every", "2"]

failures = 0


def check(cond, what):
    global failures
    if cond:
        print("ok   %s" % what)
    else:
        failures += 1
        print("FAIL %s" % what)


def run(args):
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    return subprocess.run([TRAIN] + args, capture_output=True, text=True, timeout=300, env=e)


def read_st(path):
    """(bytes, header length, header) of a safetensors file, parsed here."""
    b = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", b[:8])[0]
    return b, n, json.loads(b[8:8 + n])


def crc_of(b, n, h):
    """docs/train.md: CRC-32 over every tensor but train.checksum in byte order of the
    names, each as its name, a 0 byte, then its data bytes."""
    c = 0
    for k in sorted(k for k in h if k not in ("__metadata__", "train.checksum")):
        a, e = h[k]["data_offsets"]
        c = zlib.crc32(k.encode() + b"\0", c)
        c = zlib.crc32(bytes(b[8 + n + a:8 + n + e]), c)
    return c


def stored_crc(b, n, h):
    a, e = h["train.checksum"]["data_offsets"]
    return struct.unpack("<q", bytes(b[8 + n + a:8 + n + e]))[0]


def edit(path, name, index, value, fix_crc=True):
    """Set element `index` of tensor `name` to value; with fix_crc the checksum is
    recomputed, so that only the value check can refuse the file."""
    b, n, h = read_st(path)
    dt = {"F32": np.float32, "I64": np.int64, "F64": np.float64}[h[name]["dtype"]]
    a, e = h[name]["data_offsets"]
    x = np.frombuffer(bytes(b[8 + n + a:8 + n + e]), dt).copy()
    x.flat[index] = value
    b[8 + n + a:8 + n + e] = x.tobytes()
    if fix_crc:
        a, e = h["train.checksum"]["data_offsets"]
        b[8 + n + a:8 + n + e] = struct.pack("<q", crc_of(b, n, h))
    open(path, "wb").write(b)


def snapshot(d):
    """{file: (bytes, mtime_ns)} of the run's files."""
    out = {}
    for f in ("checkpoint.safetensors", "model.safetensors", "config.json", "train.csv"):
        p = os.path.join(d, f)
        if os.path.exists(p):
            out[f] = (open(p, "rb").read(), os.stat(p).st_mtime_ns)
    return out


def all_finite(path):
    b, n, h = read_st(path)
    for k, v in h.items():
        if k != "__metadata__" and v["dtype"] == "F32":
            a, e = v["data_offsets"]
            if not np.all(np.isfinite(np.frombuffer(bytes(b[8 + n + a:8 + n + e]), np.float32))):
                return False
    return True


def leftovers(d):
    return [f for f in os.listdir(d) if ".tmp." in f]


def trained(tmp, name, stop_at=4):
    d = os.path.join(tmp, name)
    r = run(["--out", d, "--stop-at", str(stop_at)] + TINY)
    assert r.returncode == 0, r.stderr
    return d


def test_checksum(tmp):
    d = trained(tmp, "crc")
    b, n, h = read_st(os.path.join(d, "checkpoint.safetensors"))
    check("train.checksum" in h and h["train.checksum"]["dtype"] == "I64", "checksum: stored as train.checksum (I64)")
    check(stored_crc(b, n, h) == crc_of(b, n, h), "checksum: equals zlib.crc32 computed as docs/train.md says")
    # the checksum is the last tensor, after the data of every other one
    last = max(h[k]["data_offsets"][1] for k in h if k != "__metadata__")
    check(h["train.checksum"]["data_offsets"][1] == last, "checksum: the last tensor of the file")


def test_diverged(tmp):
    # a planted weight (checksum recomputed: a valid checkpoint) makes step 5 non-finite:
    # in the final norm the gradient first, in a layer's norm already the loss
    for name, tensor, what in (("div", "model.norm.weight", "the gradient norm is NaN"),
                               ("divloss", "model.layers.0.post_attention_layernorm.weight",
                                "the training loss is NaN")):
        d = trained(tmp, name)
        edit(os.path.join(d, "checkpoint.safetensors"), tensor, 0, 1e38 if name == "div" else 1e37)
        before = snapshot(d)
        r = run(["--out", d, "--resume"] + TINY)
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1, "diverged (%s): exit 1 (got %d)" % (what, r.returncode))
        msg = [l for l in err if "diverged" in l]
        check(msg and "step 5" in msg[0] and what in msg[0] and "those of step 4" in msg[0],
              "diverged: the message names the step, the quantity and what is kept (%s)" % (msg[:1] or err[-1:]))
        after = snapshot(d)
        check(after == before, "diverged (%s): checkpoint, model, config and train.csv untouched (bytes, mtime)" % what)
        csv = open(os.path.join(d, "train.csv")).read().lower()
        check("nan" not in csv and "inf" not in csv, "diverged (%s): no NaN or Inf row in train.csv" % what)
        check(all_finite(os.path.join(d, "model.safetensors")), "diverged (%s): model.safetensors is finite" % what)
        check(not leftovers(d), "diverged (%s): no temporary files left (%s)" % (what, leftovers(d)))
    # from a fresh start: diverging before the first checkpoint writes no model at all
    d2 = os.path.join(tmp, "div0")
    r = run(["--out", d2, "--init-std", "10", "--lr", "10"] + TINY[:-2] + ["--ckpt-every", "0"])
    # (a large lr need not diverge on a tiny model; what is checked is that no row is NaN either way)
    csv2 = open(os.path.join(d2, "train.csv")).read().lower() if os.path.exists(os.path.join(d2, "train.csv")) else ""
    check("nan" not in csv2, "diverged: --lr 10 --init-std 10 logs no NaN row (exit %d)" % r.returncode)


def refused(tmp, name, mutate, expect, what):
    d = trained(tmp, name)
    mutate(os.path.join(d, "checkpoint.safetensors"))
    before = snapshot(d)
    time.sleep(0.01)
    r = run(["--out", d, "--resume"] + TINY)
    line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    check(r.returncode != 0 and "checkpoint.safetensors" in line and expect in line,
          "resume refuses %s by name (exit %d: %s)" % (what, r.returncode, line[:200]))
    check(snapshot(d) == before, "resume refusing %s rewrites nothing (train.csv, model, checkpoint)" % what)


def flip_byte(path):
    b, n, h = read_st(path)
    a, _ = h["model.layers.0.self_attn.q_proj.weight"]["data_offsets"]
    b[8 + n + a + 5] ^= 0x10
    open(path, "wb").write(b)


def test_resume_refusals(tmp):
    refused(tmp, "flip", flip_byte, "checksum mismatch", "a flipped byte")
    refused(tmp, "nanw", lambda p: edit(p, "model.layers.0.mlp.up_proj.weight", 3, float("nan")),
            "model.layers.0.mlp.up_proj.weight element 3 is nan", "a NaN weight")
    refused(tmp, "infm", lambda p: edit(p, "optimizer.exp_avg.model.embed_tokens.weight", 7, float("inf")),
            "optimizer.exp_avg.model.embed_tokens.weight element 7 is inf", "an infinite first moment")
    refused(tmp, "negv", lambda p: edit(p, "optimizer.exp_avg_sq.model.norm.weight", 1, -1e-6),
            "optimizer.exp_avg_sq.model.norm.weight element 1", "a negative second moment")
    refused(tmp, "negstep", lambda p: edit(p, "train.step", 0, -1), "train.step -1 is not in [0, 12]",
            "a negative step")
    refused(tmp, "bigstep", lambda p: edit(p, "train.step", 0, 13), "train.step 13 is not in [0, 12]",
            "a step past --steps")
    # other flags than the checkpoint's: the config check (exit 2)
    d = trained(tmp, "flags")
    before = snapshot(d)
    r = run(["--out", d, "--resume"] + TINY + ["--ffn", "32"])
    check(r.returncode == 2 and "different flags" in r.stderr and snapshot(d) == before,
          "resume refuses other flags (exit %d) and rewrites nothing" % r.returncode)
    # a checkpoint from before checksums (no train.checksum): resumes, with a warning
    d = trained(tmp, "nocrc")
    path = os.path.join(d, "checkpoint.safetensors")
    b, n, h = read_st(path)
    a, e = h.pop("train.checksum")["data_offsets"]
    hdr = json.dumps(h).encode()
    hdr += b" " * (-len(hdr) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hdr)) + hdr + bytes(b[8 + n:8 + n + a]))
    r = run(["--out", d, "--resume"] + TINY)
    check(r.returncode == 0 and "warning" in r.stderr and "no checksum" in r.stderr,
          "resume: a checkpoint without checksum resumes with a warning (exit %d: %s)" %
          (r.returncode, r.stderr.strip()[-160:]))
    # an intact checkpoint still resumes to the end
    d = trained(tmp, "intact")
    r = run(["--out", d, "--resume"] + TINY)
    check(r.returncode == 0 and open(os.path.join(d, "train.csv")).read().splitlines()[-1].startswith("12,"),
          "resume: an intact checkpoint resumes (%s)" % r.stderr.strip()[-200:])


def test_lock(tmp):
    d = trained(tmp, "locked")
    before = snapshot(d)
    # the lock as atomic.h makes it: a pid-named temporary beside train.lock, flock-held
    lock = os.path.join(d, ".train.lock.tmp.%d.Ab12Cd" % os.getpid())
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        for extra, what in ((["--force"], "--force"), (["--resume"], "--resume")):
            r = run(["--out", d] + extra + TINY)
            check(r.returncode == 1 and "another train run is writing this folder" in r.stderr and
                  "process %d" % os.getpid() in r.stderr,
                  "lock: a second train %s is refused naming the holder (exit %d: %s)" %
                  (what, r.returncode, r.stderr.strip()[-160:]))
            check(snapshot(d) == before, "lock: the refused %s touched nothing" % what)
    finally:
        os.close(fd)
        os.remove(lock)
    # a live train holds it: start one, wait for its first row, then a second one
    live = os.path.join(tmp, "live")
    e = dict(os.environ, OMP_NUM_THREADS="1")
    args = ["--out", live] + TINY[:-6] + ["--steps", "1000000", "--eval-every", "1", "--ckpt-every", "0"]
    p = subprocess.Popen([TRAIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    csv = os.path.join(live, "train.csv")
    for _ in range(6000):   # a bound against hanging forever (10 minutes), not a speed limit
        if p.poll() is not None or (os.path.exists(csv) and len(open(csv).read().splitlines()) >= 2):
            break
        time.sleep(0.1)
    r = run(["--out", live, "--force"] + TINY)
    check(r.returncode == 1 and "another train run is writing this folder" in r.stderr and
          "process %d" % p.pid in r.stderr, "lock: a train into a folder a live train writes is refused (%s)" %
          r.stderr.strip()[-160:])
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=300)
    check(p.returncode == 130 and os.path.exists(os.path.join(live, "checkpoint.safetensors")),
          "lock: the first run was not disturbed (exit %d, checkpoint written)" % p.returncode)
    check(not leftovers(live), "lock: released at the end (%s)" % leftovers(live))


def test_memory(tmp):
    for flags, what in ((["--vocab", "16777216", "--hidden", "65536", "--heads", "1024"], "--vocab 2^24"),
                        (["--batch", "65536", "--seq", "65536"], "--batch and --seq 65536")):
        d = os.path.join(tmp, "mem")
        r = run(["--out", d, "--quiet"] + flags)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(lines) >= 1 and "more than the" in lines[0] and "MemAvailable" in lines[0],
              "memory: %s refused with one line (exit %d: %s)" % (what, r.returncode, lines[:1]))
        check(not os.path.exists(d), "memory: %s created nothing" % what)


def main():
    tmp = tempfile.mkdtemp(prefix="dfl_train_guards_")
    t0 = time.time()
    try:
        test_checksum(tmp)
        test_diverged(tmp)
        test_resume_refusals(tmp)
        test_lock(tmp)
        test_memory(tmp)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    print("test_train_guards.py: %d failures, %.1f s" % (failures, time.time() - t0))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
