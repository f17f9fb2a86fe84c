// tokenizer_ref_e2e.js — the reference side of bench/tokenizer.sh's end-to-end row: what
// bin/tokenize does, done with Hugging Face tokenizers (Rust, @anush008/tokenizers) in
// node: load TOKENIZER.json, encode every line of TEXT as one text (encodeBatch, no
// special tokens; MODE "whole": the whole file as one text), write one JSON line per
// text ({"ids", "tokens", "offsets"}) to OUT.
//   node bench/tokenizer_ref_e2e.js NODE_MODULES TOKENIZER.json TEXT OUT [lines|whole]
'use strict';
const fs = require('fs');
const path = require('path');
const [modules, tokPath, textPath, outPath, mode] = process.argv.slice(2);
const { Tokenizer } = require(path.resolve(modules, '@anush008/tokenizers'));

(async () => {
  const tok = Tokenizer.fromFile(tokPath);
  const text = fs.readFileSync(textPath, 'utf8');
  const lines = mode === 'whole' ? [text] : text.split('\n');
  if (mode !== 'whole' && lines.length && lines[lines.length - 1] === '') lines.pop();
  const encs = await tok.encodeBatch(lines, { addSpecialTokens: false });
  const fd = fs.openSync(outPath, 'w');
  let buf = [];
  for (const e of encs) {
    buf.push(JSON.stringify({ ids: e.getIds(), tokens: e.getTokens(), offsets: e.getOffsets() }));
    if (buf.length >= 256) {
      fs.writeSync(fd, buf.join('\n') + '\n');
      buf = [];
    }
  }
  if (buf.length) fs.writeSync(fd, buf.join('\n') + '\n');
  fs.closeSync(fd);
})().catch((e) => { console.error('tokenizer_ref_e2e.js: ' + e.message); process.exit(1); });
