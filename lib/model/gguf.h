/* gguf.h — read GGUF files (llama.cpp / ggml's model container), memory-mapped and
 * validated; split models NAME-00001-of-0000N.gguf opened as one set.
 *
 * File layout (ggml's docs/gguf.md, version 2 and 3; all integers little-endian):
 *   u32 magic "GGUF" (bytes 47 47 55 46), u32 version (2 or 3),
 *   u64 n_tensors, u64 n_kv,
 *   n_kv × { string key, u32 value_type, value }
 *   n_tensors × { string name, u32 n_dims (1..4), u64 ne[n_dims], u32 ggml_type,
 *                 u64 offset }
 *   zero padding to the alignment, then the data section to the end of the file.
 * A string is u64 length + that many bytes (UTF-8, no NUL). Value types: 0 u8, 1 i8,
 * 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (one byte, 0 or 1), 8 string, 9 array
 * (u32 element type, u64 count, the elements; arrays of arrays are refused here),
 * 10 u64, 11 i64, 12 f64. The alignment is general.alignment (u32, a power of two)
 * or 32. ne[0] is the fastest-varying dimension: a matrix [rows, cols] in PyTorch's
 * order is ne = {cols, rows}. Each tensor's offset is relative to the data section
 * and a multiple of the alignment; its size is ne[1]·ne[2]·ne[3] rows of
 * dfl_ggml_row_bytes(type, ne[0]) (ne[0] a multiple of the type's block).
 *
 * Validation before anything is trusted: magic and version, every count and length
 * against the bytes left (a declared count is never allocated before the bytes for
 * it exist), known value types, bool 0/1, no duplicate keys or tensor names, a known
 * ggml type and a whole number of blocks per row, a tensor size without overflow,
 * offsets aligned, ranges inside the data section and not overlapping. Malformed
 * input is DFL_ERR_FORMAT naming the file and the key, tensor or byte offset.
 */
#ifndef DFL_GGUF_H
#define DFL_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define DFL_GGUF_MAX_DIMS 4

typedef enum dfl_gguf_vtype {
    DFL_GGUF_U8 = 0,
    DFL_GGUF_I8,
    DFL_GGUF_U16,
    DFL_GGUF_I16,
    DFL_GGUF_U32,
    DFL_GGUF_I32,
    DFL_GGUF_F32,
    DFL_GGUF_BOOL,
    DFL_GGUF_STRING,
    DFL_GGUF_ARRAY,
    DFL_GGUF_U64,
    DFL_GGUF_I64,
    DFL_GGUF_F64
} dfl_gguf_vtype;

/* One metadata value: a view into the file. Scalars and strings by value type; an
 * array holds n elements of elem_type at data (strings: each a u64 length + bytes). */
typedef struct dfl_gguf_kv {
    const char *key; /* NUL-terminated copy, owned by the file */
    dfl_gguf_vtype type;
    dfl_gguf_vtype elem_type; /* arrays only */
    uint64_t n;               /* arrays: element count; strings: byte length */
    const void *data;         /* the value's bytes in the mapping (unaligned) */
    size_t nbytes;            /* bytes of the value (arrays: of all elements) */
} dfl_gguf_kv;

/* One tensor: ne as the file gives it (ne[0] fastest), data a view into the mapping. */
typedef struct dfl_gguf_tensor {
    const char *name; /* NUL-terminated copy, owned by the file */
    uint32_t type;    /* ggml type (model/gguf_quant.h) */
    int ndim;
    int64_t ne[DFL_GGUF_MAX_DIMS]; /* unused dims are 1 */
    const void *data;
    size_t nbytes;
} dfl_gguf_tensor;

typedef struct dfl_gguf dfl_gguf;

/* Open PATH. A name NAME-0000k-of-0000N.gguf opens all N splits (NAME-00001-of-... to
 * NAME-0000N-of-...; any k), each validated, as one set: metadata from the first
 * split, tensors from all (a name in two splits is DFL_ERR_FORMAT; split.count, when
 * present, must equal N). Caller owns *out (dfl_gguf_close). DFL_ERR_IO (cannot open,
 * not a regular file, a split missing), DFL_ERR_FORMAT, DFL_ERR_NOMEM. */
dfl_status dfl_gguf_open(const char *path, dfl_gguf **out, dfl_error *err);

/* Parse and validate a GGUF image already in memory (fuzzer, tests). buf must outlive
 * the result; `label` names it in errors. */
dfl_status dfl_gguf_open_memory(const void *buf, size_t len, const char *label, dfl_gguf **out, dfl_error *err);

/* Unmap and free; accepts NULL. */
void dfl_gguf_close(dfl_gguf *g);

/* The version (2 or 3) of the first split. */
uint32_t dfl_gguf_version(const dfl_gguf *g);

size_t dfl_gguf_kv_count(const dfl_gguf *g);
/* i-th key in file order, or NULL when i is out of range. */
const dfl_gguf_kv *dfl_gguf_kv_at(const dfl_gguf *g, size_t i);
/* Key by name, or NULL. */
const dfl_gguf_kv *dfl_gguf_find_kv(const dfl_gguf *g, const char *key);

/* Typed reads of a scalar key. Each returns 1 and stores the value when the key exists
 * with a fitting type (any integer type in range for _int, f32/f64 or an integer for
 * _num, a string for _str), 0 when it is absent, −1 when it has another type. _str
 * gives a view (not NUL-terminated) and its length. */
int dfl_gguf_get_int(const dfl_gguf *g, const char *key, int64_t *out);
int dfl_gguf_get_num(const dfl_gguf *g, const char *key, double *out);
int dfl_gguf_get_bool(const dfl_gguf *g, const char *key, int *out);
int dfl_gguf_get_str(const dfl_gguf *g, const char *key, const char **s, size_t *len);

/* Element i of an array value as an integer, a number or a string view; 0 when the
 * element type does not fit (or i >= n). Strings are walked from the start: O(i). */
int dfl_gguf_arr_int(const dfl_gguf_kv *kv, uint64_t i, int64_t *out);
int dfl_gguf_arr_num(const dfl_gguf_kv *kv, uint64_t i, double *out);

size_t dfl_gguf_tensor_count(const dfl_gguf *g);
/* i-th tensor (splits in order, file order within), or NULL. */
const dfl_gguf_tensor *dfl_gguf_tensor_at(const dfl_gguf *g, size_t i);
/* Tensor by name, or NULL. The view lives as long as g. */
const dfl_gguf_tensor *dfl_gguf_find_tensor(const dfl_gguf *g, const char *name);
/* The path of the split holding the tensor (for messages). */
const char *dfl_gguf_file_of(const dfl_gguf *g, const dfl_gguf_tensor *t);

/* internal: "u32", "string", ... for a value type; "?" for an unknown one. */
const char *dfl__gguf_vtype_name(uint32_t t);

#endif
