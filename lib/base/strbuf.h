/* strbuf.h — a growable NUL-terminated text buffer for building reports, CSV logs and
 * file headers. Appends never fail loudly: the first allocation failure (or a size
 * that would overflow) latches `oom`, later appends do nothing, and the caller checks
 * once at the end. */
#ifndef DFL_STRBUF_H
#define DFL_STRBUF_H

#include <stddef.h>

/* Zero-initialise ({0}) before use. p is NULL until the first append, then always
 * NUL-terminated; the caller owns p (free(), or dfl_strbuf_free). */
typedef struct dfl_strbuf {
    char *p;
    size_t len; /* bytes before the NUL */
    size_t cap; /* bytes allocated */
    int oom;    /* an append failed: contents are incomplete */
} dfl_strbuf;

/* Append n bytes of s (which need not be NUL-terminated). */
void dfl_strbuf_add(dfl_strbuf *b, const char *s, size_t n);
/* Append the string s. */
void dfl_strbuf_puts(dfl_strbuf *b, const char *s);
/* Append printf-formatted text. */
void dfl_strbuf_printf(dfl_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Free p and reset to empty. */
void dfl_strbuf_free(dfl_strbuf *b);

#endif
