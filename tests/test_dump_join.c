/* test_dump_join.c — dfl_dump_join (lib/dump/dump_join.c, the MPI probe's join) without
 * MPI: dfl_probe_run writes the dump of every prompt and the part dumps of disjoint
 * subsets (as ranks do), dfl_dump_join joins the parts, and the joined file is compared
 * with the single-process dump through HDF5's own API (H5Ovisit, H5Dread, H5Aread —
 * not the dump reader): the same objects, every dataset's and attribute's values
 * byte for byte, the dimension scales attached inside each sample's own group, every
 * dataset dump_schema.h says is always written; the root count nonfinite_samples
 * recounted; and the error paths: a sample in two parts, a part that is missing, not
 * HDF5 or not a dump, an `into` that cannot be opened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/probe.h"
#include "dump/dump_join.h"
#include "dump/dump_schema.h"
#include "model/kernels.h"

#define TMPDIR_PREFIX "dfl_join"
#include "tmpdir.h"
#include "tiny_model.h"

static const char *MODELS[2] = {"llama", "diff_transformer"};

/* A path in the folder that stays valid (path_of's four buffers rotate). */
typedef struct path_buf {
    char s[400];
} path_buf;

static path_buf at(const char *name)
{
    path_buf p;
    snprintf(p.s, sizeof p.s, "%.399s", path_of(name));
    return p;
}

/* Three prompts: text and spans (answer, query, target) with a depth, plain tokens, and
 * a longer one; maps of every layer and head are stored. */
static void write_prompts(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"id\": \"a\", \"tokens\": [0, 5, 9, 12, 3, 7, 7, 2], \"text\": [\"<s>\", \"b\", \"c\", \"d\", \"e\", "
          "\"f\", \"g\", \"h\"], \"answer\": [[2, 4]], \"query\": [[4, 6]], \"target\": [[6, 8]], \"depth\": 0.5}\n",
          f);
    fputs("{\"id\": \"b\", \"tokens\": [0, 30, 31, 32, 33]}\n", f);
    fputs("{\"id\": \"c\", \"tokens\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, "
          "21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39], \"query\": [[36, 39]]}\n",
          f);
    fclose(f);
}

static int setup(void **state)
{
    /* One thread: the moments' partial sums depend on which thread took which block of
     * rows, so only a one-thread run repeats bit for bit, and the join must reproduce
     * the single-process dump exactly. */
    dfl_set_threads(1);
    if (group_setup(state)) return -1;
    for (int i = 0; i < 2; i++) {
        path_buf pd = at(MODELS[i]);
        const char *dir = pd.s;
        tiny_spec s = {MODELS[i], 2, 32, 2, 2, 48, 64, 7u + (unsigned)i};
        if (mkdir(dir, 0755) || tiny_model_write(dir, s)) return -1;
    }
    write_prompts(at("p.jsonl").s);
    return 0;
}

static int teardown(void **state)
{
    for (int i = 0; i < 2; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s/config.json", g_dir, MODELS[i]);
        remove(p);
        snprintf(p, sizeof p, "%s/%s/model.safetensors", g_dir, MODELS[i]);
        remove(p);
        snprintf(p, sizeof p, "%s/%s", g_dir, MODELS[i]);
        rmdir(p);
    }
    return group_teardown(state);
}

/* probe the prompts of subset[n] (NULL: all) with model `m` into out. */
static void probe(const char *m, const char *out, const size_t *subset, size_t n)
{
    char model[512], prompts[512];
    snprintf(model, sizeof model, "%s/%s", g_dir, m);
    snprintf(prompts, sizeof prompts, "%s/p.jsonl", g_dir);
    dfl_probe_params p = dfl_probe_params_default();
    p.model_dir = model;
    p.prompts_path = prompts;
    p.out_path = out;
    p.overwrite = 1;
    p.subset = subset;
    p.n_subset = n;
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_map_select_parse("all", &p.maps, &err), DFL_OK);
    dfl_status s = dfl_probe_run(&p, NULL, &err);
    dfl_map_select_free(&p.maps);
    if (s) fail_msg("probe %s: %s", out, err.msg);
}

/* ----------------------------------------------------- comparing files */

/* Values of a dataset or attribute read in their file type; variable-length strings
 * compared as strings. */
