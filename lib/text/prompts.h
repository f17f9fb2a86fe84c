/* prompts.h — the prompt JSON Lines reader and writer (docs/format.md "Prompt file").
 *
 * One sample per line:
 *   {"id": "d50-s3", "tokens": [0, 17, 93], "text": ["<bos>", "The", " city"],
 *    "answer": [[120, 124]], "query": [[250, 253]], "distractor": [[40, 44]],
 *    "target": [[253, 257]], "bos": true, "depth": 0.5}
 * Only "tokens" is required (non-empty array of integers in [0, 2^31)). Spans are
 * half-open [start, end) pairs with 0 <= start < end <= len(tokens). "text", when
 * present, has one string per token. Blank lines are skipped. Every other key is an
 * error naming it (with the nearest known key when it is at most two edits away), except
 * notes nothing reads: "comment", "note", "notes", "meta", "metadata", "source", any key
 * starting "_", and any key whose value is null. Lines are JSON as Python's json reads
 * it (base/jsondoc.h), NaN, Infinity and -Infinity included; "depth": NaN is no depth.
 * Line numbers in messages are 1-based.
 *
 * A text prompt gives "input" (a string) instead of "tokens":
 *   {"id": "a", "input": "The capital of France is Paris.", "answer": ["Paris"],
 *    "query": [[0, 22]], "target": [{"text": "Paris", "occurrence": 1}]}
 * Its spans are character (code point) ranges of the input, strings naming a substring
 * (the first occurrence), or {"text": s, "occurrence": k} (the k-th, 1-based). It is
 * tokenized by dfl_prompt_set_read_text (prompts_text.c); dfl_prompt_set_read refuses
 * it. A tokenized prompt may keep "input" and carry "offsets": one [start, end) code
 * point range of the input per token.
 *
 * A chat prompt gives "messages" instead (and optionally "add_generation_prompt": bool
 * and "chat_template_kwargs": {...}, more variables for the template):
 *   {"id": "c", "messages": [{"role": "system", "content": "Be brief."},
 *                            {"role": "user", "content": "Capital of France?"},
 *                            {"role": "assistant", "content": "Paris."}],
 *    "answer": {"message": 2}, "query": ["Capital of France?"]}
 * dfl_prompt_tokenize renders it with the tokenizer folder's chat template as
 * transformers' apply_chat_template(tokenize=False) does (text/jinja.h) and tokenizes
 * the result without adding special tokens (the template writes them). Its spans are
 * those of a text prompt, resolved in the rendered text, or {"message": k}: the content
 * of messages[k] (0-based) where it appears in the rendered text (white space around it
 * left out); a single span may stand without its list.
 */
#ifndef DFL_PROMPTS_H
#define DFL_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Segment codes written to the dump's `segments` dataset (contract). */
enum {
    DFL_SEG_CONTEXT = 0,
    DFL_SEG_BOS = 1,
    DFL_SEG_ANSWER = 2,
    DFL_SEG_QUERY = 3,
    DFL_SEG_DISTRACTOR = 4,
    DFL_SEG_TARGET = 5
};

/* The span kinds a prompt can carry, in the order of the fields below. */
typedef enum dfl_span_kind {
    DFL_SPAN_ANSWER = 0,
    DFL_SPAN_QUERY,
    DFL_SPAN_DISTRACTOR,
    DFL_SPAN_TARGET,
    DFL_SPAN_KINDS
} dfl_span_kind;

typedef struct dfl_span {
    int32_t start, end; /* half-open */
} dfl_span;

typedef struct dfl_prompt {
    char *id;        /* "id" or NULL when absent; owned */
    int32_t *tokens; /* [n_tokens]; owned */
    size_t n_tokens;
    char **text;                     /* [n_tokens] UTF-8 strings, or NULL when absent; owned */
    dfl_span *spans[DFL_SPAN_KINDS]; /* each [n_spans[k]] or NULL; owned */
    size_t n_spans[DFL_SPAN_KINDS];
    int bos; /* "bos", default 1 */
    int has_depth;
    double depth;                         /* "depth" when has_depth */
    size_t line;                          /* 1-based line number it was read from (0 if built in memory) */
    char *input;                          /* "input" text, or NULL; owned */
    int32_t *offsets;                     /* [n_tokens][2] code point range of each token in input, or NULL; owned */
    dfl_span *char_spans[DFL_SPAN_KINDS]; /* a text prompt's spans in code points, before
                                           * tokenization (n_tokens == 0); owned */
    size_t n_char_spans[DFL_SPAN_KINDS];
    char *chat;                       /* a chat prompt's template variables (JSON: messages,
                                       * add_generation_prompt, chat_template_kwargs), or NULL; owned */
    char *chat_spans[DFL_SPAN_KINDS]; /* its spans as JSON, resolved once rendered; owned */
    size_t input_len;                 /* bytes of input when it holds U+0000 (the JSON escape \u0000);
                                       * 0: strlen(input) */
    /* Generation (probe --generate, prompts_generate.c): "generate" N tokens for this
     * prompt (has_generate; 0 = none), "expect": the tokens a generation should begin
     * with (free-form retrieval, scored by exact match). */
    int has_generate;
    int64_t generate;
    int32_t *expect; /* [n_expect] or NULL; owned */
    size_t n_expect;
} dfl_prompt;

/* JSON key of a span kind: "answer", "query", "distractor", "target". */
const char *dfl_span_kind_name(dfl_span_kind k);

