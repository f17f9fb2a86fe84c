/* safetensors.c — validated, memory-mapped reading and atomic writing of safetensors
 * files, and a model directory's (possibly sharded)
 * tensor set. The layout and the validation rules are in safetensors.h. */
#include "model/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/half.h"
#include "base/strbuf.h"

/* The reference implementation refuses headers above 100 MB; so do we, which also
 * bounds the memory cJSON may take for a hostile header. */
#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)
/* cJSON numbers are doubles: integers are exact only below 2^53. */
#define ST_MAX_JSON_INT 9007199254740992.0
/* Names this long in a message would push out the part that says what is wrong. */
#define NAME_FMT "%.200s"

/* ------------------------------------------------------------------------------------
 * dtypes
 * ---------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {
    [DFL_DTYPE_F32] = {"F32", 4},   [DFL_DTYPE_F16] = {"F16", 2}, [DFL_DTYPE_BF16] = {"BF16", 2},
    [DFL_DTYPE_F64] = {"F64", 8},   [DFL_DTYPE_I64] = {"I64", 8}, [DFL_DTYPE_I32] = {"I32", 4},
    [DFL_DTYPE_I16] = {"I16", 2},   [DFL_DTYPE_I8] = {"I8", 1},   [DFL_DTYPE_U8] = {"U8", 1},
    [DFL_DTYPE_BOOL] = {"BOOL", 1},
};
#define N_DTYPES (sizeof dtype_info / sizeof dtype_info[0])

static int dtype_valid(dfl_dtype t)
{
    return (unsigned)t < N_DTYPES;
}

const char *dfl_dtype_name(dfl_dtype t)
{
    return dtype_valid(t) ? dtype_info[t].name : NULL;
}

size_t dfl_dtype_size(dfl_dtype t)
{
    return dtype_valid(t) ? dtype_info[t].size : 0;
}

static int dtype_parse(const char *s, dfl_dtype *out)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (dfl_dtype)i;
            return 1;
        }
    return 0;
}

size_t dfl_tensor_numel(const dfl_tensor *t)
{
    /* Tensors from a file were overflow-checked when opened; a hand-built tensor
     * whose product overflows saturates so it can never match a real byte count. */
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || !dfl__mul_ok(n, (size_t)t->shape[i], &n)) return SIZE_MAX;
    }
    return n;
}

/* numel * dtype size with every product overflow-checked; 0 on overflow or a bad
 * dim, else 1. */
static int shape_nbytes(dfl_dtype dt, int ndim, const int64_t *shape, size_t *out)
{
    size_t n = dfl_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (uint64_t)shape[i] > SIZE_MAX) return 0;
        if (!dfl__mul_ok(n, (size_t)shape[i], &n)) return 0;
    }
    *out = n;
    return 1;
}

/* ------------------------------------------------------------------------------------
 * tensor conversion
 * ---------------------------------------------------------------------------------- */

dfl_status dfl_tensor_to_f32(const dfl_tensor *t, float *dst, dfl_error *err)
{
    if (!t || (!dst && t->nbytes)) return dfl__fail(err, DFL_ERR_USAGE, "dfl_tensor_to_f32: NULL argument");
    const char *nm = t->name ? t->name : "?";
    if (t->dtype != DFL_DTYPE_F32 && t->dtype != DFL_DTYPE_F16 && t->dtype != DFL_DTYPE_BF16) {
        const char *dn = dfl_dtype_name(t->dtype);
        return dfl__fail(err, DFL_ERR_TENSOR, "tensor '" NAME_FMT "': dtype %s cannot be converted to f32", nm,
                         dn ? dn : "(invalid)");
    }
    /* Bytes are little-endian and possibly unaligned (the data buffer starts right
     * after a header of any length), so assemble each element from bytes. */
    const unsigned char *p = t->data; /* [n * size] */
    size_t size = dfl_dtype_size(t->dtype);
    size_t n = t->nbytes / size;
    if (t->dtype == DFL_DTYPE_F32) {
        for (size_t i = 0; i < n; i++, p += 4) {
            uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            memcpy(&dst[i], &u, sizeof u);
        }
    } else if (t->dtype == DFL_DTYPE_F16) {
        for (size_t i = 0; i < n; i++, p += 2)
            dst[i] = dfl_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    } else {
        for (size_t i = 0; i < n; i++, p += 2)
            dst[i] = dfl_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
    }
    return DFL_OK;
}

