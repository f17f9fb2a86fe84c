/* test_jsondoc.c — JSON documents read as Python's json reads them: UTF-8 checking
 * (the offsets are those Python's bytes.decode("utf-8") reports, worked out by hand
 * below), last duplicate key wins at every depth, text after the document refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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
    assert_true(bad_at("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == SIZE_MAX);   /* é € 😀 */
    assert_int_equal(bad_at("ab\xff"), 2);
    assert_int_equal(bad_at("a\xc0\x80"), 1);           /* overlong NUL */
    assert_int_equal(bad_at("a\xe0\x80\x80"), 1);       /* overlong 3-byte */
    assert_int_equal(bad_at("ab\xed\xa0\x80"), 2);      /* surrogate U+D800 */
    assert_int_equal(bad_at("\xf4\x90\x80\x80"), 0);    /* above U+10FFFF */
    assert_int_equal(bad_at("xyz\xe2\x82"), 3);         /* truncated */
    assert_int_equal(bad_at("\xc3\xa9\x80"), 2);        /* stray continuation */
}

static void test_last_key_wins_and_trailing(void **state)
{
    (void)state;
    const char *why;
    size_t at;
    const char *doc = "{\"a\": 1, \"b\": {\"x\": 1, \"x\": [2]}, \"a\": {\"a\": 3, \"a\": 4}}  \n";
    cJSON *j = dfl__json_parse(doc, strlen(doc), &why, &at);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(j), 2);   /* json.loads: {"b": {"x": [2]}, "a": {"a": 4}} */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_last_key_wins_and_trailing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