/* Parse one JSON line (len bytes, need not be NUL-terminated) into *p, which the
 * caller then frees with dfl_prompt_free. `label` and `line` name it in messages
 * ("prompts.jsonl:12: span answer[0] = [5, 3] is reversed"). DFL_ERR_FORMAT for
 * invalid JSON or wrong types, DFL_ERR_RANGE for spans out of range or reversed,
 * negative token ids, an empty token list or a text array of the wrong length.
 * Non-integral numbers where integers belong are DFL_ERR_FORMAT; JSON null for an
 * optional key means absent; a numeric "id" is kept as its decimal text; a NUL byte,
 * a \u0000 escape anywhere but in "input", or an escaped lone surrogate is DFL_ERR_FORMAT; an unknown key is
 * DFL_ERR_FORMAT; a number beyond the double range (1e309) is DFL_ERR_RANGE naming its byte. On failure *p is left
 * zeroed. */
dfl_status dfl_prompt_parse(const char *json, size_t len, const char *label, size_t line, dfl_prompt *p,
                            dfl_error *err);

/* Free what p owns and zero it; accepts NULL and zeroed prompts. */
void dfl_prompt_free(dfl_prompt *p);

/* Segment code per token (u8 [n_tokens], caller-allocated): context by default,
 * bos for token 0 when p->bos, then answer, query, distractor, target spans painted
 * in that order (a later kind wins where spans overlap). */
void dfl_prompt_segments(const dfl_prompt *p, uint8_t *seg);

/* Check every token id < vocab_size; DFL_ERR_RANGE naming the line and position,
 * DFL_ERR_USAGE when vocab_size <= 0. */
dfl_status dfl_prompt_check_vocab(const dfl_prompt *p, int64_t vocab_size, const char *label, dfl_error *err);

/* ---- a whole file ---- */

typedef struct dfl_prompt_set {
    dfl_prompt *items;
    size_t count;
} dfl_prompt_set;

/* Read every non-blank line of a JSONL file (a regular file of at most 1 GiB: a FIFO,
 * a device or a larger file is DFL_ERR_IO at once). Fails on the first bad line with its
 * line number; an empty file (no samples) is DFL_ERR_FORMAT; a text prompt (no
 * "tokens") is DFL_ERR_FORMAT naming the ways to tokenize it. Caller frees with
 * dfl_prompt_set_free. '\r\n' line ends, a missing final newline and a leading UTF-8
 * byte-order mark are accepted; a NUL byte is DFL_ERR_FORMAT; a missing file DFL_ERR_IO.
 * On failure *out is left empty. */
dfl_status dfl_prompt_set_read(const char *path, dfl_prompt_set *out, dfl_error *err);
void dfl_prompt_set_free(dfl_prompt_set *s);

/* Write prompts as JSONL (only the fields present) atomically: a temporary file in
 * the same folder, renamed when complete; DFL_ERR_EXISTS if path exists and
 * !overwrite. Every prompt is validated first by the reader's rules (DFL_ERR_RANGE,
 * nothing created); count 0 is DFL_ERR_USAGE (the reader refuses an empty file);
 * DFL_ERR_IO when the folder is missing or unwritable. Reading the file back gives
 * equal prompts (depth exactly, bit for bit). */
dfl_status dfl_prompt_set_write(const char *path, const dfl_prompt *items, size_t count, int overwrite, dfl_error *err);

/* ---- text prompts (prompts_text.c) ---- */

struct dfl_tokenizer;

/* Tokenize a text prompt in place: tokens, text (decoded labels), offsets, and spans
 * (a token belongs to a span when its characters overlap it). special: add BOS/EOS as
 * the tokenizer's post-processor does; bos is set when the first token is such a
 * special token. A prompt that already has tokens is left alone. DFL_ERR_RANGE when
 * the text gives no token or a span covers none; DFL_ERR_FORMAT for invalid UTF-8
 * (line and byte offset). */
dfl_status dfl_prompt_tokenize(dfl_prompt *p, struct dfl_tokenizer *t, int special, const char *label, dfl_error *err);

/* dfl_prompt_set_read that also accepts text prompts and tokenizes them with t
 * (token prompts are read unchanged). */
dfl_status dfl_prompt_set_read_text(const char *path, struct dfl_tokenizer *t, int special, dfl_prompt_set *out,
                                    dfl_error *err);

/* Read text prompts from `in`, tokenize them with t and write token prompts (with
 * "input" and "offsets") to `out` atomically. */
dfl_status dfl_prompt_file_tokenize(const char *in, const char *out, struct dfl_tokenizer *t, int special,
                                    int overwrite, dfl_error *err);

/* ---- internals shared with prompts_text.c ---- */

typedef struct cJSON cJSON;
/* Parse a text prompt's keys (input, spans as characters) into p. */
dfl_status dfl__prompt_parse_text(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err);
/* Parse the optional "input" and "offsets" of a token prompt. */
dfl_status dfl__prompt_parse_extra(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err);
/* Parse the optional "depth" (NaN = absent; Infinity refused). */
dfl_status dfl__prompt_parse_depth(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err);
/* Parse the optional "generate" (an integer in [0, 1<<20]) and "expect" (token ids) of
 * either kind of prompt. */
dfl_status dfl__prompt_parse_generate(const cJSON *root, const char *label, size_t line, dfl_prompt *p, dfl_error *err);
/* Add "generate" and "expect" to a prompt's JSON object when present; 0 on allocation
 * failure. */
int dfl__prompt_json_generate(cJSON *o, const dfl_prompt *p);
/* Add "input" and "offsets" to a prompt's JSON object; 0 on allocation failure. */
int dfl__prompt_json_extra(cJSON *o, const dfl_prompt *p);
/* dfl_prompt_set_read with text prompts allowed (left untokenized) or refused. */
dfl_status dfl__prompt_set_read(const char *path, int allow_text, dfl_prompt_set *out, dfl_error *err);

#endif