/* ------------------------------------------------------------------------------------
 * one file: parsing and validation
 * ---------------------------------------------------------------------------------- */

struct dfl_st_file {
    char *label; /* the path or the caller's label, for messages */
    void *map;   /* mmap'ed image (NULL for dfl_st_open_memory) */
    size_t map_len;
    dfl_tensor *tensors; /* [n], header order */
    size_t *by_name;     /* [n], indices into tensors sorted by name */
    char *names;         /* every name, NUL-terminated, back to back */
    size_t n;
};

/* qsort has no context argument in C11; the tensors are reached through a small
 * struct that holds both the index and the array. */
typedef struct {
    size_t idx;
    const dfl_tensor *t;
} name_ref;

static int cmp_name_ref(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    return strcmp(x->t[x->idx].name, y->t[y->idx].name);
}

typedef struct {
    uint64_t begin, end;
    size_t idx;
} range_ref;

static int cmp_range(const void *a, const void *b)
{
    const range_ref *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* A JSON number that is an exact integer in [0, 2^53): cJSON keeps only a double,
 * so 1.5, -1, 1e300, NaN and anything that may have been rounded are refused. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d < ST_MAX_JSON_INT)) return 0;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return 0;
    *out = u;
    return 1;
}

static int is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void file_free(dfl_st_file *f)
{
    if (!f) return;
    if (f->map) munmap(f->map, f->map_len);
    free(f->label);
    free(f->tensors);
    free(f->by_name);
    free(f->names);
    free(f);
}

/* Validate one header entry and fill t (name is set by the caller). The data
 * buffer is data[0, data_len). */
static dfl_status parse_entry(const cJSON *e, const char *label, const unsigned char *data, size_t data_len,
                              dfl_tensor *t, dfl_error *err)
{
    const char *nm = e->string;
#define BAD(...) dfl__fail(err, DFL_ERR_FORMAT, "%s: tensor '" NAME_FMT "': " __VA_ARGS__)
    if (!cJSON_IsObject(e)) return BAD("entry is not an object", label, nm);

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!dt) return BAD("no \"dtype\"", label, nm);
    if (!cJSON_IsString(dt)) return BAD("\"dtype\" is not a string", label, nm);
    if (!dtype_parse(dt->valuestring, &t->dtype)) return BAD("unsupported dtype \"%.32s\"", label, nm, dt->valuestring);

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!sh) return BAD("no \"shape\"", label, nm);
    if (!cJSON_IsArray(sh)) return BAD("\"shape\" is not an array", label, nm);
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > DFL_ST_MAX_DIMS) return BAD("shape has %d dims (at most %d)", label, nm, ndim, DFL_ST_MAX_DIMS);
    t->ndim = ndim;
    int k = 0;
    for (const cJSON *d = sh->child; d; d = d->next, k++) {
        uint64_t u;
        if (!json_uint(d, &u)) return BAD("shape[%d] is not a non-negative integer below 2^53", label, nm, k);
        t->shape[k] = (int64_t)u;
    }
    for (; k < DFL_ST_MAX_DIMS; k++)
        t->shape[k] = 0;

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!off) return BAD("no \"data_offsets\"", label, nm);
    uint64_t be[2];
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &be[0]) ||
        !json_uint(off->child->next, &be[1]))
        return BAD("\"data_offsets\" is not a pair of non-negative integers below 2^53", label, nm);
    if (be[0] > be[1])
        return BAD("data_offsets [%llu, %llu] reversed", label, nm, (unsigned long long)be[0],
                   (unsigned long long)be[1]);
    if (be[1] > data_len)
        return BAD("data_offsets [%llu, %llu] past the end of the data (%zu bytes)", label, nm,
                   (unsigned long long)be[0], (unsigned long long)be[1], data_len);

    size_t want;
    if (!shape_nbytes(t->dtype, t->ndim, t->shape, &want))
        return BAD("shape is too large (its byte size overflows)", label, nm);
    size_t have = (size_t)(be[1] - be[0]);
    if (want != have)
        return BAD("data_offsets [%llu, %llu] hold %zu bytes but the shape and dtype need %zu", label, nm,
                   (unsigned long long)be[0], (unsigned long long)be[1], have, want);
    t->data = data + be[0];
    t->nbytes = have;
    return DFL_OK;
