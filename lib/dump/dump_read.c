/* dump_read.c — the reading side of the dump module (with dump.c, the only files that
 * include hdf5.h). Everything is validated against the file before it is trusted:
 * shapes are compared with what the caller expects, boxes with the dataset's extent,
 * and a dump must hold its data itself (a dump is untrusted input): a link other than a
 * hard one is refused, at open in the groups every reader goes through and on every
 * lookup by name elsewhere, and so are external storage, virtual datasets and filters
 * HDF5 does not ship when a dataset is opened — each would make a tool read another
 * file, or load a plugin from disk. */
#include "dump/dump_read.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dump/dump_chunks.h"
#include "base/half.h"

struct dfl_dump_reader {
    hid_t file;
    hid_t lapl; /* access list of every lookup by name: refuses to follow external links */
    char *path;
    dfl_dump_sample *samples; /* [nsamples], sorted by index */
    size_t nsamples;
};

struct dfl_dump_slab {
    const dfl_dump_reader *r;
    char *name;
    hid_t dset;
    hid_t ftype; /* the dataset's own type: half data is read as it is stored */
    dfl_dump_dset_info info;
    uint16_t *half; /* [cap] raw half buffer */
    size_t cap;
    float *lut;          /* [65536] half -> f32, for f16 data */
    dfl__chunks *chunks; /* direct parallel chunk decoding, NULL: HDF5 reads */
};

/* ---------------------------------------------------------------- helpers */

/* Paths are relative to the root; HDF5 takes "." for the root itself. */
static const char *rel(const char *path)
{
    while (*path == '/')
        path++;
    return *path ? path : ".";
}

/* HDF5 keeps its automatic error printing per thread in the thread-safe build (and
 * prints a whole stack by default): every entry point that calls HDF5 turns it off for
 * the calling thread, since the viewer reads from its request threads. */
static void quiet_hdf5(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* Text taken from the file (a name, a link target) for a message: control characters
 * become '?', so the message stays one line, and a long text is cut with "...", so it
 * stays whole. */
static void file_text(const char *s, char *buf, size_t cap)
{
    size_t n = 0, len = strlen(s);
    int cut = len > cap - 1;
    size_t keep = cut ? cap - 4 : len;
    for (; n < keep; n++)
        buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    if (cut) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
}

/* H5Ewalk2 callback: the innermost error, where HDF5 saw what went wrong. */
static herr_t innermost(unsigned n, const H5E_error2_t *e, void *data)
{
    if (n == 0 && e->desc) file_text(e->desc, data, 160);
    return 0;
}

/* "file: name: HDF5 failed to <what> (<HDF5's innermost reason>)". Call it before any
 * other HDF5 call: each one clears the error stack. */
static dfl_status h5fail(const dfl_dump_reader *r, dfl_error *err, const char *what, const char *name)
{
    char why[160] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, why);
    return dfl__fail(err, DFL_ERR_HDF5, "%s: %s: HDF5 failed to %s%s%s%s", r->path, rel(name), what, why[0] ? " (" : "",
                     why, why[0] ? ")" : "");
}

/* A variable-length string type in the stored type's character set (HDF5 does not
 * convert between ASCII and UTF-8; h5py writes UTF-8, other writers ASCII). Caller
 * closes. */
static hid_t vlen_str_type(hid_t stored)
{
    H5T_cset_t cset = H5Tget_cset(stored);
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return t;
    if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, cset == H5T_CSET_ASCII ? cset : H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* Stored element type of t as a dfl_h5_type; -1 when unsupported. */
static int classify(hid_t t, int *is_string)
{
    *is_string = 0;
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    if (cls == H5T_STRING) {
        *is_string = 1;
        return DFL_H5_U8;
    }
    if (cls == H5T_FLOAT) {
        if (size == 2) {
            /* IEEE half as dump.c and h5py write it: sign 15, exponent 10..14, mantissa 0..9 */
            size_t spos, epos, esize, mpos, msize;
            if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0 || spos != 15 || epos != 10 || esize != 5 ||
                mpos != 0 || msize != 10 || H5Tget_ebias(t) != 15 || H5Tget_order(t) != H5T_ORDER_LE)
                return -1;
            return DFL_H5_F16;
        }
        if (size == 4) return DFL_H5_F32;
        if (size == 8) return DFL_H5_F64;
        return -1;
    }
    if (cls == H5T_INTEGER) {
        int sgn = H5Tget_sign(t) == H5T_SGN_2;
        if (size == 1 && !sgn) return DFL_H5_U8;
        if (size == 4) return sgn ? DFL_H5_I32 : DFL_H5_U32;
        if (size == 8 && !sgn) return DFL_H5_U64;
        /* other integer widths convert exactly enough through HDF5; report them as i32 */
        if (size <= 8) return sgn ? DFL_H5_I32 : DFL_H5_U64;
    }
    return -1;
}

