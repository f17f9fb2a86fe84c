/* gguf_tok.h — a tokenizer from a GGUF file's metadata (docs/format.md "GGUF
 * tokenizer"): the `tokenizer.ggml.*` keys written back as the tokenizer.json the
 * converter read, then loaded by text/tokenizer.h, so encoding is the Hugging Face one.
 *
 * Supported: tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, merges, token_type,
 * bos/eos ids, add_bos_token/add_eos_token) with tokenizer.ggml.pre "llama-bpe" (Llama
 * 3), "qwen2" (Qwen 2/2.5/3), "gpt-2" or "default" (GPT-2's own regex); "llama"
 * (SentencePiece BPE: tokens, scores, token_type, add_space_prefix; Llama 2, Mistral,
 * Gemma). Other models and pre-tokenizers are refused by name.
 */
#ifndef DFL_GGUF_TOK_H
#define DFL_GGUF_TOK_H

#include "base/status.h"
#include "model/gguf.h"
#include "text/tokenizer.h"

/* The tokenizer.json text for g's tokenizer metadata (label names the file in errors).
 * Caller frees *json. DFL_ERR_CONFIG (missing or unsupported tokenizer keys),
 * DFL_ERR_FORMAT (a key of the wrong type, an id out of range), DFL_ERR_NOMEM. */
dfl_status dfl_gguf_tokenizer_json(const dfl_gguf *g, const char *label, char **json, dfl_error *err);

/* A tokenizer for PATH: a GGUF file's metadata when PATH ends in .gguf, else
 * dfl_tokenizer_open_path (tokenizer.json, or a folder holding one). Caller closes *out. */
dfl_status dfl_model_tokenizer_open(const char *path, dfl_tokenizer **out, dfl_error *err);

#endif