#undef BAD
}

/* The 8-byte little-endian header length and the header bytes: checked against the
 * file's size and the limit, refused if they hold a NUL, and copied NUL-terminated into
 * *hdr (caller frees) for cJSON, which then never reads past it. *data[*data_len] is
 * what follows the header. */
static dfl_status read_header(const unsigned char *buf, size_t len, const char *label, char **hdr, size_t *hdr_len,
                              const unsigned char **data, size_t *data_len, dfl_error *err)
{
    if (len < 8)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %zu bytes, too short for the 8-byte header length", label, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    if (hlen > len - 8)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: header length %llu past the end of the file (%zu bytes)", label,
                         (unsigned long long)hlen, len);
    if (hlen > ST_MAX_HEADER)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: header length %llu above the %llu-byte limit", label,
                         (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    size_t n = (size_t)hlen;
    /* a NUL inside the header would silently cut names short */
    const void *nul = memchr(buf + 8, 0, n);
    if (nul)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: header has a NUL byte at offset %zu", label,
                         (size_t)((const unsigned char *)nul - buf));
    if (!(*hdr = malloc(n + 1))) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory for the header", label);
    memcpy(*hdr, buf + 8, n);
    (*hdr)[n] = '\0';
    *hdr_len = n;
    *data = buf + 8 + n;
    *data_len = len - 8 - n;
    return DFL_OK;
}

/* The header text hdr[n] as one JSON object, padded only with whitespace. Caller frees
 * *root (cJSON_Delete). Offsets in messages are file offsets. */
static dfl_status parse_header_json(const char *hdr, size_t n, const char *label, cJSON **root, dfl_error *err)
{
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(hdr, n, &end, 0);
    if (!*root) {
        size_t pos = end && end >= hdr && end <= hdr + n ? (size_t)(end - hdr) : 0;
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: header is not valid JSON (near offset %zu)", label, 8 + pos);
    }
    for (const char *p = end; p < hdr + n; p++)
        if (!is_json_space(*p))
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: trailing bytes after the header JSON at offset %zu", label,
                             8 + (size_t)(p - hdr));
    if (!cJSON_IsObject(*root)) return dfl__fail(err, DFL_ERR_FORMAT, "%s: header is not a JSON object", label);
    return DFL_OK;
}

/* Count the tensor entries of the header and the bytes their names take; check that
 * __metadata__ maps strings to strings. */
static dfl_status count_entries(const cJSON *root, const char *label, size_t *count, size_t *names_len, dfl_error *err)
{
    *count = *names_len = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) return dfl__fail(err, DFL_ERR_FORMAT, "%s: __metadata__ is not an object", label);
            for (const cJSON *m = e->child; m; m = m->next)
                if (!cJSON_IsString(m))
                    return dfl__fail(err, DFL_ERR_FORMAT, "%s: __metadata__ value '" NAME_FMT "' is not a string",
                                     label, m->string);
            continue;
        }
        (*count)++;
        *names_len += strlen(e->string) + 1; /* bounded by the header length: no overflow */
    }
    return DFL_OK;
}

/* Duplicate names would make lookups ambiguous; sorting brings them together. Fills
 * f->by_name (nr[count] is sorted in place). */
static dfl_status check_names(dfl_st_file *f, name_ref *nr, size_t count, const char *label, dfl_error *err)
{
    qsort(nr, count, sizeof *nr, cmp_name_ref);
    for (size_t k = 0; k < count; k++)
        f->by_name[k] = nr[k].idx;
    for (size_t k = 1; k < count; k++)
        if (strcmp(f->tensors[nr[k].idx].name, f->tensors[nr[k - 1].idx].name) == 0)
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: tensor '" NAME_FMT "' appears twice", label,
                             f->tensors[nr[k].idx].name);
    return DFL_OK;
}

/* Overlapping ranges would alias two tensors. Empty tensors own no bytes and may sit
 * anywhere in [0, data_len]. rr[count] is sorted in place. */
