/* jsondoc.c — JSON documents as Python's json reads them (see jsondoc.h). */
#include "base/jsondoc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t dfl__utf8_invalid_at(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = u[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) n = 2;
        else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return i;
        if (i + n > len || u[i + 1] < lo || u[i + 1] > hi) return i;
        for (size_t k = 2; k < n; k++)
            if (u[i + k] < 0x80 || u[i + k] > 0xBF) return i;
        i += n;
    }
    return SIZE_MAX;
}

void dfl__json_last_key_wins(cJSON *node)
{
    for (cJSON *c = node ? node->child : NULL; c;) {
        cJSON *next = c->next;
        int repeated = 0;
        if (cJSON_IsObject(node) && c->string)
            for (cJSON *l = next; l && !repeated; l = l->next) repeated = l->string && !strcmp(l->string, c->string);
        if (repeated) cJSON_Delete(cJSON_DetachItemViaPointer(node, c));
        else dfl__json_last_key_wins(c);
        c = next;
    }
}

cJSON *dfl__json_parse(const char *text, size_t len, const char **why, size_t *at)
{
    *why = NULL;
    *at = 0;
    size_t bad = dfl__utf8_invalid_at(text, len);
    if (bad != SIZE_MAX) {
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
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!root) {
        *why = "syntax error";
        *at = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
    } else {
        const char *q = end ? end : buf + len;
        while (q < buf + len && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')) q++;
        if (q < buf + len) {
            *why = "text after the JSON document";
            *at = (size_t)(q - buf);
            cJSON_Delete(root);
            root = NULL;
        } else {
            dfl__json_last_key_wins(root);
        }
    }
    free(buf);
    return root;
}
