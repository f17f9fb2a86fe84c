/* probe.c — one pass over a prompt set: forward with capture, dump per sample. */
#include "probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomic.h"
#include "dump.h"
#include "forward.h"
#include "model.h"
#include "prompts.h"

dfl_probe_params dfl_probe_params_default(void)
{
    dfl_probe_params p;
    memset(&p, 0, sizeof p);
    p.maps = DFL_MAPS_NONE;
    p.map_f16 = 1;
    return p;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --------------------------------------------------------- sample capture */

/* Everything captured for one sample while its forward pass runs. */
typedef struct sample_run {
    const dfl_model *m;
    const int32_t *tokens;
    int64_t T;
    dfl_dump *dump;
    dfl_dump_stream *maps[3];   /* map1, map2, diff: [L, Hs, T, T] */
    dfl_dump_stream *logits;    /* [T, V] or NULL */
    float *nll;                 /* [T] */
    int32_t *argmax;            /* [T] */
} sample_run;

static int want_all_maps(void *user, int64_t layer)
{
    (void)layer;
    return ((sample_run *)user)->maps[0] != NULL;
}

static dfl_status on_attn(void *user, const dfl_attn_block *b, dfl_error *err)
{
    sample_run *r = user;
    const float *src[3] = {b->map1, b->map2, b->diff};
    int64_t start[4] = {b->layer, b->head, b->row0, 0};
    int64_t count[4] = {1, 1, b->n, b->ncols};
    for (int i = 0; i < 3; i++) {
        if (!r->maps[i] || !src[i]) continue;
        dfl_status s = dfl_dump_stream_write_f32(r->maps[i], start, count, src[i], b->ld, err);
        if (s) return s;
    }
    return DFL_OK;
}

/* nll[t] = −log softmax(logits[t])[tokens[t+1]] (NaN at T−1), argmax[t] (first max). */
static dfl_status on_logits(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    sample_run *r = user;
    for (int64_t i = 0; i < n; i++) {
        const float *z = logits + i * V;
        int64_t t = row0 + i, best = 0;
        for (int64_t v = 1; v < V; v++)
            if (z[v] > z[best]) best = v;
        r->argmax[t] = (int32_t)best;
        if (t + 1 < r->T) {
            double sum = 0.0, mx = z[best];
            for (int64_t v = 0; v < V; v++) sum += exp((double)z[v] - mx);
            r->nll[t] = (float)(mx + log(sum) - (double)z[r->tokens[t + 1]]);
        } else {
            r->nll[t] = NAN;
        }
    }
    if (r->logits) {
        int64_t start[2] = {row0, 0}, count[2] = {n, V};
        return dfl_dump_stream_write_f32(r->logits, start, count, logits, V, err);
    }
    return DFL_OK;
}

/* ------------------------------------------------------------ per sample */

static dfl_status put_index(dfl_dump *d, const char *name, int64_t n, dfl_error *err)
{
    int32_t *v = dfl__alloc_array((size_t)n, sizeof *v);
    if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)i;
    dfl_status s = dfl_dump_put(d, name, DFL_H5_I32, 1, &n, v, err);
    free(v);
    return s;
}

/* attn/map1 (+ map2, diff) [L, Hs, T, T] with their dimension scales. */
static dfl_status create_map_streams(sample_run *r, int f16, dfl_error *err)
{
    const dfl_config *c = &r->m->config;
    int64_t L = c->num_layers, Hs = dfl_config_analysis_heads(c), T = r->T;
    dfl_status s;
    if ((s = put_index(r->dump, "attn/layers", L, err)) || (s = put_index(r->dump, "attn/heads", Hs, err)) ||
        (s = put_index(r->dump, "attn/rows", T, err)) || (s = put_index(r->dump, "attn/keys", T, err)))
        return s;
    static const char *names[3] = {"attn/map1", "attn/map2", "attn/diff"};
    static const char *scales[4] = {"attn/layers", "attn/heads", "attn/rows", "attn/keys"};
    static const char *labels[4] = {"layer", "head", "query", "key"};
    int nmaps = c->type == DFL_MODEL_LLAMA ? 1 : 3;
    int64_t dims[4] = {L, Hs, T, T}, chunk[4] = {1, 1, T < 16 ? T : 16, T};
    for (int i = 0; i < nmaps; i++) {
        if ((s = dfl_dump_stream_create(r->dump, names[i], f16 ? DFL_H5_F16 : DFL_H5_F32, 4, dims, chunk, 1,
                                        &r->maps[i], err)))
            return s;
        if ((s = dfl_dump_attach_scales(r->dump, names[i], 4, scales, labels, err))) return s;
    }
    return DFL_OK;
}

