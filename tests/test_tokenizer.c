/* test_tokenizer.c — the tokenizer's loader errors (malformed and truncated JSON,
 * unsupported types named, merges naming unknown tokens, duplicate ids, bad regexes),
 * the JSON reader, encode on small hand-built tokenizers (ids and offsets worked out by
 * hand), labels and decode, invalid UTF-8, and the readable token labels of the
 * built-in font. Behaviour against Hugging Face's own library is in
 * test_tokenizer_fixtures.py and test_tokenizer_ref.py. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/render.h"
#include "text/tokenizer.h"
#include "text/tokenizer_internal.h"

/* A SentencePiece-style tokenizer: <unk>, <s>, a few letters, ▁ and merges. */
#define SP_VOCAB                                                                                                       \
    "{\"<unk>\":0,\"<s>\":1,\"a\":2,\"b\":3,\"c\":4,\"\xe2\x96\x81\":5,\"ab\":6,\"abc\":7,"                            \
    "\"\xe2\x96\x81"                                                                                                   \
    "a\":8,\"<0xC3>\":9,\"<0xA9>\":10}"
#define SP_MERGES "[\"a b\",\"ab c\",\"\xe2\x96\x81 a\"]"

static char *sp_json(const char *model_extra, const char *normalizer, const char *pre, const char *post)
{
    char *buf = malloc(8192);
    snprintf(buf, 8192,
             "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":1,\"content\":\"<s>\",\"single_word\":false,"
             "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
             "\"normalizer\":%s,\"pre_tokenizer\":%s,\"post_processor\":%s,"
             "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
             "\"\xe2\x96\x81\"},"
             "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" "
             "\",\"start\":1,\"stop\":0}]},"
             "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true%s,"
             "\"vocab\":" SP_VOCAB ",\"merges\":" SP_MERGES "}}",
             normalizer, pre, post, model_extra);
    return buf;
}

#define METASPACE_NORM                                                                                                 \
    "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"                     \
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]}"
#define BOS_TEMPLATE                                                                                                   \
    "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"                  \
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":" \
    "[\"<s>\"]}}}"

static dfl_status load(const char *json, dfl_tokenizer **t, dfl_error *err)
{
    return dfl_tokenizer_load(json, strlen(json), t, err);
}

static dfl_tokenizer *sp_tokenizer(void)
{
    char *j = sp_json("", METASPACE_NORM, "null", BOS_TEMPLATE);
    dfl_tokenizer *t = NULL;
    dfl_error err = {0};
    dfl_status s = load(j, &t, &err);
    if (s) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(s, DFL_OK);
    free(j);
    return t;
}

/* Encode and compare ids and code point offsets. */
static void expect(dfl_tokenizer *t, const char *text, int special, size_t n, const uint32_t *ids, const uint32_t *offs)
{
    dfl_encoding e;
    dfl_error err = {0};
    assert_int_equal(dfl_tokenizer_encode(t, text, strlen(text), special, &e, &err), DFL_OK);
    assert_int_equal(e.n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(e.ids[i], ids[i]);
        assert_int_equal(e.start[i], offs[2 * i]);
        assert_int_equal(e.end[i], offs[2 * i + 1]);
    }
    dfl_encoding_free(&e);
}

/* ---------------------------------------------------------------- encode ---- */