static void compare_values(hid_t a, hid_t b, int is_attr, const char *where)
{
    hid_t ta = is_attr ? H5Aget_type(a) : H5Dget_type(a), tb = is_attr ? H5Aget_type(b) : H5Dget_type(b);
    hid_t sa = is_attr ? H5Aget_space(a) : H5Dget_space(a), sb = is_attr ? H5Aget_space(b) : H5Dget_space(b);
    if (H5Tequal(ta, tb) <= 0) fail_msg("%s: types differ", where);
    hssize_t n = H5Sget_simple_extent_npoints(sa);
    if (n != H5Sget_simple_extent_npoints(sb) || H5Sget_simple_extent_ndims(sa) != H5Sget_simple_extent_ndims(sb))
        fail_msg("%s: shapes differ", where);
    int vstr = H5Tget_class(ta) == H5T_STRING && H5Tis_variable_str(ta) > 0;
    size_t elem = vstr ? sizeof(char *) : H5Tget_size(ta);
    hid_t mt = H5Tcopy(ta); /* the stored bytes as they are (no conversion) */
    unsigned char *x = calloc((size_t)n + 1, elem), *y = calloc((size_t)n + 1, elem);
    assert_non_null(x);
    assert_non_null(y);
    if (n > 0) {
        herr_t ra = is_attr ? H5Aread(a, mt, x) : H5Dread(a, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, x);
        herr_t rb = is_attr ? H5Aread(b, mt, y) : H5Dread(b, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, y);
        if (ra < 0 || rb < 0) fail_msg("%s: cannot read", where);
    }
    if (vstr) {
        for (hssize_t i = 0; i < n; i++) {
            const char *u = ((char **)(void *)x)[i], *v = ((char **)(void *)y)[i];
            if (strcmp(u ? u : "", v ? v : "")) fail_msg("%s[%lld]: '%s' != '%s'", where, (long long)i, u, v);
        }
        H5Dvlen_reclaim(mt, sa, H5P_DEFAULT, x);
        H5Dvlen_reclaim(mt, sb, H5P_DEFAULT, y);
    } else if (H5Tget_class(ta) != H5T_REFERENCE && memcmp(x, y, (size_t)n * elem)) {
        fail_msg("%s: values differ", where);
    }
    free(x), free(y);
    H5Tclose(mt), H5Tclose(ta), H5Tclose(tb), H5Sclose(sa), H5Sclose(sb);
}

typedef struct cmp_ctx {
    hid_t other;
    const char *what;
    int compare; /* 0: only check that the object exists in `other` */
    size_t objects;
} cmp_ctx;

/* Dimension-scale bookkeeping attributes hold object references, which differ
 * between files by design; the attachments themselves are checked apart. */
static int reference_attr(const char *name)
{
    return !strcmp(name, "DIMENSION_LIST") || !strcmp(name, "REFERENCE_LIST");
}

static herr_t cmp_attr(hid_t obj, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    hid_t *pair = data; /* [0] the other file's object */
    if (reference_attr(name)) return 0;
    if (H5Aexists(pair[0], name) <= 0) fail_msg("attribute %s missing", name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), b = H5Aopen(pair[0], name, H5P_DEFAULT);
    compare_values(a, b, 1, name);
    H5Aclose(a), H5Aclose(b);
    return 0;
}

static herr_t cmp_object(hid_t root, const char *name, const H5O_info_t *info, void *data)
{
    cmp_ctx *c = data;
    c->objects++;
    if (!strcmp(name, ".")) return 0;
    if (H5LTpath_valid(c->other, name, 1) <= 0) fail_msg("%s: %s is missing", c->what, name);
    if (!c->compare) return 0;
    hid_t a = H5Oopen(root, name, H5P_DEFAULT), b = H5Oopen(c->other, name, H5P_DEFAULT);
    H5O_info_t ib;
    H5Oget_info(b, &ib);
    if (ib.type != info->type) fail_msg("%s: %s has another kind", c->what, name);
    if (info->type == H5O_TYPE_DATASET) compare_values(a, b, 0, name);
    hsize_t idx = 0;
    hid_t pair[1] = {b};
    H5Aiterate2(a, H5_INDEX_NAME, H5_ITER_INC, &idx, cmp_attr, pair);
    if (H5Aget_num_attrs(a) != H5Aget_num_attrs(b)) fail_msg("%s: %s has other attributes", c->what, name);
    H5Oclose(a), H5Oclose(b);
    return 0;
}

