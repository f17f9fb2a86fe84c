/* probe_clip.h — internal to probe: the run on a DiffCLIP or CLIP model (model/clip.h),
 * whose prompts are image prompts (docs/format.md "Image prompts"). dfl_probe_run hands
 * over to it when the model folder's config.json names model_type "diffclip" or "clip". */
#ifndef DFL_PROBE_CLIP_H
#define DFL_PROBE_CLIP_H

#include "analysis/probe.h"

/* 1 when DIR/config.json names model_type "diffclip" or "clip". */
int dfl__probe_is_clip(const char *model_dir);

/* dfl_probe_run for such a model: the image tower's maps (rows: the prompt's analysis
 * rows, or every token with p->maps enabled), object / background shares, outliers,
 * embeddings and zero-shot scores of the captions. Uses p's model_dir, prompts_path,
 * out_path, tokenizer_path, maps.enabled, topk, overwrite and cancel; the
 * rest is for text models. Nothing is left at out_path on error. */
dfl_status dfl__probe_clip_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err);

#endif
