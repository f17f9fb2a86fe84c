#!/usr/bin/python3
"""clip_bpe.py — CLIP's BPE tokenizer as its published algorithm describes it (OpenAI
CLIP's and DiffCLIP's tokenizer.py, SimpleTokenizer), written here independently of the
tokenizer.json that scripts/convert_diffclip.py builds and of difflens' C tokenizer; and a
small merges file learned from a corpus, in bpe_simple_vocab_16e6.txt's format.

  encode(merges, text)  ids: <|startoftext|>, the text's BPE ids, <|endoftext|>
  learn_merges(words, n) the n most frequent pair merges, CLIP-style (word-final </w>)

Steps (SimpleTokenizer.encode): html.unescape twice and strip (ftfy.fix_text, which only
repairs broken text, is left out), white space runs to one space, lower case; the words are
the matches of CLIP's pattern (the `regex` module: \\p{L}, \\p{N}); each word's UTF-8 bytes
as GPT-2's byte characters, the last one with "</w>", merged by the lowest-ranked pair until
none applies. Ids: 256 byte characters, the same with </w>, the merges joined, then
<|startoftext|>, <|endoftext|>.
"""
import html
from collections import Counter

import regex

PATTERN = regex.compile(r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"
                        r"[^\s\p{L}\p{N}]+", regex.IGNORECASE)


def byte_encoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def vocab_of(merges):
    be = byte_encoder()
    v = list(be.values())
    v = v + [c + "</w>" for c in v] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    return {t: i for i, t in reversed(list(enumerate(v)))}  # the first id of a repeated piece


def bpe(word, ranks):
    w = tuple(word[:-1]) + (word[-1] + "</w>",)
    while len(w) > 1:
        pairs = [(ranks.get((w[i], w[i + 1]), 1 << 30), i) for i in range(len(w) - 1)]
        r, _ = min(pairs)
        if r == 1 << 30:
            break
        a, b = [(w[i], w[i + 1]) for rr, i in pairs if rr == r][0]
        out, i = [], 0
        while i < len(w):
            if i < len(w) - 1 and w[i] == a and w[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(w[i])
                i += 1
        w = tuple(out)
    return w


def encode(merges, text):
    ranks = {tuple(m): i for i, m in enumerate(merges)}
    vocab = vocab_of(merges)
    be = byte_encoder()
    text = " ".join(html.unescape(html.unescape(text)).strip().split()).lower()
    ids = [vocab["<|startoftext|>"]]
    for tok in PATTERN.findall(text):
        if tok in ("<|startoftext|>", "<|endoftext|>"):
            ids.append(vocab[tok])
            continue
        chars = "".join(be[b] for b in tok.encode("utf-8"))
        ids.extend(vocab[p] for p in bpe(chars, ranks))
    return ids + [vocab["<|endoftext|>"]]


def learn_merges(words, n):
    """Greedy pair merges over words (byte characters, final </w>), most frequent first."""
    be = byte_encoder()
    corpus = Counter(tuple("".join(be[b] for b in w.encode("utf-8"))[:-1]) +
                     ("".join(be[b] for b in w.encode("utf-8"))[-1] + "</w>",) for w in words)
    merges = []
    for _ in range(n):
        pairs = Counter()
        for w, c in corpus.items():
            for i in range(len(w) - 1):
                pairs[(w[i], w[i + 1])] += c
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        new = Counter()
        for w, c in corpus.items():
            out, i = [], 0
            while i < len(w):
                if i < len(w) - 1 and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += c
        corpus = new
    return merges