/* Every object of `single` is in `joined` with the same values and attributes, and
 * `joined` holds no more objects. */
static void compare_files(const char *single, const char *joined)
{
    hid_t fs = H5Fopen(single, H5F_ACC_RDONLY, H5P_DEFAULT), fj = H5Fopen(joined, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(fs >= 0 && fj >= 0);
    cmp_ctx c = {fj, joined, 1, 0}, back = {fs, single, 0, 0};
    assert_true(H5Ovisit(fs, H5_INDEX_NAME, H5_ITER_INC, cmp_object, &c) >= 0);
    assert_true(H5Ovisit(fj, H5_INDEX_NAME, H5_ITER_INC, cmp_object, &back) >= 0);
    assert_int_equal(c.objects, back.objects);
    hsize_t idx = 0;
    hid_t pair[1] = {fj};
    H5Aiterate2(fs, H5_INDEX_NAME, H5_ITER_INC, &idx, cmp_attr, pair); /* root attributes */
    assert_int_equal(H5Aget_num_attrs(fs), H5Aget_num_attrs(fj));
    H5Fclose(fs), H5Fclose(fj);
}

/* In every sample of the dump: the maps' dimension scales are attached and live in the
 * sample's own attn group, and every dataset dump_schema.h declares always written
 * (for this model type) is there. */
static void check_samples(const char *path, int diff, size_t n)
{
    static const char *const scales[4] = {DFL_DS_ATTN_LAYERS, DFL_DS_ATTN_HEADS, DFL_DS_ATTN_ROWS, DFL_DS_ATTN_KEYS};
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    for (size_t i = 0; i < n; i++) {
        char g[64], p[192];
        snprintf(g, sizeof g, DFL_DS_SAMPLE_FMT, i);
        for (size_t e = 0; e < DFL_DUMP_SCHEMA_ENTRIES; e++) {
            const dfl_dump_entry *x = &dfl_dump_schema[e];
            if (x->kind != DFL_ENTRY_DATASET || x->presence != DFL_ALWAYS || x->path[0] == '/' ||
                (x->models == DFL_MODELS_DIFF && !diff))
                continue;
            snprintf(p, sizeof p, "%s/%s", g, x->path);
            if (H5LTpath_valid(f, p, 1) <= 0) fail_msg("%s: %s missing", path, p);
        }
        snprintf(p, sizeof p, "%s/%s", g, DFL_DS_ATTN_MAP1);
        hid_t m = H5Dopen2(f, p, H5P_DEFAULT);
        assert_true(m >= 0);
        for (unsigned d = 0; d < 4; d++) {
            snprintf(p, sizeof p, "%s/%s", g, scales[d]);
            hid_t sc = H5Dopen2(f, p, H5P_DEFAULT);
            assert_true(sc >= 0);
            if (H5DSis_attached(m, sc, d) <= 0) fail_msg("%s: %s is not attached to dimension %u", path, p, d);
            H5Dclose(sc);
        }
        H5Dclose(m);
    }
    H5Fclose(f);
}

/* ---------------------------------------------------------------- tests */

static void test_join_equals_single(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        path_buf ps = at("single.h5"), pa = at("part0.h5"), pb = at("part1.h5");
        const char *single = ps.s, *a = pa.s, *b = pb.s;
        static const size_t s0[2] = {0, 2}, s1[1] = {1};
        probe(MODELS[i], single, NULL, 0);
        probe(MODELS[i], a, s0, 2);
        probe(MODELS[i], b, s1, 1);
        const char *parts[1] = {b};
        dfl_error err = {DFL_OK, ""};
        if (dfl_dump_join(a, parts, 1, &err)) fail_msg("join: %s", err.msg);
        compare_files(single, a);
        check_samples(a, i == 1, 3);
        check_samples(single, i == 1, 3);
        remove(single), remove(a), remove(b);
    }
}

/* A rank with no prompt writes a dump without samples: joining it changes nothing;
 * joining three parts in any order gives the same file. */
