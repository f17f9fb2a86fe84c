// tokenizer_ref.js — the reference side of tests/test_tokenizer_ref.py: Hugging Face
// tokenizers (Rust, through @anush008/tokenizers) encodes each text of a JSON Lines file.
//   node tests/tokenizer_ref.js NODE_MODULES TOKENIZER.json IN.jsonl OUT.jsonl
// IN lines: {"text": string, "special": bool}; OUT lines: {"ids": [...], "offsets": [[s, e], ...]}.
// Offsets: the node binding reports code point offsets (the Python API's char offsets);
// this script checks that on a surrogate-pair string before it trusts them.
'use strict';
const fs = require('fs');
const path = require('path');
const [modules, tokPath, inPath, outPath] = process.argv.slice(2);
const { Tokenizer } = require(path.join(modules, '@anush008/tokenizers'));

(async () => {
  const tok = Tokenizer.fromFile(tokPath);
  // "😀a": code points [0,1) and [1,2); UTF-16 units would give [0,2) and [2,3)
  const probe = await tok.encode('\u{1F600}a', null, { addSpecialTokens: false });
  const last = probe.getOffsets()[probe.getOffsets().length - 1];
  if (last[1] !== 2) throw new Error('reference offsets are not code points: ' + JSON.stringify(probe.getOffsets()));
  const lines = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = [];
  for (const line of lines) {
    const item = JSON.parse(line);
    const e = await tok.encode(item.text, null, { addSpecialTokens: item.special });
    out.push(JSON.stringify({ ids: e.getIds(), offsets: e.getOffsets() }));
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
})().catch((e) => { console.error('tokenizer_ref.js: ' + e.message); process.exit(1); });
