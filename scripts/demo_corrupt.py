#!/usr/bin/python3
"""demo_corrupt.py — a clean and a corrupted needle prompt for a patching sweep.

Reads a `noise prompts` file, takes the prompt with the given id, and writes two lines:
"clean" (the prompt as it is) and "corrupt" (the last query asks for another needle's
key: the first distractor's). Both keep the clean prompt's target spans, so a sweep's
metric (probe --patch-sweep, metric target_prob) reads the clean answer's probability
in all three runs: high in the clean run, low where the model follows the corrupted key.

Usage: /usr/bin/python3 scripts/demo_corrupt.py PROMPTS.jsonl ID OUT.jsonl
"""
import json
import os
import sys


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        prompts = [json.loads(line) for line in f if line.strip()]
    p = next((q for q in prompts if q["id"] == argv[2]), None)
    if p is None or not p.get("query") or not p.get("distractor"):
        print("demo_corrupt.py: no prompt %r with queries and distractors in %s" % (argv[2], argv[1]),
              file=sys.stderr)
        return 1
    key_at = p["query"][-1][0] + 1          # <query> KEY <sep> of the last query
    other = p["distractor"][0][0] + 1       # <needle> KEY d1 d2 of the first distractor
    bad = dict(p, id="corrupt", tokens=list(p["tokens"]))
    bad["tokens"][key_at] = p["tokens"][other]
    if "text" in p:
        bad["text"] = list(p["text"])
        bad["text"][key_at] = p["text"][other]
    tmp = argv[3] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(dict(p, id="clean")) + "\n")
        f.write(json.dumps(bad) + "\n")
    os.replace(tmp, argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
