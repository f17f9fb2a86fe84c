/* noise_prompts_free.c — free-form needle retrieval: each prompt cut before its last
 * target span, whose tokens become what the generation must produce ("expect"). */
#include <stdlib.h>
#include <string.h>

#include "text/noise_prompts.h"

/* The last target span of p (the answer after the last query), or -1. */
static int64_t last_target(const dfl_prompt *p, int64_t *end)
{
    int64_t start = -1;
    for (size_t j = 0; j < p->n_spans[DFL_SPAN_TARGET]; j++)
        if (p->spans[DFL_SPAN_TARGET][j].start > start) {
            start = p->spans[DFL_SPAN_TARGET][j].start;
            *end = p->spans[DFL_SPAN_TARGET][j].end;
        }
    return start;
}

dfl_status dfl_noise_prompts_free_form(dfl_prompt_set *set, dfl_error *err)
{
    for (size_t i = 0; i < set->count; i++) {
        dfl_prompt *p = &set->items[i];
        int64_t end = 0, start = last_target(p, &end);
        if (start < 1 || end != (int64_t)p->n_tokens)
            return dfl__fail(err, DFL_ERR_USAGE,
                             "prompt %zu: free-form prompts need the answer's target span at the end of the prompt", i);
        size_t n = (size_t)(end - start);
        if (!(p->expect = dfl__alloc_array(n, sizeof *p->expect)))
            return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        memcpy(p->expect, p->tokens + start, n * sizeof *p->expect);
        p->n_expect = n;
        p->has_generate = 1;
        p->generate = (int64_t)n;
        for (size_t k = (size_t)start; p->text && k < p->n_tokens; k++)
            free(p->text[k]);
        p->n_tokens = (size_t)start;
        /* spans past the cut go (the last target); the others end before it */
        for (int kind = 0; kind < DFL_SPAN_KINDS; kind++) {
            size_t kept = 0;
            for (size_t j = 0; j < p->n_spans[kind]; j++)
                if (p->spans[kind][j].end <= start) p->spans[kind][kept++] = p->spans[kind][j];
            p->n_spans[kind] = kept;
        }
    }
    return DFL_OK;
}
