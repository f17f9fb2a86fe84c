// gguf_ref.js — reads GGUF files with @huggingface/gguf (the reference parser of
// tests/test_gguf.py) and prints, per file, one JSON line: its metadata and tensor infos.
//   node tests/gguf_ref.js NODE_MODULES FILE...
const { gguf } = require(process.argv[2] + "/@huggingface/gguf");
const big = (k, v) => (typeof v === "bigint" ? v.toString() : v);
(async () => {
  for (const path of process.argv.slice(3)) {
    const r = await gguf(path, { allowLocalFile: true });
    const tensors = r.tensorInfos.map((t) => ({ name: t.name, shape: t.shape.map(String), dtype: t.dtype }));
    console.log(JSON.stringify({ metadata: r.metadata, tensors }, big));
  }
})().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
