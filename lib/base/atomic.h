/* atomic.h — outputs that are never half-written: create a temporary file beside the
 * destination, write it, then rename it into place (or remove it on failure).
 *
 * Every file the library writes goes through here: stdio writers (prompts, safetensors,
 * PNG, the trainer's JSON and CSV) use dfl__atomic_open / dfl__atomic_close (or
 * dfl__atomic_write for one buffer); writers that open the file themselves (HDF5) use
 * the three steps dfl__check_overwrite, dfl__make_tmp, dfl__commit_tmp.
 *
 * Temporary names carry the writer's pid, "dir/.name.tmp.PID.Ab12Cd", and the writer
 * holds an exclusive flock(2) on the file until it is renamed or removed. That gives:
 *  - a lock: a second writer to the same destination fails at once (DFL_ERR_EXISTS
 *    naming the other process) instead of after its run;
 *  - clean-up after kill -9: a temporary of this naming in the destination's folder
 *    that nobody holds locked and whose pid is gone is removed by the next writer;
 *  - clean-up on signals: dfl__tmp_unlink_all() is async-signal-safe, so a tool's
 *    handler can remove every temporary of the process before it _exit()s.
 * The library itself never installs handlers.
 */
#ifndef DFL_ATOMIC_H
#define DFL_ATOMIC_H

#include <stdio.h>

#include "base/status.h"

/* Bytes free to an unprivileged writer on the file system that holds (or will hold)
 * the file `path`; -1 when that cannot be told (the write itself will then say why). */
double dfl__free_bytes(const char *path);

/* DFL_ERR_EXISTS when path exists and !overwrite, else DFL_OK. */
dfl_status dfl__check_overwrite(const char *path, int overwrite, dfl_error *err);

/* DFL_ERR_USAGE when the output `out` is the same file as one of inputs[n] (same
 * device and inode, or the same path once links are resolved; NULL entries skipped).
 * An input that is a directory (a model) stands for every file directly in it. Checked
 * whatever --force says: an output never replaces an input. */
dfl_status dfl__check_not_input(const char *out, const char *const *inputs, size_t n, dfl_error *err);

/* A unique temporary path in path's folder, "dir/.name.tmp.PID.Ab12Cd", created empty
 * (mode 0644) and locked. First removes stale temporaries of this naming in the folder
 * (unlocked, writer pid gone). Caller owns *tmp (free()) and must either
 * dfl__commit_tmp or dfl__discard_tmp it (a plain remove() also works; the lock is
 * then released at the next dfl__make_tmp or at exit). DFL_ERR_EXISTS if another
 * live process is writing the same path; DFL_ERR_IO if the folder is not writable. */
dfl_status dfl__make_tmp(const char *path, char **tmp, dfl_error *err);

/* fsync-free rename of tmp onto path (re-checking overwrite); on failure tmp is
 * removed. The lock is released either way. DFL_ERR_EXISTS / DFL_ERR_IO. */
dfl_status dfl__commit_tmp(const char *tmp, const char *path, int overwrite, dfl_error *err);

/* An output being written: f writes to tmp, which becomes path at close. */
typedef struct dfl_atomic {
    FILE *f;          /* open for writing ("wb") */
    char *tmp;        /* owned; freed by dfl__atomic_close */
    const char *path; /* borrowed: must outlive the dfl_atomic */
    int overwrite;
} dfl_atomic;

/* Check overwrite, create the temporary file and open it. On failure nothing is left
 * on disk and *a needs no close. DFL_ERR_EXISTS, DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl__atomic_open(dfl_atomic *a, const char *path, int overwrite, dfl_error *err);

/* Close a->f (a full disk may only show here, so its error counts) and, when s is
 * DFL_OK and the close succeeded, rename into place; otherwise remove the temporary
 * file. Returns s if it was already an error (err untouched), else the close/rename
 * status. Frees a->tmp. */
dfl_status dfl__atomic_close(dfl_atomic *a, dfl_status s, dfl_error *err);

/* Write n bytes of data to path atomically (open, one fwrite, close). */
dfl_status dfl__atomic_write(const char *path, const void *data, size_t n, int overwrite, dfl_error *err);

/* Remove tmp and release its lock (NULL ok). */
void dfl__discard_tmp(const char *tmp);

/* Unlink every temporary this process holds. Async-signal-safe (only unlink(2) on
 * paths stored beforehand): for a tool's signal handler. */
void dfl__tmp_unlink_all(void);

#endif
