/* status.c — status texts, error records and small shared helpers. */
#include "base/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    while (bytes >= 1000 && u < 5)
        bytes /= 1000, u++;
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

void *dfl__grow_array(void *v, size_t *cap, size_t size, size_t first)
{
    size_t nc = *cap ? *cap * 2 : first, bytes;
    if (nc < *cap || !dfl__mul_ok(nc, size, &bytes)) return NULL;
    void *nv = realloc(v, bytes);
    if (nv) *cap = nc;
    return nv;
}

/* "1 GiB", "256 MiB", "64 KiB" or "1000 bytes": a bound as it is written in code. */
static void fmt_bound(size_t max, char *buf, size_t cap)
{
    if (max && max % ((size_t)1 << 30) == 0)
        snprintf(buf, cap, "%zu GiB", max >> 30);
    else if (max && max % ((size_t)1 << 20) == 0)
        snprintf(buf, cap, "%zu MiB", max >> 20);
    else if (max && max % 1024 == 0)
        snprintf(buf, cap, "%zu KiB", max >> 10);
    else
        snprintf(buf, cap, "%zu bytes", max);
}

static dfl_status too_large(dfl_error *err, const char *label, size_t max, const char *what)
{
    char b[32];
    fmt_bound(max, b, sizeof b);
    return dfl__fail(err, DFL_ERR_IO, "%s: more than %s, the bound for %s (is it the right file?)", label, b, what);
}

/* Grow the text buffer *buf of *cap bytes (NULL and 0 at first) for reading up to max + 1 bytes and the NUL:
 * to first bytes, then twice the size, never past max + 2. On failure *buf is freed. */
static dfl_status grow_text(char **buf, size_t *cap, size_t first, size_t max, const char *label, dfl_error *err)
{
    if (*cap > SIZE_MAX / 2) {
        free(*buf);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: too large", label);
    }
    size_t nc = *cap ? *cap * 2 : first;
    if (max < SIZE_MAX - 2 && nc > max + 2) nc = max + 2;
    if (nc <= *cap) nc = *cap + 1; /* cannot happen: n <= max */
    char *nb = realloc(*buf, nc);
    if (!nb) {
        free(*buf);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", label);
    }
    *buf = nb;
    *cap = nc;
    return DFL_OK;
}

/* Read fd to its end or to max + 1 bytes into a NUL-terminated buffer; cap0 is the
 * first guess at the size. */
static dfl_status read_fd(int fd, const char *label, size_t max, const char *what, size_t cap0, char **out, size_t *len,
                          dfl_error *err)
{
    char *buf = NULL;
    size_t cap = 0, n = 0;
    dfl_status st;
    for (;;) {
        if (n + 1 >= cap && (st = grow_text(&buf, &cap, cap0 < 4096 ? 4096 : cap0, max, label, err))) return st;
        ssize_t got = read(fd, buf + n, cap - 1 - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            return dfl__fail(err, DFL_ERR_IO, "%s: read error: %s", label, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n > max) {
            free(buf);
            return too_large(err, label, max, what);
        }
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return DFL_OK;
}

dfl_status dfl__open_regular(const char *path, const char *what, int *fd_out, struct stat *st, dfl_error *err)
{
    *fd_out = -1;
    /* O_NONBLOCK: a FIFO in a file's place is refused at once, not waited on */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return dfl__fail(err, DFL_ERR_IO, "%s: %s", path, strerror(errno));
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return dfl__fail(err, DFL_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        const char *kind = S_ISDIR(st->st_mode)    ? "a folder"
                           : S_ISFIFO(st->st_mode) ? "a FIFO"
                           : S_ISCHR(st->st_mode)  ? "a character device"
                           : S_ISBLK(st->st_mode)  ? "a block device"
                           : S_ISSOCK(st->st_mode) ? "a socket"
                                                   : "not a file";
        return dfl__fail(err, DFL_ERR_IO, "%s: not a regular file (%s), cannot be read as %s", path, kind, what);
    }
    *fd_out = fd;
    return DFL_OK;
}

dfl_status dfl__read_file_max(const char *path, size_t max, const char *what, char **out, size_t *len, dfl_error *err)
{
    int fd;
    struct stat st;
    dfl_status s0 = dfl__open_regular(path, what, &fd, &st, err);
    if (s0) return s0;
    if ((uint64_t)st.st_size > (uint64_t)max) {
        close(fd);
        return too_large(err, path, max, what);
    }
    /* the size is a first guess only: a file may grow while it is read (or be in /proc) */
    dfl_status s = read_fd(fd, path, max, what, (size_t)st.st_size + 1, out, len, err);
    close(fd);
    return s;
}

dfl_status dfl__read_file(const char *path, char **out, size_t *len, dfl_error *err)
{
    return dfl__read_file_max(path, DFL_READ_MAX_DEFAULT, "an input file", out, len, err);
}

dfl_status dfl__read_stream(FILE *f, const char *label, size_t max, const char *what, char **out, size_t *len,
                            dfl_error *err)
{
    char *buf = NULL;
    size_t cap = 0, n = 0;
    dfl_status st;
    for (;;) {
        if (n + 1 >= cap && (st = grow_text(&buf, &cap, 65536, max, label, err))) return st;
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (n > max) {
            free(buf);
            return too_large(err, label, max, what);
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return dfl__fail(err, DFL_ERR_IO, "%s: read error", label);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return DFL_OK;
}