static void test_join_empty_and_three_parts(void **state)
{
    (void)state;
    path_buf ps = at("single.h5"), pa = at("p2.h5"), pb = at("p0.h5"), pc = at("p1.h5"), pn = at("none.h5");
    const char *single = ps.s, *a = pa.s, *b = pb.s, *c = pc.s, *none = pn.s;
    static const size_t s0[1] = {0}, s1[1] = {1}, s2[1] = {2};
    probe("diff_transformer", single, NULL, 0);
    probe("diff_transformer", a, s2, 1);
    probe("diff_transformer", b, s0, 1);
    probe("diff_transformer", c, s1, 1);
    probe("diff_transformer", none, s0, 0);
    const char *parts[3] = {none, c, b};
    dfl_error err = {DFL_OK, ""};
    if (dfl_dump_join(a, parts, 3, &err)) fail_msg("join: %s", err.msg);
    compare_files(single, a);
    remove(single), remove(a), remove(b), remove(c), remove(none);
}

/* nonfinite_samples counts the joined samples that carry nonfinite_layer. */
static void test_join_recounts_nonfinite(void **state)
{
    (void)state;
    path_buf pa = at("n0.h5"), pb = at("n1.h5");
    const char *a = pa.s, *b = pb.s;
    static const size_t s0[2] = {0, 1}, s1[1] = {2};
    probe("llama", a, s0, 2);
    probe("llama", b, s1, 1);
    /* mark sample 2 of the second part as if its forward pass had met a NaN */
    hid_t f = H5Fopen(b, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t g = H5Gopen2(f, "samples/000002", H5P_DEFAULT), sp = H5Screate(H5S_SCALAR);
    int64_t one = 1;
    hid_t at = H5Acreate2(g, DFL_ATTR_NONFINITE_LAYER, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(at >= 0 && H5Awrite(at, H5T_NATIVE_INT64, &one) >= 0);
    H5Aclose(at), H5Sclose(sp), H5Gclose(g), H5Fclose(f);
    const char *parts[1] = {b};
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_dump_join(a, parts, 1, &err), DFL_OK);
    f = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT);
    int64_t n = -1;
    hid_t r = H5Aopen(f, DFL_ATTR_NONFINITE_SAMPLES, H5P_DEFAULT);
    assert_true(r >= 0 && H5Aread(r, H5T_NATIVE_INT64, &n) >= 0);
    H5Aclose(r), H5Fclose(f);
    assert_int_equal(n, 1);
    remove(a), remove(b);
}

static void expect_fail(const char *into, const char *part, dfl_status want, const char *needle)
{
    const char *parts[1] = {part};
    dfl_error err = {DFL_OK, ""};
    assert_int_equal(dfl_dump_join(into, parts, 1, &err), want);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void test_join_errors(void **state)
{
    (void)state;
    path_buf pa = at("e0.h5"), pb = at("e1.h5"), pt = at("notes.txt"), ph = at("plain.h5"), pm = at("missing.h5");
    const char *a = pa.s, *b = pb.s, *txt = pt.s, *h5 = ph.s;
    static const size_t s0[2] = {0, 1}, s1[2] = {1, 2};
    probe("llama", a, s0, 2);
    probe("llama", b, s1, 2);
    /* sample 1 in both */
    expect_fail(a, b, DFL_ERR_FORMAT, "sample 000001 is also in");
    /* a part that is not there */
    expect_fail(a, pm.s, DFL_ERR_IO, "cannot read the part dump");
    /* a part that is not HDF5 */
    FILE *f = fopen(txt, "w");
    assert_non_null(f);
    fputs("not a dump\n", f);
    fclose(f);
    expect_fail(a, txt, DFL_ERR_HDF5, "failed to open the part dump");
    /* HDF5, but not a dump */
    hid_t h = H5Fcreate(h5, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(h >= 0);
    H5Gclose(H5Gcreate2(h, "samples", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Fclose(h);
    expect_fail(a, h5, DFL_ERR_FORMAT, "not a difflens dump");
    /* an `into` that is not HDF5 */
    expect_fail(txt, b, DFL_ERR_HDF5, "failed to open the dump for joining");
    remove(a), remove(b), remove(txt), remove(h5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_equals_single),
        cmocka_unit_test(test_join_empty_and_three_parts),
        cmocka_unit_test(test_join_recounts_nonfinite),
        cmocka_unit_test(test_join_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
