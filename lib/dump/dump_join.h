/* dump_join.h — one dump from the dumps of disjoint prompt subsets (MPI ranks' parts).
 *
 * Each part is a complete dump (root attributes, /model, /samples/NNNNNN) written by
 * probe for a subset of the prompts, its samples named by their index in the whole
 * prompt file. Joining moves the sample groups of the other parts into one of them,
 * which then reads as the dump a single process writes for the whole file: the same
 * root attributes, every sample under its own index, in prompt order.
 */
#ifndef DFL_DUMP_JOIN_H
#define DFL_DUMP_JOIN_H

#include <stddef.h>

#include "base/status.h"

/* Copy every /samples/NNNNNN group of parts[0..n) into the dump file `into` (modified
 * in place; the caller renames it into place afterwards). Chunks are copied as stored,
 * compressed, with no decoding; the dimension scales inside each copied group are
 * attached anew, since HDF5 does not carry object references between files; root
 * counts over samples (nonfinite_samples) are counted again. The parts are only read.
 * DFL_ERR_IO when a part cannot be read or the file system of `into` has less room than
 * the parts take (checked before any copy), DFL_ERR_HDF5 (a file HDF5 cannot open,
 * with the file and group), DFL_ERR_FORMAT (a sample present twice, or a part whose
 * root attribute format is not "difflens-dump"). On error `into` is left partly
 * joined: remove it. tests/test_dump_join.c checks it against a single-process dump. */
dfl_status dfl_dump_join(const char *into, const char *const *parts, size_t n, dfl_error *err);

#endif