static hid_t native(dfl_h5_type t)
{
    switch (t) {
    case DFL_H5_F32: return H5T_NATIVE_FLOAT;
    case DFL_H5_F64: return H5T_NATIVE_DOUBLE;
    case DFL_H5_I32: return H5T_NATIVE_INT32;
    case DFL_H5_U8: return H5T_NATIVE_UINT8;
    case DFL_H5_U64: return H5T_NATIVE_UINT64;
    case DFL_H5_U32: return H5T_NATIVE_UINT32;
    case DFL_H5_F16: break;
    }
    return -1;
}

static size_t native_size(dfl_h5_type t)
{
    switch (t) {
    case DFL_H5_F32:
    case DFL_H5_I32:
    case DFL_H5_U32: return 4;
    case DFL_H5_F64:
    case DFL_H5_U64: return 8;
    case DFL_H5_U8: return 1;
    case DFL_H5_F16: return 2;
    }
    return 0;
}

static const char *type_name(dfl_h5_type t)
{
    static const char *names[] = {"f32", "f16", "i32", "u8", "f64", "u64", "u32"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

/* Fill info from an open dataset. */
static dfl_status describe(const dfl_dump_reader *r, const char *path, hid_t ds, dfl_dump_dset_info *info,
                           dfl_error *err)
{
    memset(info, 0, sizeof *info);
    hid_t sp = H5Dget_space(ds), t = H5Dget_type(ds), dcpl = H5Dget_create_plist(ds);
    dfl_status s = DFL_OK;
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (sp < 0 || t < 0 || nd < 0) {
        s = h5fail(r, err, "read the shape", path);
    } else if (nd > DFL_DUMP_MAX_RANK) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: rank %d is above %d", r->path, rel(path), nd, DFL_DUMP_MAX_RANK);
    } else {
        hsize_t d[DFL_DUMP_MAX_RANK], c[DFL_DUMP_MAX_RANK];
        H5Sget_simple_extent_dims(sp, d, NULL);
        info->ndim = nd;
        for (int i = 0; i < nd; i++)
            info->dims[i] = (int64_t)d[i];
        if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, nd, c) == nd)
            for (int i = 0; i < nd; i++)
                info->chunk[i] = (int64_t)c[i];
        int k = classify(t, &info->is_string);
        if (k < 0)
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: unsupported element type", r->path, rel(path));
        else
            info->type = (dfl_h5_type)k;
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    return s;
}

static size_t element_count(const dfl_dump_dset_info *info, int *overflow)
{
    size_t n = 1;
    *overflow = 0;
    for (int i = 0; i < info->ndim; i++)
        if (!dfl__mul_ok(n, (size_t)info->dims[i], &n)) *overflow = 1;
    return n;
}

static void shape_text(const dfl_dump_dset_info *info, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < info->ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)info->dims[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* ------------------------------------------------------ self-containment */

/* The filters a dump may use: the writer's (shuffle, deflate) and the others HDF5
 * itself ships. Any other id would be looked up as a plugin, code loaded from disk,
 * at the first read. */
static int filter_allowed(H5Z_filter_t id)
{
    return id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE || id == H5Z_FILTER_FLETCHER32 ||
           id == H5Z_FILTER_SZIP || id == H5Z_FILTER_NBIT || id == H5Z_FILTER_SCALEOFFSET;
}

#define SELF_CONTAINED "refused: a dump must hold all its data itself"

/* Why a dataset with creation list dcpl would take data from outside the file, or run
 * code that is not HDF5's, into why[cap]; "" when it would not. */
static void outside_data(hid_t dcpl, char *why, size_t cap)
{
    char name[128] = "", shown[128];
    why[0] = '\0';
    if (dcpl < 0) {
        snprintf(why, cap, "HDF5 failed to read its storage properties");
        return;
    }
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL) {
        snprintf(why, cap, "a virtual dataset (its data is in other files); " SELF_CONTAINED);
        return;
    }
    if (H5Pget_external_count(dcpl) != 0) {
        off_t offset;
        hsize_t size;
        if (H5Pget_external(dcpl, 0, sizeof name, name, &offset, &size) < 0) name[0] = '\0';
        name[sizeof name - 1] = '\0';
        file_text(name, shown, 60);
        snprintf(why, cap, "its data is in an external file ('%s'); " SELF_CONTAINED, shown);
        return;
    }
    int n = H5Pget_nfilters(dcpl);
    for (int i = 0; i < n; i++) {
        unsigned flags, cd[8];
        size_t ncd = 8;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
        if (filter_allowed(id)) continue;
        name[sizeof name - 1] = '\0';
        file_text(name, shown, 40);
        snprintf(why, cap,
                 "filter %d ('%s') is not one HDF5 ships (deflate, shuffle, fletcher32, szip, nbit, scaleoffset); "
                 "refused: reading it would load a plugin",
                 (int)id, shown);
        return;
    }
}

/* H5Pset_elink_cb: refuses to follow any external link, a second line behind the link
 * checks (which refuse a dump that has one before HDF5 is asked to follow it). */
static herr_t elink_refuse(const char *parent_file, const char *parent_group, const char *child_file,
                           const char *child_object, unsigned *acc_flags, hid_t fapl, void *user)
{
    (void)parent_file;
    (void)parent_group;
    (void)child_file;
    (void)child_object;
    (void)acc_flags;
    (void)fapl;
    (void)user;
    return -1;
}

