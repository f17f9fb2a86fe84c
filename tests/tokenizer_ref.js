// tokenizer_ref.js — the reference side of tests/test_tokenizer_ref.py: Hugging Face
// tokenizers (Rust, through @anush008/tokenizers) encodes each text of a JSON Lines file.
//   node tests/tokenizer_ref.js NODE_MODULES TOKENIZER.json IN.jsonl OUT.jsonl
// IN lines: {"text": string, "special": bool, "tok": optional other tokenizer.json};
// OUT lines: {"ids": [...], "offsets": [[s, e], ...]}, or {"error": message} when a
// line's tokenizer fails to load.
// Offsets: the node binding reports code point offsets (the Python API's char offsets);
// this script checks that on a surrogate-pair string before it trusts them.
'use strict';
const fs = require('fs');
const path = require('path');
const [modules, tokPath, inPath, outPath] = process.argv.slice(2);
const { Tokenizer } = require(path.resolve(modules, '@anush008/tokenizers'));

// the last tokenizer loaded (callers group lines by tokenizer: one in memory at a time)
let cache = new Map();
async function load(p) {
  if (cache.has(p)) return cache.get(p);
  cache = new Map();
  let tok;
  try {
    tok = Tokenizer.fromFile(p);
  } catch (e) {
    cache.set(p, e);
    return e;
  }
  // "😀a" has 2 code points (3 UTF-16 units, 5 bytes): no offset may exceed 2
  const probe = await tok.encode('\u{1F600}a', null, { addSpecialTokens: false });
  if (probe.getOffsets().some((o) => o[1] > 2))
    throw new Error('reference offsets are not code points: ' + JSON.stringify(probe.getOffsets()));
  cache.set(p, tok);
  return tok;
}

(async () => {
  const lines = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = [];
  for (const line of lines) {
    const item = JSON.parse(line);
    const tok = await load(item.tok || tokPath);
    if (tok instanceof Error) {
      out.push(JSON.stringify({ error: tok.message }));
      continue;
    }
    const e = await tok.encode(item.text, null, { addSpecialTokens: item.special });
    out.push(JSON.stringify({ ids: e.getIds(), offsets: e.getOffsets() }));
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
})().catch((e) => { console.error('tokenizer_ref.js: ' + e.message); process.exit(1); });
