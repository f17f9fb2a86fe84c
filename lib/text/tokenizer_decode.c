/* tokenizer_decode.c — decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
 * Replace, Sequence) over a list of token strings, as Hugging Face's decode_chain,
 * and the per-token labels built from the same steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

typedef struct dstr {
    char *p;
    size_t n;
} dstr;

typedef struct dlist {
    dstr *v;
    size_t n;
} dlist;

static int set_str(dstr *d, const char *p, size_t n)
{
    char *x = malloc(n + 1);
    if (!x) return -1;
    memcpy(x, p, n);
    x[n] = '\0';
    free(d->p);
    d->p = x;
    d->n = n;
    return 0;
}

static void list_free(dlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].p);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Join a list into one string. */
static int fuse(dlist *l)
{
    size_t total = 0;
    for (size_t i = 0; i < l->n; i++)
        total += l->v[i].n;
    char *x = malloc(total + 1);
    if (!x) return -1;
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        memcpy(x + k, l->v[i].p, l->v[i].n);
        k += l->v[i].n;
    }
    x[k] = '\0';
    list_free(l);
    l->v = calloc(1, sizeof *l->v);
    if (!l->v) {
        free(x);
        return -1;
    }
    l->v[0] = (dstr){x, k};
    l->n = 1;
    return 0;
}

/* Valid UTF-8 kept; each invalid byte becomes `bad` (U+FFFD) or <0xNN> when bad is NULL. */
static int repair_utf8(dstr *d, const char *bad)
{
    if (dfl__utf8_check(d->p, d->n) == d->n) return 0;
    size_t cap = d->n * 6 + 1, k = 0, i = 0;
    char *x = malloc(cap);
    if (!x) return -1;
    while (i < d->n) {
        size_t ok = dfl__utf8_check(d->p + i, d->n - i);
        memcpy(x + k, d->p + i, ok);
        k += ok;
        i += ok;
        if (i < d->n) {
            if (bad) {
                memcpy(x + k, bad, strlen(bad));
                k += strlen(bad);
            } else
                k += (size_t)snprintf(x + k, 7, "<0x%02X>", (unsigned char)d->p[i]);
            i++;
        }
    }
    x[k] = '\0';
    free(d->p);
    d->p = x;
    d->n = k;
    return 0;
}

/* "<0xNN>" → the byte; -1 when s is not such a token. */
static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else
            return -1;
    }
    return v;
}

/* Replace every occurrence of pat by rep in d (literal). */
static int replace_all(dstr *d, const char *pat, size_t pn, const char *rep, size_t rn)
{
    if (!pn) return 0;
    size_t cap = d->n + 1, k = 0;
    if (rn > pn) cap = d->n / pn * rn + d->n + 1;
    char *x = malloc(cap);
    if (!x) return -1;
    size_t i = 0;
    while (i < d->n) {
        if (d->n - i >= pn && !memcmp(d->p + i, pat, pn)) {
            memcpy(x + k, rep, rn);
            k += rn;
            i += pn;
        } else {
            x[k++] = d->p[i++];
        }
    }
    x[k] = '\0';
    free(d->p);
    d->p = x;
    d->n = k;
    return 0;
}

static int replace_re(dstr *d, const pcre2_code *re, const char *rep, size_t rn)
{
    PCRE2_SIZE outlen = d->n * 2 + rn * 4 + 64;
    for (int tries = 0; tries < 8; tries++) {
        char *x = malloc(outlen + 1);
        if (!x) return -1;
        PCRE2_SIZE ol = outlen;
        int rc = pcre2_substitute(re, (PCRE2_SPTR)d->p, d->n, 0,
                                  PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_LITERAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
                                  NULL, NULL, (PCRE2_SPTR)rep, rn, (PCRE2_UCHAR *)x, &ol);
        if (rc >= 0) {
            x[ol] = '\0';
            free(d->p);
            d->p = x;
            d->n = ol;
            return 0;
        }
        free(x);
        if (rc != PCRE2_ERROR_NOMEMORY) return -1;
        outlen = ol;
    }
    return -1;
}

/* One decoder step. labels: per-token mode (no Fuse, no Strip, no dropped first space;
 * bytes kept raw for the final <0xNN> rendering). */