/* Why link li, called name in group g, leads somewhere else than to an object of this
 * file, into why[cap]; "" for a hard link. difflens writes no other kind (dimension
 * scales are attributes holding object references, not links). */
static void link_refusal(hid_t g, const char *name, const H5L_info_t *li, hid_t lapl, char *why, size_t cap)
{
    char target[1024] = "", shown[128], shown_obj[128];
    why[0] = '\0';
    if (li->type == H5L_TYPE_HARD) return;
    if (li->type == H5L_TYPE_SOFT) {
        if (H5Lget_val(g, name, target, sizeof target, lapl) < 0) target[0] = '\0';
        target[sizeof target - 1] = '\0';
        file_text(target, shown, 100);
        snprintf(why, cap, "a soft link (to '%s'); refused: a dump holds no links", shown);
    } else if (li->type == H5L_TYPE_EXTERNAL) {
        const char *file = "", *obj = "";
        unsigned flags;
        if (li->u.val_size > sizeof target || H5Lget_val(g, name, target, sizeof target, lapl) < 0 ||
            H5Lunpack_elink_val(target, li->u.val_size, &flags, &file, &obj) < 0)
            file = obj = "";
        file_text(file, shown, 60);
        file_text(obj, shown_obj, 60);
        snprintf(why, cap, "an external link (to '%s', object '%s'); " SELF_CONTAINED, shown, shown_obj);
    } else {
        snprintf(why, cap, "a user-defined link (class %d); refused: a dump holds no links", (int)li->type);
    }
}

/* Where `path` is: 1 when every link on the way to it is a hard link, 0 when one is
 * missing, -1 (err filled, DFL_ERR_FORMAT) when one is a link of another kind. Checked
 * on every lookup by name, so a link is never followed, wherever it is. */
static int find(const dfl_dump_reader *r, const char *path, dfl_error *err)
{
    const char *p = rel(path);
    if (!strcmp(p, ".")) return 1;
    size_t n = strlen(p);
    char *buf = malloc(n + 1);
    if (!buf) return 0;
    memcpy(buf, p, n + 1);
    int where = 1;
    /* prefix by prefix: H5Lget_info fails on a missing intermediate group */
    for (size_t i = 0; i <= n && where == 1; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        H5L_info_t li;
        char why[512];
        /* H5Lexists first: a failed H5Lget_info leaves records on the thread's HDF5
         * error stack, which the thread-safe build does not free when a thread ends */
        if (i > 0 && (H5Lexists(r->file, buf, r->lapl) <= 0 || H5Lget_info(r->file, buf, &li, r->lapl) < 0)) {
            where = 0;
        } else if (i > 0 && (link_refusal(r->file, buf, &li, r->lapl, why, sizeof why), why[0])) {
            char shown[128];
            file_text(buf, shown, 100);
            dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: %s", r->path, shown, why);
            where = -1;
        }
        buf[i] = c;
    }
    free(buf);
    return where;
}

typedef struct links_ctx {
    const dfl_dump_reader *r;
    const char *group;
    dfl_error *err;
    dfl_status s;
} links_ctx;

/* H5Literate callback: stops (1) at the first link that is not a hard link. */
static herr_t check_link(hid_t g, const char *name, const H5L_info_t *li, void *user)
{
    links_ctx *c = user;
    char why[512], shown[128];
    link_refusal(g, name, li, c->r->lapl, why, sizeof why);
    if (!why[0]) return 0;
    file_text(name, shown, 100);
    c->s =
        dfl__fail(c->err, DFL_ERR_FORMAT, "%s: %s%s%s: %s", c->r->path, c->group, c->group[0] ? "/" : "", shown, why);
    return 1;
}

/* The links of group `name` under loc (group: its path from the root, "" for the
 * root, for messages): DFL_OK when all are hard links. */
static dfl_status check_links(const dfl_dump_reader *r, hid_t loc, const char *name, const char *group, dfl_error *err)
{
    links_ctx c = {r, group, err, DFL_OK};
    hsize_t at = 0;
    herr_t h = H5Literate_by_name(loc, name, H5_INDEX_NAME, H5_ITER_NATIVE, &at, check_link, &c, r->lapl);
    if (c.s) return c.s;
    return h < 0 ? h5fail(r, err, "list the links", group) : DFL_OK;
}

static dfl_status open_dset(const dfl_dump_reader *r, const char *path, hid_t *out, dfl_error *err)
{
    *out = -1;
    quiet_hdf5();
    int where = find(r, path, err);
    if (where < 0) return DFL_ERR_FORMAT;
    if (where == 0) return dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: no such dataset", r->path, rel(path));
    H5O_info_t oi;
    if (H5Oget_info_by_name(r->file, rel(path), &oi, r->lapl) < 0 || oi.type != H5O_TYPE_DATASET)
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: not a dataset", r->path, rel(path));
    *out = H5Dopen2(r->file, rel(path), r->lapl);
    if (*out < 0) return h5fail(r, err, "open", path);
    /* storage that reaches outside the file: checked when a dataset is opened, not when
     * the dump is (opening every dataset would make a dump of 2,000 samples open 20
     * times slower) */
    char why[512];
    hid_t dcpl = H5Dget_create_plist(*out);
    outside_data(dcpl, why, sizeof why);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (!why[0]) return DFL_OK;
    H5Dclose(*out);
    *out = -1;
    return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: %s", r->path, rel(path), why);
}

