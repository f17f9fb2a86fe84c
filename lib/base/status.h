/* status.h — the one status enum of libdifflens, its text, and the error record.
 *
 * Every library function that can fail returns a dfl_status and, when it is not
 * DFL_OK, fills a caller-owned dfl_error with a one-line message that names the
 * file, tensor, line or offset involved. The library never prints and never exits.
 */
#ifndef DFL_STATUS_H
#define DFL_STATUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum dfl_status {
    DFL_OK = 0,
    DFL_ERR_IO,       /* a file could not be opened, read, written or renamed */
    DFL_ERR_FORMAT,   /* malformed content: JSON, safetensors header, dump */
    DFL_ERR_CONFIG,   /* config.json inconsistent, incomplete or unsupported */
    DFL_ERR_TENSOR,   /* a tensor missing, of the wrong dtype or shape */
    DFL_ERR_RANGE,    /* a value out of its allowed range (token id, span) */
    DFL_ERR_NOMEM,    /* allocation failed or a size overflowed */
    DFL_ERR_USAGE,    /* an invalid argument or option value */
    DFL_ERR_EXISTS,   /* an output exists and overwriting was not allowed */
    DFL_ERR_HDF5,     /* the HDF5 library reported an error */
    DFL_ERR_CANCELLED /* the caller raised its cancel flag (a tool: on a signal) */
} dfl_status;

/* The caller-owned error record: status plus a one-line message (no newline). */
typedef struct dfl_error {
    dfl_status status;
    char msg[512];
} dfl_error;

/* Short fixed text for a status ("ok", "i/o error", ...). Never NULL. */
const char *dfl_status_str(dfl_status s);

/* Exit code a tool uses for a status: 0 ok, 2 usage, 1 anything else. */
int dfl_status_exit_code(dfl_status s);

/* ---- internals shared between library files (dfl__ prefix) ---- */

/* Fill err (may be NULL) with status s and a printf-style message; returns s. */
dfl_status dfl__fail(dfl_error *err, dfl_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefix an already-filled error message with "context: ". Returns err->status. */
dfl_status dfl__context(dfl_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* strerror(errno) when errno says the storage failed (ENOSPC, EIO, EFBIG, EDQUOT,
 * EROFS), else NULL: for messages after a library (HDF5, libpng) hid the cause. */
const char *dfl__os_reason(void);

/* A byte count for messages: "512 B", "61.4 KB", "1.2 GB" (powers of 1000). */
void dfl__human_bytes(double bytes, char *buf, size_t cap);

/* out = a*b; returns 0 on overflow (out untouched), 1 otherwise. */
int dfl__mul_ok(size_t a, size_t b, size_t *out);

/* malloc of n*size bytes with an overflow check; NULL on overflow or failure.
 * Caller owns the result (free()). */
void *dfl__alloc_array(size_t n, size_t size);

/* calloc with the same contract. */
void *dfl__calloc_array(size_t n, size_t size);

/* Grow the array v of *cap elements of size bytes for appending: to first elements when
 * *cap is 0, else twice as many, overflow-checked. Returns the new array and sets *cap,
 * or NULL with v (still the caller's) and *cap unchanged. */
void *dfl__grow_array(void *v, size_t *cap, size_t size, size_t first);

/* Open path read-only as a regular file (O_NONBLOCK, so a FIFO in its place is refused
 * at once, not waited on) and fstat it into *st: *fd is the caller's to close. DFL_ERR_IO
 * naming the path and what it is when it is no regular file ("cannot be read as what"). */
struct stat;
dfl_status dfl__open_regular(const char *path, const char *what, int *fd, struct stat *st, dfl_error *err);

/* Read a whole input file into a NUL-terminated malloc'ed buffer; *len excludes the NUL;
 * caller owns *out. At most max bytes: a larger file is DFL_ERR_IO naming the bound and
 * `what` ("prompts", "tokenizer.json"), before anything is read. Only a regular file:
 * a FIFO, a device (/dev/zero) or a folder is DFL_ERR_IO "not a regular file", at once
 * (it is opened without waiting for a writer). DFL_ERR_IO, DFL_ERR_NOMEM. */
dfl_status dfl__read_file_max(const char *path, size_t max, const char *what, char **out, size_t *len, dfl_error *err);

/* The bound of dfl__read_file: generous, so that only a wrong file (or an endless one)
 * meets it. */
#define DFL_READ_MAX_DEFAULT ((size_t)1 << 30)

/* dfl__read_file_max(path, DFL_READ_MAX_DEFAULT, "an input file", ...). */
dfl_status dfl__read_file(const char *path, char **out, size_t *len, dfl_error *err);

/* Read a stream (standard input, a pipe) to its end, at most max bytes (DFL_ERR_IO naming
 * `label`, the bound and `what` when it gives more); as dfl__read_file_max otherwise. */
dfl_status dfl__read_stream(FILE *f, const char *label, size_t max, const char *what, char **out, size_t *len,
                            dfl_error *err);

#endif
