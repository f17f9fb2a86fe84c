/* dump_writer.h — internal to the dump writer (dump.c, dump_direct.c): the writer's and
 * the streams' state, and the one place a stream's dataset is created. Includes hdf5.h,
 * as only lib/dump does. */
#ifndef DFL_DUMP_WRITER_H
#define DFL_DUMP_WRITER_H

#include <hdf5.h>

#include "dump/dump.h"

struct dfl_dump {
    hid_t file;
    hid_t sample; /* current /samples/NNNNNN group, or -1 */
    hid_t f16;    /* IEEE half type, little-endian */
    char *path, *tmp;
    int overwrite;
    int failed; /* a write was refused: the file can only be discarded */
};

/* A direct stream's staging, queue and compressors (dump_direct.c). */
typedef struct dfl__direct direct_state;

struct dfl_dump_stream {
    dfl_dump *d;
    hid_t dset;
    dfl_h5_type type;
    int ndim;
    uint16_t *half; /* conversion buffer for F16 writes */
    float *packed;  /* packing buffer for strided F32 writes */
    size_t cap;
    direct_state *direct; /* chunks assembled here (dfl_dump_stream_create_direct), else NULL */
};

/* Create the chunked dataset of stream s (dims[ndim], chunk[ndim]) filled with 0 where
 * never written: deflate >= 0 declares shuffle + deflate at that level, -1 no filter;
 * dapl: access properties (H5P_DEFAULT). Sets s->d, dset, type, ndim; the caller
 * frees s on failure. DFL_ERR_HDF5. */
dfl_status dfl__dump_stream_open(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                 const hsize_t *chunk, int deflate, hid_t dapl, dfl_dump_stream *s, dfl_error *err);

/* The direct stream's write (see dfl_dump_stream_write_f32), pump
 * (dfl_dump_stream_pump) and release (NULL ok). */
dfl_status dfl__direct_write(dfl_dump_stream *s, const int64_t *start, const int64_t *count, const float *data,
                             int64_t ld, dfl_error *err);
dfl_status dfl__direct_pump(dfl_dump_stream *s, dfl_error *err);
int64_t dfl__direct_jobs(dfl_dump_stream *s);
void dfl__direct_work(dfl_dump_stream *s, int64_t k, int thread);
void dfl__direct_free(direct_state *x);

#endif
