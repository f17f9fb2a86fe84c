#!/usr/bin/python3
"""convert_diffclip.py — a DiffCLIP or CLIP training checkpoint to a difflens model folder.

    /usr/bin/python3 scripts/convert_diffclip.py CHECKPOINT.pt OUTDIR [--vision-heads 12]
        [--text-heads 8] [--preprocess slip|clip] [--bpe bpe_simple_vocab_16e6.txt.gz] [--force]

Reads the pickled checkpoint the DiffCLIP authors publish (checkpoint_best.pt: a dict whose
"state_dict" holds the model's tensors, "module."-prefixed), tells DiffCLIP (differential
attention: attn.q_proj) from its CLIP baseline (attn.qkv / attn.in_proj_weight), reads the
sizes from the tensors' shapes, checks every tensor against them, and writes
OUTDIR/model.safetensors (the published names without "module.") and OUTDIR/config.json
(docs/format.md "DiffCLIP and its CLIP baseline"). Run once per checkpoint; difflens then
loads the folder like any other model.

Why this is safe to run on a downloaded file: torch.load(weights_only=True) unpickles with
PyTorch's restricted unpickler, which can only build tensors, storages, OrderedDict and
plain values — no code in the file runs. The training scripts also pickle their argparse
arguments (an argparse.Namespace) and floats, which Debian's PyTorch 1.13 restricted
unpickler refuses; the file is then read by RestrictedUnpickler below, which builds tensors
itself (numpy views of the zip's storage records), OrderedDict and argparse.Namespace (a
plain attribute bag, whose unpickling only fills its __dict__) and refuses every other
global by name. (PyTorch 1.13's torch.load ignores a pickle_module argument, so the
restriction cannot be handed to torch.load itself.)

Exit status: 0 written, 1 the checkpoint is refused (message on stderr), 2 usage.
"""
import argparse
import io
import json
import os
import pickle
import struct
import sys
import tempfile
import zipfile
from collections import OrderedDict

import numpy as np
import torch

