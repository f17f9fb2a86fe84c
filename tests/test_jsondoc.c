/* test_jsondoc.c — JSON documents read as Python's json reads them: UTF-8 checking
 * (the offsets are those Python's bytes.decode("utf-8") reports, worked out by hand
 * below), last duplicate key wins at every depth, text after the document refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "base/jsondoc.h"
#include "base/utf8.h"

/* The validator's offset, SIZE_MAX when the whole string is well-formed. */
static size_t bad_at(const char *s)
{
    size_t n = strlen(s), k = dfl__utf8_check(s, n);
    return k == n ? SIZE_MAX : k;
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(bad_at("plain ascii") == SIZE_MAX);
    assert_true(bad_at("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == SIZE_MAX); /* é € 😀 */
    assert_int_equal(bad_at("ab\xff"), 2);
    assert_int_equal(bad_at("a\xc0\x80"), 1);        /* overlong NUL */
    assert_int_equal(bad_at("a\xe0\x80\x80"), 1);    /* overlong 3-byte */
    assert_int_equal(bad_at("ab\xed\xa0\x80"), 2);   /* surrogate U+D800 */
    assert_int_equal(bad_at("\xf4\x90\x80\x80"), 0); /* above U+10FFFF */
    assert_int_equal(bad_at("xyz\xe2\x82"), 3);      /* truncated */
    assert_int_equal(bad_at("\xc3\xa9\x80"), 2);     /* stray continuation */
}

static void test_last_key_wins_and_trailing(void **state)
{
    (void)state;
    const char *why;
    size_t at;
    const char *doc = "{\"a\": 1, \"b\": {\"x\": 1, \"x\": [2]}, \"a\": {\"a\": 3, \"a\": 4}}  \n";
    cJSON *j = dfl__json_parse(doc, strlen(doc), &why, &at);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(j), 2); /* json.loads: {"b": {"x": [2]}, "a": {"a": 4}} */
    cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "a"), *b = cJSON_GetObjectItemCaseSensitive(j, "b");
    assert_true(cJSON_IsObject(a) && cJSON_GetArraySize(a) == 1);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(a, "a")->valueint, 4);
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(b, "x")));
    cJSON_Delete(j);
    /* arrays keep their repeated values */
    j = dfl__json_parse("[1, 1, {\"k\": 0}]", 16, &why, &at);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(j), 3);
    cJSON_Delete(j);
    assert_null(dfl__json_parse("{} {}", 5, &why, &at));
    assert_string_equal(why, "text after the JSON document");
    assert_int_equal(at, 3);
    assert_null(dfl__json_parse("{\"a\": \"\xff\"}", 10, &why, &at));
    assert_string_equal(why, "invalid UTF-8");
    assert_int_equal(at, 7);
    assert_null(dfl__json_parse("{\"a\": ", 6, &why, &at));
    assert_string_equal(why, "syntax error");
}

/* What Python's json.dumps writes for non-finite floats, read back as json.loads does:
 * json.dumps({"a": [float("nan"), 1, float("inf")], "b": {"c": -float("inf")}}) with a
 * repeated "a" after it (the last wins, also for the marked values). */