static dfl_status run_sample(const dfl_probe_params *p, const dfl_model *m, dfl_dump *d, const dfl_prompt *pr,
                             size_t index, double *fwd_seconds, dfl_error *err)
{
    const dfl_config *c = &m->config;
    int64_t T = (int64_t)pr->n_tokens;
    sample_run r;
    memset(&r, 0, sizeof r);
    r.m = m;
    r.tokens = pr->tokens;
    r.T = T;
    r.dump = d;
    uint8_t *seg = dfl__alloc_array((size_t)T, 1);
    r.nll = dfl__alloc_array((size_t)T, sizeof(float));
    r.argmax = dfl__alloc_array((size_t)T, sizeof(int32_t));
    dfl_status s = DFL_OK;
    if (!seg || !r.nll || !r.argmax) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((s = dfl_dump_sample_begin(d, index, pr->id, pr->has_depth ? pr->depth : NAN, err))) goto done;
    dfl_prompt_segments(pr, seg);
    if ((s = dfl_dump_put(d, "tokens", DFL_H5_I32, 1, &T, pr->tokens, err))) goto done;
    if ((s = dfl_dump_put(d, "segments", DFL_H5_U8, 1, &T, seg, err))) goto done;
    if (pr->text && (s = dfl_dump_put_strings(d, "token_text", (const char *const *)pr->text, pr->n_tokens, err)))
        goto done;
    if (p->maps == DFL_MAPS_ALL && (s = create_map_streams(&r, p->map_f16, err))) goto done;
    if (p->save_logits) {
        int64_t dims[2] = {T, c->vocab_size}, chunk[2] = {T < 16 ? T : 16, c->vocab_size};
        if ((s = dfl_dump_stream_create(d, "logits", DFL_H5_F32, 2, dims, chunk, 0, &r.logits, err))) goto done;
    }

    dfl_capture cap = {.user = &r, .want_maps = want_all_maps, .attn_rows = on_attn, .logits_rows = on_logits};
    double t0 = now_seconds();
    s = dfl_forward(m, pr->tokens, T, NULL, &cap, err);
    *fwd_seconds += now_seconds() - t0;
    if (s) goto done;
    if ((s = dfl_dump_put(d, "nll", DFL_H5_F32, 1, &T, r.nll, err))) goto done;
    if ((s = dfl_dump_put(d, "argmax", DFL_H5_I32, 1, &T, r.argmax, err))) goto done;
    s = dfl_dump_sample_end(d, err);
done:
    for (int i = 0; i < 3; i++) dfl_dump_stream_close(r.maps[i]);
    dfl_dump_stream_close(r.logits);
    free(seg);
    free(r.nll);
    free(r.argmax);
    return s;
}

/* ------------------------------------------------------------------ run */

dfl_status dfl_probe_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err)
{
    dfl_model *m = NULL;
    dfl_prompt_set ps = {NULL, 0};
    dfl_dump *d = NULL;
    dfl_probe_report rep;
    memset(&rep, 0, sizeof rep);
    /* Cheap checks first: an existing output or bad prompts fail before the load. */
    dfl_status s = dfl__check_overwrite(p->out_path, p->overwrite, err);
    if (!s) s = dfl_prompt_set_read(p->prompts_path, &ps, err);
    if (!s) s = dfl_model_load(p->model_dir, &m, err);
    if (s) goto done;

    const dfl_config *c = &m->config;
    for (size_t i = 0; i < ps.count; i++) {
        if ((s = dfl_prompt_check_vocab(&ps.items[i], c->vocab_size, p->prompts_path, err))) goto done;
        rep.tokens += (int64_t)ps.items[i].n_tokens;
        if (p->warn && c->max_position_embeddings > 0 && (int64_t)ps.items[i].n_tokens > c->max_position_embeddings) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s:%zu: %zu tokens exceed max_position_embeddings (%lld)", p->prompts_path,
                     ps.items[i].line, ps.items[i].n_tokens, (long long)c->max_position_embeddings);
            p->warn(p->user, msg);
        }
    }

    dfl_dump_info info = {m, p->model_dir, 0, "none", "last"};
    if ((s = dfl_dump_create(p->out_path, p->overwrite, &info, &d, err))) goto done;
    double start = now_seconds();
    int64_t done_tokens = 0;
    for (size_t i = 0; i < ps.count; i++) {
        if (p->progress) {
            dfl_probe_progress pg = {i, ps.count, done_tokens, rep.tokens, now_seconds() - start};
            p->progress(p->user, &pg);
        }
        if ((s = run_sample(p, m, d, &ps.items[i], i, &rep.forward_seconds, err))) {
            dfl__context(err, "%s:%zu", p->prompts_path, ps.items[i].line);
            goto done;
        }
        done_tokens += (int64_t)ps.items[i].n_tokens;
        rep.flops += dfl_forward_flops(c, (int64_t)ps.items[i].n_tokens);
    }
    if (p->progress) {
        dfl_probe_progress pg = {ps.count, ps.count, done_tokens, rep.tokens, now_seconds() - start};
        p->progress(p->user, &pg);
    }
    rep.samples = ps.count;
    s = dfl_dump_finish(d, err);
    d = NULL;
done:
    dfl_dump_abort(d);
    dfl_model_free(m);
    dfl_prompt_set_free(&ps);
    if (report) *report = rep;
    return s;
}
