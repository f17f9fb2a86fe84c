/* dump_chunks.h — internal to the dump reader: reading boxes of chunked float datasets
 * by decoding their stored chunks directly, on all cores.
 *
 * HDF5's own read path inflates one chunk at a time on one core and copies it twice.
 * Here HDF5 only hands over the stored bytes of the chunks a box touches (serially, it
 * is not thread-safe: H5Dread_chunk, one index probe each); they are then inflated,
 * unshuffled, converted to f32 and scattered into the caller's buffer in parallel.
 * Only the layouts probe and h5py write by default are taken: little-endian f16/f32,
 * chunked, at least one filter, drawn from shuffle then deflate (without one the chunk
 * index keeps no lengths to trust), a defined fill value.
 * dfl__chunks_open reports anything else as "not eligible" and the caller falls back
 * to H5Dread; both paths give bit-identical results. A reader must not
 * outlive the file it was opened on. */
#ifndef DFL_DUMP_CHUNKS_H
#define DFL_DUMP_CHUNKS_H

#include <hdf5.h>

#include "dump/dump_read.h"

typedef struct dfl__chunks dfl__chunks;

/* Inspect dset (described by info; lut: f16 -> f32 table for f16 data, else NULL,
 * borrowed for the reader's lifetime). *out is NULL, with DFL_OK, when the dataset is
 * not one this path decodes. The caller owns *out: dfl__chunks_close (NULL ok).
 * DFL_ERR_NOMEM, DFL_ERR_HDF5. */
dfl_status dfl__chunks_open(hid_t dset, const dfl_dump_dset_info *info, const float *lut, dfl__chunks **out,
                            dfl_error *err);

/* Read the box start + count (already checked against the extent) as f32 into out,
 * row-major over count. `where` names the dataset in messages ("file: name").
 * DFL_ERR_FORMAT for a chunk that does not decode, DFL_ERR_HDF5, DFL_ERR_NOMEM. */
dfl_status dfl__chunks_read(dfl__chunks *c, const int64_t *start, const int64_t *count, float *out, const char *where,
                            dfl_error *err);

void dfl__chunks_close(dfl__chunks *c);

/* For tests (in dump_read.c): whether slab s decodes chunks directly; on = 0 switches it
 * to HDF5's reads for good, so both paths can be compared on one dataset. */
int dfl__dump_slab_direct(dfl_dump_slab *s, int on);

#endif
