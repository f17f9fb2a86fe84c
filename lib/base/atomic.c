/* atomic.c — temporary-file-then-rename outputs, with pid-named, flock-held temps. */
#include "base/atomic.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ------------------------------------------------- the process's temporaries */

/* Temporaries this process holds, with the descriptor that keeps the flock. A fixed
 * table (no allocation) so that dfl__tmp_unlink_all can run in a signal handler;
 * a tool writes a handful of files at a time. */
#define HELD_MAX 64
static struct {
    char path[4096];
    volatile sig_atomic_t used;
    int fd;
} g_tmp[HELD_MAX];

static void release(int i)
{
    g_tmp[i].used = 0;
    if (g_tmp[i].fd >= 0) close(g_tmp[i].fd);
    g_tmp[i].fd = -1;
}

/* Drop entries whose file a caller remove()d without dfl__discard_tmp. */
static void prune(void)
{
    struct stat st;
    for (int i = 0; i < HELD_MAX; i++)
        if (g_tmp[i].used && stat(g_tmp[i].path, &st) != 0) release(i);
}

static int find(const char *tmp)
{
    for (int i = 0; i < HELD_MAX; i++)
        if (g_tmp[i].used && !strcmp(g_tmp[i].path, tmp)) return i;
    return -1;
}

void dfl__tmp_unlink_all(void)
{
    for (int i = 0; i < HELD_MAX; i++)
        if (g_tmp[i].used) unlink(g_tmp[i].path);
}

/* ------------------------------------------------------- the folder's temporaries */

/* If name is ".<base>.tmp.<pid>.<6 chars>" (base NULL: any base), its pid, else 0. */
static long tmp_pid(const char *name, const char *base)
{
    if (name[0] != '.') return 0;
    const char *t = strstr(name, ".tmp.");
    if (!t) return 0;
    /* the last ".tmp." (a base may itself contain ".tmp.") */
    for (const char *u; (u = strstr(t + 1, ".tmp.")) != NULL;)
        t = u;
    if (base && ((size_t)(t - name - 1) != strlen(base) || strncmp(name + 1, base, strlen(base)))) return 0;
    char *end;
    errno = 0;
    long pid = strtol(t + 5, &end, 10);
    if (errno || pid <= 0 || end == t + 5 || *end != '.' || strlen(end + 1) != 6) return 0;
    return pid;
}

static int pid_alive(long pid)
{
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* Look at the temporaries of our naming in dir: remove the stale ones (nobody holds the
 * lock and the pid is gone); return the pid of a live writer of `base`, else 0. */
static long sweep(const char *dir, const char *base, char *live_name, size_t live_cap)
{
    DIR *dp = opendir(dir);
    if (!dp) return 0;
    long live = 0;
    char p[4096];
    for (struct dirent *e; (e = readdir(dp)) != NULL;) {
        long pid = tmp_pid(e->d_name, NULL);
        if (!pid || pid == (long)getpid()) continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p) continue;
        int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        memset(&st, 0, sizeof st);
        int locked =
            fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        if (S_ISREG(st.st_mode) && !locked && !pid_alive(pid))
            unlink(p);
        else if (locked && !live && tmp_pid(e->d_name, base)) {
            live = pid;
            snprintf(live_name, live_cap, "%s", e->d_name);
        }
        close(fd); /* also drops the lock we may just have taken */
    }
    closedir(dp);
    return live;
}

/* ------------------------------------------------------------------ API */

double dfl__free_bytes(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    else
        snprintf(dir, sizeof dir, ".");
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0) return -1;
    return (double)fs.f_bavail * (double)fs.f_frsize;
}

dfl_status dfl__check_overwrite(const char *path, int overwrite, dfl_error *err)
{
    struct stat st;
    if (!overwrite && stat(path, &st) == 0)
        return dfl__fail(err, DFL_ERR_EXISTS, "%s: exists (use --force to overwrite)", path);
    return DFL_OK;
}

/* out's resolved path: realpath of its folder + its name (out need not exist), in buf. */
static int resolve_out(const char *out, char *buf, size_t cap)
{
    const char *slash = strrchr(out, '/');
    char dir[4096], real[PATH_MAX];
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash == out ? 1 : slash - out), out);
    else
        snprintf(dir, sizeof dir, ".");
    if (!realpath(dir, real)) return 0;
    return (size_t)snprintf(buf, cap, "%s/%s", strcmp(real, "/") ? real : "", slash ? slash + 1 : out) < cap;
}