/* ------------------------------------------------------ group-relative reads */

struct dfl_dump_group {
    const dfl_dump_reader *r;
    hid_t g;
};

dfl_status dfl_dump_group_open(const dfl_dump_reader *r, const char *path, dfl_dump_group **out, dfl_error *err)
{
    *out = NULL;
    quiet_hdf5();
    int where = find(r, path, err);
    if (where < 0) return DFL_ERR_FORMAT;
    if (where == 0) return dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: no such group", r->path, rel(path));
    dfl_dump_group *g = malloc(sizeof *g);
    if (!g) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", r->path);
    g->r = r;
    if ((g->g = H5Gopen2(r->file, rel(path), r->lapl)) < 0) {
        free(g);
        return h5fail(r, err, "open the group", path);
    }
    *out = g;
    return DFL_OK;
}

void dfl_dump_group_close(dfl_dump_group *g)
{
    if (!g) return;
    H5Gclose(g->g);
    free(g);
}

/* 1 when every link from g to `name` is a hard link (find's rule, relative to g). */
static int hard_links_in(hid_t g, const char *name, hid_t lapl)
{
    char buf[256];
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, name, n + 1);
    for (size_t i = 0; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        H5L_info_t li;
        char why[512];
        int ok = H5Lexists(g, buf, lapl) > 0 && H5Lget_info(g, buf, &li, lapl) >= 0 &&
                 (link_refusal(g, buf, &li, lapl, why, sizeof why), !why[0]);
        buf[i] = c;
        if (!ok) return 0;
    }
    return 1;
}

int dfl_dump_group_read_exact(dfl_dump_group *g, const char *name, dfl_h5_type type, int nd, int64_t *dims, void *out)
{
    quiet_hdf5();
    hid_t mtype = native(type);
    if (mtype < 0 || nd < 0 || nd > DFL_DUMP_MAX_RANK || !hard_links_in(g->g, name, g->r->lapl)) return 0;
    hid_t ds = H5Dopen2(g->g, name, g->r->lapl);
    if (ds < 0) return 0;
    char why[512];
    hid_t dcpl = H5Dget_create_plist(ds), sp = H5Dget_space(ds), t = H5Dget_type(ds);
    outside_data(dcpl, why, sizeof why);
    int ok = !why[0] && sp >= 0 && t >= 0 && H5Tequal(t, mtype) > 0 && H5Sget_simple_extent_ndims(sp) == nd;
    hsize_t got[DFL_DUMP_MAX_RANK];
    if (ok) ok = H5Sget_simple_extent_dims(sp, got, NULL) == nd;
    for (int i = 0; ok && i < nd; i++) {
        if (dims[i] >= 0)
            ok = (int64_t)got[i] == dims[i];
        else
            dims[i] = (int64_t)got[i];
    }
    if (ok && out) ok = H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    if (dcpl >= 0) H5Pclose(dcpl);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(ds);
    return ok;
}

/* half [n] -> f32 [n] */
static void half_to_f32(const uint16_t *h, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = dfl_f16_to_f32(h[i]);
}

/* ------------------------------------------------------------ open/close */

typedef struct list_ctx {
    dfl_dump_reader *r;
    size_t cap;
    int nomem;
    dfl_error *err;
    dfl_status s; /* a link refused, in the listing or in a sample group */
} list_ctx;

/* H5Literate callback over /samples: keep the groups named by a decimal index; stop
 * (-1) at a link that is not a hard link, in /samples or in a sample group. */