static dfl_status check_ranges(const dfl_st_file *f, range_ref *rr, size_t count, const char *label, dfl_error *err)
{
    qsort(rr, count, sizeof *rr, cmp_range);
    const range_ref *prev = NULL;
    for (size_t k = 0; k < count; k++) {
        if (rr[k].begin == rr[k].end) continue;
        if (prev && rr[k].begin < prev->end)
            return dfl__fail(
                err, DFL_ERR_FORMAT,
                "%s: tensor '" NAME_FMT "': data_offsets [%llu, %llu] overlap tensor '" NAME_FMT "' [%llu, %llu]",
                label, f->tensors[rr[k].idx].name, (unsigned long long)rr[k].begin, (unsigned long long)rr[k].end,
                f->tensors[prev->idx].name, (unsigned long long)prev->begin, (unsigned long long)prev->end);
        prev = &rr[k];
    }
    return DFL_OK;
}

/* Parse the image buf[0, len): header length, header JSON, each entry (parse_entry),
 * then unique names and disjoint ranges. On success *out takes ownership of nothing
 * but itself (the caller attaches any mapping). */
static dfl_status parse_image(const unsigned char *buf, size_t len, const char *label, dfl_st_file **out,
                              dfl_error *err)
{
    char *hdr = NULL;
    size_t n = 0, data_len = 0, count = 0, names_len = 0;
    const unsigned char *data = NULL; /* [data_len] */
    dfl_status s = read_header(buf, len, label, &hdr, &n, &data, &data_len, err);
    if (s) return s;
    dfl_st_file *f = NULL;
    cJSON *root = NULL;
    name_ref *nr = NULL;
    range_ref *rr = NULL;
    if ((s = parse_header_json(hdr, n, label, &root, err))) goto done;
    if ((s = count_entries(root, label, &count, &names_len, err))) goto done;

    f = calloc(1, sizeof *f);
    if (f) {
        f->label = strdup(label);
        f->tensors = dfl__calloc_array(count, sizeof *f->tensors);
        f->by_name = dfl__alloc_array(count, sizeof *f->by_name);
        f->names = malloc(names_len ? names_len : 1);
    }
    nr = dfl__alloc_array(count, sizeof *nr);
    rr = dfl__alloc_array(count, sizeof *rr);
    if (!f || !f->label || !f->tensors || !f->by_name || !f->names || !nr || !rr) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", label);
        goto done;
    }

    size_t i = 0, npos = 0;
    int seen_meta = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (seen_meta++) {
                s = dfl__fail(err, DFL_ERR_FORMAT, "%s: __metadata__ appears twice", label);
                break;
            }
            continue;
        }
        dfl_tensor *t = &f->tensors[i];
        s = parse_entry(e, label, data, data_len, t, err);
        if (s != DFL_OK) break;
        size_t l = strlen(e->string) + 1;
        memcpy(f->names + npos, e->string, l);
        t->name = f->names + npos;
        npos += l;
        rr[i].begin = (uint64_t)((const unsigned char *)t->data - data);
        rr[i].end = rr[i].begin + t->nbytes;
        rr[i].idx = i;
        nr[i].idx = i;
        nr[i].t = f->tensors;
        i++;
    }
    f->n = count;
    if (s == DFL_OK) s = check_names(f, nr, count, label, err);
    if (s == DFL_OK) s = check_ranges(f, rr, count, label, err);

done:
    free(nr);
    free(rr);
    cJSON_Delete(root);
    free(hdr);
    if (s != DFL_OK) {
        file_free(f);
        return s;
    }
    *out = f;
    return DFL_OK;
}

static dfl_status too_short(dfl_error *err, const char *label, size_t len)
{
    return dfl__fail(err, DFL_ERR_FORMAT, "%s: %zu bytes, too short for the 8-byte header length", label, len);
}

dfl_status dfl_st_open_memory(const void *buf, size_t len, const char *label, dfl_st_file **out, dfl_error *err)
{
    if (!out || (!buf && len)) return dfl__fail(err, DFL_ERR_USAGE, "dfl_st_open_memory: NULL argument");
    *out = NULL;
    if (!label) label = "(memory)";
    if (len < 8) return too_short(err, label, len);
    return parse_image(buf, len, label, out, err);
}

