#!/usr/bin/python3
"""Five needle-style prompts over the needle-task vocabulary (DESIGN.md): filler, one
needle `<needle> key d1..d4` at depths 0..1, and a query for it at the end."""
import json
import random
import sys

rng = random.Random(7)
T, rows = 192, []
for depth in (0.0, 0.25, 0.5, 0.75, 1.0):
    key, digits = rng.randrange(15, 79), [5 + rng.randrange(10) for _ in range(4)]
    needle = [1, key] + digits
    query = [2, key, 3]
    ctx_len = T - 1 - len(query) - len(digits)
    filler = [rng.randrange(79, 128) for _ in range(ctx_len - len(needle))]
    at = round(depth * (ctx_len - len(needle)))
    ctx = filler[:at] + needle + filler[at:]
    tokens = [0] + ctx + query + digits
    a0 = 1 + at
    q0 = 1 + ctx_len
    rows.append({"id": "d%d" % round(depth * 100), "tokens": tokens, "depth": depth,
                 "answer": [[a0, a0 + len(needle)]], "query": [[q0, q0 + len(query)]],
                 "target": [[q0 + len(query), len(tokens)]]})
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
