/* gguf.c — the GGUF reader: a bounds-checked cursor over the mapped image, the
 * header, metadata and tensor table validated before any view is handed out. */
#include "model/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf_quant.h"

#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_NAME      64   /* ggml's GGML_MAX_NAME: tensor names are shorter */
#define GGUF_MAX_SPLITS    9999 /* the %05d in split names leaves room for more; none are that large */

typedef struct gguf_file {
    char *path; /* owned */
    void *map;  /* mmap'ed image (NULL for dfl_gguf_open_memory) */
    size_t map_len;
    uint32_t version;
    size_t align;
    dfl_gguf_kv *kv; /* [n_kv] */
    size_t n_kv;
    dfl_gguf_tensor *t; /* [n_t] */
    size_t n_t;
} gguf_file;

struct dfl_gguf {
    gguf_file *files; /* [n_files] */
    size_t n_files;
    const dfl_gguf_tensor **by_name; /* [n_tensors] sorted by name */
    const dfl_gguf_tensor **order;   /* [n_tensors] splits in order, file order within */
    size_t *file_of;                 /* [n_tensors] split index, parallel to order */
    size_t n_tensors;
};

/* ------------------------------------------------------------------ cursor */

typedef struct rd {
    const uint8_t *p;
    size_t len, off;
    const char *label;
    dfl_error *err;
} rd;

static dfl_status truncated(rd *r, const char *what)
{
    return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: GGUF truncated reading %s at byte %zu (file is %zu bytes)", r->label,
                     what, r->off, r->len);
}

static dfl_status need(rd *r, size_t n, const char *what)
{
    return r->len - r->off < n ? truncated(r, what) : DFL_OK;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static dfl_status rd_u32(rd *r, uint32_t *v, const char *what)
{
    dfl_status s = need(r, 4, what);
    if (s) return s;
    *v = (uint32_t)le(r->p + r->off, 4);
    r->off += 4;
    return DFL_OK;
}

static dfl_status rd_u64(rd *r, uint64_t *v, const char *what)
{
    dfl_status s = need(r, 8, what);
    if (s) return s;
    *v = le(r->p + r->off, 8);
    r->off += 8;
    return DFL_OK;
}

/* A string: u64 length, then the bytes (a view). */
static dfl_status rd_str(rd *r, const uint8_t **sp, uint64_t *n, const char *what)
{
    dfl_status s = rd_u64(r, n, what);
    if (s) return s;
    if (*n > r->len - r->off) return truncated(r, what);
    *sp = r->p + r->off;
    r->off += (size_t)*n;
    return DFL_OK;
}

/* A NUL-terminated copy of a key or name; an embedded NUL is refused (C strings). */
static dfl_status copy_name(rd *r, const uint8_t *sp, uint64_t n, const char *what, char **out)
{
    if (memchr(sp, 0, (size_t)n))
        return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: %s at byte %zu holds a NUL byte", r->label, what, r->off);
    if (!(*out = malloc((size_t)n + 1))) return dfl__fail(r->err, DFL_ERR_NOMEM, "%s: out of memory", r->label);
    memcpy(*out, sp, (size_t)n);
    (*out)[n] = 0;
    return DFL_OK;
}

/* ----------------------------------------------------------------- values */

static const uint8_t SCALAR_SIZE[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const VTYPE_NAME[13] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};

/* One value of type t at the cursor (an array element when in_array): checked and
 * skipped. Fills kv->data/nbytes/n (and elem_type for arrays) when kv is not NULL. */
static dfl_status rd_value(rd *r, uint32_t t, const char *key, int in_array, dfl_gguf_kv *kv)
{
    size_t start = r->off;
    dfl_status s;
    if (t > DFL_GGUF_F64)
        return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: key '%s' has unknown value type %u (byte %zu)", r->label, key, t,
                         r->off);
    if (t == DFL_GGUF_STRING) {
        const uint8_t *sp = NULL;
        uint64_t n;
        if ((s = rd_str(r, &sp, &n, "a string value"))) return s;
        if (kv) {
            kv->data = sp;
            kv->n = n;
            kv->nbytes = (size_t)n;
        }
        return DFL_OK;
    }
    if (t == DFL_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if ((s = rd_u32(r, &et, "an array's element type")) || (s = rd_u64(r, &n, "an array's length"))) return s;
        if (et == DFL_GGUF_ARRAY || in_array) /* ggml's gguf.cpp refuses them too */
            return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: key '%s' is an array of arrays (not supported)", r->label,
                             key);
        if (et > DFL_GGUF_F64)
            return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: key '%s' is an array of unknown type %u", r->label, key, et);
        size_t data_at = r->off;
        if (et != DFL_GGUF_STRING) {
            size_t es = SCALAR_SIZE[et];
            if (n > (r->len - r->off) / es) return truncated(r, "an array");
            if (et == DFL_GGUF_BOOL)
                for (uint64_t i = 0; i < n; i++)
                    if (r->p[r->off + i] > 1)
                        return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: key '%s': bool element %llu is %u (0 or 1)",
                                         r->label, key, (unsigned long long)i, r->p[r->off + i]);
            r->off += (size_t)n * es;
        } else {
            /* every string takes at least 8 bytes: the loop is bounded by the file */
            if (n > (r->len - r->off) / 8) return truncated(r, "an array");
            for (uint64_t i = 0; i < n; i++)
                if ((s = rd_value(r, et, key, 1, NULL))) return s;
        }
        if (kv) {
            kv->elem_type = (dfl_gguf_vtype)et;
            kv->n = n;
            kv->data = r->p + data_at;
            kv->nbytes = r->off - data_at;
        }
        return DFL_OK;
    }
    if ((s = need(r, SCALAR_SIZE[t], "a value"))) return s;
    if (t == DFL_GGUF_BOOL && r->p[r->off] > 1)
        return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: key '%s': bool value is %u (0 or 1)", r->label, key,
                         r->p[r->off]);
    r->off += SCALAR_SIZE[t];
    if (kv) {
        kv->data = r->p + start;
        kv->nbytes = SCALAR_SIZE[t];
        kv->n = 1;
    }
    return DFL_OK;
}