static herr_t list_sample(hid_t g, const char *name, const H5L_info_t *li, void *user)
{
    list_ctx *c = user;
    links_ctx lc = {c->r, "samples", c->err, DFL_OK};
    if (check_link(g, name, li, &lc)) {
        c->s = lc.s;
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long long idx = strtoull(name, &end, 10);
    H5O_info_t oi;
    if (errno || end == name || *end || H5Oget_info_by_name(g, name, &oi, c->r->lapl) < 0 || oi.type != H5O_TYPE_GROUP)
        return 0;
    dfl_dump_reader *r = c->r;
    if (r->nsamples == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 16;
        dfl_dump_sample *ns = nc > c->cap ? dfl__alloc_array(nc, sizeof *ns) : NULL;
        if (!ns) {
            c->nomem = 1;
            return -1;
        }
        if (r->nsamples) memcpy(ns, r->samples, r->nsamples * sizeof *ns);
        free(r->samples);
        r->samples = ns;
        c->cap = nc;
    }
    size_t glen = strlen(name) + 9;
    char *group = malloc(glen);
    if (!group) {
        c->nomem = 1;
        return -1;
    }
    snprintf(group, glen, "samples/%s", name);
    if ((c->s = check_links(r, g, name, group, c->err))) {
        free(group);
        return -1;
    }
    char *id = NULL;
    if (H5Aexists_by_name(r->file, group, "id", r->lapl) > 0) dfl_dump_get_attr_str(r, group, "id", &id, NULL);
    if (!id) id = strdup("");
    if (!id) {
        free(group);
        c->nomem = 1;
        return -1;
    }
    dfl_dump_sample *s = &r->samples[r->nsamples++];
    s->index = (size_t)idx;
    s->id = id;
    s->group = group;
    return 0;
}

static int by_index(const void *a, const void *b)
{
    size_t x = ((const dfl_dump_sample *)a)->index, y = ((const dfl_dump_sample *)b)->index;
    return x < y ? -1 : x > y;
}

dfl_status dfl_dump_open(const char *path, dfl_dump_reader **out, dfl_error *err)
{
    *out = NULL;
    quiet_hdf5(); /* HDF5 prints its error stack by default; the library never prints */
    struct stat st;
    if (stat(path, &st) != 0) return dfl__fail(err, DFL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return dfl__fail(err, DFL_ERR_IO, "%s: is a folder, not a dump", path);
    if (H5Fis_hdf5(path) <= 0)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: not a difflens dump (not an HDF5 file)", path);
    dfl_dump_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    }
    r->file = -1;
    r->lapl = H5Pcreate(H5P_DATASET_ACCESS); /* a link access list that H5Dopen2 takes too */
    if (r->lapl < 0 || H5Pset_elink_cb(r->lapl, elink_refuse, NULL) < 0) {
        dfl_dump_close(r);
        return dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to make a link access list", path);
    }
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0) {
        dfl_dump_close(r);
        return dfl__fail(err, DFL_ERR_IO, "%s: HDF5 cannot open the file", path);
    }
    char *fmt = NULL;
    int64_t version = 0;
    dfl_status s = DFL_OK;
    if (H5Aexists(r->file, "format") <= 0) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a difflens dump (no root attribute 'format')", path);
    } else if (dfl_dump_get_attr_str(r, "", "format", &fmt, NULL) || strcmp(fmt, DFL_DUMP_FORMAT) != 0) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a difflens dump (format is '%s', not '%s')", path, fmt ? fmt : "?",
                      DFL_DUMP_FORMAT);
    } else if (dfl_dump_get_attr_i64(r, "", "format_version", &version, NULL)) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a difflens dump (no root attribute 'format_version')", path);
    } else if (version < 1 || version > DFL_DUMP_FORMAT_VERSION) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: format_version %lld is not one this build reads (1 to %d)", path,
                      (long long)version, DFL_DUMP_FORMAT_VERSION);
    }
    free(fmt);
    /* links, in the groups every reader goes through; what lies deeper is checked on
     * every lookup by name (find), and a dataset's storage when it is opened */
    if (!s) s = check_links(r, r->file, ".", "", err);
    if (!s && dfl_dump_exists(r, "model")) s = check_links(r, r->file, "model", "model", err);
    if (!s && dfl_dump_exists(r, "samples")) {
        list_ctx c = {r, 0, 0, err, DFL_OK};
        hsize_t at = 0;
        if (H5Literate_by_name(r->file, "samples", H5_INDEX_NAME, H5_ITER_INC, &at, list_sample, &c, r->lapl) < 0)
            s = c.s       ? c.s
                : c.nomem ? dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path)
                          : h5fail(r, err, "list the samples", "samples");
        if (!s && r->nsamples) qsort(r->samples, r->nsamples, sizeof *r->samples, by_index);
    }
    if (s) {
        dfl_dump_close(r);
        return s;
    }
    *out = r;
    return DFL_OK;
}

void dfl_dump_close(dfl_dump_reader *r)
{
    if (!r) return;
    quiet_hdf5();
    if (r->file >= 0) H5Fclose(r->file);
    if (r->lapl >= 0) H5Pclose(r->lapl);
    for (size_t i = 0; i < r->nsamples; i++) {
        free((char *)r->samples[i].id);
        free((char *)r->samples[i].group);
    }
    free(r->samples);
    free(r->path);
    free(r);
}

const char *dfl_dump_path(const dfl_dump_reader *r)
{
    return r->path;
}

/* -------------------------------------------------------------- attributes */

static dfl_status open_attr(const dfl_dump_reader *r, const char *obj, const char *name, hid_t *out, dfl_error *err)
{
    *out = -1;
    quiet_hdf5();
    int where = find(r, obj, err);
    if (where < 0) return DFL_ERR_FORMAT;
    if (where == 0 || H5Aexists_by_name(r->file, rel(obj), name, r->lapl) <= 0)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: no attribute '%s'", r->path, rel(obj), name);
    *out = H5Aopen_by_name(r->file, rel(obj), name, H5P_DEFAULT, r->lapl);
    return *out < 0 ? h5fail(r, err, "open an attribute", obj) : DFL_OK;
}

