/* tokenizer.h — Hugging Face tokenizer.json: load, encode, decode, exactly as the
 * `tokenizers` library does.
 *
 * Supported (what Llama 2/3, Qwen 2.5/3, Gemma 3, Mistral, TinyLlama, SmolLM2 use):
 *   model          BPE, byte-level (ignore_merges) or SentencePiece-style (byte_fallback,
 *                  fuse_unk, unk_token); Unigram, WordPiece, WordLevel are refused
 *   normalizer     Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, Strip
 *   pre_tokenizer  Sequence, Split (PCRE2, all behaviours, invert), ByteLevel,
 *                  Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit
 *   added_tokens   lstrip, rstrip, single_word, normalized; matched before the model
 *   post_processor TemplateProcessing, ByteLevel (trim_offsets), Sequence
 *   decoder        ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence
 * Offsets are Unicode code point indices into the input, half-open, like the Python
 * API (special tokens the post-processor adds get [0, 0)).
 *
 * A tokenizer is read-only after loading except for its word cache: encode from one
 * thread at a time per handle.
 */
#ifndef DFL_TOKENIZER_H
#define DFL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct dfl_tokenizer dfl_tokenizer;

/* Load tokenizer.json at path. Caller closes with dfl_tokenizer_close. DFL_ERR_IO for
 * an unreadable file, one that is not a regular file or holds more than 1 GiB (at
 * once: a FIFO is not waited on); of a repeated key the last wins. DFL_ERR_FORMAT for malformed JSON (with its byte
 * offset), a merge naming an unknown token or a duplicate id; DFL_ERR_CONFIG for an unsupported component (the message
 * names its type) or a bad regex. */
dfl_status dfl_tokenizer_open(const char *path, dfl_tokenizer **out, dfl_error *err);

/* dfl_tokenizer_open on path, or on path/tokenizer.json when path is a folder. */
dfl_status dfl_tokenizer_open_path(const char *path, dfl_tokenizer **out, dfl_error *err);

/* The same from a buffer of len bytes (copied; need not be NUL-terminated). */
dfl_status dfl_tokenizer_load(const char *json, size_t len, dfl_tokenizer **out, dfl_error *err);

void dfl_tokenizer_close(dfl_tokenizer *t);

/* One encoded text. Arrays are [n], owned; free with dfl_encoding_free. */
typedef struct dfl_encoding {
    uint32_t *ids;
    uint32_t *start, *end; /* code point offsets, half-open */
    uint8_t *special;      /* 1 for added special tokens (incl. the post-processor's) */
    size_t n;
} dfl_encoding;

/* Encode text[len] (UTF-8; need not be NUL-terminated). add_special: run the
 * post-processor's template (BOS/EOS). Invalid UTF-8 is DFL_ERR_FORMAT naming the
 * byte offset; enc is zeroed on failure. */
dfl_status dfl_tokenizer_encode(dfl_tokenizer *t, const char *text, size_t len, int add_special, dfl_encoding *enc,
                                dfl_error *err);
void dfl_encoding_free(dfl_encoding *enc);

/* One token of dfl_tokenizer_encode_each: its id, code point offsets [start, end) and
 * 1 for an added special token. A status other than DFL_OK stops the encoding and is
 * returned by it (with err as the function filled it). */
typedef dfl_status (*dfl_token_fn)(void *ctx, uint32_t id, uint32_t start, uint32_t end, int special, dfl_error *err);

/* dfl_tokenizer_encode without the arrays: each token goes to fn as soon as it is
 * known, in order, so memory does not grow with the text beyond the text itself (what
 * a normalizer changes is kept once more with its alignments). Same statuses. */
dfl_status dfl_tokenizer_encode_each(dfl_tokenizer *t, const char *text, size_t len, int add_special, dfl_token_fn fn,
                                     void *ctx, dfl_error *err);

/* Number of ids (largest id + 1, added tokens included). */
size_t dfl_tokenizer_vocab_size(const dfl_tokenizer *t);

/* The vocabulary string of an id ("Ġworld", "<0x0A>"), NUL-terminated, owned by t;
 * NULL for an unused id. *len (may be NULL) gets its byte length. */
const char *dfl_tokenizer_piece(const dfl_tokenizer *t, uint32_t id, size_t *len);

/* A folder's chat template (chat_template.jinja, else tokenizer_config.json's
 * "chat_template"), owned by t; NULL when the tokenizer came from a file or the folder
 * has none. Read by dfl_tokenizer_open_path from a folder only, with tokenizer_config.json's
 * add_bos_token / add_eos_token, applied as transformers does (tokenizer_config.c). */
const char *dfl_tokenizer_chat_template(const dfl_tokenizer *t);

/* The special tokens a chat template is rendered with (bos_token, eos_token, ... as
 * tokenizer_config.json gives them) as a JSON object; "{}" when there are none. */
const char *dfl_tokenizer_chat_specials(const dfl_tokenizer *t);

/* Id of a vocabulary string, or -1. */
int64_t dfl_tokenizer_find(const dfl_tokenizer *t, const char *s, size_t len);

/* Readable label of each token: the decoder applied to one token at a time, without
 * the steps that only make sense on a whole text (Fuse, Strip, Metaspace's dropped
 * first space), so " world" stays " world". Bytes that do not form whole UTF-8
 * characters are shown as <0xNN>. labels[n] become malloc'ed strings the caller frees
 * (dfl_tokenizer_labels_free). DFL_ERR_RANGE for an unknown id. */
dfl_status dfl_tokenizer_labels(const dfl_tokenizer *t, const uint32_t *ids, size_t n, char ***labels, dfl_error *err);
void dfl_tokenizer_labels_free(char **labels, size_t n);

/* Decode ids into text as Hugging Face's decode does (all steps; skip_special drops
 * special tokens). *out is malloc'ed, NUL-terminated, *out_len its length. */
dfl_status dfl_tokenizer_decode(const dfl_tokenizer *t, const uint32_t *ids, size_t n, int skip_special, char **out,
                                size_t *out_len, dfl_error *err);

#endif
