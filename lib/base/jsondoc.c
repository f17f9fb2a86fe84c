/* jsondoc.c — JSON documents as Python's json reads them (see jsondoc.h). */
#include "base/jsondoc.h"

#include "base/status.h"
#include "base/utf8.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void dfl__json_last_key_wins(cJSON *node)
{
    for (cJSON *c = node ? node->child : NULL; c;) {
        cJSON *next = c->next;
        int repeated = 0;
        if (cJSON_IsObject(node) && c->string)
            for (cJSON *l = next; l && !repeated; l = l->next)
                repeated = l->string && !strcmp(l->string, c->string);
        if (repeated)
            cJSON_Delete(cJSON_DetachItemViaPointer(node, c));
        else
            dfl__json_last_key_wins(c);
        c = next;
    }
}

/* One number literal of the text, in document order: where it starts and what it was. */
typedef struct numlit {
    size_t at;
    int kind; /* 0 a plain number, 1 NaN, 2 Infinity, 3 -Infinity */
} numlit;

static int is_delim_before(const char *b, size_t i)
{
    return i == 0 || strchr(" \t\r\n[,:", b[i - 1]) != NULL;
}

static int is_delim_after(const char *b, size_t len, size_t i)
{
    return i >= len || strchr(" \t\r\n,]}", b[i]) != NULL;
}

/* Find every number literal outside strings in buf[len] (as cJSON delimits them) and
 * blank each NaN, Infinity, -Infinity that stands alone as a value into a "0" padded
 * with spaces (offsets stay). *out: malloc'ed [*n] (NULL when there are none). 0 when
 * out of memory. */
static int scan_numbers(char *buf, size_t len, numlit **out, size_t *n)
{
    numlit *v = NULL;
    size_t cnt = 0, cap = 0;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            continue;
        }
        int kind = -1;
        size_t w = 0; /* bytes of a keyword */
        if (c == 'N' && len - i >= 3 && !memcmp(buf + i, "NaN", 3))
            kind = 1, w = 3;
        else if (c == 'I' && len - i >= 8 && !memcmp(buf + i, "Infinity", 8))
            kind = 2, w = 8;
        else if (c == '-' && len - i >= 9 && !memcmp(buf + i, "-Infinity", 9))
            kind = 3, w = 9;
        if (kind > 0 && !(is_delim_before(buf, i) && is_delim_after(buf, len, i + w))) kind = -1;
        if (kind < 0 && (c == '-' || (c >= '0' && c <= '9'))) kind = 0;
        if (kind < 0) continue;
        if (cnt == cap) {
            size_t nc = cap ? 2 * cap : 16;
            numlit *nv = dfl__alloc_array(nc, sizeof *nv);
            if (!nv) {
                free(v);
                return 0;
            }
            if (cnt) memcpy(nv, v, cnt * sizeof *v);
            free(v);
            v = nv;
            cap = nc;
        }
        v[cnt].at = i;
        v[cnt++].kind = kind;
        if (kind > 0) {
            buf[i] = '0';
            memset(buf + i + 1, ' ', w - 1);
            i += w - 1;
        } else {
            while (i + 1 < len && strchr("0123456789+-eE.", buf[i + 1]) && buf[i + 1])
                i++;
        }
    }
    *out = v;
    *n = cnt;
    return 1;
}

/* Walk the tree in document order (the order of the literals): give the blanked
 * keywords their values; with range, stop at a literal that overflowed. Returns the
 * literal index of such a number, or SIZE_MAX. */
static size_t apply_numbers(cJSON *node, const numlit *v, size_t n, size_t *k, int range)
{
    for (; node; node = node->next) {
        if (cJSON_IsNumber(node) && *k < n) {
            const numlit *l = &v[(*k)++];
            if (l->kind) {
                double d = l->kind == 1 ? NAN : l->kind == 2 ? INFINITY : -INFINITY;
                node->valuedouble = d;
                node->valueint = l->kind == 1 ? 0 : l->kind == 2 ? INT_MAX : INT_MIN;
            } else if (range && isinf(node->valuedouble)) {
                return (size_t)(l - v);
            }
        }
        size_t bad = apply_numbers(node->child, v, n, k, range);
        if (bad != SIZE_MAX) return bad;
    }
    return SIZE_MAX;
}

