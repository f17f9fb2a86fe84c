/* atomic.h — outputs that are never half-written: create a temporary file beside the
 * destination, write it, then rename it into place (or remove it on failure).
 *
 * Every file the library writes goes through here: stdio writers (prompts, safetensors,
 * PNG, the trainer's JSON and CSV) use dfl__atomic_open / dfl__atomic_close (or
 * dfl__atomic_write for one buffer); writers that open the file themselves (HDF5) use
 * the three steps dfl__check_overwrite, dfl__make_tmp, dfl__commit_tmp. */
#ifndef DFL_ATOMIC_H
#define DFL_ATOMIC_H

#include <stdio.h>

#include "base/status.h"

/* DFL_ERR_EXISTS when path exists and !overwrite, else DFL_OK. */
dfl_status dfl__check_overwrite(const char *path, int overwrite, dfl_error *err);

/* A unique temporary path in path's folder, e.g. "dir/.name.tmp.Ab12Cd", created
 * empty (mode 0644) so no one else takes it. Caller owns *tmp (free()) and must
 * either dfl__commit_tmp or remove() it. DFL_ERR_IO if the folder is not writable. */
dfl_status dfl__make_tmp(const char *path, char **tmp, dfl_error *err);

/* fsync-free rename of tmp onto path (re-checking overwrite); on failure tmp is
 * removed. DFL_ERR_EXISTS / DFL_ERR_IO. */
dfl_status dfl__commit_tmp(const char *tmp, const char *path, int overwrite, dfl_error *err);

/* An output being written: f writes to tmp, which becomes path at close. */
typedef struct dfl_atomic {
    FILE *f;        /* open for writing ("wb") */
    char *tmp;      /* owned; freed by dfl__atomic_close */
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

#endif