/* ------------------------------------------------------------------ parse */

static void file_free(gguf_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_kv; i++)
        free((char *)(uintptr_t)f->kv[i].key);
    for (size_t i = 0; i < f->n_t; i++)
        free((char *)(uintptr_t)f->t[i].name);
    free(f->kv);
    free(f->t);
    if (f->map) munmap(f->map, f->map_len);
    free(f->path);
    memset(f, 0, sizeof *f);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const dfl_gguf_tensor *const *)a)->name, (*(const dfl_gguf_tensor *const *)b)->name);
}

static int cmp_tensor_off(const void *a, const void *b)
{
    const dfl_gguf_tensor *x = *(const dfl_gguf_tensor *const *)a, *y = *(const dfl_gguf_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* The header and metadata: magic, version, counts, keys (duplicates refused),
 * general.alignment. */
static dfl_status parse_meta(rd *r, gguf_file *f, uint64_t *n_tensors)
{
    dfl_status s;
    if (r->len < 4 || memcmp(r->p, "GGUF", 4))
        return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: not a GGUF file (the first 4 bytes are not \"GGUF\")", r->label);
    r->off = 4;
    uint64_t n_kv;
    if ((s = rd_u32(r, &f->version, "the version"))) return s;
    if (f->version == 1)
        return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: GGUF version 1 is not supported (2 or 3; re-convert the model)",
                         r->label);
    if (f->version != 2 && f->version != 3)
        return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: GGUF version %u is not supported (2 or 3%s)", r->label,
                         f->version, (f->version & 0xFFFF) == 0 ? "; a big-endian file?" : "");
    if ((s = rd_u64(r, n_tensors, "the tensor count")) || (s = rd_u64(r, &n_kv, "the key count"))) return s;
    /* a key takes >= 13 bytes (u64 length, u32 type, a 1-byte value), a tensor >= 32 */
    if (n_kv > (r->len - r->off) / 13) return truncated(r, "the metadata (key count larger than the file allows)");
    if (*n_tensors > (r->len - r->off) / 32)
        return truncated(r, "the tensor table (count larger than the file allows)");
    if (n_kv && !(f->kv = calloc((size_t)n_kv, sizeof *f->kv)))
        return dfl__fail(r->err, DFL_ERR_NOMEM, "%s: out of memory", r->label);
    f->align = GGUF_DEFAULT_ALIGN;
    for (uint64_t i = 0; i < n_kv; i++) {
        dfl_gguf_kv *kv = &f->kv[f->n_kv];
        const uint8_t *sp = NULL;
        uint64_t n;
        uint32_t t;
        if ((s = rd_str(r, &sp, &n, "a key"))) return s;
        char *key;
        if ((s = copy_name(r, sp, n, "a key", &key))) return s;
        kv->key = key;
        f->n_kv++;
        for (size_t j = 0; j + 1 < f->n_kv; j++)
            if (!strcmp(f->kv[j].key, key))
                return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: key '%s' appears twice", r->label, key);
        if ((s = rd_u32(r, &t, "a value type"))) return s;
        kv->type = (dfl_gguf_vtype)t;
        if ((s = rd_value(r, t, key, 0, kv))) return s;
        if (!strcmp(key, "general.alignment")) {
            uint64_t a = t == DFL_GGUF_U32 ? le(kv->data, 4) : 0;
            if (t != DFL_GGUF_U32 || a == 0 || (a & (a - 1)))
                return dfl__fail(r->err, DFL_ERR_FORMAT, "%s: general.alignment must be a u32 power of two", r->label);
            f->align = (size_t)a;
        }
    }
    return DFL_OK;
}