/* The value of 4 hex digits at p (p[0..3] exist), or -1. */
static long hex4(const char *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The decoded byte length of every string literal of buf[len] (keys included), in
 * document order: *out malloc'ed [*n]. A lone surrogate escape sets *bad (its backslash)
 * and stops. Escapes cJSON refuses (bad hex) are counted loosely: cJSON fails on them.
 * 0 when out of memory. */
static int scan_strings(const char *buf, size_t len, size_t **out, size_t *n, size_t *bad)
{
    size_t *v = NULL, cnt = 0, cap = 0;
    *bad = SIZE_MAX;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '"') continue;
        size_t m = 0, j = i + 1;
        for (; j < len && buf[j] != '"'; j++) {
            if (buf[j] != '\\') {
                m++;
                continue;
            }
            if (j + 1 >= len) break;
            if (buf[j + 1] != 'u' || len - j < 6) {
                m++;
                j++;
                continue;
            }
            long c = hex4(buf + j + 2);
            if (c >= 0xDC00 && c <= 0xDFFF) {
                *bad = j;
                break;
            }
            if (c >= 0xD800 && c <= 0xDBFF) {
                long lo = len - j >= 12 && buf[j + 6] == '\\' && buf[j + 7] == 'u' ? hex4(buf + j + 8) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    *bad = j;
                    break;
                }
                m += 4;
                j += 11;
                continue;
            }
            m += c < 0 ? 1 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
            j += 5;
        }
        if (*bad != SIZE_MAX) break;
        if (cnt == cap) {
            size_t nc = cap ? 2 * cap : 16;
            size_t *nv = dfl__alloc_array(nc, sizeof *nv);
            if (!nv) {
                free(v);
                return 0;
            }
            if (cnt) memcpy(nv, v, cnt * sizeof *v);
            free(v);
            v = nv;
            cap = nc;
        }
        v[cnt++] = m;
        i = j;
    }
    *out = v;
    *n = cnt;
    return 1;
}

/* Walk the tree in document order (keys before their values, as the literals come):
 * each string value keeps its decoded length + 1 in valueint (0: unknown). */
static void apply_strlens(cJSON *node, int in_object, const size_t *v, size_t n, size_t *k)
{
    for (; node; node = node->next) {
        if (in_object) (*k)++;
        if (cJSON_IsString(node) && *k < n) {
            size_t m = v[(*k)++];
            node->valueint = m < (size_t)INT_MAX ? (int)m + 1 : 0;
        }
        apply_strlens(node->child, cJSON_IsObject(node), v, n, k);
    }
}

size_t dfl__json_string_len(const cJSON *s)
{
    if (!cJSON_IsString(s) || !s->valuestring) return 0;
    return s->valueint > 0 ? (size_t)s->valueint - 1 : strlen(s->valuestring);
}

cJSON *dfl__json_parse(const char *text, size_t len, const char **why, size_t *at)
{
    return dfl__json_parse_opts(text, len, 0, why, at);
}

cJSON *dfl__json_parse_opts(const char *text, size_t len, unsigned flags, const char **why, size_t *at)
{
    *why = NULL;
    *at = 0;
    size_t bad = dfl__utf8_check(text, len);
    if (bad != len) {
        *why = "invalid UTF-8";
        *at = bad;
        return NULL;
    }
    if (len == SIZE_MAX) return *why = "too large", NULL;
    /* cJSON gets its own NUL-terminated copy: text need not be terminated */
    char *buf = malloc(len + 1);
    if (!buf) return *why = "out of memory", NULL;
    if (len) memcpy(buf, text, len);
    buf[len] = '\0';
    numlit *nums = NULL;
    size_t n_nums = 0;
    if ((flags & (DFL_JSON_NONFINITE | DFL_JSON_RANGE)) && !scan_numbers(buf, len, &nums, &n_nums)) {
        free(buf);
        return *why = "out of memory", NULL;
    }
    if (!(flags & DFL_JSON_NONFINITE)) /* keywords stay refused: put them back */
        for (size_t i = 0; i < n_nums; i++)
            if (nums[i].kind)
                memcpy(buf + nums[i].at, text + nums[i].at, nums[i].kind == 1 ? 3 : nums[i].kind == 2 ? 8 : 9);
    size_t *lens = NULL, n_lens = 0, lone = SIZE_MAX;
    if ((flags & DFL_JSON_STRLEN) && !scan_strings(buf, len, &lens, &n_lens, &lone)) {
        free(nums);
        free(buf);
        return *why = "out of memory", NULL;
    }
    if (lone != SIZE_MAX) {
        free(lens);
        free(nums);
        free(buf);
        *at = lone;
        return *why = "lone surrogate", NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!root) {
        *why = "syntax error";
        *at = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
    } else {
        const char *q = end ? end : buf + len;
        while (q < buf + len && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q < buf + len) {
            *why = "text after the JSON document";
            *at = (size_t)(q - buf);
            cJSON_Delete(root);
            root = NULL;
        } else {
            size_t k = 0, bad = nums ? apply_numbers(root, nums, n_nums, &k, flags & DFL_JSON_RANGE) : SIZE_MAX;
            if (bad != SIZE_MAX) {
                *why = "number out of range";
                *at = nums[bad].at;
                cJSON_Delete(root);
                root = NULL;
            } else {
                size_t k = 0;
                if (lens) apply_strlens(root, 0, lens, n_lens, &k);
                dfl__json_last_key_wins(root);
            }
        }
    }
    free(lens);
    free(nums);
    free(buf);
    return root;
}
