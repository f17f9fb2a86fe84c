/* dump_sample.h — one sample of a dump as a figure or the viewer reads it: its tokens,
 * segments and token text, and the geometry of its attention maps with the scales that
 * name what was captured. Built on dump_read.h; every figure that draws a sample's maps
 * (attnmap, bin/view, a new one) reads them through here, so they all accept and refuse
 * the same dumps.
 *
 *   samples/NNNNNN/tokens         i32 [T]
 *   samples/NNNNNN/segments       u8 [T]      (optional: all context when absent)
 *   samples/NNNNNN/token_text     str [T]     (optional; ignored unless one per token)
 *   samples/NNNNNN/attn/map1      [Ls, Hs, R, T]; map2 and diff (Diff dumps) the same shape,
 *                                 but map2 [Ls, Gs, R, T] under attn/noise_groups (Motif GDA)
 *   samples/NNNNNN/attn/noise_groups i32 [Gs], with /model/noise_group i32 [H]
 *   samples/NNNNNN/attn/layers    i32 [Ls]  \
 *   samples/NNNNNN/attn/heads     i32 [Hs]   > strictly ascending (0 .. n-1 when absent);
 *   samples/NNNNNN/attn/rows      i32 [R]   /  rows are query positions inside [0, T)
 */
#ifndef DFL_DUMP_SAMPLE_H
#define DFL_DUMP_SAMPLE_H

#include <stdint.h>

#include "dump/dump_read.h"

/* The attention maps under attn/, in the order of their bits in dfl_dump_attn.maps. */
typedef enum dfl_dump_map { DFL_DUMP_MAP1 = 0, DFL_DUMP_MAP2, DFL_DUMP_DIFF, DFL_DUMP_NMAPS } dfl_dump_map;

/* "map1", "map2", "diff": the dataset names; "?" out of range. */
const char *dfl_dump_map_name(dfl_dump_map m);

/* Read the scale attn/NAME (NAME "layers", "heads" or "rows") of the attention group
 * `attn` ("samples/NNNNNN/attn") as n int32 into *out, or 0 .. n-1 when the dump has
 * none. The values must be strictly ascending: DFL_ERR_FORMAT naming the dataset
 * otherwise; read errors of dfl_dump_read; DFL_ERR_NOMEM. The caller frees *out
 * (NULL on failure). */
dfl_status dfl_dump_read_scale(const dfl_dump_reader *r, const char *attn, const char *name, int64_t n, int32_t **out,
                               dfl_error *err);

/* A sample's tokens and their labels. */
typedef struct dfl_dump_tokens {
    int64_t T;
    int32_t *tokens;   /* [T] */
    uint8_t *segments; /* [T]; 0 (context) everywhere when the dump has none */
    char **text;       /* [T], or NULL when the dump has no token_text of T strings */
} dfl_dump_tokens;

/* Read the tokens, segments and token text of sample s into *out (zeroed first).
 * Statuses of dfl_dump_read (DFL_ERR_TENSOR: no tokens, or segments
 * of another length), DFL_ERR_NOMEM. On failure nothing is left to free. */
dfl_status dfl_dump_tokens_read(const dfl_dump_reader *r, const dfl_dump_sample *s, dfl_dump_tokens *out,
                                dfl_error *err);
/* Free what dfl_dump_tokens_read allocated and zero *t; accepts NULL. */
void dfl_dump_tokens_free(dfl_dump_tokens *t);

/* The geometry of a sample's attention maps. */
typedef struct dfl_dump_attn {
    char group[64];                 /* "samples/NNNNNN/attn" */
    unsigned maps;                  /* bit m set when dfl_dump_map m is stored */
    int f16;                        /* the maps are stored as IEEE half */
    int64_t Ls, Hs, R, T;           /* the maps' shape; Ls = Hs = R = 0 when none is stored */
    int32_t *layers, *heads, *rows; /* [Ls], [Hs], [R] the scales; NULL when no map */
    int32_t *map2_head;             /* [Hs] where stored head i is on map2's head axis: i, or
                                     * (Motif GDA, attn/noise_groups) its noise group's
                                     * position; NULL when no map */
} dfl_dump_attn;

/* The index on map m's head axis of stored head position hi (map2 of Motif GDA dumps
 * holds one map per noise group: a->map2_head[hi]; every other map: hi). */
static inline int64_t dfl_dump_attn_head_index(const dfl_dump_attn *a, dfl_dump_map m, int64_t hi)
{
    return m == DFL_DUMP_MAP2 && a->map2_head ? a->map2_head[hi] : hi;
}

/* Find the maps of sample s, whose tokens number T, check that each stored map is
 * [Ls, Hs, R, T] with one shape for all (map2 of a Motif GDA dump: [Ls, Gs, R, T], each
 * stored head's noise group among attn/noise_groups: map2_head), and read their scales (dfl_dump_read_scale;
 * rows must also lie inside [0, T)). No map at all is not an error (maps == 0).
 * DFL_ERR_FORMAT naming the dataset, statuses of dfl_dump_read, DFL_ERR_NOMEM. On
 * failure nothing is left to free. */
dfl_status dfl_dump_attn_open(const dfl_dump_reader *r, const dfl_dump_sample *s, int64_t T, dfl_dump_attn *out,
                              dfl_error *err);
/* Free the scales and zero *a; accepts NULL. */
void dfl_dump_attn_free(dfl_dump_attn *a);

#endif
