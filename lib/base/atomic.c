/* atomic.c — temporary-file-then-rename outputs. */
#include "base/atomic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

dfl_status dfl__check_overwrite(const char *path, int overwrite, dfl_error *err)
{
    struct stat st;
    if (!overwrite && stat(path, &st) == 0)
        return dfl__fail(err, DFL_ERR_EXISTS, "%s: exists (use --force to overwrite)", path);
    return DFL_OK;
}

dfl_status dfl__make_tmp(const char *path, char **tmp, dfl_error *err)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(path) + 32;
    char *t = malloc(n);
    if (!t) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    snprintf(t, n, "%.*s.%s.tmp.XXXXXX", (int)dirlen, path, base);
    int fd = mkstemp(t);
    if (fd < 0) {
        dfl__fail(err, DFL_ERR_IO, "%s: cannot create a file in its folder: %s", path, strerror(errno));
        free(t);
        return DFL_ERR_IO;
    }
    fchmod(fd, 0644);
    close(fd);
    *tmp = t;
    return DFL_OK;
}

dfl_status dfl__commit_tmp(const char *tmp, const char *path, int overwrite, dfl_error *err)
{
    dfl_status s = dfl__check_overwrite(path, overwrite, err);
    if (s == DFL_OK && rename(tmp, path) != 0)
        s = dfl__fail(err, DFL_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
    if (s != DFL_OK) remove(tmp);
    return s;
}

dfl_status dfl__atomic_open(dfl_atomic *a, const char *path, int overwrite, dfl_error *err)
{
    a->f = NULL;
    a->tmp = NULL;
    a->path = path;
    a->overwrite = overwrite;
    dfl_status s = dfl__check_overwrite(path, overwrite, err);
    if (s == DFL_OK) s = dfl__make_tmp(path, &a->tmp, err);
    if (s != DFL_OK) return s;
    if (!(a->f = fopen(a->tmp, "wb"))) {
        s = dfl__fail(err, DFL_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        remove(a->tmp);
        free(a->tmp);
        a->tmp = NULL;
    }
    return s;
}

dfl_status dfl__atomic_close(dfl_atomic *a, dfl_status s, dfl_error *err)
{
    if (a->f) {
        int bad = ferror(a->f);
        int e = errno;
        if (fclose(a->f) != 0) bad = 1, e = errno;
        a->f = NULL;
        if (bad && s == DFL_OK) s = dfl__fail(err, DFL_ERR_IO, "%s: write error: %s", a->path, strerror(e));
    }
    if (a->tmp) {
        if (s == DFL_OK) s = dfl__commit_tmp(a->tmp, a->path, a->overwrite, err); /* removes tmp on failure */
        else remove(a->tmp);
        free(a->tmp);
        a->tmp = NULL;
    }
    return s;
}

dfl_status dfl__atomic_write(const char *path, const void *data, size_t n, int overwrite, dfl_error *err)
{
    dfl_atomic a;
    dfl_status s = dfl__atomic_open(&a, path, overwrite, err);
    if (s != DFL_OK) return s;
    if (n && fwrite(data, 1, n, a.f) != n) s = dfl__fail(err, DFL_ERR_IO, "%s: write error: %s", path, strerror(errno));
    return dfl__atomic_close(&a, s, err);
}