dfl_status dfl_dump_get_attr_str(const dfl_dump_reader *r, const char *obj, const char *name, char **out,
                                 dfl_error *err)
{
    *out = NULL;
    hid_t a;
    dfl_status s = open_attr(r, obj, name, &a, err);
    if (s) return s;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    if (t < 0 || sp < 0 || H5Tget_class(t) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: attribute '%s' is not a string", r->path, rel(obj), name);
    } else if (H5Tis_variable_str(t) > 0) {
        hid_t mt = vlen_str_type(t);
        char *v = NULL;
        if (mt < 0 || H5Aread(a, mt, &v) < 0) {
            s = h5fail(r, err, "read a string attribute", obj);
        } else {
            *out = strdup(v ? v : "");
            if (!*out) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            H5free_memory(v);
        }
        if (mt >= 0) H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(t);
        char *v = calloc(n + 1, 1);
        hid_t mt = H5Tcopy(t);
        if (!v)
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else if (mt < 0 || H5Aread(a, mt, v) < 0)
            s = h5fail(r, err, "read a string attribute", obj);
        if (mt >= 0) H5Tclose(mt);
        if (s)
            free(v);
        else
            *out = v;
    }
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return s;
}

static dfl_status attr_num(const dfl_dump_reader *r, const char *obj, const char *name, hid_t mtype, void *out,
                           dfl_error *err)
{
    hid_t a;
    dfl_status s = open_attr(r, obj, name, &a, err);
    if (s) return s;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || sp < 0 || H5Sget_simple_extent_npoints(sp) != 1)
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: attribute '%s' is not a number", r->path, rel(obj), name);
    else if (H5Aread(a, mtype, out) < 0)
        s = h5fail(r, err, "read a numeric attribute", obj);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return s;
}

dfl_status dfl_dump_get_attr_i64(const dfl_dump_reader *r, const char *obj, const char *name, int64_t *out,
                                 dfl_error *err)
{
    return attr_num(r, obj, name, H5T_NATIVE_INT64, out, err);
}

dfl_status dfl_dump_get_attr_f64(const dfl_dump_reader *r, const char *obj, const char *name, double *out,
                                 dfl_error *err)
{
    return attr_num(r, obj, name, H5T_NATIVE_DOUBLE, out, err);
}

/* ---------------------------------------------------------------- samples */

size_t dfl_dump_sample_count(const dfl_dump_reader *r)
{
    return r->nsamples;
}

const dfl_dump_sample *dfl_dump_sample_at(const dfl_dump_reader *r, size_t i)
{
    return i < r->nsamples ? &r->samples[i] : NULL;
}

dfl_status dfl_dump_sample_find(const dfl_dump_reader *r, const char *key, const dfl_dump_sample **out, dfl_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < r->nsamples; i++)
        if (r->samples[i].id[0] && !strcmp(r->samples[i].id, key)) {
            *out = &r->samples[i];
            return DFL_OK;
        }
    char *end;
    errno = 0;
    unsigned long long idx = strtoull(key, &end, 10);
    if (!errno && end != key && !*end && key[0] != '-')
        for (size_t i = 0; i < r->nsamples; i++)
            if (r->samples[i].index == idx) {
                *out = &r->samples[i];
                return DFL_OK;
            }
    if (r->nsamples == 0)
        return dfl__fail(err, DFL_ERR_RANGE, "%s: sample '%s': the dump has no samples", r->path, key);
    /* say what is there: the index range and the first few ids */
    char ids[200] = "";
    size_t used = 0;
    for (size_t i = 0; i < r->nsamples && i < 5 && used < sizeof ids; i++)
        used += (size_t)snprintf(ids + used, sizeof ids - used, "%s'%s'", i ? ", " : "", r->samples[i].id);
    if (r->nsamples > 5 && used < sizeof ids) snprintf(ids + used, sizeof ids - used, ", ...");
    return dfl__fail(err, DFL_ERR_RANGE, "%s: no sample with id or index '%s' (%zu samples, index %zu to %zu, ids %s)",
                     r->path, key, r->nsamples, r->samples[0].index, r->samples[r->nsamples - 1].index, ids);
}

/* --------------------------------------------------------------- datasets */

int dfl_dump_exists(const dfl_dump_reader *r, const char *path)
{
    quiet_hdf5();
    /* a link of another kind exists too: the read that follows refuses it */
    return find(r, path, NULL) != 0;
}

dfl_status dfl_dump_dataset_info(const dfl_dump_reader *r, const char *path, dfl_dump_dset_info *info, dfl_error *err)
{
    hid_t ds;
    dfl_status s = open_dset(r, path, &ds, err);
    if (s) return s;
    s = describe(r, path, ds, info, err);
    H5Dclose(ds);
    return s;
}