dfl_status dfl_st_open(const char *path, dfl_st_file **out, dfl_error *err)
{
    if (!path || !out) return dfl__fail(err, DFL_ERR_USAGE, "dfl_st_open: NULL argument");
    *out = NULL;
    int fd;
    struct stat st;
    dfl_status s0 = dfl__open_regular(path, "a safetensors file", &fd, &st, err);
    if (s0) return s0;
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: too large to map", path);
    }
    size_t len = (size_t)st.st_size;
    /* mmap refuses length 0, and nothing this short can be valid anyway. */
    if (len < 8) {
        close(fd);
        return too_short(err, path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return dfl__fail(err, DFL_ERR_IO, "%s: cannot map: %s", path, strerror(e));
    dfl_st_file *f = NULL;
    dfl_status s = parse_image(map, len, path, &f, err);
    if (s != DFL_OK) {
        munmap(map, len);
        return s;
    }
    f->map = map;
    f->map_len = len;
    *out = f;
    return DFL_OK;
}

void dfl_st_close(dfl_st_file *f)
{
    file_free(f);
}

size_t dfl_st_count(const dfl_st_file *f)
{
    return f ? f->n : 0;
}

const dfl_tensor *dfl_st_at(const dfl_st_file *f, size_t i)
{
    return f && i < f->n ? &f->tensors[i] : NULL;
}

const dfl_tensor *dfl_st_find(const dfl_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    size_t lo = 0, hi = f->n; /* binary search over by_name: [lo, hi) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const dfl_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------
 * writing
 * ---------------------------------------------------------------------------------- */

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Check that every tensor describes itself consistently, before anything is created. */
static dfl_status check_tensors(const char *path, const dfl_tensor *ts, size_t n, dfl_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const dfl_tensor *t = &ts[i];
        if (!t->name) return dfl__fail(err, DFL_ERR_USAGE, "%s: tensor %zu has no name", path, i);
        if (strcmp(t->name, "__metadata__") == 0)
            return dfl__fail(err, DFL_ERR_USAGE, "%s: \"__metadata__\" is reserved, not a tensor name", path);
        if (!dtype_valid(t->dtype))
            return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '" NAME_FMT "': invalid dtype %d", path, t->name,
                             (int)t->dtype);
        if (t->ndim < 0 || t->ndim > DFL_ST_MAX_DIMS)
            return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '" NAME_FMT "': %d dims (0 to %d allowed)", path, t->name,
                             t->ndim, DFL_ST_MAX_DIMS);
        for (int k = 0; k < t->ndim; k++)
            if (t->shape[k] < 0 || (double)t->shape[k] >= ST_MAX_JSON_INT)
                return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '" NAME_FMT "': shape[%d] = %lld out of range", path,
                                 t->name, k, (long long)t->shape[k]);
        size_t want;
        if (!shape_nbytes(t->dtype, t->ndim, t->shape, &want))
            return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '" NAME_FMT "': byte size overflows", path, t->name);
        if (want != t->nbytes)
            return dfl__fail(err, DFL_ERR_TENSOR, "%s: tensor '" NAME_FMT "': nbytes %zu, shape and dtype need %zu",
                             path, t->name, t->nbytes, want);
        if (t->nbytes && !t->data)
            return dfl__fail(err, DFL_ERR_USAGE, "%s: tensor '" NAME_FMT "': NULL data", path, t->name);
    }
    if (n < 2) return DFL_OK;
    const char **names = dfl__alloc_array(n, sizeof *names); /* [n] */
    if (!names) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++)
        names[i] = ts[i].name;
    qsort(names, n, sizeof *names, cmp_str_ptr);
    dfl_status s = DFL_OK;
    for (size_t i = 1; i < n && s == DFL_OK; i++)
        if (strcmp(names[i], names[i - 1]) == 0)
            s = dfl__fail(err, DFL_ERR_USAGE, "%s: tensor '" NAME_FMT "' given twice", path, names[i]);
    free(names);
    return s;
}

/* A JSON integer in plain decimal: readers that parse offsets as integers (serde in
 * the Rust reference) refuse the exponent forms a double could print as (1e+15). */
