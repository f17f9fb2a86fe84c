/* utf8.h — UTF-8 as RFC 3629 defines it, for every reader of text: the one validator
 * (JSON documents, prompt lines, tokenizer.json strings, texts to encode) and the
 * decode/encode steps the tokenizer walks strings with.
 *
 * Well-formed means what Python's bytes.decode("utf-8") and Rust's str accept: no
 * overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no stray or
 * missing continuation bytes. */
#ifndef DFL_UTF8_H
#define DFL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Offset of the first byte of s[0..n) that does not start a well-formed sequence (the
 * offset Python's UnicodeDecodeError.start reports), or n when all of s is well-formed. */
size_t dfl__utf8_check(const char *s, size_t n);

/* Decode the character at s[i] (i < n; well-formed input assumed, a truncated tail
 * reads as single bytes); *cp = its code point. Returns its length in bytes. */
size_t dfl__utf8_next(const char *s, size_t n, size_t i, uint32_t *cp);

/* Encode cp (<= U+10FFFF) into out[0..4); returns its length in bytes. */
size_t dfl__utf8_put(uint32_t cp, char *out);

#endif