/* The tensor table, then the data section: every range checked. */
static dfl_status parse_tensors(rd *r, gguf_file *f, uint64_t n_tensors)
{
    dfl_status s;
    uint64_t *offs = NULL;
    const dfl_gguf_tensor **sorted = NULL;
    if (n_tensors &&
        (!(f->t = calloc((size_t)n_tensors, sizeof *f->t)) || !(offs = calloc((size_t)n_tensors, sizeof *offs)) ||
         !(sorted = calloc((size_t)n_tensors, sizeof *sorted)))) {
        s = dfl__fail(r->err, DFL_ERR_NOMEM, "%s: out of memory", r->label);
        goto done;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        dfl_gguf_tensor *t = &f->t[i];
        const uint8_t *sp = NULL;
        uint64_t n;
        uint32_t nd, type;
        if ((s = rd_str(r, &sp, &n, "a tensor name"))) goto done;
        if (n >= GGUF_MAX_NAME) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT, "%s: tensor name at byte %zu is %llu bytes (at most %d)", r->label,
                          r->off - (size_t)n, (unsigned long long)n, GGUF_MAX_NAME - 1);
            goto done;
        }
        char *name;
        if ((s = copy_name(r, sp, n, "a tensor name", &name))) goto done;
        t->name = name;
        f->n_t++;
        if ((s = rd_u32(r, &nd, "a tensor's dimension count"))) goto done;
        if (nd < 1 || nd > DFL_GGUF_MAX_DIMS) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT, "%s: tensor '%s' has %u dimensions (1 to %d)", r->label, name, nd,
                          DFL_GGUF_MAX_DIMS);
            goto done;
        }
        t->ndim = (int)nd;
        size_t rows = 1;
        for (int d = 0; d < DFL_GGUF_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t v;
            if ((s = rd_u64(r, &v, "a tensor's dimensions"))) goto done;
            if (v > ((uint64_t)1 << 62) || (d > 0 && !dfl__mul_ok(rows, (size_t)v, &rows))) {
                s = dfl__fail(r->err, DFL_ERR_FORMAT, "%s: tensor '%s': dimension %u (%llu) is too large", r->label,
                              name, d, (unsigned long long)v);
                goto done;
            }
            t->ne[d] = (int64_t)v;
        }
        if ((s = rd_u32(r, &type, "a tensor's type")) || (s = rd_u64(r, &offs[i], "a tensor's offset"))) goto done;
        t->type = type;
        size_t be, bb;
        if (!dfl_ggml_type_block(type, &be, &bb)) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT, "%s: tensor '%s' has unknown ggml type %u", r->label, name, type);
            goto done;
        }
        if ((uint64_t)t->ne[0] % be) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT,
                          "%s: tensor '%s': ne[0] = %lld is not a multiple of %s's block of "
                          "%zu",
                          r->label, name, (long long)t->ne[0], dfl_ggml_type_name(type), be);
            goto done;
        }
        size_t row_bytes = (size_t)((uint64_t)t->ne[0] / be) * bb; /* ne[0] <= 2^62, bb < 2^9 / be */
        if ((uint64_t)t->ne[0] / be > SIZE_MAX / bb || !dfl__mul_ok(row_bytes, rows, &t->nbytes)) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT, "%s: tensor '%s' is too large", r->label, name);
            goto done;
        }
    }
    /* the data section starts at the next multiple of the alignment */
    size_t data_at = r->off + (f->align - r->off % f->align) % f->align;
    if (data_at > r->len) {
        r->off = r->len;
        s = truncated(r, "the padding before the data section");
        goto done;
    }
    size_t data_len = r->len - data_at;
    for (size_t i = 0; i < f->n_t; i++) {
        dfl_gguf_tensor *t = &f->t[i];
        if (offs[i] % f->align) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %zu",
                          r->label, t->name, (unsigned long long)offs[i], f->align);
            goto done;
        }
        if (offs[i] > data_len || t->nbytes > data_len - offs[i]) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT,
                          "%s: tensor '%s': bytes [%llu, +%zu) of the data section run past "
                          "its end (%zu bytes)",
                          r->label, t->name, (unsigned long long)offs[i], t->nbytes, data_len);
            goto done;
        }
        t->data = r->p + data_at + offs[i];
        sorted[i] = t;
    }
    if (f->n_t) qsort(sorted, f->n_t, sizeof *sorted, cmp_tensor_off);
    for (size_t i = 1; i < f->n_t; i++)
        if ((const uint8_t *)sorted[i - 1]->data + sorted[i - 1]->nbytes > (const uint8_t *)sorted[i]->data) {
            s = dfl__fail(r->err, DFL_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", r->label, sorted[i - 1]->name,
                          sorted[i]->name);
            goto done;
        }
    s = DFL_OK;