static cJSON *json_u64(uint64_t v)
{
    char tmp[24];
    snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(tmp);
}

/* The header JSON (built with cJSON, which escapes the names), padded with spaces so
 * that the data buffer starts at a multiple of 8 bytes from the file start. */
static dfl_status build_header(const char *path, const dfl_tensor *ts, size_t n, dfl_strbuf *b, dfl_error *err)
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    int ok = root && meta && cJSON_AddItemToObject(root, "__metadata__", meta);
    if (!ok) cJSON_Delete(meta);
    /* "format": "pt" is what save_pretrained writes; some transformers versions
     * refuse a checkpoint without it. */
    ok = ok && cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t off = 0;
    for (size_t i = 0; ok && i < n; i++) {
        const dfl_tensor *t = &ts[i];
        if ((double)t->nbytes >= ST_MAX_JSON_INT - (double)off) {
            cJSON_Delete(root);
            return dfl__fail(err, DFL_ERR_RANGE, "%s: data larger than 2^53 bytes", path);
        }
        cJSON *o = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = o && cJSON_AddStringToObject(o, "dtype", dfl_dtype_name(t->dtype))
                           ? cJSON_AddArrayToObject(o, "shape")
                           : NULL;
        ok = shape != NULL;
        for (int k = 0; ok && k < t->ndim; k++)
            ok = cJSON_AddItemToArray(shape, json_u64((uint64_t)t->shape[k]));
        cJSON *offs = ok ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        ok = offs && cJSON_AddItemToArray(offs, json_u64(off));
        off += t->nbytes;
        ok = ok && cJSON_AddItemToArray(offs, json_u64(off));
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (text) dfl_strbuf_puts(b, text);
    cJSON_free(text);
    while (text && !b->oom && (8 + b->len) % 8 != 0)
        dfl_strbuf_add(b, " ", 1);
    if (!text || b->oom) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory for the header", path);
    return DFL_OK;
}

dfl_status dfl_st_write(const char *path, const dfl_tensor *tensors, size_t n, int overwrite, dfl_error *err)
{
    if (!path || (!tensors && n)) return dfl__fail(err, DFL_ERR_USAGE, "dfl_st_write: NULL argument");
    dfl_status s = check_tensors(path, tensors, n, err);
    if (s != DFL_OK) return s;
    s = dfl__check_overwrite(path, overwrite, err);
    if (s != DFL_OK) return s;

    dfl_strbuf hdr = {0};
    s = build_header(path, tensors, n, &hdr, err);
    if (s != DFL_OK) {
        free(hdr.p);
        return s;
    }
    dfl_atomic a;
    s = dfl__atomic_open(&a, path, overwrite, err);
    if (s != DFL_OK) {
        free(hdr.p);
        return s;
    }
    unsigned char len8[8]; /* u64 little-endian header length */
    uint64_t hl = hdr.len;
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(hl >> (8 * i));
    int ok = fwrite(len8, 1, 8, a.f) == 8 && fwrite(hdr.p, 1, hdr.len, a.f) == hdr.len;
    for (size_t i = 0; ok && i < n; i++)
        if (tensors[i].nbytes) ok = fwrite(tensors[i].data, 1, tensors[i].nbytes, a.f) == tensors[i].nbytes;
    if (!ok) s = dfl__fail(err, DFL_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    free(hdr.p);
    return dfl__atomic_close(&a, s, err);
}

/* ------------------------------------------------------------------------------------
 * a model directory's tensor set
 * ---------------------------------------------------------------------------------- */

typedef struct {
    const dfl_tensor *t;
    size_t file; /* index into files */
} set_ent;

struct dfl_st_set {
    dfl_st_file **files; /* [nfiles] */
    size_t nfiles;
    set_ent *all;    /* [n], files in order, header order within */
    size_t *by_name; /* [n], indices into all sorted by name */
    size_t n;
};

void dfl_st_set_close(dfl_st_set *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->nfiles; i++)
        dfl_st_close(s->files[i]);
    free(s->files);
    free(s->all);
    free(s->by_name);
    free(s);
}

