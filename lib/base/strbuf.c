/* strbuf.c — growable text buffer with a sticky out-of-memory flag (see strbuf.h). */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dfl_strbuf_add(dfl_strbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (n > SIZE_MAX - b->len - 1) { /* len + n + 1 would wrap */
        b->oom = 1;
        return;
    }
    size_t need = b->len + n + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return;
            }
            cap *= 2;
        }
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void dfl_strbuf_puts(dfl_strbuf *b, const char *s)
{
    dfl_strbuf_add(b, s, strlen(s));
}

void dfl_strbuf_printf(dfl_strbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    char tmp[256]; /* most pieces fit: no second formatting pass */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof tmp) {
        dfl_strbuf_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    dfl_strbuf_add(b, big, (size_t)n);
    free(big);
}

void dfl_strbuf_free(dfl_strbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}