static int same_file(const struct stat *o, int o_ok, const char *o_real, const char *in)
{
    struct stat st;
    char real[PATH_MAX];
    if (o_ok && stat(in, &st) == 0 && st.st_dev == o->st_dev && st.st_ino == o->st_ino) return 1;
    return o_real[0] && realpath(in, real) && !strcmp(real, o_real);
}

dfl_status dfl__check_not_input(const char *out, const char *const *inputs, size_t n, dfl_error *err)
{
    if (!out) return DFL_OK;
    struct stat o;
    int o_ok = stat(out, &o) == 0;
    char o_real[PATH_MAX + 256];
    if (!resolve_out(out, o_real, sizeof o_real)) o_real[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *in = inputs[i];
        struct stat st;
        if (!in || stat(in, &st) != 0) continue;
        if (same_file(&o, o_ok, o_real, in))
            return dfl__fail(err, DFL_ERR_USAGE, "%s: is the input %s; an output never replaces an input", out, in);
        if (!S_ISDIR(st.st_mode)) continue;
        DIR *dp = opendir(in);
        if (!dp) continue;
        char p[4096 + 256];
        int hit = 0;
        for (struct dirent *e; !hit && (e = readdir(dp)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", in, e->d_name);
            hit = same_file(&o, o_ok, o_real, p);
        }
        closedir(dp);
        if (hit) return dfl__fail(err, DFL_ERR_USAGE, "%s: is the input %s; an output never replaces an input", out, p);
    }
    return DFL_OK;
}

dfl_status dfl__make_tmp(const char *path, char **tmp, dfl_error *err)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    char dir[4096], live_name[256];
    if (dirlen + 2 > sizeof dir || strlen(path) + 40 > sizeof g_tmp[0].path)
        return dfl__fail(err, DFL_ERR_IO, "%s: path too long", path);
    if (dirlen)
        snprintf(dir, sizeof dir, "%.*s", (int)(dirlen > 1 ? dirlen - 1 : 1), path);
    else
        snprintf(dir, sizeof dir, ".");
    prune();
    long other = sweep(dir, base, live_name, sizeof live_name);
    if (other)
        return dfl__fail(err, DFL_ERR_EXISTS, "%s: being written by process %ld (its temporary file %s)", path, other,
                         live_name);
    int slot = -1;
    for (int i = 0; i < HELD_MAX && slot < 0; i++)
        if (!g_tmp[i].used) slot = i;
    if (slot < 0) return dfl__fail(err, DFL_ERR_IO, "%s: too many temporary files open", path);

    /* The name is made in the table itself and the slot is taken before the file
     * exists: a signal arriving just after its creation still finds it there. */
    snprintf(g_tmp[slot].path, sizeof g_tmp[slot].path, "%.*s.%s.tmp.%ld.XXXXXX", (int)dirlen, path, base,
             (long)getpid());
    g_tmp[slot].fd = -1;
    g_tmp[slot].used = 1;
    int fd = mkostemp(g_tmp[slot].path, O_CLOEXEC);
    if (fd < 0) {
        g_tmp[slot].used = 0;
        return dfl__fail(err, DFL_ERR_IO, "%s: cannot create a file in its folder: %s", path, strerror(errno));
    }
    g_tmp[slot].fd = fd;
    fchmod(fd, 0644);
    flock(fd, LOCK_EX | LOCK_NB);
    char *t = strdup(g_tmp[slot].path);
    if (!t) {
        dfl__discard_tmp(g_tmp[slot].path);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    }
    /* Two writers that started together both see the other now: both give up rather
     * than one silently replacing the other's output. */
    if ((other = sweep(dir, base, live_name, sizeof live_name)) != 0) {
        dfl__discard_tmp(t);
        free(t);
        return dfl__fail(err, DFL_ERR_EXISTS, "%s: being written by process %ld (its temporary file %s)", path, other,
                         live_name);
    }
    *tmp = t;
    return DFL_OK;
}

dfl_status dfl__commit_tmp(const char *tmp, const char *path, int overwrite, dfl_error *err)
{
    dfl_status s = dfl__check_overwrite(path, overwrite, err);
    if (s == DFL_OK && rename(tmp, path) != 0)
        s = dfl__fail(err, DFL_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
    if (s != DFL_OK) remove(tmp);
    int i = find(tmp);
    if (i >= 0) release(i);
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
        dfl__discard_tmp(a->tmp);
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
        if (s == DFL_OK)
            s = dfl__commit_tmp(a->tmp, a->path, a->overwrite, err); /* removes tmp on failure */
        else
            dfl__discard_tmp(a->tmp);
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

void dfl__discard_tmp(const char *tmp)
{
    if (!tmp) return;
    int i = find(tmp);
    remove(tmp);
    if (i >= 0) release(i);
}
