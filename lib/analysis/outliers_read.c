/* outliers_read.c — one sample's outlier datasets through its open group (see
 * outliers_read.h). */
#include "analysis/outliers_read.h"

#include <hdf5.h>
#include <stdlib.h>

struct dfl__outliers_file {
    hid_t file;
};

dfl__outliers_file *dfl__outliers_file_open(const char *path)
{
    dfl__outliers_file *f = malloc(sizeof *f);
    if (!f) return NULL;
    H5E_BEGIN_TRY { f->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    if (f->file < 0) {
        free(f);
        return NULL;
    }
    return f;
}

void dfl__outliers_file_close(dfl__outliers_file *f)
{
    if (!f) return;
    H5Fclose(f->file);
    free(f);
}

/* Read dataset `name` of group g into out when it has exactly the dims want[nd] and the
 * element type mtype; 1 when read. */
static int read_exact(hid_t g, const char *name, int nd, const int64_t *want, hid_t mtype, void *out)
{
    hid_t ds = H5Dopen2(g, name, H5P_DEFAULT);
    if (ds < 0) return 0;
    hid_t sp = H5Dget_space(ds), t = H5Dget_type(ds);
    int ok = sp >= 0 && t >= 0 && H5Tequal(t, mtype) > 0 && H5Sget_simple_extent_ndims(sp) == nd;
    hsize_t dims[3];
    if (ok) ok = H5Sget_simple_extent_dims(sp, dims, NULL) == nd;
    for (int i = 0; ok && i < nd; i++) ok = (int64_t)dims[i] == want[i];
    if (ok) ok = H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(ds);
    return ok;
}

/* The length of tokens when it is stored as probe writes it (4-byte integers). */
static int read_tokens(hid_t g, int64_t *tokens)
{
    hid_t ds = H5Dopen2(g, "tokens", H5P_DEFAULT);
    if (ds < 0) return 0;
    hid_t sp = H5Dget_space(ds), t = H5Dget_type(ds);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    int ok = t >= 0 && H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 4 && nd >= 0 && nd <= 3;
    hsize_t dims[3];
    if (ok) ok = H5Sget_simple_extent_dims(sp, dims, NULL) == nd;
    if (ok) *tokens = nd == 1 ? (int64_t)dims[0] : 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(ds);
    return ok;
}

/* Both kinds' top, top_index, hist and moments, then the hidden channel profile. */
static int read_group(hid_t g, int64_t L, int64_t K, int64_t B, int64_t D, dfl__outliers_sample *out)
{
    static const char *const kinds[2] = {"outliers/logits", "outliers/hidden"};
    if (!read_tokens(g, &out->tokens)) return 0;
    for (int k = 0; k < 2; k++) {
        hid_t o = H5Gopen2(g, kinds[k], H5P_DEFAULT);
        if (o < 0) return 0;
        const int64_t d_top[2] = {L, K}, d_idx[3] = {L, K, k ? 2 : 4}, d_hist[2] = {L, B}, d_mom[2] = {L, 6};
        int ok = read_exact(o, "top", 2, d_top, H5T_NATIVE_FLOAT, out->top[k]) &&
                 read_exact(o, "top_index", 3, d_idx, H5T_NATIVE_INT32, out->idx[k]) &&
                 read_exact(o, "hist", 2, d_hist, H5T_NATIVE_UINT64, out->hist[k]) &&
                 read_exact(o, "moments", 2, d_mom, H5T_NATIVE_DOUBLE, out->mom[k]);
        if (ok && k == 1) {
            const int64_t d_ch[2] = {L, D};
            ok = read_exact(o, "channel_absmax", 2, d_ch, H5T_NATIVE_FLOAT, out->cabs) &&
                 read_exact(o, "channel_count", 2, d_ch, H5T_NATIVE_UINT32, out->ccnt);
        }
        H5Gclose(o);
        if (!ok) return 0;
    }
    return 1;
}

int dfl__outliers_read_sample(dfl__outliers_file *f, const char *group, int64_t L, int64_t K, int64_t B, int64_t D,
                              dfl__outliers_sample *out)
{
    int ok = 0;
    H5E_BEGIN_TRY
    {
        hid_t g = H5Gopen2(f->file, group, H5P_DEFAULT);
        if (g >= 0) {
            ok = read_group(g, L, K, B, D, out);
            H5Gclose(g);
        }
    }
    H5E_END_TRY;
    return ok;
}
