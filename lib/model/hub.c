/* hub.c — ORG/NAME[@REVISION] to a snapshot folder of the local Hugging Face cache
 * (layout and rules in hub.h). Only stat, lstat and reading refs/ files: no network. */
#include "model/hub.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/strbuf.h"

/* ------------------------------------------------------------------ naming */

/* One part of a repo id: huggingface_hub's validate_repo_id rules. */
static int id_part_ok(const char *s, size_t n)
{
    if (n == 0 || n > 96) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '_' && c != '.') return 0;
        if (i + 1 < n && ((c == '-' && s[i + 1] == '-') || (c == '.' && s[i + 1] == '.'))) return 0;
    }
    return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

/* Split "ORG/NAME[@REV]": lengths of ORG and NAME, *rev the revision or NULL. */
static int split_ref(const char *ref, size_t *org_n, size_t *name_n, const char **rev)
{
    const char *slash = strchr(ref, '/');
    if (!slash) return 0;
    const char *at = strchr(slash, '@');
    *org_n = (size_t)(slash - ref);
    *name_n = at ? (size_t)(at - slash - 1) : strlen(slash + 1);
    *rev = at ? at + 1 : NULL;
    if (!id_part_ok(ref, *org_n) || !id_part_ok(slash + 1, *name_n)) return 0;
    if (*rev && (!**rev || strstr(*rev, "..") || **rev == '/')) return 0;
    return 1;
}

int dfl_hub_is_ref(const char *model)
{
    struct stat st;
    size_t a, b;
    const char *rev;
    if (!model || lstat(model, &st) == 0) return 0;
    return split_ref(model, &a, &b, &rev);
}

/* ------------------------------------------------------------------ the cache */

static char *join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 2);
    if (p) snprintf(p, na + nb + 2, "%s/%s", a, b);
    return p;
}

/* "~/x" -> "$HOME/x"; anything else copied. */
static char *expand_home(const char *path)
{
    const char *home = getenv("HOME");
    if ((path[0] == '~' && (path[1] == '/' || !path[1])) && home && home[0]) return join(home, path[1] ? path + 2 : "");
    return strdup(path);
}

static const char *env_set(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

dfl_status dfl_hub_cache_dir(char **dir, const char **source, dfl_error *err)
{
    const char *v;
    char *base = NULL;
    *dir = NULL;
    if ((v = env_set("HF_HUB_CACHE"))) {
        *source = "HF_HUB_CACHE";
        *dir = expand_home(v);
    } else if ((v = env_set("HUGGINGFACE_HUB_CACHE"))) {
        *source = "HUGGINGFACE_HUB_CACHE";
        *dir = expand_home(v);
    } else if ((v = env_set("HF_HOME"))) {
        *source = "HF_HOME";
        if ((base = expand_home(v))) *dir = join(base, "hub");
    } else if ((v = env_set("XDG_CACHE_HOME"))) {
        *source = "XDG_CACHE_HOME";
        if ((base = expand_home(v))) *dir = join(base, "huggingface/hub");
    } else {
        *source = "default";
        if (!env_set("HOME"))
            return dfl__fail(err, DFL_ERR_IO, "no Hugging Face cache: HF_HUB_CACHE, HF_HOME and HOME are unset");
        *dir = expand_home("~/.cache/huggingface/hub");
    }
    free(base);
    return *dir ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
}

/* ------------------------------------------------------------------ resolving */

/* "(missing)", "(a dangling symlink: its blob is missing)" or NULL when path is a
 * readable file (or folder when want_dir). */
static const char *why_not(const char *path, int want_dir)
{
    struct stat st, lst;
    if (stat(path, &st) == 0)
        return want_dir ? (S_ISDIR(st.st_mode) ? NULL : "(not a folder)")
                        : (S_ISREG(st.st_mode) ? NULL : "(not a file)");
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) return "(a symlink to a missing blob)";
    return "(missing)";
}