/* "dir/name" in a new buffer (NULL when out of memory). */
static char *path_join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    int slash = dl > 0 && dir[dl - 1] != '/';
    if (dl > SIZE_MAX - nl - 2) return NULL;
    char *p = malloc(dl + nl + 2);
    if (!p) return NULL;
    memcpy(p, dir, dl);
    if (slash) p[dl] = '/';
    memcpy(p + dl + (size_t)slash, name, nl + 1);
    return p;
}

/* 1 when p exists, 0 when it does not (ENOENT, ENOTDIR), else -errno (a symlink loop,
 * no permission): that is reported as such, not as a missing file. */
static int path_exists(const char *p)
{
    struct stat st;
    if (stat(p, &st) == 0) return 1;
    return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
}

typedef struct {
    const char *name;
    size_t idx;
} named_idx;

static int cmp_named_idx(const void *a, const void *b)
{
    return strcmp(((const named_idx *)a)->name, ((const named_idx *)b)->name);
}

/* Gather the tensors of s->files into s->all and the sorted s->by_name; a name in
 * two files is DFL_ERR_FORMAT (which one would be meant?). */
static dfl_status set_index(dfl_st_set *s, const char *what, dfl_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        n += dfl_st_count(s->files[i]); /* each bounded by its file size */
    s->all = dfl__alloc_array(n, sizeof *s->all);
    s->by_name = dfl__alloc_array(n, sizeof *s->by_name);
    named_idx *ni = dfl__alloc_array(n, sizeof *ni); /* [n] */
    if (!s->all || !s->by_name || !ni) {
        free(ni);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", what);
    }
    size_t k = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        for (size_t j = 0; j < dfl_st_count(s->files[i]); j++, k++) {
            s->all[k].t = dfl_st_at(s->files[i], j);
            s->all[k].file = i;
            ni[k].name = s->all[k].t->name;
            ni[k].idx = k;
        }
    s->n = n;
    qsort(ni, n, sizeof *ni, cmp_named_idx);
    dfl_status st = DFL_OK;
    for (size_t i = 0; i < n; i++) {
        s->by_name[i] = ni[i].idx;
        if (i > 0 && st == DFL_OK && strcmp(ni[i].name, ni[i - 1].name) == 0)
            st = dfl__fail(err, DFL_ERR_FORMAT, "%s: tensor '" NAME_FMT "' is in both %s and %s", what, ni[i].name,
                           s->files[s->all[ni[i - 1].idx].file]->label, s->files[s->all[ni[i].idx].file]->label);
    }
    free(ni);
    return st;
}

/* A shard name must stay inside the model folder. */
static int shard_name_ok(const char *nm)
{
    return nm[0] != '\0' && strchr(nm, '/') == NULL && strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0;
}

