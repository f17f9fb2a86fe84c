#!/usr/bin/python3
"""test_gguf_tokenizer.py — the tokenizer rebuilt from GGUF metadata against Hugging Face
tokenizers (@anush008/tokenizers in node, the reference of tests/test_tokenizer_ref.py)
on the real tokenizer.json files of Llama 3 (tokenizer.ggml.pre "llama-bpe") and Qwen 3
("qwen2"), written into GGUF metadata by tests/ref/gguf.py's converter (as llama.cpp's
convert_hf_to_gguf.py writes them): ids equal on the whole tokenizer corpus, with and
without special tokens; add_bos_token against a tokenizer.json whose post-processor
adds the bos; the SentencePiece ("llama") vocabularies of Llama 2 (add_space_prefix) and
Gemma 3 (without), ids and offsets; probe runs a text prompt from a GGUF model; refusals
name what they refuse (other tokenizer.ggml.model values, unknown pre-tokenizers).

Run from the repo root:  /usr/bin/python3 tests/test_gguf_tokenizer.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import gguf  # noqa: E402
import test_tokenizer_ref as ttr  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def main():
    if not os.path.isdir(os.path.join(ttr.MODULES, "@anush008", "tokenizers")):
        print("FAIL: the reference is missing; run scripts/deps.sh (installs .npm-deps/)")
        return 1
    tmp = tempfile.mkdtemp(prefix="dfl-gguf-tok-")
    try:
        texts = ttr.corpus()[:-1]     # the 1 MB line is tests/test_tokenizer_ref.py's
        for name, pre in (("llama3", "llama-bpe"), ("qwen3", "qwen2")):
            path = os.path.join(ttr.MODULES, ttr.TOKENIZERS[name])
            with open(path, encoding="utf-8") as f:
                tok = json.load(f)
            g = os.path.join(tmp, name + ".gguf")
            gguf.write_gguf(g, [("general.architecture", gguf.STRING, "llama")] + gguf.tokenizer_kvs(tok, pre), [])
            refs = ttr.run_ref(path, [(t, True) for t in texts] + [(t, False) for t in texts])
            for special in (True, False):
                ours = ttr.run_ours(g, texts, special)
                ref = refs[:len(texts)] if special else refs[len(texts):]
                bad = [i for i, (a, b) in enumerate(zip(ours, ref)) if a["ids"] != b["ids"]]
                for i in bad[:3]:
                    print("  %s special=%s text %d %r\n    gguf %s\n    hf   %s" % (
                        name, special, i, texts[i][:60], ours[i]["ids"][:20], ref[i]["ids"][:20]))
                ntok = sum(len(b["ids"]) for b in ref)
                check(len(ours) == len(texts) and not bad,
                      "%s from GGUF, special=%s: %d texts, %d tokens, %d id mismatches" % (
                          name, special, len(texts), ntok, len(bad)))
            # add_bos_token: the reference is the same tokenizer.json with a template adding the bos
            bos = tok["model"]["vocab"].get("<|begin_of_text|>") or next(
                (a["id"] for a in tok["added_tokens"] if a["content"] in ("<|begin_of_text|>", "<|endoftext|>")))
            content = next(a["content"] for a in tok["added_tokens"] if a["id"] == bos)
            t2 = dict(tok)
            t2["post_processor"] = {"type": "TemplateProcessing", "single": [
                {"SpecialToken": {"id": content, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {content: {"id": content, "ids": [bos], "tokens": [content]}}}
            p2 = os.path.join(tmp, name + "-bos.json")
            with open(p2, "w", encoding="utf-8") as f:
                json.dump(t2, f)
            kv = gguf.tokenizer_kvs(tok, pre, add_bos=True)
            kv = [x for x in kv if x[0] != "tokenizer.ggml.bos_token_id"] + [("tokenizer.ggml.bos_token_id", gguf.U32, bos)]
            g2 = os.path.join(tmp, name + "-bos.gguf")
            gguf.write_gguf(g2, kv, [])
            few = texts[:12]
            ref = ttr.run_ref(p2, [(t, True) for t in few])
            ours = ttr.run_ours(g2, few, True)
            check([a["ids"] for a in ours] == [b["ids"] for b in ref] and all(a["ids"][:1] == [bos] for a in ours),
                  "%s from GGUF with add_bos_token: ids start with %d and equal Hugging Face's" % (name, bos))

        # SentencePiece vocabularies (tokenizer.ggml.model "llama"): Llama 2 with the space
        # prefix, Gemma 3 without, written as convert_hf_to_gguf.py writes them
        for name, prefix in (("llama2", True), ("gemma3", False)):
            path = os.path.join(ttr.MODULES, ttr.TOKENIZERS[name])
            with open(path, encoding="utf-8") as f:
                tok = json.load(f)
            g = os.path.join(tmp, name + ".gguf")
            gguf.write_gguf(g, [("general.architecture", gguf.STRING, "llama")] + gguf.spm_tokenizer_kvs(tok, prefix), [])
            refs = ttr.run_ref(path, [(t, True) for t in texts] + [(t, False) for t in texts])
            for special in (True, False):
                ours = ttr.run_ours(g, texts, special)
                ref = refs[:len(texts)] if special else refs[len(texts):]
                bad = [i for i, (a, b) in enumerate(zip(ours, ref)) if a["ids"] != b["ids"]]
                off = [i for i, (a, b) in enumerate(zip(ours, ref))
                       if [list(o) for o in a["offsets"]] != [list(o) for o in b["offsets"]]]
                for i in bad[:3]:
                    print("  %s special=%s text %d %r\n    gguf %s\n    hf   %s" % (
                        name, special, i, texts[i][:60], ours[i]["ids"][:20], ref[i]["ids"][:20]))
                check(len(ours) == len(texts) and not bad and not off,
                      "%s (SentencePiece) from GGUF, special=%s: %d texts, %d id and %d offset mismatches" % (
                          name, special, len(texts), len(bad), len(off)))

        # probe on a GGUF model with the llama3 tokenizer: a text prompt tokenized from the file
        with open(os.path.join(ttr.MODULES, ttr.TOKENIZERS["llama3"]), encoding="utf-8") as f:
            tok = json.load(f)
        kv = gguf.tokenizer_kvs(tok, "llama-bpe", add_bos=True)
        V = max(t for _, t in tok["model"]["vocab"].items()) + 1 + len(tok["added_tokens"])
        cfg = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
               "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": V, "tie_word_embeddings": True}
        rng = np.random.default_rng(0)
        D, F = 32, 64
        hf = [("model.embed_tokens.weight", (rng.standard_normal((V, D)) * 0.1).astype(np.float32))]
        for n, shape in (("input_layernorm.weight", (D,)), ("post_attention_layernorm.weight", (D,)),
                         ("self_attn.q_proj.weight", (D, D)), ("self_attn.k_proj.weight", (D, D)),
                         ("self_attn.v_proj.weight", (D, D)), ("self_attn.o_proj.weight", (D, D)),
                         ("mlp.gate_proj.weight", (F, D)), ("mlp.up_proj.weight", (F, D)),
                         ("mlp.down_proj.weight", (D, F))):
            hf.append(("model.layers.0." + n, (rng.standard_normal(shape) * 0.1).astype(np.float32)))
        hf.append(("model.norm.weight", np.ones(D, np.float32)))
        m = os.path.join(tmp, "m.gguf")
        tensors = []
        for n, a in hf:
            t = gguf.Q8_0 if a.ndim == 2 else gguf.F32
            tensors.append((gguf.gguf_name(n), t, list(a.shape[::-1]), gguf.quantize(a, t)))
        gguf.write_gguf(m, gguf.config_kvs(cfg) + kv, tensors)
        pf = os.path.join(tmp, "p.jsonl")
        with open(pf, "w") as f:
            f.write(json.dumps({"id": "t", "input": "Hello world, GGUF!"}) + "\n")
        out = os.path.join(tmp, "d.h5")
        r = subprocess.run([os.path.join(ttr.BIN, "probe"), "--model", m, "--prompts", pf, "--out", out, "--quiet"],
                           capture_output=True, text=True)
        want = ttr.run_ref(os.path.join(tmp, "llama3-bos.json"), [("Hello world, GGUF!", True)])[0]["ids"]
        got = None
        if r.returncode == 0:
            import h5py
            with h5py.File(out, "r") as f:
                got = f["samples/000000/tokens"][()].tolist()
        check(got == want, "probe: a text prompt through the GGUF tokenizer gives %s (Hugging Face: %s)%s" % (
            got, want, "" if r.returncode == 0 else " — " + r.stderr.strip()))

        # refusals
        for kv, msg in (([("tokenizer.ggml.model", gguf.STRING, "bert")], "'bert' is not supported"),
                        ([("tokenizer.ggml.model", gguf.STRING, "llama"),
                          ("tokenizer.ggml.tokens", gguf.ARRAY, (gguf.STRING, ["a", "b"]))],
                         "'tokenizer.ggml.scores' is missing"),
                        ([("tokenizer.ggml.model", gguf.STRING, "gpt2"), ("tokenizer.ggml.pre", gguf.STRING, "falcon")],
                         "'falcon' is not supported"),
                        ([("tokenizer.ggml.model", gguf.STRING, "gpt2")], "'tokenizer.ggml.tokens' is missing"),
                        ([], "no string 'tokenizer.ggml.model'")):
            p = os.path.join(tmp, "bad.gguf")
            gguf.write_gguf(p, kv, [])
            r = subprocess.run([os.path.join(ttr.BIN, "tokenize"), "--tokenizer", p], input="x\n", capture_output=True,
                               text=True)
            check(r.returncode != 0 and msg in r.stderr, "refused: %s (%s)" % (msg, r.stderr.strip()[:120]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