/* refs/REV's hash into hash (40 hex digits), "" if there is no such file. */
static dfl_status read_ref(const char *path, char hash[64], dfl_error *err)
{
    hash[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT || errno == ENOTDIR
                   ? DFL_OK
                   : dfl__fail(err, DFL_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    size_t n = fread(hash, 1, 63, f);
    fclose(f);
    hash[n] = '\0';
    while (n > 0 && isspace((unsigned char)hash[n - 1]))
        hash[--n] = '\0';
    int hex = n == 40;
    for (size_t i = 0; i < n && hex; i++)
        hex = isxdigit((unsigned char)hash[i]) != 0;
    return hex ? DFL_OK : dfl__fail(err, DFL_ERR_FORMAT, "%s does not hold a 40-hex commit hash", path);
}

dfl_status dfl_hub_resolve(const char *ref, char **dir, dfl_error *err)
{
    size_t org_n, name_n;
    const char *rev;
    *dir = NULL;
    if (!split_ref(ref, &org_n, &name_n, &rev))
        return dfl__fail(err, DFL_ERR_USAGE, "'%s' is not a hub model name ORG/NAME[@REVISION]", ref);
    if (!rev) rev = "main";
    char *cache = NULL, *snap = NULL;
    const char *source;
    dfl_status s = dfl_hub_cache_dir(&cache, &source, err);
    if (s) return s;
    dfl_strbuf repo = {0}, tried = {0};
    dfl_strbuf_printf(&repo, "%s/models--%.*s--%.*s", cache, (int)org_n, ref, (int)name_n, ref + org_n + 1);
    char hash[64] = "";
    if (!repo.oom) {
        char *refs = join(repo.p, "refs");
        char *ref_file = refs ? join(refs, rev) : NULL;
        if (!ref_file)
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else
            s = read_ref(ref_file, hash, err);
        if (!s && !hash[0]) dfl_strbuf_printf(&tried, "%s (no such ref), ", ref_file);
        free(ref_file);
        free(refs);
    }
    if (!s) {
        dfl_strbuf path = {0};
        dfl_strbuf_printf(&path, "%s/snapshots/%s", repo.p, hash[0] ? hash : rev);
        snap = path.p;
        const char *why = path.oom ? "" : why_not(snap, 1);
        if (path.oom || repo.oom) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        } else if (why) {
            dfl_strbuf_printf(&tried, "%s %s", snap, why);
            s = dfl__fail(err, DFL_ERR_IO,
                          "%s: not in the Hugging Face cache %s (from %s); difflens never "
                          "downloads (first: huggingface-cli download %.*s); tried %s",
                          ref, cache, source, (int)(org_n + 1 + name_n), ref, tried.oom ? "(out of memory)" : tried.p);
        }
    }
    /* the files a model folder needs, each through its symlink into blobs/ */
    if (!s) {
        static const char *const need[] = {"config.json", "model.safetensors", "model.safetensors.index.json"};
        const char *why_cfg, *why_st = NULL, *why_idx = NULL;
        char *cfg = join(snap, need[0]), *st = join(snap, need[1]), *idx = join(snap, need[2]);
        if (!cfg || !st || !idx)
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else if ((why_cfg = why_not(cfg, 0)))
            s = dfl__fail(err, DFL_ERR_IO, "%s: %s %s in the Hugging Face cache (%s)", ref, cfg, why_cfg, source);
        else if ((why_st = why_not(st, 0)) && (why_idx = why_not(idx, 0)))
            s = dfl__fail(err, DFL_ERR_IO, "%s: no weights in the Hugging Face cache (%s): tried %s %s, %s %s", ref,
                          source, st, why_st, idx, why_idx);
        free(cfg), free(st), free(idx);
    }
    dfl_strbuf_free(&repo);
    dfl_strbuf_free(&tried);
    free(cache);
    if (s)
        free(snap);
    else
        *dir = snap;
    return s;
}

dfl_status dfl_hub_model_dir(const char *model, char **dir, dfl_error *err)
{
    if (dfl_hub_is_ref(model)) return dfl_hub_resolve(model, dir, err);
    *dir = strdup(model);
    return *dir ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
}
