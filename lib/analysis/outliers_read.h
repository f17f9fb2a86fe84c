/* outliers_read.h — internal to outliers.c: one sample's outlier datasets read through
 * the sample's open group, for the layout probe writes.
 *
 * dfl_dump_read finds each dataset from the root by path and checks every prefix of it
 * on each call; over the 11 datasets of a sample that is most of the time of a load.
 * Here a sample's groups are opened once (dump_read's group-relative reads, with the
 * same link and storage refusals) and each dataset read straight into the caller's
 * buffer. Only what probe writes is taken: the shapes below and element types equal to
 * the memory types (no HDF5 conversion). Anything else — a missing dataset, another
 * shape or type, a refused link or storage — makes the read answer "not taken", and
 * the caller reads that sample through dfl_dump_read, which gives the same numbers or
 * names the fault.
 */
#ifndef DFL_OUTLIERS_READ_H
#define DFL_OUTLIERS_READ_H

#include <stdint.h>

#include "dump/dump_read.h"

/* One sample's datasets, in caller-owned buffers. k = 0 logits, 1 hidden. */
typedef struct dfl__outliers_sample {
    int64_t tokens;    /* tokens' length */
    float *top[2];     /* [L, K] outliers/<kind>/top */
    int32_t *idx[2];   /* [L, K, 4] logits, [L, K, 2] hidden: outliers/<kind>/top_index */
    uint64_t *hist[2]; /* [L, B] outliers/<kind>/hist */
    double *mom[2];    /* [L, 6] outliers/<kind>/moments */
    float *cabs;       /* [L, D] outliers/hidden/channel_absmax */
    uint32_t *ccnt;    /* [L, D] outliers/hidden/channel_count */
} dfl__outliers_sample;

/* Read the datasets of the sample group `group` ("samples/000003") of r into out, for
 * L layers, top lists of K, B histogram bins and hidden size D. 1 when every dataset was
 * read; 0 when one is not as probe writes it (out is then partly filled: read the
 * sample again another way). Never prints, never fills an error record. */
int dfl__outliers_read_sample(const dfl_dump_reader *r, const char *group, int64_t L, int64_t K, int64_t B, int64_t D,
                              dfl__outliers_sample *out);

#endif
