/* dump_generated.c — a generating sample's prompt and generated tokens as one sequence. */
#include "dump/dump_generated.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_schema.h"

int64_t dfl_dump_sample_keys(const dfl_dump_reader *r, const dfl_dump_sample *s, int64_t T)
{
    char gp[160], mp[160];
    snprintf(gp, sizeof gp, "%s/" DFL_DS_GENERATED_TOKENS, s->group);
    snprintf(mp, sizeof mp, "%s/" DFL_DS_ATTN_MAP1, s->group);
    dfl_dump_dset_info info;
    dfl_error e;
    if (!dfl_dump_exists(r, gp) || !dfl_dump_exists(r, mp) || dfl_dump_dataset_info(r, mp, &info, &e)) return T;
    return info.ndim == 4 && info.dims[3] > T ? info.dims[3] : T;
}

dfl_status dfl_dump_tokens_join_generated(const dfl_dump_reader *r, const dfl_dump_sample *s, dfl_dump_tokens *t,
                                          int64_t *prompt_T, dfl_error *err)
{
    *prompt_T = -1;
    char gp[160], mp[160], tp[160];
    snprintf(gp, sizeof gp, "%s/" DFL_DS_GENERATED_TOKENS, s->group);
    snprintf(mp, sizeof mp, "%s/" DFL_DS_ATTN_MAP1, s->group);
    snprintf(tp, sizeof tp, "%s/" DFL_DS_GENERATED_TOKEN_TEXT, s->group);
    if (!dfl_dump_exists(r, gp) || !dfl_dump_exists(r, mp)) return DFL_OK;
    dfl_dump_dset_info info;
    dfl_status st = dfl_dump_dataset_info(r, mp, &info, err);
    if (st) return st;
    if (info.ndim != 4 || info.dims[3] <= t->T) return DFL_OK;
    int64_t G = info.dims[3] - t->T;
    int32_t *gen = NULL;
    size_t n = 0;
    char **text = NULL;
    size_t nt = 0;
    if ((st = dfl_dump_read_alloc(r, gp, DFL_H5_I32, (void **)&gen, &n, err))) return st;
    if ((size_t)G > n) {
        free(gen);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %lld keys past the prompt, but %zu generated tokens", mp,
                         (long long)G, n);
    }
    if (t->text && dfl_dump_exists(r, tp) && (st = dfl_dump_read_strings(r, tp, &text, &nt, err))) {
        free(gen);
        return st;
    }
    size_t T = (size_t)t->T, all = T + (size_t)G;
    int32_t *tok = realloc(t->tokens, all * sizeof *tok);
    if (tok) t->tokens = tok;
    uint8_t *seg = tok ? realloc(t->segments, all) : NULL;
    if (seg) t->segments = seg;
    char **lab = seg && t->text ? realloc(t->text, all * sizeof *lab) : NULL;
    if (lab) t->text = lab;
    int ok = tok && seg && (!t->text || lab);
    for (size_t i = 0; ok && t->text && i < (size_t)G; i++) {
        char num[24];
        snprintf(num, sizeof num, "#%d", gen[i]);
        const char *src = text && i < nt && text[i] ? text[i] : num;
        for (size_t k = 0; src == num && k < T; k++) /* no tokenizer: the prompt's label of that id */
            if (t->tokens[k] == gen[i]) src = t->text[k];
        if (!(t->text[T + i] = strdup(src))) {
            for (size_t k = 0; k < i; k++)
                free(t->text[T + k]);
            ok = 0;
        }
    }
    if (ok) {
        for (size_t i = 0; i < (size_t)G; i++) {
            t->tokens[T + i] = gen[i];
            t->segments[T + i] = DFL_SEG_GENERATED;
        }
        t->T = (int64_t)all;
        *prompt_T = (int64_t)T;
    }
    free(gen);
    if (text) dfl_dump_strings_free(text, nt);
    return ok ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
}