static void test_nonfinite_and_range(void **state)
{
    (void)state;
    const char *why;
    size_t at;
    const char *doc = "{\"a\": [NaN, 1, Infinity], \"b\": {\"c\": -Infinity, \"s\": \"NaN -Infinity\"}, "
                      "\"a\": [2, NaN,\n-Infinity]}";
    assert_null(dfl__json_parse(doc, strlen(doc), &why, &at)); /* not without the option */
    assert_string_equal(why, "syntax error");
    cJSON *j = dfl__json_parse_opts(doc, strlen(doc), DFL_JSON_NONFINITE, &why, &at);
    assert_non_null(j);
    cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "a"), *b = cJSON_GetObjectItemCaseSensitive(j, "b");
    assert_int_equal(cJSON_GetArraySize(a), 3);
    assert_true(cJSON_GetArrayItem(a, 0)->valuedouble == 2);
    assert_true(isnan(cJSON_GetArrayItem(a, 1)->valuedouble));
    assert_true(isinf(cJSON_GetArrayItem(a, 2)->valuedouble) && cJSON_GetArrayItem(a, 2)->valuedouble < 0);
    assert_true(isinf(cJSON_GetObjectItemCaseSensitive(b, "c")->valuedouble));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(b, "s")->valuestring, "NaN -Infinity"); /* strings untouched */
    cJSON_Delete(j);
    /* keywords only as whole values: 1NaN, NaNx, -NaN and nan stay errors */
    static const char *const bad[] = {"[1NaN]", "[NaNx]", "[-NaN]", "[nan]", "[Infinity1]", "{NaN: 1}", "[--Infinity]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_null(dfl__json_parse_opts(bad[i], strlen(bad[i]), DFL_JSON_NONFINITE | DFL_JSON_RANGE, &why, &at));
        assert_string_equal(why, "syntax error");
    }
    /* a literal beyond the double range is named with its offset (json.loads reads inf) */
    doc = "{\"x\": \"1e309\", \"y\": [1, 2e308]}";
    assert_null(dfl__json_parse_opts(doc, strlen(doc), DFL_JSON_RANGE, &why, &at));
    assert_string_equal(why, "number out of range");
    assert_int_equal(at, 24);
    j = dfl__json_parse_opts(doc, strlen(doc), 0, &why, &at); /* without: cJSON's inf */
    assert_non_null(j);
    cJSON_Delete(j);
    j = dfl__json_parse_opts("[1e308, -1e-400, 0.5]", 21, DFL_JSON_RANGE, &why, &at); /* underflow is 0, fine */
    assert_non_null(j);
    cJSON_Delete(j);
}

/* DFL_JSON_STRLEN: U+0000 kept with the string's length (keys skipped in the count, as
 * the literals come), surrogate pairs fine, lone halves refused at their backslash */
static void test_strlen_and_surrogates(void **state)
{
    (void)state;
    const char *why;
    size_t at;
    const char *doc =
        "{\"k\\u0000\": \"a\\u0000b\", \"n\": 1, \"arr\": [\"\\u0000\", \"\\ud83d\\ude00\\u00e9\\\\u0000\"]}";
    cJSON *j = dfl__json_parse_opts(doc, strlen(doc), DFL_JSON_STRLEN, &why, &at);
    assert_non_null(j);
    const cJSON *v = j->child;
    assert_int_equal(dfl__json_string_len(v), 3);
    assert_memory_equal(v->valuestring, "a\0b", 4);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "arr")->child;
    assert_int_equal(dfl__json_string_len(a), 1);
    assert_int_equal(dfl__json_string_len(a->next), 4 + 2 + 6); /* an escaped backslash then "u0000" is text */
    assert_string_equal(a->next->valuestring, "\xf0\x9f\x98\x80\xc3\xa9\\u0000");
    cJSON_Delete(j);
    j = dfl__json_parse_opts(doc, strlen(doc), 0, &why, &at); /* without the flag: strlen */
    assert_int_equal(dfl__json_string_len(j->child), 1);
    cJSON_Delete(j);
    static const char *const lone[] = {"[\"x\\ud800\"]", "[\"x\\udc00\"]", "[\"x\\ud800\\u0041\"]",
                                       "[\"x\\ud800\\ud800\"]"};
    for (size_t i = 0; i < sizeof lone / sizeof *lone; i++) {
        assert_null(dfl__json_parse_opts(lone[i], strlen(lone[i]), DFL_JSON_STRLEN, &why, &at));
        assert_string_equal(why, "lone surrogate");
        assert_int_equal(at, 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_last_key_wins_and_trailing),
        cmocka_unit_test(test_nonfinite_and_range),
        cmocka_unit_test(test_strlen_and_surrogates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
