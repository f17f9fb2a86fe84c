/* atomic.c — temporary-file-then-rename outputs. */
#include "base/atomic.h"

#include <errno.h>
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