PREPROCESS = {
    # SLIP's eval_zeroshot.py (the code the DiffCLIP checkpoints were evaluated with):
    # Resize(224) (torchvision's default, bilinear), CenterCrop(224), ImageNet statistics.
    "slip": {"resize": 224, "crop": 224, "interpolation": "bilinear",
             "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
    # OpenAI CLIP's _transform: bicubic, CLIP's statistics.
    "clip": {"resize": 224, "crop": 224, "interpolation": "bicubic",
             "mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]},
}
DTYPES = {torch.float32: ("F32", 4), torch.float16: ("F16", 2), torch.bfloat16: ("BF16", 2)}


class Refused(Exception):
    """The checkpoint cannot be converted; the message says why."""


# ---------------------------------------------------------------------------
# reading the checkpoint
# ---------------------------------------------------------------------------

STORAGES = {"FloatStorage": "<f4", "HalfStorage": "<f2", "BFloat16Storage": "bf16", "DoubleStorage": "<f8",
            "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1",
            "ByteStorage": "u1", "BoolStorage": "?"}


class _Storage:
    """A storage type named by the pickle (torch.FloatStorage...): only its dtype."""
    def __init__(self, name):
        self.name, self.dtype = name, STORAGES[name]


def _rebuild_tensor(storage, offset, size, stride, *unused):
    """torch._utils._rebuild_tensor_v2's job on our own storages (numpy arrays)."""
    if storage.ndim != 1 or len(size) != len(stride):
        raise pickle.UnpicklingError("malformed tensor record")
    need = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    if offset < 0 or any(s < 0 for s in stride) or need > storage.size:
        raise pickle.UnpicklingError("tensor record outside its storage")
    item = storage.itemsize
    a = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size), strides=[s * item for s in stride])
    a = np.array(a)  # a copy: the tensor owns its values
    if storage.dtype == np.uint16 and getattr(storage, "bf16", False):
        return torch.from_numpy(a.astype(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return data


class _BF16(np.ndarray):
    """uint16 bit patterns of bf16 values, marked so that the tensor is rebuilt as bf16."""
    bf16 = True


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles a torch.save zip's data.pkl building only tensors (from the zip's own
    storage records, through numpy), OrderedDict and argparse.Namespace: every other
    global is an UnpicklingError naming it, so no code of the file can run."""
    GLOBALS = {("collections", "OrderedDict"): OrderedDict,
               ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
               ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
               ("argparse", "Namespace"): argparse.Namespace}

    def __init__(self, file, zf, prefix):
        super().__init__(file, encoding="utf-8")
        self.zf, self.prefix, self.storages = zf, prefix, {}

    def find_class(self, module, name):
        if module == "torch" and name in STORAGES:
            return _Storage(name)
        if (module, name) in self.GLOBALS:
            return self.GLOBALS[(module, name)]
        raise pickle.UnpicklingError("refused global %s.%s (not a tensor, a storage or argparse.Namespace)"
                                     % (module, name))

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _Storage)):
            raise pickle.UnpicklingError("unknown persistent record %r" % (pid[:1],))
        st, key = pid[1], str(pid[2])
        if key not in self.storages:
            raw = self.zf.read(self.prefix + "data/" + key)
            if st.dtype == "bf16":
                a = np.frombuffer(raw, dtype="<u2").view(_BF16)
            else:
                a = np.frombuffer(raw, dtype=st.dtype)
            self.storages[key] = a
        return self.storages[key]


def load_restricted(path):
    """A torch.save zip read by RestrictedUnpickler."""
    with zipfile.ZipFile(path) as zf:
        pkl = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise Refused("%s: not a torch.save zip (no single data.pkl)" % path)
        prefix = pkl[0][:-len("data.pkl")]
        return RestrictedUnpickler(io.BytesIO(zf.read(pkl[0])), zf, prefix).load()


def load_checkpoint(path):
    """The checkpoint's object, read without running code from it (see the module doc)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError):
        pass  # a global or an opcode PyTorch's restricted unpickler does not take: ours
    try:
        return load_restricted(path)
    except pickle.UnpicklingError as e:
        raise Refused("%s: %s" % (path, e))
    except (zipfile.BadZipFile, KeyError, ValueError, EOFError, TypeError) as e:
        raise Refused("%s: not a PyTorch checkpoint (%s)" % (path, e))


def state_dict_of(obj):
    """name -> tensor: obj["state_dict"] (or obj itself), "module." removed."""
    sd = obj.get("state_dict", obj) if isinstance(obj, dict) else None
    if not isinstance(sd, dict) or not sd:
        raise Refused("no state_dict in the checkpoint")
    out = {}
    for k, v in sd.items():
        if not isinstance(k, str) or not isinstance(v, torch.Tensor):
            raise Refused("state_dict entry %r is not a named tensor" % (k,))
        name = k[len("module."):] if k.startswith("module.") else k
        if name in out:
            raise Refused("tensor %s given twice (with and without module.)" % name)
        out[name] = v
    return out


# ---------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------

def count_layers(sd, prefix):
    n = 0
    while any(k.startswith("%s%d." % (prefix, n)) for k in sd):
        n += 1
    return n


def shape_of(sd, name):
    if name not in sd:
        raise Refused("missing tensor %s" % name)
    return tuple(sd[name].shape)


def expect(sd, name, shape, used):
    got = shape_of(sd, name)
    if got != tuple(shape):
        raise Refused("tensor %s has shape %s, expected %s" % (name, list(got), list(shape)))
    used.add(name)


def attention_names(sd, pre, width, heads, diff, tower, used):
    """Check one block's attention tensors (docs/format.md's table)."""
    if heads <= 0 or width % heads:
        raise Refused("%s: width %d is not a multiple of heads %d" % (tower, width, heads))
    d = width // heads
    if diff:
        if heads % 2:
            raise Refused("%s: differential attention needs an even number of heads, not %d" % (tower, heads))
        lam = shape_of(sd, pre + "attn.lambda_q1")
        if lam != (d,):
            raise Refused("%s: lambda_q1 has %s values, but width %d / heads %d = head_dim %d (give the right "
                          "--%s-heads)" % (tower, list(lam), width, heads, d, "vision" if tower == "vision" else "text"))
        for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
            expect(sd, pre + "attn.%s.weight" % p, (width, width), used)
            expect(sd, pre + "attn.%s.bias" % p, (width,), used)
        for p in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            expect(sd, pre + "attn." + p, (d,), used)
        expect(sd, pre + "attn.diff_norm.weight", (2 * d,), used)
    elif tower == "vision":
        expect(sd, pre + "attn.qkv.weight", (3 * width, width), used)
        expect(sd, pre + "attn.qkv.bias", (3 * width,), used)
        expect(sd, pre + "attn.proj.weight", (width, width), used)
        expect(sd, pre + "attn.proj.bias", (width,), used)
    else:
        expect(sd, pre + "attn.in_proj_weight", (3 * width, width), used)
        expect(sd, pre + "attn.in_proj_bias", (3 * width,), used)
        expect(sd, pre + "attn.out_proj.weight", (width, width), used)
        expect(sd, pre + "attn.out_proj.bias", (width,), used)


def layout(sd, vision_heads, text_heads):
    """config.json's model part from the tensors; every tensor checked and used."""
    used = set()
    diff = "visual.blocks.0.attn.q_proj.weight" in sd
    if not diff and "visual.blocks.0.attn.qkv.weight" not in sd:
        raise Refused("neither visual.blocks.0.attn.q_proj (DiffCLIP) nor visual.blocks.0.attn.qkv (CLIP) is in "
                      "the checkpoint: not a DiffCLIP/SLIP CLIP model")
    pw = shape_of(sd, "visual.patch_embed.proj.weight")
    if len(pw) != 4 or pw[1] != 3 or pw[2] != pw[3]:
        raise Refused("visual.patch_embed.proj.weight has shape %s, expected [width, 3, P, P]" % list(pw))
    dv, patch = pw[0], pw[2]
    expect(sd, "visual.patch_embed.proj.bias", (dv,), used)
    used.add("visual.patch_embed.proj.weight")
    expect(sd, "visual.cls_token", (1, 1, dv), used)
    pos = shape_of(sd, "visual.pos_embed")
    grid = int(round((pos[1] - 1) ** 0.5)) if len(pos) == 3 and pos[1] > 1 else 0
    if len(pos) != 3 or pos[0] != 1 or pos[2] != dv or grid * grid != pos[1] - 1:
        raise Refused("visual.pos_embed has shape %s, expected [1, 1 + grid², %d]" % (list(pos), dv))
    used.add("visual.pos_embed")
    lv = count_layers(sd, "visual.blocks.")
    mlp_v = shape_of(sd, "visual.blocks.0.mlp.fc1.weight")[0]
    scaled = "visual.blocks.0.ls1.gamma" in sd
    for l in range(lv):
        pre = "visual.blocks.%d." % l
        for n in ("norm1", "norm2"):
            expect(sd, pre + n + ".weight", (dv,), used)
            expect(sd, pre + n + ".bias", (dv,), used)
        attention_names(sd, pre, dv, vision_heads, diff, "vision", used)
        expect(sd, pre + "mlp.fc1.weight", (mlp_v, dv), used)
        expect(sd, pre + "mlp.fc1.bias", (mlp_v,), used)
        expect(sd, pre + "mlp.fc2.weight", (dv, mlp_v), used)
        expect(sd, pre + "mlp.fc2.bias", (dv,), used)
        if scaled:
            expect(sd, pre + "ls1.gamma", (dv,), used)
            expect(sd, pre + "ls2.gamma", (dv,), used)
    expect(sd, "visual.norm.weight", (dv,), used)
    expect(sd, "visual.norm.bias", (dv,), used)

    vocab, dt = shape_of(sd, "token_embedding.weight")
    used.add("token_embedding.weight")
    ctx = shape_of(sd, "positional_embedding")[0]
    expect(sd, "positional_embedding", (ctx, dt), used)
    lt = count_layers(sd, "transformer.resblocks.")
    mlp_t = shape_of(sd, "transformer.resblocks.0.mlp.c_fc.weight")[0]
    for l in range(lt):
        pre = "transformer.resblocks.%d." % l
        for n in ("ln_1", "ln_2"):
            expect(sd, pre + n + ".weight", (dt,), used)
            expect(sd, pre + n + ".bias", (dt,), used)
        attention_names(sd, pre, dt, text_heads, diff, "text", used)
        expect(sd, pre + "mlp.c_fc.weight", (mlp_t, dt), used)
        expect(sd, pre + "mlp.c_fc.bias", (mlp_t,), used)
        expect(sd, pre + "mlp.c_proj.weight", (dt, mlp_t), used)
        expect(sd, pre + "mlp.c_proj.bias", (dt,), used)
    expect(sd, "ln_final.weight", (dt,), used)
    expect(sd, "ln_final.bias", (dt,), used)
    embed = shape_of(sd, "text_projection")[1]
    expect(sd, "text_projection", (dt, embed), used)
    expect(sd, "image_projection", (dv, embed), used)
    expect(sd, "logit_scale", (), used)
    unknown = sorted(set(sd) - used)
    if unknown:
        raise Refused("tensors this layout does not have: %s" % ", ".join(unknown[:8]))

    vision = {"image_size": grid * patch, "patch_size": patch, "width": dv, "layers": lv, "heads": vision_heads,
              "mlp_width": mlp_v, "layer_norm_eps": 1e-5 if diff else 1e-6, "hidden_act": "gelu"}
    text = {"context_length": ctx, "vocab_size": vocab, "width": dt, "layers": lt, "heads": text_heads,
            "mlp_width": mlp_t, "layer_norm_eps": 1e-5, "hidden_act": "quick_gelu"}
    if diff:
        vision["lambda_init"] = text["lambda_init"] = 0.8
    return {"model_type": "diffclip" if diff else "clip", "embed_dim": embed,
            "vision_config": vision, "text_config": text}


# ---------------------------------------------------------------------------
# the CLIP tokenizer
# ---------------------------------------------------------------------------

CLIP_SPLIT = (r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"
              r"[^\s\p{L}\p{N}]+")
CLIP_MERGES = 49152 - 256 - 2  # the merges SimpleTokenizer keeps (lines 1 .. 48894 of the file)


def byte_chars():
    """GPT-2's bytes_to_unicode order: the printable Latin-1 bytes as themselves, the
    other 68 bytes as U+0100 on, in byte order. Returns the 256 characters in CLIP's vocab order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + n)
            n += 1
    return [chars[b] for b in keep] + [chars[b] for b in range(256) if b not in keep]


def clip_tokenizer_json(bpe_path):
    """tokenizer.json equivalent to CLIP's SimpleTokenizer on bpe_simple_vocab_16e6.txt(.gz):
    ids = the 256 byte characters, the same with </w>, the merges joined, <|startoftext|>,
    <|endoftext|>; text NFC-normalised, white space runs to one space, lower-cased, split by
    CLIP's pattern, byte-level characters, BPE with the word-final suffix </w>, and the
    template <|startoftext|> $A <|endoftext|>. Not reproduced: SimpleTokenizer's ftfy.fix_text
    and html.unescape (mojibake repair), which change only broken or HTML-escaped text."""
    import gzip
    opener = gzip.open if bpe_path.endswith(".gz") else open
    with opener(bpe_path, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    merges = [m for m in lines[1:1 + CLIP_MERGES] if m.strip()]
    if any(len(m.split()) != 2 for m in merges):
        raise Refused("%s: not a BPE merges file (a line is not two symbols)" % bpe_path)
    base = byte_chars()
    vocab = base + [c + "</w>" for c in base] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    ids = {}
    for i, v in enumerate(vocab):
        ids.setdefault(v, i)
    sot, eot = len(vocab) - 2, len(vocab) - 1

    def special(i, content):
        return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": True, "special": True}
    return len(vocab), {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [special(sot, "<|startoftext|>"), special(eot, "<|endoftext|>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
            {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": CLIP_SPLIT}, "behavior": "Removed", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<|startoftext|>": {"id": "<|startoftext|>", "ids": [sot],
                                                                  "tokens": ["<|startoftext|>"]},
                                              "<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot],
                                                                "tokens": ["<|endoftext|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False, "vocab": ids,
                  "merges": merges}}


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------

def safetensors_bytes(sd):
    """The safetensors image of sd: header, then tensors in name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(sd):
        t = sd[name].detach().contiguous()
        if t.dtype not in DTYPES:
            t = t.to(torch.float32)
        code, size = DTYPES[t.dtype]
        raw = t.view(torch.int16).numpy().tobytes() if size == 2 else t.numpy().tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def write_atomic(path, data, force):
    if os.path.exists(path) and not force:
        raise Refused("%s exists (--force to replace it)" % path)
    fd, tmp = tempfile.mkstemp(prefix=".convert-", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def convert(checkpoint, outdir, vision_heads=12, text_heads=8, preprocess="slip", force=False, bpe=None):
    """Convert; returns the config written. Raises Refused."""
    sd = state_dict_of(load_checkpoint(checkpoint))
    cfg = layout(sd, vision_heads, text_heads)
    tok = None
    if bpe:
        n, tok = clip_tokenizer_json(bpe)
        if n != cfg["text_config"]["vocab_size"]:
            raise Refused("%s gives %d ids, the text tower has %d" % (bpe, n, cfg["text_config"]["vocab_size"]))
    size = cfg["vision_config"]["image_size"]  # 224 for the published models; the crop is the tower's input
    cfg["preprocess"] = dict(PREPROCESS[preprocess], resize=size, crop=size)
    os.makedirs(outdir, exist_ok=True)
    write_atomic(os.path.join(outdir, "model.safetensors"), safetensors_bytes(sd), force)
    write_atomic(os.path.join(outdir, "config.json"), (json.dumps(cfg, indent=1) + "\n").encode(), force)
    if tok:
        write_atomic(os.path.join(outdir, "tokenizer.json"), json.dumps(tok, ensure_ascii=False).encode(), force)
    return cfg


def main(argv):
    ap = argparse.ArgumentParser(description="Convert a DiffCLIP / CLIP training checkpoint to safetensors + "
                                 "config.json.")
    ap.add_argument("checkpoint")
    ap.add_argument("outdir")
    ap.add_argument("--vision-heads", type=int, default=12, help="softmax heads of the image tower [12]")
    ap.add_argument("--text-heads", type=int, default=8, help="softmax heads of the text tower [8]")
    ap.add_argument("--preprocess", choices=sorted(PREPROCESS), default="slip",
                    help="image preprocessing written to config.json [slip]")
    ap.add_argument("--bpe", help="CLIP's bpe_simple_vocab_16e6.txt.gz (shipped with the DiffCLIP code): also "
                    "write OUTDIR/tokenizer.json [none]")
    ap.add_argument("--force", action="store_true", help="replace an existing conversion")
    a = ap.parse_args(argv)
    try:
        cfg = convert(a.checkpoint, a.outdir, a.vision_heads, a.text_heads, a.preprocess, a.force, a.bpe)
    except Refused as e:
        print("convert_diffclip: %s" % e, file=sys.stderr)
        return 1
    print("convert_diffclip: %s: %s, image %d layers, text %d layers -> %s" % (
        a.checkpoint, cfg["model_type"], cfg["vision_config"]["layers"], cfg["text_config"]["layers"], a.outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