/* Open the shards named by the index at ipath (in dir) into s. */
static dfl_status set_open_index(dfl_st_set *s, const char *dir, const char *ipath, dfl_error *err)
{
    char *text = NULL;
    size_t len = 0;
    dfl_status st = dfl__read_file(ipath, &text, &len, err);
    if (st != DFL_OK) return st;
    const char **shards = NULL; /* [nshards] distinct names, order of first use; owned by root */
    size_t *ent_shard = NULL;   /* [nent] shard index of each weight_map entry */
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: not valid JSON", ipath);
        goto done;
    }
    /* Only an object may be searched by key: cJSON would compare an array's
     * nameless children against the key. */
    const cJSON *wm = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: no \"weight_map\" object", ipath);
        goto done;
    }
    size_t nent = 0;
    for (const cJSON *e = wm->child; e; e = e->next)
        nent++;
    if (nent == 0) {
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: \"weight_map\" is empty", ipath);
        goto done;
    }
    shards = dfl__alloc_array(nent, sizeof *shards);
    ent_shard = dfl__alloc_array(nent, sizeof *ent_shard);
    if (!shards || !ent_shard) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", ipath);
        goto done;
    }
    /* Distinct shard names: a few per model, so a linear scan per entry is enough. */
    size_t nshards = 0, k = 0;
    for (const cJSON *e = wm->child; e; e = e->next, k++) {
        if (!cJSON_IsString(e)) {
            st = dfl__fail(err, DFL_ERR_FORMAT, "%s: tensor '" NAME_FMT "': shard is not a string", ipath, e->string);
            goto done;
        }
        if (!shard_name_ok(e->valuestring)) {
            st = dfl__fail(err, DFL_ERR_FORMAT,
                           "%s: tensor '" NAME_FMT "': shard name '" NAME_FMT
                           "' is not a plain file name in the model folder",
                           ipath, e->string, e->valuestring);
            goto done;
        }
        size_t j = 0;
        while (j < nshards && strcmp(shards[j], e->valuestring) != 0)
            j++;
        if (j == nshards) shards[nshards++] = e->valuestring;
        ent_shard[k] = j;
    }

    s->files = dfl__calloc_array(nshards, sizeof *s->files);
    if (!s->files) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", ipath);
        goto done;
    }
    for (size_t j = 0; j < nshards; j++) {
        char *p = path_join(dir, shards[j]);
        if (!p) {
            st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", ipath);
            goto done;
        }
        st = dfl_st_open(p, &s->files[j], err);
        free(p);
        if (st != DFL_OK) {
            if (err) dfl__context(err, "%s: shard '" NAME_FMT "'", ipath, shards[j]);
            goto done;
        }
        s->nfiles++;
    }
    /* Every name the index promises must be where it says. */
    k = 0;
    for (const cJSON *e = wm->child; e; e = e->next, k++)
        if (!dfl_st_find(s->files[ent_shard[k]], e->string)) {
            st = dfl__fail(err, DFL_ERR_FORMAT, "%s: tensor '" NAME_FMT "' is not in its shard %s", ipath, e->string,
                           s->files[ent_shard[k]]->label);
            goto done;
        }
    st = set_index(s, ipath, err);
done:
    cJSON_Delete(root);
    free(text);
    free(shards);
    free(ent_shard);
    return st;
}

dfl_status dfl_st_set_open(const char *dir, dfl_st_set **out, dfl_error *err)
{
    if (!dir || !out) return dfl__fail(err, DFL_ERR_USAGE, "dfl_st_set_open: NULL argument");
    *out = NULL;
    dfl_st_set *s = calloc(1, sizeof *s);
    char *single = path_join(dir, "model.safetensors");
    char *index = path_join(dir, "model.safetensors.index.json");
    dfl_status st = DFL_OK;
    int e1 = single ? path_exists(single) : 0, e2 = index ? path_exists(index) : 0;
    if (!s || !single || !index) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", dir);
    } else if (e1 < 0 || (e1 == 0 && e2 < 0)) {
        st = dfl__fail(err, DFL_ERR_IO, "%s: %s", e1 < 0 ? single : index, strerror(e1 < 0 ? -e1 : -e2));
    } else if (e1) {
        s->files = calloc(1, sizeof *s->files);
        if (!s->files) st = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", dir);
        if (st == DFL_OK) st = dfl_st_open(single, &s->files[0], err);
        if (st == DFL_OK) {
            s->nfiles = 1;
            st = set_index(s, single, err);
        }
    } else if (e2) {
        st = set_open_index(s, dir, index, err);
    } else {
        st = dfl__fail(err, DFL_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    free(single);
    free(index);
    if (st != DFL_OK) {
        dfl_st_set_close(s);
        return st;
    }
    *out = s;
    return DFL_OK;
}

static const set_ent *set_lookup(const dfl_st_set *s, const char *name)
{
    if (!s || !name) return NULL;
    size_t lo = 0, hi = s->n; /* binary search over by_name: [lo, hi) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const set_ent *e = &s->all[s->by_name[mid]];
        int c = strcmp(name, e->t->name);
        if (c == 0) return e;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const dfl_tensor *dfl_st_set_find(const dfl_st_set *s, const char *name)
{
    const set_ent *e = set_lookup(s, name);
    return e ? e->t : NULL;
}

size_t dfl_st_set_count(const dfl_st_set *s)
{
    return s ? s->n : 0;
}

const dfl_tensor *dfl_st_set_at(const dfl_st_set *s, size_t i)
{
    return s && i < s->n ? s->all[i].t : NULL;
}

const char *dfl_st_set_file_of(const dfl_st_set *s, const char *name)
{
    const set_ent *e = set_lookup(s, name);
    return e ? s->files[e->file]->label : NULL;
}
