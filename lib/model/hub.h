/* hub.h — models named ORG/NAME[@REVISION] found in the local Hugging Face cache, laid out
 * as huggingface_hub writes it (file_download.py), and never fetched: difflens does no
 * network access at all.
 *
 *   CACHE/models--ORG--NAME/
 *       refs/REVISION            a text file holding a 40-hex commit hash ("main" by default)
 *       snapshots/HASH/FILE      symlinks (relative) into blobs/, one per downloaded file:
 *                                config.json, model.safetensors or model.safetensors.index.json
 *                                and its shards, tokenizer.json, tokenizer_config.json, ...
 *       blobs/ETAG               the files' contents
 *
 * CACHE is the first that is set (and not empty) of HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE
 * (its old name), HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, and ~/.cache/huggingface/hub,
 * the order of huggingface_hub's constants.py; a leading "~/" is the home folder. A
 * REVISION with a refs/ file is replaced by the hash it holds; otherwise it names the
 * snapshot folder itself (a commit hash given directly), as try_to_load_from_cache does.
 * The snapshot folder is then read like any model folder: opening its files follows the
 * symlinks into blobs/. */
#ifndef DFL_HUB_H
#define DFL_HUB_H

#include "base/status.h"

/* 1 when `model` names a hub model rather than a path: nothing exists at that path and
 * it reads ORG/NAME or ORG/NAME@REVISION (ORG and NAME of letters, digits, '-', '_', '.',
 * not starting or ending with '-' or '.', without "--" or ".."); else 0. */
int dfl_hub_is_ref(const char *model);

/* The cache folder as described above, malloc'ed into *dir (caller frees), and in
 * *source the variable it came from ("HF_HUB_CACHE", ..., or "default"). DFL_ERR_IO
 * when no variable is set and HOME is unknown, DFL_ERR_NOMEM. */
dfl_status dfl_hub_cache_dir(char **dir, const char **source, dfl_error *err);

/* The snapshot folder of ORG/NAME[@REVISION] (default revision "main"), malloc'ed into
 * *dir (caller frees); it holds config.json and model.safetensors or its index, each
 * resolving to a blob. DFL_ERR_USAGE for a malformed reference; DFL_ERR_IO naming the
 * cache, where it came from and each path tried when the model, the revision or one of
 * those files is not there (a dangling symlink: its blob is missing); DFL_ERR_NOMEM. */
dfl_status dfl_hub_resolve(const char *ref, char **dir, dfl_error *err);

/* `model` as a folder to load: a malloc'ed copy of it when it is a path, its snapshot
 * folder (dfl_hub_resolve) when dfl_hub_is_ref(model). Caller frees *dir. */
dfl_status dfl_hub_model_dir(const char *model, char **dir, dfl_error *err);

#endif
