/* outliers_read.h — internal to outliers.c: one sample's outlier datasets read through
 * the sample's open group, for the layout probe writes.
 *
 * dfl_dump_read (lib/dump) finds each dataset from the root by path and checks every
 * prefix of it on each call; over the 11 datasets of a sample that is most of the time
 * of a load. Here a sample's group is opened once and each dataset once, relative to
 * it, and read straight into the caller's buffer. Only what probe writes is taken: the
 * shapes below and element types equal to the memory types (no HDF5 conversion).
 * Anything else — a missing dataset, another shape or type — makes the read answer
 * "not taken", and the caller reads that sample through dfl_dump_read, which gives
 * the same numbers or words the error. The only file outside lib/dump that includes
 * hdf5.h (the dump reader has no call that reads relative to an open group).
 */
#ifndef DFL_OUTLIERS_READ_H
#define DFL_OUTLIERS_READ_H

#include <stdint.h>

typedef struct dfl__outliers_file dfl__outliers_file;

/* One sample's datasets, in caller-owned buffers. k = 0 logits, 1 hidden. */
typedef struct dfl__outliers_sample {
    int64_t tokens;          /* tokens' length (0 when tokens is not 1-D) */
    float *top[2];           /* [L, K] outliers/<kind>/top */
    int32_t *idx[2];         /* [L, K, 4] logits, [L, K, 2] hidden: outliers/<kind>/top_index */
    uint64_t *hist[2];       /* [L, B] outliers/<kind>/hist */
    double *mom[2];          /* [L, 6] outliers/<kind>/moments */
    float *cabs;             /* [L, D] outliers/hidden/channel_absmax */
    uint32_t *ccnt;          /* [L, D] outliers/hidden/channel_count */
} dfl__outliers_sample;

/* Open the dump at path for dfl__outliers_read_sample. NULL when HDF5 cannot open it
 * (the caller then reads every sample through dfl_dump_read). Close with
 * dfl__outliers_file_close (NULL ok). */
dfl__outliers_file *dfl__outliers_file_open(const char *path);
void dfl__outliers_file_close(dfl__outliers_file *f);

/* Read the datasets of the sample group `group` ("samples/000003") into out, for L
 * layers, top lists of K, B histogram bins and hidden size D. 1 when every dataset was
 * read; 0 when one is not as probe writes it (out is then partly filled: read the
 * sample again another way). Never prints. */
int dfl__outliers_read_sample(dfl__outliers_file *f, const char *group, int64_t L, int64_t K, int64_t B, int64_t D,
                              dfl__outliers_sample *out);

#endif
