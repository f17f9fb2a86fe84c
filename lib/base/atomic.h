/* atomic.h — outputs that are never half-written: create a temporary file beside the
 * destination, write it, then rename it into place (or remove it on failure). */
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

#endif
