/* attnmap_image.h — internal to attnmap: the overlay of an image tower's attention on
 * the image (attnmap_image.c), for dumps of DiffCLIP and CLIP image prompts. */
#ifndef DFL_ATTNMAP_IMAGE_H
#define DFL_ATTNMAP_IMAGE_H

#include "render/attnmap.h"

/* 1 when the dump's model_type is "diffclip" or "clip". */
int dfl__attnmap_is_image(const char *dump_path);

/* dfl_attnmap_run for such a dump: one layer (default the last) and head (default 0,
 * or the mean), the stored row p->rows[0] (default the first stored row, the class
 * token), map1 | map2 | diff with DFL_ATTN_ALL, p->vs_path beside it, one colour scale.
 * Statuses as dfl_attnmap_run. */
dfl_status dfl__attnmap_image_run(const dfl_attnmap_params *p, dfl_attnmap_report *rep, dfl_error *err);

#endif