dfl_status dfl_dump_read(const dfl_dump_reader *r, const char *path, dfl_h5_type type, void *out, size_t n,
                         dfl_error *err)
{
    if (type == DFL_H5_F16) return dfl__fail(err, DFL_ERR_USAGE, "dfl_dump_read: f16 is not a memory type");
    hid_t ds;
    dfl_status s = open_dset(r, path, &ds, err);
    if (s) return s;
    dfl_dump_dset_info info;
    int overflow;
    char shape[128];
    s = describe(r, path, ds, &info, err);
    size_t count = s ? 0 : element_count(&info, &overflow);
    if (!s && info.is_string) {
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: a string dataset, not numbers", r->path, rel(path));
    } else if (!s && (overflow || count != n)) {
        shape_text(&info, shape, sizeof shape);
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: shape %s has %zu elements, expected %zu", r->path, rel(path), shape,
                      overflow ? (size_t)-1 : count, n);
    } else if (!s && n > 0) {
        if (info.type == DFL_H5_F16 && (type == DFL_H5_F32 || type == DFL_H5_F64)) {
            /* raw halves, converted here (HDF5's half conversion is a slow soft path) */
            uint16_t *h = dfl__alloc_array(n, sizeof *h);
            hid_t ft = H5Dget_type(ds);
            if (!h)
                s = dfl__fail(err, DFL_ERR_NOMEM, "%s: %s: out of memory", r->path, rel(path));
            else if (ft < 0 || H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, h) < 0)
                s = h5fail(r, err, "read", path);
            if (!s) {
                if (type == DFL_H5_F32)
                    half_to_f32(h, out, n);
                else
                    for (size_t i = 0; i < n; i++)
                        ((double *)out)[i] = dfl_f16_to_f32(h[i]);
            }
            if (ft >= 0) H5Tclose(ft);
            free(h);
        } else if (H5Dread(ds, native(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
            s = dfl__fail(err, DFL_ERR_HDF5, "%s: %s: HDF5 cannot read the %s data as %s", r->path, rel(path),
                          type_name(info.type), type_name(type));
        }
    }
    H5Dclose(ds);
    return s;
}

dfl_status dfl_dump_read_alloc(const dfl_dump_reader *r, const char *path, dfl_h5_type type, void **out, size_t *n,
                               dfl_error *err)
{
    *out = NULL;
    if (n) *n = 0;
    dfl_dump_dset_info info;
    dfl_status s = dfl_dump_dataset_info(r, path, &info, err);
    if (s) return s;
    int overflow;
    size_t count = element_count(&info, &overflow);
    void *buf = overflow ? NULL : dfl__alloc_array(count, native_size(type));
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "%s: %s: out of memory", r->path, rel(path));
    if ((s = dfl_dump_read(r, path, type, buf, count, err))) {
        free(buf);
        return s;
    }
    *out = buf;
    if (n) *n = count;
    return DFL_OK;
}

void dfl_dump_strings_free(char **s, size_t n)
{
    if (!s) return;
    for (size_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

dfl_status dfl_dump_read_strings(const dfl_dump_reader *r, const char *path, char ***out, size_t *n, dfl_error *err)
{
    *out = NULL;
    *n = 0;
    hid_t ds;
    dfl_status s = open_dset(r, path, &ds, err);
    if (s) return s;
    dfl_dump_dset_info info;
    if ((s = describe(r, path, ds, &info, err))) goto done;
    if (!info.is_string || info.ndim != 1) {
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: not a 1-D string dataset", r->path, rel(path));
        goto done;
    }
    size_t count = (size_t)info.dims[0];
    char **res = dfl__calloc_array(count ? count : 1, sizeof *res);
    if (!res) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "%s: %s: out of memory", r->path, rel(path));
        goto done;
    }
    hid_t ft = H5Dget_type(ds);
    if (count > 0 && H5Tis_variable_str(ft) > 0) {
        hid_t mt = vlen_str_type(ft), sp = H5Dget_space(ds);
        char **raw = dfl__calloc_array(count, sizeof *raw);
        if (!raw)
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else if (mt < 0 || sp < 0 || H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0)
            s = h5fail(r, err, "read", path);
        for (size_t i = 0; !s && i < count; i++)
            if (!(res[i] = strdup(raw[i] ? raw[i] : ""))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        if (raw && mt >= 0 && sp >= 0) H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, raw);
        free(raw);
        if (sp >= 0) H5Sclose(sp);
        if (mt >= 0) H5Tclose(mt);
    } else if (count > 0) {
        size_t w = H5Tget_size(ft), bytes;
        char *raw = dfl__mul_ok(w, count, &bytes) ? dfl__alloc_array(bytes, 1) : NULL;
        if (!raw)
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else if (H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0)
            s = h5fail(r, err, "read", path);
        for (size_t i = 0; !s && i < count; i++) {
            if (!(res[i] = calloc(w + 1, 1)))
                s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            else
                memcpy(res[i], raw + i * w, w);
        }
        free(raw);
    }
    if (ft >= 0) H5Tclose(ft);
    if (s) {
        dfl_dump_strings_free(res, count);
    } else {
        *out = res;
        *n = count;
    }
done:
    H5Dclose(ds);
    return s;
}

/* --------------------------------------------------------------- hyperslabs */