done:
    free(offs);
    free(sorted);
    return s;
}

static dfl_status parse_file(const uint8_t *buf, size_t len, const char *label, gguf_file *f, dfl_error *err)
{
    rd r = {buf, len, 0, label, err};
    uint64_t n_tensors;
    dfl_status s = parse_meta(&r, f, &n_tensors);
    if (!s) s = parse_tensors(&r, f, n_tensors);
    return s;
}

/* ------------------------------------------------------------------- sets */

/* The tensor index over all files; duplicate names refused. */
static dfl_status build_index(dfl_gguf *g, dfl_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_files; i++)
        n += g->files[i].n_t;
    g->n_tensors = n;
    if (!n) return DFL_OK;
    g->by_name = dfl__alloc_array(n, sizeof *g->by_name);
    g->order = dfl__alloc_array(n, sizeof *g->order);
    g->file_of = dfl__alloc_array(n, sizeof *g->file_of);
    if (!g->by_name || !g->order || !g->file_of) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < g->n_files; i++)
        for (size_t j = 0; j < g->files[i].n_t; j++, k++) {
            g->order[k] = g->by_name[k] = &g->files[i].t[j];
            g->file_of[k] = i;
        }
    qsort(g->by_name, n, sizeof *g->by_name, cmp_tensor_name);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(g->by_name[i - 1]->name, g->by_name[i]->name))
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: tensor '%s' appears twice", g->files[0].path,
                             g->by_name[i]->name);
    return DFL_OK;
}

static dfl_gguf *set_new(size_t n_files)
{
    dfl_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    if (!(g->files = calloc(n_files, sizeof *g->files))) {
        free(g);
        return NULL;
    }
    g->n_files = n_files;
    return g;
}

void dfl_gguf_close(dfl_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_files; i++)
        file_free(&g->files[i]);
    free(g->files);
    free(g->by_name);
    free(g->order);
    free(g->file_of);
    free(g);
}