static void test_sp_encode(void **state)
{
    (void)state;
    dfl_tokenizer *t = sp_tokenizer();
    /* "abc ab": ▁abc → ▁a (merge 3) b c → ▁a + bc? merges: a b (0), ab c (1), ▁ a (2).
     * Symbols ▁ a b c: pair (a,b) rank 0 first → ▁ ab c → (ab,c) rank 1 → ▁ abc; then
     * ▁ + abc has no merge. "▁ab" → ▁ ab. */
    static const uint32_t ids1[] = {1, 5, 7, 5, 6};
    static const uint32_t off1[] = {0, 0, 0, 1, 0, 3, 3, 4, 4, 6};
    expect(t, "abc ab", 1, 5, ids1, off1);
    /* no BOS without special tokens; "a" alone: ▁ a → ▁a (rank 2) */
    static const uint32_t ids2[] = {8};
    static const uint32_t off2[] = {0, 1};
    expect(t, "a", 0, 1, ids2, off2);
    /* é falls back to its two bytes, both covering the whole character; x and y are
     * unknown and fuse into one <unk> */
    static const uint32_t ids3[] = {5, 9, 10, 0};
    static const uint32_t off3[] = {0, 1, 0, 1, 0, 1, 1, 3};
    expect(t, "\xc3\xa9xy", 0, 4, ids3, off3);
    /* "<s>" in the text is the special token, and the normalizer runs on the rest */
    static const uint32_t ids4[] = {1, 8, 1, 8};
    static const uint32_t off4[] = {0, 0, 0, 1, 1, 4, 4, 5};
    expect(t, "a<s>a", 1, 4, ids4, off4);
    /* empty text: only the template's BOS */
    static const uint32_t ids5[] = {1};
    static const uint32_t off5[] = {0, 0};
    expect(t, "", 1, 1, ids5, off5);
    dfl_tokenizer_close(t);
}

static void test_labels_and_decode(void **state)
{
    (void)state;
    dfl_tokenizer *t = sp_tokenizer();
    dfl_error err = {0};
    static const uint32_t ids[] = {1, 8, 6, 9, 10, 5, 7};
    char **labels = NULL;
    assert_int_equal(dfl_tokenizer_labels(t, ids, 7, &labels, &err), DFL_OK);
    assert_string_equal(labels[0], "<s>");
    assert_string_equal(labels[1], " a"); /* the leading space stays in a label */
    assert_string_equal(labels[2], "ab");
    assert_string_equal(labels[3], "<0xC3>"); /* half a character */
    assert_string_equal(labels[4], "<0xA9>");
    assert_string_equal(labels[5], " ");
    dfl_tokenizer_labels_free(labels, 7);
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(dfl_tokenizer_decode(t, ids, 7, 1, &out, &n, &err), DFL_OK);
    assert_string_equal(out, "aab\xc3\xa9 abc"); /* Strip removed the first space; bytes joined */
    free(out);
    static const uint32_t bad[] = {99};
    assert_int_equal(dfl_tokenizer_labels(t, bad, 1, &labels, &err), DFL_ERR_RANGE);
    assert_non_null(strstr(err.msg, "99"));
    assert_null(labels);
    dfl_tokenizer_close(t);
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    dfl_tokenizer *t = sp_tokenizer();
    dfl_error err = {0};
    dfl_encoding e;
    static const char *bad[] = {"ab\xff", "abc\xc3", "a\xed\xa0\x80", "\xc0\xaf", "xx\xf4\x90\x80\x80"};
    static const size_t at[] = {2, 3, 1, 0, 2};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(dfl_tokenizer_encode(t, bad[i], strlen(bad[i]), 1, &e, &err), DFL_ERR_FORMAT);
        char want[64];
        snprintf(want, sizeof want, "invalid UTF-8 at byte %zu", at[i]);
        assert_string_equal(err.msg, want);
        assert_null(e.ids);
    }
    dfl_tokenizer_close(t);
}

/* ByteLevel's table is a bijection between bytes and its 256 characters. */
static void test_bytelevel_table(void **state)
{
    (void)state;
    int seen[512] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t c = dfl__bytelevel_char((uint8_t)b);
        assert_true(c < 512);
        assert_int_equal(seen[c]++, 0);
        assert_int_equal(dfl__bytelevel_byte(c), b);
    }
    assert_int_equal(dfl__bytelevel_char(' '), 0x120);  /* Ġ */
    assert_int_equal(dfl__bytelevel_char('\n'), 0x10A); /* Ċ */
    assert_int_equal(dfl__bytelevel_byte(0x3000), -1);
}

/* ---------------------------------------------------------------- errors ---- */