dfl_status dfl_dump_slab_open(const dfl_dump_reader *r, const char *path, dfl_dump_slab **out, dfl_error *err)
{
    *out = NULL;
    dfl_dump_slab *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(rel(path)))) {
        free(s);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    s->r = r;
    s->ftype = -1;
    dfl_status st = open_dset(r, path, &s->dset, err);
    if (!st) st = describe(r, path, s->dset, &s->info, err);
    if (!st &&
        (s->info.is_string || (s->info.type != DFL_H5_F16 && s->info.type != DFL_H5_F32 && s->info.type != DFL_H5_F64)))
        st = dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: not a floating-point dataset", r->path, rel(path));
    if (!st && (s->ftype = H5Dget_type(s->dset)) < 0) st = h5fail(r, err, "read the type", path);
    if (!st && s->info.type == DFL_H5_F16) {
        if (!(s->lut = dfl__alloc_array(65536, sizeof *s->lut)))
            st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else
            for (uint32_t h = 0; h < 65536; h++)
                s->lut[h] = dfl_f16_to_f32((uint16_t)h);
    }
    if (!st) st = dfl__chunks_open(s->dset, &s->info, s->lut, &s->chunks, err);
    if (st) {
        dfl_dump_slab_close(s);
        return st;
    }
    *out = s;
    return DFL_OK;
}

const dfl_dump_dset_info *dfl_dump_slab_info(const dfl_dump_slab *s)
{
    return &s->info;
}

dfl_status dfl_dump_slab_read_f32(dfl_dump_slab *s, const int64_t *start, const int64_t *count, float *out,
                                  dfl_error *err)
{
    const dfl_dump_reader *r = s->r;
    int nd = s->info.ndim;
    quiet_hdf5();
    hsize_t hs[DFL_DUMP_MAX_RANK], hc[DFL_DUMP_MAX_RANK];
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        if (start[i] < 0 || count[i] < 0 || start[i] > s->info.dims[i] || count[i] > s->info.dims[i] - start[i])
            return dfl__fail(err, DFL_ERR_RANGE, "%s: %s: box [%lld, +%lld) leaves dimension %d of size %lld", r->path,
                             s->name, (long long)start[i], (long long)count[i], i, (long long)s->info.dims[i]);
        hs[i] = (hsize_t)start[i];
        hc[i] = (hsize_t)count[i];
        if (!dfl__mul_ok(n, (size_t)count[i], &n)) return dfl__fail(err, DFL_ERR_NOMEM, "hyperslab too large");
    }
    if (n == 0) return DFL_OK;
    if (s->chunks) {
        char where[512];
        snprintf(where, sizeof where, "%s: %s", r->path, s->name);
        return dfl__chunks_read(s->chunks, start, count, out, where, err);
    }
    void *dst = out;
    hid_t mtype = H5T_NATIVE_FLOAT;
    if (s->info.type == DFL_H5_F16) {
        if (n > s->cap) {
            uint16_t *nb = dfl__alloc_array(n, sizeof *nb);
            if (!nb) return dfl__fail(err, DFL_ERR_NOMEM, "%s: %s: out of memory", r->path, s->name);
            free(s->half);
            s->half = nb;
            s->cap = n;
        }
        dst = s->half;
        mtype = s->ftype; /* same as stored: HDF5 copies, no conversion */
    }
    hid_t fsp = H5Dget_space(s->dset), msp = nd ? H5Screate_simple(nd, hc, NULL) : H5Screate(H5S_SCALAR);
    int ok = fsp >= 0 && msp >= 0 && (nd == 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, hs, NULL, hc, NULL) >= 0) &&
             H5Dread(s->dset, mtype, msp, fsp, H5P_DEFAULT, dst) >= 0;
    dfl_status st = ok ? DFL_OK : h5fail(r, err, "read a hyperslab", s->name);
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    if (st) return st;
    if (s->info.type == DFL_H5_F16)
        for (size_t i = 0; i < n; i++)
            out[i] = s->lut[s->half[i]];
    return DFL_OK;
}

void dfl_dump_slab_close(dfl_dump_slab *s)
{
    if (!s) return;
    quiet_hdf5();
    dfl__chunks_close(s->chunks);
    if (s->ftype >= 0) H5Tclose(s->ftype);
    if (s->dset >= 0) H5Dclose(s->dset);
    free(s->half);
    free(s->lut);
    free(s->name);
    free(s);
}

int dfl__dump_slab_direct(dfl_dump_slab *s, int on)
{
    if (!on && s->chunks) {
        dfl__chunks_close(s->chunks);
        s->chunks = NULL;
    }
    return s->chunks != NULL;
}

dfl_status dfl_dump_read_slab_f32(const dfl_dump_reader *r, const char *path, const int64_t *start,
                                  const int64_t *count, float *out, dfl_error *err)
{
    dfl_dump_slab *s;
    dfl_status st = dfl_dump_slab_open(r, path, &s, err);
    if (st) return st;
    st = dfl_dump_slab_read_f32(s, start, count, out, err);
    dfl_dump_slab_close(s);
    return st;
}
