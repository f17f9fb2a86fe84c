#!/usr/bin/python3
"""test_train.py — end-to-end tests of bin/train: a tiny matched pair (files, CSV,
parameter counts, probe loads both models), resume determinism (10 + 10 steps with a
resume give the same bytes as 20 straight), SIGINT (exit 130, a valid checkpoint, no
temporary files, resume finishes), the output-directory rules and usage errors
(exit 2). Runs in well under 30 s on 2 cores."""
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("BIN", "bin")
TRAIN = os.path.join(BIN, "train")
PROBE = os.path.join(BIN, "probe")

# a tiny model and task: a step takes a few milliseconds
TINY = ["--layers", "2", "--hidden", "32", "--heads", "4", "--ffn", "64", "--seq", "48", "--needles", "2",
        "--digits", "2", "--batch", "4", "--eval-samples", "8", "--warmup", "3", "--lr", "3e-3", "--quiet"]

failures = 0


def check(cond, what):
    global failures
    if cond:
        print("ok   %s" % what)
    else:
        failures += 1
        print("FAIL %s" % what)


def run(args, timeout=60, env=None):
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    if env:
        e.update(env)
    return subprocess.run([TRAIN] + args, capture_output=True, text=True, timeout=timeout, env=e)


def st_header(path):
    """safetensors header dict of path."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def write_prompts(tmp):
    """A one-prompt file in tmp (each test makes its own: no test needs another's files)."""
    path = os.path.join(tmp, "p.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"tokens": [0] + [80 + i % 40 for i in range(30)] + [2, 20, 3, 7, 8]}) + "\n")
    return path


def start_and_interrupt(args, csv, env):
    """Start bin/train, wait until `csv` has its first row (the run is past its first
    evaluation, so a checkpoint exists to be saved), then send SIGINT. Returns the
    process, or None if it ended (or never logged) first."""
    p = subprocess.Popen([TRAIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for _ in range(12000):  # a bound against hanging forever, not a speed limit (20 minutes)
        if p.poll() is not None:
            return None
        try:
            with open(csv) as f:
                if len(f.read().splitlines()) >= 2:
                    break
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    else:
        p.kill()
        p.communicate()
        return None
    p.send_signal(signal.SIGINT)
    return p


def leftovers(d):
    return [f for r, _, fs in os.walk(d) for f in fs if ".tmp." in f]


def test_pair(tmp):
    out = os.path.join(tmp, "pair")
    r = run(["--pair", out, "--steps", "12", "--eval-every", "4"] + TINY)
    check(r.returncode == 0, "pair: exit 0 (%s)" % r.stderr.strip()[-200:])
    counts = [int(x) for x in re.findall(r": (\d+) parameters", r.stdout)]
    check(len(counts) == 2, "pair: both parameter counts printed")
    if len(counts) == 2:
        # 2 layers x 6 x head_dim 8 (hidden 32 / 4 heads)
        check(counts[1] - counts[0] == 2 * 6 * 8, "pair: counts differ by L*6*head_dim (%d vs %d)" % tuple(counts))
    for name, mtype, heads in (("transformer", "llama", 4), ("diff", "diff_transformer", 2)):
        d = os.path.join(out, name)
        files = sorted(os.listdir(d))
        check(files == ["checkpoint.safetensors", "config.json", "model.safetensors", "train.csv", "train.png"],
              "pair/%s: files %s" % (name, files))
        cfg = json.load(open(os.path.join(d, "config.json")))
        check(cfg["model_type"] == mtype and cfg["num_attention_heads"] == heads and cfg["head_dim"] == 8,
              "pair/%s: config %s, %d heads of head_dim 8" % (name, mtype, heads))
        hdr = st_header(os.path.join(d, "model.safetensors"))
        n = sum(math.prod(v["shape"]) for k, v in hdr.items() if k != "__metadata__")
        check(n == counts[0 if name == "transformer" else 1], "pair/%s: model file holds %d parameters" % (name, n))
        rows = open(os.path.join(d, "train.csv")).read().splitlines()
        check(rows[0] == "step,lr,loss,eval_loss,eval_acc,tokens_per_s,elapsed_s", "pair/%s: CSV header" % name)
        steps = [int(x.split(",")[0]) for x in rows[1:]]
        check(steps == [4, 8, 12], "pair/%s: CSV rows at steps %s" % (name, steps))
        vals = [float(v) for v in rows[-1].split(",")]
        check(all(v == v for v in vals) and 0 <= vals[4] <= 1 and vals[2] > 0 and vals[3] > 0,
              "pair/%s: CSV values finite and in range" % name)
        # probe loads the model and runs a prompt
        prompts = write_prompts(tmp)
        p = subprocess.run([PROBE, "--model", d, "--prompts", prompts, "--out", os.path.join(tmp, name + ".h5"),
                            "--quiet", "--force", "--threads", "1"], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, "pair/%s: probe loads the model (%s)" % (name, p.stderr.strip()[-200:]))
    with open(os.path.join(out, "train.png"), "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "pair: OUTDIR/train.png compares both curves")
    check(not leftovers(out), "pair: no temporary files")


def test_resume(tmp):
    a, b = os.path.join(tmp, "straight"), os.path.join(tmp, "resumed")
    base = ["--type", "diffllama", "--steps", "20", "--eval-every", "5", "--ckpt-every", "0"] + TINY
    env = {"OMP_NUM_THREADS": "2"}
    r1 = run(["--out", a, "--threads", "2"] + base, env=env)
    r2 = run(["--out", b, "--threads", "2", "--stop-at", "10"] + base, env=env)
    check(r1.returncode == 0 and r2.returncode == 0, "resume: both runs exit 0")
    hdr = st_header(os.path.join(b, "checkpoint.safetensors"))
    check("train.step" in hdr and "optimizer.exp_avg_sq.model.norm.weight" in hdr, "resume: checkpoint holds optimizer state")
    with open(os.path.join(b, "train.csv")) as f:
        check(len(f.read().splitlines()) == 3, "resume: stopped run logged steps 5 and 10")
    r3 = run(["--out", b, "--threads", "2", "--resume"] + base, env=env)
    check(r3.returncode == 0, "resume: continues (%s)" % r3.stderr.strip()[-200:])
    same = open(os.path.join(a, "model.safetensors"), "rb").read() == open(os.path.join(b, "model.safetensors"), "rb").read()
    check(same, "resume: 10 + 10 steps give the same weights as 20 straight, bit for bit")
    ca = open(os.path.join(a, "checkpoint.safetensors"), "rb").read()
    cb = open(os.path.join(b, "checkpoint.safetensors"), "rb").read()
    # the elapsed-time scalar differs, and with it the checksum over every tensor;
    # everything else (weights, moments, step) must not
    ha, hb = st_header(os.path.join(a, "checkpoint.safetensors")), st_header(os.path.join(b, "checkpoint.safetensors"))
    off_a = 8 + struct.unpack("<Q", ca[:8])[0]
    diff = [k for k in ha if k not in ("__metadata__", "train.elapsed_s", "train.checksum") and
            ca[off_a + ha[k]["data_offsets"][0]:off_a + ha[k]["data_offsets"][1]] !=
            cb[off_a + hb[k]["data_offsets"][0]:off_a + hb[k]["data_offsets"][1]]]
    check(not diff, "resume: optimizer state identical too (%s)" % diff[:3])
    la = [l.split(",")[:5] for l in open(os.path.join(a, "train.csv")).read().splitlines()]
    lb = [l.split(",")[:5] for l in open(os.path.join(b, "train.csv")).read().splitlines()]
    check(la == lb, "resume: the same CSV (step, lr, loss, eval_loss, eval_acc)")
    # a resume with other flags is refused; an already finished run stays as it is
    r4 = run(["--out", b, "--resume", "--seed", "9"] + base)
    check(r4.returncode == 2 and "same" in r4.stderr, "resume: other flags refused with exit 2")
    r5 = run(["--out", b, "--resume"] + base)
    check(r5.returncode == 0, "resume: a finished run resumes to nothing")


def test_sigint(tmp):
    out = os.path.join(tmp, "sig")
    args = ["--out", out, "--steps", "100000", "--eval-every", "5", "--ckpt-every", "0"] + TINY
    e = dict(os.environ, OMP_NUM_THREADS="1")
    p = start_and_interrupt(args, os.path.join(out, "train.csv"), e)
    if p is None:
        check(False, "sigint: the run logs its first evaluation and is still running")
        return
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        check(False, "sigint: the run stops")
        return
    check(p.returncode == 130, "sigint: exit 130 (%s)" % err.strip()[-200:])
    check(not leftovers(out), "sigint: no temporary files")
    hdr = st_header(os.path.join(out, "checkpoint.safetensors"))
    step = None
    with open(os.path.join(out, "checkpoint.safetensors"), "rb") as f:
        raw = f.read()
        n = struct.unpack("<Q", raw[:8])[0]
        b0 = 8 + n + hdr["train.step"]["data_offsets"][0]
        step = struct.unpack("<q", raw[b0:b0 + 8])[0]
    check(step is not None and step >= 1, "sigint: checkpoint at step %s" % step)
    pr = subprocess.run([PROBE, "--model", out, "--prompts", write_prompts(tmp), "--out",
                         os.path.join(tmp, "sig.h5"), "--quiet", "--threads", "1"], capture_output=True, text=True)
    check(pr.returncode == 0, "sigint: the model written on stop loads in probe")
    r = run(["--out", out, "--resume", "--stop-at", str(step + 3)] + args[2:])
    check(r.returncode == 0, "sigint: resume continues (%s)" % r.stderr.strip()[-200:])
    # a pair stopped during its first model: --resume continues it and starts the Diff model
    pair = os.path.join(tmp, "sigpair")
    pargs = ["--pair", pair, "--steps", "100000", "--eval-every", "5", "--ckpt-every", "0"] + TINY
    p = start_and_interrupt(pargs, os.path.join(pair, "transformer", "train.csv"), e)
    if p is None:
        check(False, "sigint: the pair logs its first evaluation and is still running")
        return
    p.communicate(timeout=120)
    check(p.returncode == 130 and not os.path.exists(os.path.join(pair, "diff")),
          "sigint: a pair stops during the transformer (exit %s)" % p.returncode)
    r = run(pargs + ["--resume", "--stop-at", "5"])
    check(r.returncode == 0 and os.path.exists(os.path.join(pair, "diff", "checkpoint.safetensors")),
          "sigint: --resume of the pair starts the Diff model (%s)" % r.stderr.strip()[-200:])


def test_errors(tmp):
    cases = [
        (["--out", os.path.join(tmp, "e"), "--type", "gpt2"], "--type"),
        (["--out", os.path.join(tmp, "e"), "--vocab", "100"], "--vocab"),
        (["--pair", os.path.join(tmp, "e"), "--heads", "3"], "even"),
        (["--out", os.path.join(tmp, "e"), "--hidden", "30", "--heads", "4"], "hidden"),
        (["--out", os.path.join(tmp, "e"), "--seq", "20"], "too short"),
        (["--out", os.path.join(tmp, "e"), "--steps", "0"], "--steps"),
        (["--out", os.path.join(tmp, "e"), "--lr", "abc"], "--lr"),
        (["--out", os.path.join(tmp, "e"), "--min-lr", "1", "--lr", "0.1"], "min-lr"),
        (["--out", os.path.join(tmp, "e"), "--loss", "some"], "--loss"),
        (["--out", os.path.join(tmp, "e"), "--bogus"], "bogus"),
        (["--steps", "3"], "exactly one"),
        (["--out", "a", "--pair", "b"], "exactly one"),
        (["--out", os.path.join(tmp, "e"), "--resume", "--force"], "exclude"),
        (["--out", os.path.join(tmp, "e"), "extra"], "unexpected"),
    ]
    for args, word in cases:
        r = run(args)
        check(r.returncode == 2 and word in r.stderr, "usage error exits 2: %s (%s)" % (" ".join(args[-2:]), r.stderr.strip()[:80]))
    check(not os.path.exists(os.path.join(tmp, "e")), "usage errors create nothing")
    h = run(["--help"])
    check(h.returncode == 0 and "(default: 16)" in h.stdout and "--pair" in h.stdout and "GQA" in h.stdout,
          "--help lists flags with defaults")
    # an existing run is not overwritten without --force; --resume needs a checkpoint
    d = os.path.join(tmp, "exists")
    check(run(["--out", d, "--steps", "2"] + TINY).returncode == 0, "dir rules: first run")
    r = run(["--out", d, "--steps", "2"] + TINY)
    check(r.returncode == 1 and "--force" in r.stderr, "dir rules: existing run refused (exit 1)")
    check(run(["--out", d, "--steps", "2", "--force"] + TINY).returncode == 0, "dir rules: --force starts over")
    r = run(["--out", os.path.join(tmp, "nock"), "--resume", "--steps", "2"] + TINY)
    check(r.returncode == 1 and "checkpoint" in r.stderr, "dir rules: --resume without a checkpoint (exit 1)")
    # a damaged checkpoint, or a safetensors file that is not a training checkpoint
    ck = os.path.join(d, "checkpoint.safetensors")
    with open(ck, "r+b") as f:
        f.truncate(100)
    r = run(["--out", d, "--resume", "--steps", "4"] + TINY)
    check(r.returncode == 1 and "checkpoint.safetensors" in r.stderr, "dir rules: a truncated checkpoint (exit 1)")
    shutil.copy(os.path.join(d, "model.safetensors"), ck)
    r = run(["--out", d, "--resume", "--steps", "4"] + TINY)
    check(r.returncode == 1 and "not a difflens training checkpoint" in r.stderr,
          "dir rules: a model file is not a checkpoint (exit 1)")


def main():
    if not os.access(TRAIN, os.X_OK):
        print("test_train.py: %s not built" % TRAIN, file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="dfl_train_")
    t0 = time.time()
    try:
        # each test in a folder of its own: none depends on another's files or order
        for test in (test_pair, test_resume, test_sigint, test_errors):
            own = os.path.join(tmp, test.__name__)
            os.mkdir(own)
            test(own)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_train.py: %d failures, %.1f s" % (failures, time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
