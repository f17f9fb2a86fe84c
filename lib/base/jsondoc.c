/* jsondoc.c — JSON documents as Python's json reads them (see jsondoc.h). */
#include "base/jsondoc.h"

#include "base/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
