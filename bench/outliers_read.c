/* outliers_read.c — the time of reading what bin/outliers reads, and nothing else: a
 * minimal HDF5 loop over a dump's samples (one H5Literate over /samples; per sample one
 * H5Gopen, the length of tokens, and one H5Dopen + H5Dread + H5Dclose of each of
 * outliers/{logits,hidden}/{top, top_index, hist, moments} and
 * outliers/hidden/{channel_absmax, channel_count}, in their stored types, into one
 * reused buffer). No checks, no pooling: the floor a reader of these datasets pays.
 *
 *   outliers_read DUMP REPEATS     prints "best_seconds samples tokens"
 *
 * Each run opens and closes the file; the best (minimum) wall time counts. */
#define _POSIX_C_SOURCE 200809L
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *const names[10] = {
    "outliers/logits/top",          "outliers/logits/top_index", "outliers/logits/hist",
    "outliers/logits/moments",      "outliers/hidden/top",       "outliers/hidden/top_index",
    "outliers/hidden/hist",         "outliers/hidden/moments",   "outliers/hidden/channel_absmax",
    "outliers/hidden/channel_count"};

typedef struct run_state {
    unsigned char *buf; /* [cap] every dataset lands here */
    size_t cap;
    long samples, tokens;
    int failed;
} run_state;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Read one dataset of group g whole, in its stored type. */
static void read_one(hid_t g, const char *name, run_state *st)
{
    hid_t ds = H5Dopen2(g, name, H5P_DEFAULT), t = ds >= 0 ? H5Dget_type(ds) : -1, sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t bytes = t >= 0 && n >= 0 ? (size_t)n * H5Tget_size(t) : 0;
    if (ds < 0 || t < 0 || n < 0 || bytes > st->cap || H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, st->buf) < 0)
        st->failed = 1;
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (ds >= 0) H5Dclose(ds);
}

static herr_t one_sample(hid_t samples, const char *name, const H5L_info_t *info, void *user)
{
    (void)info;
    run_state *st = user;
    hid_t g = H5Gopen2(samples, name, H5P_DEFAULT);
    if (g < 0) {
        st->failed = 1;
        return 0;
    }
    hid_t ds = H5Dopen2(g, "tokens", H5P_DEFAULT), sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (n < 0)
        st->failed = 1;
    else
        st->tokens += (long)n;
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    for (int i = 0; i < 10; i++)
        read_one(g, names[i], st);
    H5Gclose(g);
    st->samples++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: outliers_read DUMP REPEATS\n");
        return 2;
    }
    char *end;
    long repeats = strtol(argv[2], &end, 10);
    run_state st = {malloc(64 << 20), 64 << 20, 0, 0, 0};
    if (!st.buf || *end || repeats < 1 || repeats > 1000) return 2;
    double best = -1;
    for (long r = 0; r < repeats; r++) {
        st.samples = st.tokens = 0;
        double t0 = now();
        hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t g = f >= 0 ? H5Gopen2(f, "samples", H5P_DEFAULT) : -1;
        if (g < 0 || H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, one_sample, &st) < 0) st.failed = 1;
        if (g >= 0) H5Gclose(g);
        if (f >= 0) H5Fclose(f);
        double t = now() - t0;
        if (best < 0 || t < best) best = t;
    }
    free(st.buf);
    if (st.failed) {
        fprintf(stderr, "outliers_read: %s: a dataset could not be read\n", argv[1]);
        return 1;
    }
    printf("%.4f %ld %ld\n", best, st.samples, st.tokens);
    return 0;
}
