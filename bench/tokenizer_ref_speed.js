// tokenizer_ref_speed.js — the reference side of bench/tokenizer.sh: Hugging Face
// tokenizers (Rust, @anush008/tokenizers) loads TOKENIZER.json and encodes TEXT as one
// string, REPEATS times (one sequence: the library encodes it on one thread).
//   node bench/tokenizer_ref_speed.js NODE_MODULES TOKENIZER.json TEXT REPEATS
// Prints: load_s <wall> load_cpu_s <CPU> mb_per_s <MB/s of the best encode> tokens <count>
'use strict';
const fs = require('fs');
const path = require('path');
const [modules, tokPath, textPath, repeatsArg] = process.argv.slice(2);
const { Tokenizer } = require(path.resolve(modules, '@anush008/tokenizers'));

(async () => {
  const text = fs.readFileSync(textPath, 'utf8');
  const bytes = fs.statSync(textPath).size;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const tok = Tokenizer.fromFile(tokPath);
  const load = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(c0);
  let best = Infinity, n = 0;
  for (let r = 0; r < Number(repeatsArg || 3); r++) {
    const a = process.hrtime.bigint();
    const e = await tok.encode(text, null, { addSpecialTokens: false });
    const s = Number(process.hrtime.bigint() - a) / 1e9;
    n = e.getLength();
    if (s < best) best = s;
  }
  console.log(`load_s ${load.toFixed(3)} load_cpu_s ${((cpu.user + cpu.system) / 1e6).toFixed(3)} ` +
              `mb_per_s ${(bytes / 1e6 / best).toFixed(2)} tokens ${n}`);
})().catch((e) => { console.error('tokenizer_ref_speed.js: ' + e.message); process.exit(1); });
