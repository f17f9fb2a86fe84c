/* status.c — status texts, error records and small shared helpers. */
#include "base/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dfl_status_str(dfl_status s)
{
    switch (s) {
    case DFL_OK: return "ok";
    case DFL_ERR_IO: return "i/o error";
    case DFL_ERR_FORMAT: return "malformed input";
    case DFL_ERR_CONFIG: return "bad model config";
    case DFL_ERR_TENSOR: return "bad tensor";
    case DFL_ERR_RANGE: return "value out of range";
    case DFL_ERR_NOMEM: return "out of memory";
    case DFL_ERR_USAGE: return "usage error";
    case DFL_ERR_EXISTS: return "output exists";
    case DFL_ERR_HDF5: return "hdf5 error";
    case DFL_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}

const char *dfl__os_reason(void)
{
    int e = errno;
    return e == ENOSPC || e == EIO || e == EFBIG || e == EDQUOT || e == EROFS ? strerror(e) : NULL;
}

void dfl__human_bytes(double bytes, char *buf, size_t cap)
{
    const char *unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (bytes >= 1000 && u < 5) bytes /= 1000, u++;
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

int dfl_status_exit_code(dfl_status s)
{
    if (s == DFL_OK) return 0;
    return s == DFL_ERR_USAGE ? 2 : 1;
}

dfl_status dfl__fail(dfl_error *err, dfl_status s, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = s;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return s;
}

dfl_status dfl__context(dfl_error *err, const char *fmt, ...)
{
    if (!err) return DFL_ERR_USAGE;
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n < sizeof err->msg ? (size_t)n : sizeof err->msg - 1;
    /* append ": old message", truncated to fit */
    size_t room = sizeof err->msg - used;
    if (room > 3) {
        memcpy(err->msg + used, ": ", 2);
        size_t k = strnlen(old, room - 3);
        memcpy(err->msg + used + 2, old, k);
        err->msg[used + 2 + k] = '\0';
    }
    return err->status;
}

int dfl__mul_ok(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

void *dfl__alloc_array(size_t n, size_t size)
{
    size_t bytes;
    if (!dfl__mul_ok(n, size, &bytes)) return NULL;
    return malloc(bytes ? bytes : 1);
}

void *dfl__calloc_array(size_t n, size_t size)
{
    size_t bytes;
    if (!dfl__mul_ok(n, size, &bytes)) return NULL;
    return calloc(bytes ? n : 1, bytes ? size : 1);
}

dfl_status dfl__read_file(const char *path, char **out, size_t *len, dfl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return dfl__fail(err, DFL_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(f); return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path); }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > SIZE_MAX / 2) { free(buf); fclose(f); return dfl__fail(err, DFL_ERR_NOMEM, "%s: too large", path); }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); fclose(f); return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path); }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); return dfl__fail(err, DFL_ERR_IO, "%s: read error", path); }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return DFL_OK;
}
