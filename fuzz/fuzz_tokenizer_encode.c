/* fuzz_tokenizer_encode.c — libFuzzer target for encoding arbitrary bytes with four
 * small tokenizers built here (byte-level with a Llama-3 Split regex and added tokens;
 * SentencePiece-style with byte fallback; Metaspace, Digits, Punctuation with Unicode
 * normalizers; Whitespace and an inverted Split). The first byte picks the tokenizer.
 * Invalid UTF-8 must be a clean error; valid text must give ids in the vocabulary,
 * offsets inside the text, labels and a decode. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/tokenizer_internal.h"

#define N_TOK 4
static dfl_tokenizer *g_tok[N_TOK];

/* Append printf output to a growing buffer. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap * 2 + 4096;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
}

/* A JSON string literal of s (only quote and backslash need escaping here). */
static void put_str(sbuf *b, const char *s)
{
    put(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            put(b, "\\%c", *s);
        else
            put(b, "%c", *s);
    }
    put(b, "\"");
}

static const char *ADDED =
    "[{\"id\":0,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":true,\"rstrip\":false,\"normalized\":false,"
    "\"special\":true},"
    "{\"id\":1,\"content\":\"</"
    "s>\",\"single_word\":true,\"lstrip\":false,\"rstrip\":true,\"normalized\":false,\"special\":true},"
    "{\"id\":2,\"content\":\"<mask>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":true,"
    "\"special\":false}]";
static const char *TEMPLATE =
    "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}}],"
    "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[0],\"tokens\":[\"<s>\"]},\"</s>\":{\"id\":\"</"
    "s>\",\"ids\":[1],\"tokens\":[\"</s>\"]}}}";

static char *build(int kind)
{
    sbuf b = {malloc(4096), 0, 4096};
    if (!b.p) abort();
    put(&b, "{\"added_tokens\":%s,", ADDED);
    if (kind == 0) {
        put(&b, "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                "{\"type\":\"Split\",\"pattern\":{\"Regex\":");
        put_str(&b, "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
        put(&b,
            "},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_"
            "regex\":false}]},"
            "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\",\"trim_offsets\":true,"
            "\"add_prefix_space\":true},%s]},\"decoder\":{\"type\":\"ByteLevel\"},",
            TEMPLATE);
    } else if (kind == 1) {
        put(&b,
            "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Prepend\","
            "\"prepend\":\"\xe2\x96\x81\"},"
            "{\"type\":\"Replace\",\"pattern\":{\"String\":\" "
            "\"},\"content\":\"\xe2\x96\x81\"}]},\"pre_tokenizer\":null,"
            "\"post_processor\":%s,\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{"
            "\"String\":\"\xe2\x96\x81\"},"
            "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" "
            "\",\"start\":1,\"stop\":0}]},",
            TEMPLATE);
    } else if (kind == 2) {
        put(&b, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"Lowercase\"},{"
                "\"type\":\"Strip\"}]},"
                "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_"
                "digits\":true},"
                "{\"type\":\"Punctuation\",\"behavior\":\"Contiguous\"},{\"type\":\"Metaspace\",\"replacement\":"
                "\"\xe2\x96\x81\","
                "\"prepend_scheme\":\"first\",\"split\":true}]},\"post_processor\":null,"
                "\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"always\"},");
    } else {
        put(&b,
            "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"[0-9]+\"},\"content\":\"#\"},"
            "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Whitespace\"},{\"type\":\"Split\","
            "\"pattern\":{\"String\":\"e\"},\"behavior\":\"MergedWithNext\",\"invert\":true},{\"type\":"
            "\"WhitespaceSplit\"}]},"
            "\"post_processor\":null,\"decoder\":null,");
    }
    /* vocabulary: the 3 added tokens, <unk>, 256 byte tokens, ▁, printable ASCII or
     * ByteLevel's 256 characters, and a few merges */
    put(&b,
        "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":%s,\"ignore_merges\":%"
        "s,\"vocab\":{",
        kind == 1 ? "true" : "false", kind == 0 ? "true" : "false");
    put(&b, "\"<s>\":0,\"</s>\":1,\"<mask>\":2,\"<unk>\":3");
    int id = 4;
    for (int i = 0; i < 256; i++)
        put(&b, ",\"<0x%02X>\":%d", i, id++);
    put(&b, ",\"\xe2\x96\x81\":%d", id++);
    if (kind == 0) {
        for (int i = 0; i < 256; i++) {
            char u[8];
            u[dfl__utf8_put(dfl__bytelevel_char((uint8_t)i), u)] = '\0';
            if (!strcmp(u, "\"") || !strcmp(u, "\\"))
                put(&b, ",\"\\%s\":%d", u, id++);
            else
                put(&b, ",\"%s\":%d", u, id++);
        }
        put(&b, ",\"\xc4\xa0t\":%d,\"he\":%d,\"\xc4\xa0the\":%d}", id, id + 1, id + 2);
        put(&b, ",\"merges\":[\"\xc4\xa0 t\",\"h e\",\"\xc4\xa0t he\"]}}");
    } else {
        for (int c = 33; c < 127; c++) {
            if (c == '"' || c == '\\')
                put(&b, ",\"\\%c\":%d", c, id++);
            else
                put(&b, ",\"%c\":%d", c, id++);
        }
        put(&b, ",\" \":%d,\"th\":%d,\"the\":%d,\"\xe2\x96\x81the\":%d}", id, id + 1, id + 2, id + 3);
        put(&b, ",\"merges\":[\"t h\",\"th e\",\"\xe2\x96\x81 the\"]}}");
    }
    return b.p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfl_error err;
    if (!g_tok[0])
        for (int k = 0; k < N_TOK; k++) {
            char *j = build(k);
            if (dfl_tokenizer_load(j, strlen(j), &g_tok[k], &err) != DFL_OK) {
                fprintf(stderr, "fuzz_tokenizer_encode: tokenizer %d: %s\n", k, err.msg);
                abort();
            }
            free(j);
        }
    if (size < 1) return 0;
    dfl_tokenizer *t = g_tok[data[0] % N_TOK];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    dfl_encoding e;
    if (dfl_tokenizer_encode(t, text, n, data[0] & 4, &e, &err) != DFL_OK) {
        if (e.ids || strchr(err.msg, '\n')) abort();
        return 0;
    }
    size_t ncp = 0;
    for (size_t i = 0; i < n; i++)
        ncp += ((unsigned char)text[i] & 0xC0) != 0x80;
    for (size_t i = 0; i < e.n; i++)
        if (!dfl_tokenizer_piece(t, e.ids[i], NULL) || e.start[i] > e.end[i] || e.end[i] > ncp) abort();
    char **labels = NULL;
    if (dfl_tokenizer_labels(t, e.ids, e.n, &labels, &err) != DFL_OK) abort();
    dfl_tokenizer_labels_free(labels, e.n);
    char *out = NULL;
    size_t on = 0;
    if (dfl_tokenizer_decode(t, e.ids, e.n, data[0] & 8, &out, &on, &err) != DFL_OK) abort();
    free(out);
    dfl_encoding_free(&e);
    return 0;
}