static void expect_load_error(const char *json, dfl_status st, const char *needle)
{
    dfl_tokenizer *t = (dfl_tokenizer *)1;
    dfl_error err = {0};
    assert_int_equal(load(json, &t, &err), st);
    assert_null(t);
    if (!strstr(err.msg, needle)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle);
    assert_null(strchr(err.msg, '\n'));
}

static void test_unsupported_types_are_named(void **state)
{
    (void)state;
    char *j;
    expect_load_error("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", DFL_ERR_CONFIG,
                      "\"Unigram\" is not supported");
    expect_load_error("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", DFL_ERR_CONFIG, "\"WordPiece\"");
    expect_load_error("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}}}", DFL_ERR_CONFIG, "\"WordLevel\"");
    j = sp_json("", "{\"type\":\"Nmt\"}", "null", "null");
    expect_load_error(j, DFL_ERR_CONFIG, "normalizer type \"Nmt\"");
    free(j);
    /* BertNormalizer's flags are booleans; strip_accents may be null, nothing else */
    j = sp_json("", "{\"type\":\"BertNormalizer\",\"lowercase\":\"yes\"}", "null", "null");
    expect_load_error(j, DFL_ERR_FORMAT, "BertNormalizer: clean_text, handle_chinese_chars and lowercase");
    free(j);
    j = sp_json("", "{\"type\":\"BertNormalizer\",\"strip_accents\":1}", "null", "null");
    expect_load_error(j, DFL_ERR_FORMAT, "strip_accents a boolean or null");
    free(j);
    j = sp_json("", "null", "{\"type\":\"UnicodeScripts\"}", "null");
    expect_load_error(j, DFL_ERR_CONFIG, "pre_tokenizer type \"UnicodeScripts\"");
    free(j);
    j = sp_json("", "null", "null", "{\"type\":\"RobertaProcessing\"}");
    expect_load_error(j, DFL_ERR_CONFIG, "post_processor type \"RobertaProcessing\"");
    free(j);
    j = sp_json("", "null",
                "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]}", "null");
    expect_load_error(j, DFL_ERR_CONFIG, "ByteLevel must come last");
    free(j);
    j = sp_json(",\"dropout\":0.1", "null", "null", "null");
    expect_load_error(j, DFL_ERR_CONFIG, "dropout");
    free(j);
    j = sp_json("", "null",
                "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(unclosed\"},\"behavior\":\"Isolated\",\"invert\":false}",
                "null");
    expect_load_error(j, DFL_ERR_CONFIG, "regex /(unclosed/");
    free(j);
    j = sp_json("", "null", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Sideways\"}", "null");
    expect_load_error(j, DFL_ERR_FORMAT, "unknown split behavior");
    free(j);
    j = sp_json("", "null", "{\"pattern\":{\"Regex\":\"a\"}}", "null");
    expect_load_error(j, DFL_ERR_FORMAT, "pre_tokenizer without a \"type\"");
    free(j);
}

/* An added token's id is Hugging Face's, not the file's "id" (tests/test_tokenizer_fixtures.py
 * checks more against the reference): a new content takes the next id past the vocabulary, so
 * neither an id already taken nor a stray large one is an error. */
static void test_added_token_ids(void **state)
{
    (void)state;
    const char *files[] = {"{\"added_tokens\":[{\"id\":0,\"content\":\"x\"}],\"model\":{\"type\":\"BPE\","
                           "\"vocab\":{\"a\":0},\"merges\":[]}}",
                           "{\"added_tokens\":[{\"id\":5000,\"content\":\"x\"}],\"model\":{\"type\":\"BPE\","
                           "\"vocab\":{\"a\":0},\"merges\":[]}}"};
    for (size_t i = 0; i < 2; i++) {
        dfl_tokenizer *t = NULL;
        dfl_error err = {0};
        assert_int_equal(load(files[i], &t, &err), DFL_OK);
        assert_int_equal(dfl_tokenizer_vocab_size(t), 2);
        expect(t, "axa", 0, 3, (const uint32_t[]){0, 1, 0}, (const uint32_t[]){0, 1, 1, 2, 2, 3});
        dfl_tokenizer_close(t);
    }
}