static int step(const dfl__tk_step *st, dlist *l, int labels)
{
    switch (st->kind) {
    case DFL__D_SEQUENCE:
        for (size_t i = 0; i < st->n_kids; i++)
            if (step(&st->kids[i], l, labels)) return -1;
        return 0;
    case DFL__D_BYTELEVEL:
        for (size_t i = 0; i < l->n; i++) {
            dstr *d = &l->v[i];
            char *x = malloc(d->n + 1);
            if (!x) return -1;
            size_t k = 0, j = 0;
            int all = 1;
            while (j < d->n) {
                uint32_t cp;
                j += dfl__utf8_next(d->p, d->n, j, &cp);
                int b = dfl__bytelevel_byte(cp);
                if (b < 0) {
                    all = 0;
                    break;
                }
                x[k++] = (char)b;
            }
            if (!all) {
                free(x);
                continue;
            } /* not a byte-level token: kept as is */
            x[k] = '\0';
            free(d->p);
            d->p = x;
            d->n = k;
        }
        if (labels) return 0;
        if (fuse(l)) return -1;
        return repair_utf8(&l->v[0], "\xEF\xBF\xBD");
    case DFL__D_BYTEFALLBACK: {
        if (labels) {
            for (size_t i = 0; i < l->n; i++) {
                int b = byte_token(l->v[i].p, l->v[i].n);
                char c = (char)b;
                if (b >= 0 && set_str(&l->v[i], &c, 1)) return -1;
            }
            return 0;
        }
        /* runs of byte tokens become text when they form valid UTF-8, else one U+FFFD each */
        dlist r = {calloc(l->n ? l->n : 1, sizeof(dstr)), 0};
        if (!r.v) return -1;
        char *bytes = malloc(l->n + 1);
        if (!bytes) {
            free(r.v);
            return -1;
        }
        size_t nb = 0;
        for (size_t i = 0; i <= l->n; i++) {
            int b = i < l->n ? byte_token(l->v[i].p, l->v[i].n) : -1;
            if (b >= 0) {
                bytes[nb++] = (char)b;
                continue;
            }
            if (nb) {
                if (dfl__utf8_check(bytes, nb) == nb) {
                    if (set_str(&r.v[r.n++], bytes, nb)) goto fail;
                } else {
                    for (size_t k = 0; k < nb; k++)
                        if (set_str(&r.v[r.n++], "\xEF\xBF\xBD", 3)) goto fail;
                }
                nb = 0;
            }
            if (i < l->n) {
                r.v[r.n++] = l->v[i];
                l->v[i].p = NULL;
            }
        }
        free(bytes);
        list_free(l);
        *l = r;
        return 0;
    fail:
        free(bytes);
        list_free(&r);
        return -1;
    }
    case DFL__D_FUSE: return labels ? 0 : fuse(l);
    case DFL__D_STRIP:
        if (labels) return 0;
        for (size_t i = 0; i < l->n; i++) {
            dstr *d = &l->v[i];
            size_t a = 0, e = d->n;
            for (size_t k = 0; k < st->start && e - a >= st->pat_len && !memcmp(d->p + a, st->pat, st->pat_len); k++)
                a += st->pat_len;
            for (size_t k = 0;
                 k < st->stop && e - a >= st->pat_len && !memcmp(d->p + e - st->pat_len, st->pat, st->pat_len); k++)
                e -= st->pat_len;
            if (set_str(d, d->p + a, e - a)) return -1;
        }
        return 0;
    case DFL__D_REPLACE:
        for (size_t i = 0; i < l->n; i++) {
            int r = st->pat ? replace_all(&l->v[i], st->pat, st->pat_len, st->content, st->content_len)
                            : replace_re(&l->v[i], st->re, st->content, st->content_len);
            if (r) return -1;
        }
        return 0;
    case DFL__D_METASPACE:
        for (size_t i = 0; i < l->n; i++) {
            if (replace_all(&l->v[i], st->pat, st->pat_len, " ", 1)) return -1;
            if (!labels && i == 0 && st->prepend_scheme != DFL__PS_NEVER && l->v[i].n && l->v[i].p[0] == ' ')
                if (set_str(&l->v[i], l->v[i].p + 1, l->v[i].n - 1)) return -1;
        }
        return 0;
    default: return -1;
    }
}

static dfl_status load_list(const dfl_tokenizer *t, const uint32_t *ids, size_t n, int skip_special, dlist *l,
                            dfl_error *err)
{
    l->v = dfl__calloc_array(n ? n : 1, sizeof *l->v);
    l->n = 0;
    if (!l->v) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = dfl__vocab_str(&t->vocab, ids[i], &len);
        if (!p) {
            list_free(l);
            return dfl__fail(err, DFL_ERR_RANGE, "token id %u is not in the vocabulary", ids[i]);
        }
        if (skip_special && t->is_special[ids[i]]) continue;
        if (set_str(&l->v[l->n++], p, len)) {
            list_free(l);
            return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        }
    }
    return DFL_OK;
}

dfl_status dfl_tokenizer_decode(const dfl_tokenizer *t, const uint32_t *ids, size_t n, int skip_special, char **out,
                                size_t *out_len, dfl_error *err)
{
    *out = NULL;
    dlist l;
    dfl_status st = load_list(t, ids, n, skip_special, &l, err);
    if (st) return st;
    if ((t->decoder && step(t->decoder, &l, 0)) || fuse(&l)) {
        list_free(&l);
        return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: decoding failed (out of memory)");
    }
    *out = l.v[0].p;
    *out_len = l.v[0].n;
    free(l.v);
    return DFL_OK;
}

void dfl_tokenizer_labels_free(char **labels, size_t n)
{
    if (!labels) return;
    for (size_t i = 0; i < n; i++)
        free(labels[i]);
    free(labels);
}

dfl_status dfl_tokenizer_labels(const dfl_tokenizer *t, const uint32_t *ids, size_t n, char ***labels, dfl_error *err)
{
    *labels = NULL;
    char **r = dfl__calloc_array(n ? n : 1, sizeof *r);
    if (!r) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        dlist l;
        dfl_status st = load_list(t, ids + i, 1, 0, &l, err);
        if (st) {
            dfl_tokenizer_labels_free(r, n);
            return st;
        }
        /* special tokens are shown as written */
        if ((!t->is_special[ids[i]] && t->decoder && step(t->decoder, &l, 1)) || fuse(&l) ||
            repair_utf8(&l.v[0], NULL)) {
            list_free(&l);
            dfl_tokenizer_labels_free(r, n);
            return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        }
        r[i] = l.v[0].p;
        free(l.v);
    }
    *labels = r;
    return DFL_OK;
}
