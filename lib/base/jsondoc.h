/* jsondoc.h — reading JSON documents the way Python's json module (and so Hugging
 * Face) reads them, for config.json, prompts and tokenizer files alike:
 *  - duplicate keys in an object: the last one wins (Python's dict semantics);
 *  - text after the document (other than whitespace) is an error;
 *  - the bytes must be UTF-8 (RFC 8259, checked by base/utf8.h): invalid bytes are an
 *    error naming their offset.
 * cJSON itself keeps the first duplicate and accepts any bytes in strings. */
#ifndef DFL_JSONDOC_H
#define DFL_JSONDOC_H

#include <cJSON.h>
#include <stddef.h>

/* Remove, in every object under node, each member that a later member of the same
 * object repeats: what remains is what Python's json.loads returns. */
void dfl__json_last_key_wins(cJSON *node);

/* Parse text[len] (need not be NUL-terminated) as one JSON document under the rules
 * above. Returns the tree (caller frees with cJSON_Delete) or NULL with *why (static
 * text) and *at (0-based byte offset of the problem). */
cJSON *dfl__json_parse(const char *text, size_t len, const char **why, size_t *at);

/* Options of dfl__json_parse_opts. */
enum {
    /* NaN, Infinity and -Infinity are numbers (Python's json.dumps writes them for
     * non-finite floats and json.loads reads them; cJSON alone refuses them) */
    DFL_JSON_NONFINITE = 1,
    /* a number literal beyond the double range (1e309: json.loads reads inf) is an
     * error, why = "number out of range", *at = its first byte */
    DFL_JSON_RANGE = 2,
    /* strings may hold U+0000 (the escape \u0000, as Python's json reads it): each string
     * value keeps its decoded length for dfl__json_string_len; and an escaped lone
     * surrogate (\uD800 with no low half, or a low half alone), which UTF-8 cannot hold,
     * is an error, why = "lone surrogate", *at = its backslash */
    DFL_JSON_STRLEN = 4
};

/* Bytes of a string item's value: its decoded length when the tree was parsed with
 * DFL_JSON_STRLEN (U+0000 included), strlen of valuestring otherwise. */
size_t dfl__json_string_len(const cJSON *s);

/* dfl__json_parse with options (DFL_JSON_* bits or'ed): the same rules, plus those. */
cJSON *dfl__json_parse_opts(const char *text, size_t len, unsigned flags, const char **why, size_t *at);

#endif