static void test_bad_vocab_and_merges(void **state)
{
    (void)state;
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}", DFL_ERR_FORMAT,
                      "duplicate id 0");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a q\"]}}", DFL_ERR_FORMAT,
                      "merge 0 names unknown token \"q\"");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"a\",\"b\"]]}}",
                      DFL_ERR_FORMAT, "merge 0 makes unknown token \"ab\"");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"ab\":1},\"merges\":[\"ab\"]}}", DFL_ERR_FORMAT,
                      "merge 0 is neither");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", DFL_ERR_FORMAT,
                      "id must be an integer");
    /* ids index arrays: one stray large id is refused, not allocated for (found by the fuzzer: 30e7) */
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":300000000},\"merges\":[]}}",
                      DFL_ERR_FORMAT, "id 300000000 is far beyond the 2 tokens");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0.5},\"merges\":[]}}", DFL_ERR_FORMAT,
                      "id must be an integer");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"a\":0},\"merges\":[]}}",
                      DFL_ERR_FORMAT, "unk_token \"<unk>\" is not in the vocabulary");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":[],\"merges\":[]}}", DFL_ERR_FORMAT,
                      "vocab must be an object");
    expect_load_error("{\"normalizer\":null}", DFL_ERR_FORMAT, "no \"model\" object");
    expect_load_error("[1,2]", DFL_ERR_FORMAT, "not a JSON object");
}

/* Every prefix of a valid file is malformed, and says where. */
static void test_truncated_json(void **state)
{
    (void)state;
    char *j = sp_json("", METASPACE_NORM, "null", BOS_TEMPLATE);
    size_t n = strlen(j);
    for (size_t k = 0; k < n; k++) {
        dfl_tokenizer *t = NULL;
        dfl_error err = {0};
        dfl_status s = dfl_tokenizer_load(j, k, &t, &err);
        assert_int_equal(s, DFL_ERR_FORMAT);
        assert_null(t);
        assert_non_null(strstr(err.msg, "invalid JSON at byte"));
    }
    free(j);
    expect_load_error("{\"model\":{} } x", DFL_ERR_FORMAT, "trailing characters");
    expect_load_error("{\"a\":\"\\ud800\"}", DFL_ERR_FORMAT, "lone surrogate");
    expect_load_error("{\"a\":\"\xff\"}", DFL_ERR_FORMAT, "invalid UTF-8 in string");
    expect_load_error("{\"a\":tru}", DFL_ERR_FORMAT, "bad value");
    char deep[600];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    expect_load_error(deep, DFL_ERR_FORMAT, "nested too deeply");
}

static void test_json_reader(void **state)
{
    (void)state;
    char buf[] = "{\"s\":\"a\\u00e9\\ud83d\\ude00\\n\\\"\",\"n\":[1,-2.5e3,true,false,null],\"e\":{}}";
    dfl__jdoc *d = NULL;
    const dfl__jv *root = NULL;
    dfl_error err = {0};
    assert_int_equal(dfl__jdoc_parse(buf, strlen(buf), &d, &root, &err), DFL_OK);
    const dfl__jv *s = dfl__jget(root, "s"), *n = dfl__jget(root, "n"), *e = dfl__jget(root, "e");
    assert_int_equal(s->type, DFL__J_STR);
    assert_int_equal(s->n, 1 + 2 + 4 + 2);
    assert_memory_equal(s->u.str, "a\xc3\xa9\xf0\x9f\x98\x80\n\"", 9);
    assert_int_equal(n->n, 5);
    assert_true(n->u.kids[1].u.num == -2500.0);
    assert_int_equal(n->u.kids[2].type, DFL__J_TRUE);
    assert_int_equal(n->u.kids[4].type, DFL__J_NULL);
    assert_int_equal(e->type, DFL__J_OBJ);
    assert_int_equal(e->n, 0);
    assert_null(dfl__jget(root, "missing"));
    dfl__jdoc_free(d);
}

