/* fuzz_dump_read.c — libFuzzer target for the dump reader every tool uses
 * (dump_read.c and its chunk decoder): any file must give data or a clean error.
 * The bytes are written to a file (HDF5 opens paths) and everything a tool reads is
 * read: root attributes, the sample list, each sample's datasets (whole, as strings,
 * and a box of each map through the chunk decoder). Seeds: fuzz/make_dump_seeds.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump/dump_read.h"

/* what the tools read from a sample (docs/format.md) */
static const char *const k_paths[] = {"tokens",
                                      "segments",
                                      "nll",
                                      "argmax",
                                      "target_correct",
                                      "target_nll",
                                      "attn/map1",
                                      "attn/map2",
                                      "attn/diff",
                                      "attn/layers",
                                      "attn/heads",
                                      "attn/rows",
                                      "noise/shares",
                                      "noise/shares_abs",
                                      "noise/raw",
                                      "noise/rows",
                                      "outliers/logits/top_values",
                                      "outliers/logits/hist",
                                      "outliers/logits/moments",
                                      "outliers/hidden/top_values",
                                      "outliers/hidden/hist",
                                      "outliers/hidden/channel_absmax",
                                      "outliers/hidden/channel_count",
                                      "logits"};

static void read_sample(const dfl_dump_reader *r, const dfl_dump_sample *s)
{
    dfl_error err;
    char path[256];
    for (size_t i = 0; i < sizeof k_paths / sizeof *k_paths; i++) {
        snprintf(path, sizeof path, "%s/%s", s->group, k_paths[i]);
        dfl_dump_dset_info info;
        if (dfl_dump_dataset_info(r, path, &info, &err)) continue;
        int64_t n = 1;
        for (int d = 0; d < info.ndim; d++)
            n = info.dims[d] > 0 && n < (1 << 22) ? n * info.dims[d] : 0;
        if (n <= 0 || n > (1 << 20)) continue; /* the fuzzer's memory, not a reader bug */
        void *buf = NULL;
        if (!dfl_dump_read_alloc(r, path, DFL_H5_F64, &buf, NULL, &err)) free(buf);
        char **str = NULL;
        size_t ns = 0;
        if (!dfl_dump_read_strings(r, path, &str, &ns, &err)) dfl_dump_strings_free(str, ns);
        dfl_dump_slab *slab = NULL;
        if (!dfl_dump_slab_open(r, path, &slab, &err)) {
            int64_t start[DFL_DUMP_MAX_RANK], count[DFL_DUMP_MAX_RANK];
            for (int d = 0; d < info.ndim; d++) {
                start[d] = info.dims[d] / 2;
                count[d] = info.dims[d] - start[d];
            }
            float *out = dfl__alloc_array((size_t)n, sizeof(float));
            if (out) dfl_dump_slab_read_f32(slab, start, count, out, &err);
            free(out);
            dfl_dump_slab_close(slab);
        }
    }
    char *id = NULL;
    if (!dfl_dump_get_attr_str(r, s->group, "id", &id, &err)) free(id);
    double depth;
    dfl_dump_get_attr_f64(r, s->group, "depth", &depth, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/dev/shm/fuzz_dump_%d.h5", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    dfl_dump_reader *r = NULL;
    dfl_error err;
    if (dfl_dump_open(path, &r, &err) == DFL_OK) {
        int64_t v;
        char *s = NULL;
        const char *ints[] = {"num_layers", "num_heads", "head_dim", "topk", "format_version"};
        for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
            dfl_dump_get_attr_i64(r, "/", ints[i], &v, &err);
        if (!dfl_dump_get_attr_str(r, "/", "model_type", &s, &err)) free(s);
        const dfl_dump_sample *found = NULL;
        dfl_dump_sample_find(r, "0", &found, &err);
        size_t n = dfl_dump_sample_count(r);
        for (size_t i = 0; i < n && i < 4; i++)
            read_sample(r, dfl_dump_sample_at(r, i));
        dfl_dump_close(r);
    }
    unlink(path);
    return 0;
}
