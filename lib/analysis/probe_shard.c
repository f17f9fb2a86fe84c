/* probe_shard.c — prompts split over MPI ranks by their forward-pass cost. */
#include "analysis/probe.h"

#include <stdlib.h>

#include "model/forward.h"

typedef struct job {
    double cost;
    size_t index;
} job;

/* Costliest first; equal costs in file order, so every rank computes the same split. */
static int by_cost(const void *a, const void *b)
{
    const job *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? 1 : -1;
    return x->index < y->index ? -1 : x->index > y->index;
}

dfl_status dfl_probe_shard(const dfl_config *c, const size_t *tokens, size_t n, int ranks, int *owner, dfl_error *err)
{
    if (ranks < 1) return dfl__fail(err, DFL_ERR_USAGE, "prompt shards: %d ranks", ranks);
    job *jobs = dfl__alloc_array(n, sizeof *jobs);
    double *load = dfl__calloc_array((size_t)ranks, sizeof *load);
    if ((n && !jobs) || !load) {
        free(jobs), free(load);
        return dfl__fail(err, DFL_ERR_NOMEM, "prompt shards: out of memory for %zu prompts", n);
    }
    for (size_t i = 0; i < n; i++)
        jobs[i] = (job){dfl_forward_flops(c, (int64_t)tokens[i]), i};
    qsort(jobs, n, sizeof *jobs, by_cost);
    /* longest processing time first: each prompt to the least-loaded rank (lowest
     * rank on ties), within 4/3 of the best possible largest load */
    for (size_t k = 0; k < n; k++) {
        int best = 0;
        for (int r = 1; r < ranks; r++)
            if (load[r] < load[best]) best = r;
        load[best] += jobs[k].cost;
        owner[jobs[k].index] = best;
    }
    free(jobs), free(load);
    return DFL_OK;
}