static void test_open_errors(void **state)
{
    (void)state;
    dfl_tokenizer *t = NULL;
    dfl_error err = {0};
    assert_int_equal(dfl_tokenizer_open("/nonexistent/tokenizer.json", &t, &err), DFL_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/tokenizer.json"));
    assert_int_equal(dfl_tokenizer_open_path("/nonexistent", &t, &err), DFL_ERR_IO);
    assert_null(t);
    dfl_tokenizer_close(NULL);
    dfl_encoding_free(NULL);
}

/* ------------------------------------------------------------ font labels ---- */

static void test_label_marks(void **state)
{
    (void)state;
    /* how labels look in figures is checked on real renderings (tests/test_figures.py);
     * here: a line break in a piece becomes a visible return mark, a tab a space */
    char buf[64];
    dfl_text_clip(buf, sizeof buf, "a\nb\tc", 10);
    assert_string_equal(buf, "a\xe2\x86\xb5"
                             "b c");
}

/* dfl_tokenizer_encode_each: its function's status stops the encoding and comes back;
 * the tokens it was given are dfl_tokenizer_encode's, in order; invalid UTF-8 is refused
 * before any token is given. */
typedef struct each_ctx {
    size_t calls, stop_at;
    uint32_t ids[16], start[16], end[16];
    int special[16];
} each_ctx;

static dfl_status each_fn(void *ctx, uint32_t id, uint32_t start, uint32_t end, int special, dfl_error *err)
{
    each_ctx *c = ctx;
    if (c->calls < 16) {
        c->ids[c->calls] = id;
        c->start[c->calls] = start;
        c->end[c->calls] = end;
        c->special[c->calls] = special;
    }
    if (++c->calls == c->stop_at) return dfl__fail(err, DFL_ERR_IO, "stop at token %zu", c->calls);
    return DFL_OK;
}

static void test_encode_each(void **state)
{
    (void)state;
    dfl_tokenizer *t = sp_tokenizer();
    const char *text = "ab abc a\xc3\xa9";
    dfl_encoding e;
    dfl_error err = {0};
    assert_int_equal(dfl_tokenizer_encode(t, text, strlen(text), 1, &e, &err), DFL_OK);
    assert_true(e.n >= 4 && e.n < 16);
    each_ctx all = {0};
    assert_int_equal(dfl_tokenizer_encode_each(t, text, strlen(text), 1, each_fn, &all, &err), DFL_OK);
    assert_int_equal(all.calls, e.n);
    for (size_t i = 0; i < e.n; i++) {
        assert_int_equal(all.ids[i], e.ids[i]);
        assert_int_equal(all.start[i], e.start[i]);
        assert_int_equal(all.end[i], e.end[i]);
        assert_int_equal(all.special[i], e.special[i]);
    }
    assert_int_equal(all.ids[0], 1); /* the template's <s> comes first, marked special */
    assert_int_equal(all.special[0], 1);
    each_ctx stop = {.stop_at = 3};
    assert_int_equal(dfl_tokenizer_encode_each(t, text, strlen(text), 1, each_fn, &stop, &err), DFL_ERR_IO);
    assert_int_equal(stop.calls, 3);
    assert_string_equal(err.msg, "stop at token 3");
    each_ctx none = {0};
    assert_int_equal(dfl_tokenizer_encode_each(t, "a\xff", 2, 1, each_fn, &none, &err), DFL_ERR_FORMAT);
    assert_int_equal(none.calls, 0);
    dfl_encoding_free(&e);
    dfl_tokenizer_close(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_encode),
        cmocka_unit_test(test_labels_and_decode),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_bytelevel_table),
        cmocka_unit_test(test_unsupported_types_are_named),
        cmocka_unit_test(test_bad_vocab_and_merges),
        cmocka_unit_test(test_added_token_ids),
        cmocka_unit_test(test_truncated_json),
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_label_marks),
        cmocka_unit_test(test_encode_each),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