dfl_status dfl_gguf_open_memory(const void *buf, size_t len, const char *label, dfl_gguf **out, dfl_error *err)
{
    *out = NULL;
    dfl_gguf *g = set_new(1);
    if (!g || !(g->files[0].path = strdup(label ? label : "(memory)"))) {
        dfl_gguf_close(g);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    dfl_status s = parse_file(buf, len, g->files[0].path, &g->files[0], err);
    if (!s) s = build_index(g, err);
    if (s) {
        dfl_gguf_close(g);
        return s;
    }
    *out = g;
    return DFL_OK;
}

/* Map and parse one file into f (f->path set by the caller). */
static dfl_status open_file(gguf_file *f, dfl_error *err)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO is refused, not waited on */
    if (fd < 0) return dfl__fail(err, DFL_ERR_IO, "%s: %s", f->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dfl__fail(err, DFL_ERR_IO, "%s: %s", f->path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dfl__fail(err, DFL_ERR_IO, "%s: not a regular file", f->path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: too large to map", f->path);
    }
    size_t len = (size_t)st.st_size;
    if (len < 24) { /* mmap refuses 0 bytes; the fixed header alone is 24 */
        close(fd);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %zu bytes is too short for a GGUF header (24)", f->path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return dfl__fail(err, DFL_ERR_IO, "%s: cannot map: %s", f->path, strerror(e));
    f->map = map;
    f->map_len = len;
    return parse_file(map, len, f->path, f, err);
}

/* NAME-0000k-of-0000N.gguf: *prefix_len = strlen(NAME), *count = N; 0 when not a split name. */
static int split_name(const char *path, size_t *prefix_len, unsigned *count)
{
    size_t n = strlen(path);
    const char *suffix = "-00000-of-00000.gguf";
    size_t k = strlen(suffix);
    if (n <= k) return 0;
    const char *p = path + n - k;
    for (size_t i = 0; i < k; i++) {
        if (suffix[i] == '0' ? (p[i] < '0' || p[i] > '9') : p[i] != suffix[i]) return 0;
    }
    unsigned idx = (unsigned)strtoul(p + 1, NULL, 10), cnt = (unsigned)strtoul(p + 10, NULL, 10);
    if (idx < 1 || cnt < 1 || idx > cnt || cnt > GGUF_MAX_SPLITS) return 0;
    *prefix_len = n - k;
    *count = cnt;
    return 1;
}

dfl_status dfl_gguf_open(const char *path, dfl_gguf **out, dfl_error *err)
{
    if (!path || !out) return dfl__fail(err, DFL_ERR_USAGE, "dfl_gguf_open: NULL argument");
    *out = NULL;
    size_t plen = 0;
    unsigned count = 1;
    int split = split_name(path, &plen, &count);
    dfl_gguf *g = set_new(count);
    if (!g) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_status s = DFL_OK;
    for (unsigned i = 0; i < count && !s; i++) {
        gguf_file *f = &g->files[i];
        size_t n = plen + 24;
        if (!(f->path = split ? malloc(n) : strdup(path))) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        if (split) snprintf(f->path, n, "%.*s-%05u-of-%05u.gguf", (int)plen, path, i + 1, count);
        s = open_file(f, err);
        if (s == DFL_ERR_IO && split) dfl__context(err, "split %u of %u", i + 1, count);
    }
    int64_t declared;
    if (!s && split && dfl_gguf_get_int(g, "split.count", &declared) == 1 && declared != (int64_t)count)
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: split.count is %lld but the file name says %u splits", g->files[0].path,
                      (long long)declared, count);
    if (!s) s = build_index(g, err);
    if (s) {
        dfl_gguf_close(g);
        return s;
    }
    *out = g;
    return DFL_OK;
}

/* ---------------------------------------------------------------- access */

uint32_t dfl_gguf_version(const dfl_gguf *g)
{
    return g->files[0].version;
}

size_t dfl_gguf_kv_count(const dfl_gguf *g)
{
    return g->files[0].n_kv;
}

const dfl_gguf_kv *dfl_gguf_kv_at(const dfl_gguf *g, size_t i)
{
    return i < g->files[0].n_kv ? &g->files[0].kv[i] : NULL;
}

const dfl_gguf_kv *dfl_gguf_find_kv(const dfl_gguf *g, const char *key)
{
    for (size_t i = 0; i < g->files[0].n_kv; i++)
        if (!strcmp(g->files[0].kv[i].key, key)) return &g->files[0].kv[i];
    return NULL;
}

/* Scalar element of type t at p as an integer (0: not an integer type or out of range). */
static int scalar_int(dfl_gguf_vtype t, const uint8_t *p, int64_t *out)
{
    uint64_t u;
    switch (t) {
    case DFL_GGUF_U8: *out = p[0]; return 1;
    case DFL_GGUF_I8: *out = (int8_t)p[0]; return 1;
    case DFL_GGUF_U16: *out = (int64_t)le(p, 2); return 1;
    case DFL_GGUF_I16: *out = (int16_t)le(p, 2); return 1;
    case DFL_GGUF_U32: *out = (int64_t)le(p, 4); return 1;
    case DFL_GGUF_I32: *out = (int32_t)le(p, 4); return 1;
    case DFL_GGUF_U64:
        if ((u = le(p, 8)) > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)u;
        return 1;
    case DFL_GGUF_I64:
        u = le(p, 8);
        memcpy(out, &u, 8);
        return 1;
    default: return 0;
    }
}

static int scalar_num(dfl_gguf_vtype t, const uint8_t *p, double *out)
{
    int64_t i;
    if (t == DFL_GGUF_F32) {
        uint32_t u = (uint32_t)le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return 1;
    }
    if (t == DFL_GGUF_F64) {
        uint64_t u = le(p, 8);
        memcpy(out, &u, 8);
        return 1;
    }
    if (scalar_int(t, p, &i)) {
        *out = (double)i;
        return 1;
    }
    return 0;
}

int dfl_gguf_get_int(const dfl_gguf *g, const char *key, int64_t *out)
{
    const dfl_gguf_kv *kv = dfl_gguf_find_kv(g, key);
    if (!kv) return 0;
    return kv->type != DFL_GGUF_ARRAY && scalar_int(kv->type, kv->data, out) ? 1 : -1;
}

int dfl_gguf_get_num(const dfl_gguf *g, const char *key, double *out)
{
    const dfl_gguf_kv *kv = dfl_gguf_find_kv(g, key);
    if (!kv) return 0;
    return kv->type != DFL_GGUF_ARRAY && scalar_num(kv->type, kv->data, out) ? 1 : -1;
}

int dfl_gguf_get_bool(const dfl_gguf *g, const char *key, int *out)
{
    const dfl_gguf_kv *kv = dfl_gguf_find_kv(g, key);
    if (!kv) return 0;
    if (kv->type != DFL_GGUF_BOOL) return -1;
    *out = *(const uint8_t *)kv->data;
    return 1;
}

int dfl_gguf_get_str(const dfl_gguf *g, const char *key, const char **s, size_t *len)
{
    const dfl_gguf_kv *kv = dfl_gguf_find_kv(g, key);
    if (!kv) return 0;
    if (kv->type != DFL_GGUF_STRING) return -1;
    *s = kv->data;
    *len = kv->nbytes;
    return 1;
}

int dfl_gguf_arr_int(const dfl_gguf_kv *kv, uint64_t i, int64_t *out)
{
    if (kv->type != DFL_GGUF_ARRAY || i >= kv->n || kv->elem_type == DFL_GGUF_STRING) return 0;
    return scalar_int(kv->elem_type, (const uint8_t *)kv->data + (size_t)i * SCALAR_SIZE[kv->elem_type], out);
}

int dfl_gguf_arr_num(const dfl_gguf_kv *kv, uint64_t i, double *out)
{
    if (kv->type != DFL_GGUF_ARRAY || i >= kv->n || kv->elem_type == DFL_GGUF_STRING) return 0;
    return scalar_num(kv->elem_type, (const uint8_t *)kv->data + (size_t)i * SCALAR_SIZE[kv->elem_type], out);
}

size_t dfl_gguf_tensor_count(const dfl_gguf *g)
{
    return g->n_tensors;
}

const dfl_gguf_tensor *dfl_gguf_tensor_at(const dfl_gguf *g, size_t i)
{
    return i < g->n_tensors ? g->order[i] : NULL;
}

const dfl_gguf_tensor *dfl_gguf_find_tensor(const dfl_gguf *g, const char *name)
{
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->by_name[mid]->name, name);
        if (!c) return g->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *dfl_gguf_file_of(const dfl_gguf *g, const dfl_gguf_tensor *t)
{
    for (size_t i = 0; i < g->n_files; i++)
        if (t >= g->files[i].t && t < g->files[i].t + g->files[i].n_t) return g->files[i].path;
    return NULL;
}

const char *dfl__gguf_vtype_name(uint32_t t)
{
    return t <= DFL_GGUF_F64 ? VTYPE_NAME[t] : "?";
}
