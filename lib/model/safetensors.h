/* safetensors.h — read (memory-mapped, validated) and write safetensors files,
 * and open a model directory's tensor set (one file or index-listed shards).
 *
 * File layout (https://huggingface.co/docs/safetensors):
 *   bytes [0, 8)        u64 little-endian N: length of the JSON header
 *   bytes [8, 8+N)      UTF-8 JSON object: name -> {"dtype": "F32"|"F16"|"BF16"|...,
 *                       "shape": [d0, d1, ...], "data_offsets": [begin, end]},
 *                       plus an optional "__metadata__" object of string -> string
 *   bytes [8+N, EOF)    the data buffer; offsets are relative to its start
 * Validation before anything is trusted: N fits in the file, the JSON parses, every
 * entry has a known dtype, a shape of at most DFL_ST_MAX_DIMS non-negative dims whose
 * product times the dtype size equals end - begin (overflow-checked), begin <= end,
 * end within the data buffer, and no two tensors' byte ranges overlap.
 */
#ifndef DFL_SAFETENSORS_H
#define DFL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/half.h" /* re-exported: F16/BF16 tensor data is converted with these */

#define DFL_ST_MAX_DIMS 8

typedef enum dfl_dtype {
    DFL_DTYPE_F32 = 0,
    DFL_DTYPE_F16,
    DFL_DTYPE_BF16,
    DFL_DTYPE_F64,
    DFL_DTYPE_I64,
    DFL_DTYPE_I32,
    DFL_DTYPE_I16,
    DFL_DTYPE_I8,
    DFL_DTYPE_U8,
    DFL_DTYPE_BOOL
} dfl_dtype;

/* One tensor: a view into memory owned by the file or set it came from. */
typedef struct dfl_tensor {
    const char *name; /* NUL-terminated, owned by the file */
    dfl_dtype dtype;
    int ndim;
    int64_t shape[DFL_ST_MAX_DIMS];
    const void *data; /* little-endian bytes, possibly unaligned */
    size_t nbytes;
} dfl_tensor;

/* "F32", "F16", ... ; NULL for an unknown value. */
const char *dfl_dtype_name(dfl_dtype t);
/* Bytes per element. */
size_t dfl_dtype_size(dfl_dtype t);
/* Number of elements of t (product of its shape; 1 for a scalar). */
size_t dfl_tensor_numel(const dfl_tensor *t);

/* ---- one file ---- */

typedef struct dfl_st_file dfl_st_file;

/* Memory-map and validate a safetensors file. *out is owned by the caller, closed
 * with dfl_st_close. DFL_ERR_IO (cannot open/map), DFL_ERR_FORMAT (any header
 * problem, message names the file and the offending tensor or offset), DFL_ERR_NOMEM. */
dfl_status dfl_st_open(const char *path, dfl_st_file **out, dfl_error *err);

/* Parse and validate a safetensors image already in memory (used by the fuzzer and
 * tests). buf must outlive the result; it is not copied. `label` names it in errors. */
dfl_status dfl_st_open_memory(const void *buf, size_t len, const char *label, dfl_st_file **out, dfl_error *err);

/* Unmap and free; accepts NULL. */
void dfl_st_close(dfl_st_file *f);

size_t dfl_st_count(const dfl_st_file *f);
/* i-th tensor in header order, or NULL when i is out of range. */
const dfl_tensor *dfl_st_at(const dfl_st_file *f, size_t i);
/* Tensor by name, or NULL. */
const dfl_tensor *dfl_st_find(const dfl_st_file *f, const char *name);

/* ---- conversion ---- */

/* Convert n elements of an F32/F16/BF16 tensor to f32 (dst has t->nbytes/size elems).
 * DFL_ERR_TENSOR for any other dtype. */
dfl_status dfl_tensor_to_f32(const dfl_tensor *t, float *dst, dfl_error *err);

/* The scalar f16/bf16 conversions are in base/half.h (included above). */

/* ---- writing ---- */

/* Write n tensors (name, dtype, shape, data, nbytes used; nbytes must match the
 * shape) to path atomically: written to a temporary file in the same folder, then
 * renamed. Fails with DFL_ERR_EXISTS if path exists and !overwrite. The data buffer
 * starts 8-byte aligned (the header is padded with spaces); tensors follow it
 * contiguously in the given order, as the reference reader requires, so a tensor
 * after one of odd size may be unaligned. The header carries
 * "__metadata__": {"format": "pt"}. DFL_ERR_TENSOR (a tensor inconsistent with its
 * shape or dtype), DFL_ERR_USAGE (NULL name or data, duplicate or reserved name),
 * DFL_ERR_IO (nothing is left behind), DFL_ERR_NOMEM. */
dfl_status dfl_st_write(const char *path, const dfl_tensor *tensors, size_t n, int overwrite, dfl_error *err);

/* ---- a model directory's tensor set ---- */

typedef struct dfl_st_set dfl_st_set;

/* Open DIR/model.safetensors, or, when absent, the shards listed in
 * DIR/model.safetensors.index.json ("weight_map": name -> file). Every file listed
 * is opened and validated; a name listed in the index but missing from its shard
 * is DFL_ERR_FORMAT. Caller owns *out (dfl_st_set_close). */
dfl_status dfl_st_set_open(const char *dir, dfl_st_set **out, dfl_error *err);
void dfl_st_set_close(dfl_st_set *s);
/* Tensor by name across all files, or NULL. The returned view lives as long as s. */
const dfl_tensor *dfl_st_set_find(const dfl_st_set *s, const char *name);
/* Total tensor count and i-th tensor (files in order, header order within). */
size_t dfl_st_set_count(const dfl_st_set *s);
const dfl_tensor *dfl_st_set_at(const dfl_st_set *s, size_t i);
/* File that holds the named tensor (for error messages), or NULL. */
const char *dfl_st_set_file_of(const dfl_st_set *s, const char *name);

#endif
