/* train_run.c — the training loop: fresh needle-task batches every step, AdamW with
 * warm-up + cosine schedule and clipping, held-out evaluation, train.csv, atomic
 * checkpoints (model + AdamW moments + step) and bit-identical resume. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "base/clock.h"
#include "base/atomic.h"
#include "base/strbuf.h"
#include "model/safetensors.h"
#include "train/train.h"
#include "train/train_internal.h"

#define STREAM_TRAIN 0
#define STREAM_EVAL  1

/* ------------------------------------------------------------- params */

dfl_train_params dfl_train_params_default(void)
{
    dfl_train_params p;
    memset(&p, 0, sizeof p);
    p.type = DFL_MODEL_LLAMA;
    p.layers = 2, p.hidden = 128, p.heads = 4, p.ffn = 512, p.vocab = 128;
    p.task = dfl_needle_params_default();
    p.batch = 16, p.steps = 1000, p.warmup = 100;
    p.lr = 1e-3, p.min_lr = 1e-4, p.weight_decay = 0.1, p.beta1 = 0.9, p.beta2 = 0.95, p.eps = 1e-8;
    p.clip = 1.0, p.init_std = 0.02;
    p.seed = 1;
    p.loss = DFL_LOSS_TARGET;
    p.eval_every = 100, p.eval_samples = 256, p.ckpt_every = 200;
    return p;
}

dfl_status dfl_train_params_config(const dfl_train_params *p, dfl_config *c, dfl_error *err)
{
    memset(c, 0, sizeof *c);
    if (p->layers < 1 || p->layers > 1024 || p->hidden < 2 || p->hidden > 65536 || p->heads < 1 || p->heads > 1024 ||
        p->ffn < 1 || p->ffn > (1 << 18))
        return dfl__fail(err, DFL_ERR_USAGE,
                         "model sizes out of range (layers %lld, hidden %lld, heads %lld, ffn %lld)",
                         (long long)p->layers, (long long)p->hidden, (long long)p->heads, (long long)p->ffn);
    if (p->vocab < DFL_NEEDLE_MIN_VOCAB || p->vocab > (1 << 24))
        return dfl__fail(err, DFL_ERR_USAGE, "vocab %lld is not in [%d, %d] (the needle task needs %d ids)",
                         (long long)p->vocab, DFL_NEEDLE_MIN_VOCAB, 1 << 24, DFL_NEEDLE_MIN_VOCAB);
    int64_t div = p->type == DFL_MODEL_DIFF_TRANSFORMER ? 2 * p->heads : p->heads;
    if (p->hidden % div || (p->hidden / div) % 2)
        return dfl__fail(
            err, DFL_ERR_USAGE, "hidden %lld must be a multiple of %s%lld with an even quotient (head_dim)",
            (long long)p->hidden, p->type == DFL_MODEL_DIFF_TRANSFORMER ? "2 x heads = " : "heads = ", (long long)div);
    if (p->type == DFL_MODEL_DIFFLLAMA && p->heads % 2)
        return dfl__fail(err, DFL_ERR_USAGE, "diffllama needs an even number of heads (got %lld)", (long long)p->heads);
    c->type = p->type;
    c->vocab_size = p->vocab;
    c->hidden_size = p->hidden;
    c->intermediate_size = p->ffn;
    c->num_layers = p->layers;
    c->num_heads = c->num_kv_heads = p->heads;
    c->head_dim = p->hidden / div;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000.0;
    c->rope_interleaved = p->type == DFL_MODEL_DIFF_TRANSFORMER || p->type == DFL_MODEL_DIFF_V2;
    c->rope_kind = DFL_ROPE_NONE;
    c->tie_word_embeddings = p->tie;
    c->max_position_embeddings = p->task.seq_len;
    c->bos_token_id = 0;
    c->kv_pairing = DFL_KV_FLASH;
    return dfl_train_config_check(c, err);
}

static dfl_status check_params(const dfl_train_params *p, dfl_needle_params *task, dfl_error *err)
{
    *task = p->task;
    task->vocab_size = p->vocab;
    dfl_status s = dfl_needle_check(task, err);
    if (s) return s;
    if (!p->out || !*p->out) return dfl__fail(err, DFL_ERR_USAGE, "no output directory given");
    if (p->batch < 1 || p->batch > 65536)
        return dfl__fail(err, DFL_ERR_USAGE, "batch %lld is not in [1, 65536]", (long long)p->batch);
    if (p->steps < 1) return dfl__fail(err, DFL_ERR_USAGE, "steps must be >= 1");
    if (p->warmup < 0) return dfl__fail(err, DFL_ERR_USAGE, "warmup must be >= 0");
    if (!(p->lr > 0) || !(p->min_lr >= 0) || p->min_lr > p->lr)
        return dfl__fail(err, DFL_ERR_USAGE, "learning rates need lr > 0 and 0 <= min-lr <= lr");
    if (!(p->weight_decay >= 0) || !(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1) ||
        !(p->eps > 0) || !(p->clip >= 0) || !(p->init_std > 0))
        return dfl__fail(err, DFL_ERR_USAGE, "optimizer settings out of range");
    if (p->eval_samples < 1 || p->eval_every < 0 || p->ckpt_every < 0 || p->stop_at < 0 || p->keep_every < 0)
        return dfl__fail(err, DFL_ERR_USAGE, "eval/checkpoint settings out of range");
    if (p->ablate_lambda && p->type == DFL_MODEL_LLAMA)
        return dfl__fail(err, DFL_ERR_USAGE, "the lambda ablation needs a Diff model (llama has no lambda)");
    if (p->ablate_lambda && p->type == DFL_MODEL_DIFF_V2)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "the lambda ablation fixes one lambda per layer: diff_transformer_v2's "
                         "lambda is per token (sigmoid(lambda_proj(x)))");
    return DFL_OK;
}

/* The flags that fix the result (all but the schedule, intervals and stop_at), as text
 * kept in the checkpoint: a resume with different ones is refused. */
static void args_text(const dfl_train_params *p, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "type=%s layers=%lld hidden=%lld heads=%lld ffn=%lld vocab=%lld tie=%d seq=%lld needles=%d "
             "queries=%d digits=%d depth=%.17g batch=%lld weight_decay=%.17g "
             "beta1=%.17g beta2=%.17g eps=%.17g clip=%.17g init_std=%.17g seed=%llu loss=%s eval_samples=%lld",
             dfl_model_type_name(p->type), (long long)p->layers, (long long)p->hidden, (long long)p->heads,
             (long long)p->ffn, (long long)p->vocab, p->tie, (long long)p->task.seq_len, p->task.needles,
             p->task.queries, p->task.digits, p->task.depth, (long long)p->batch, p->weight_decay, p->beta1, p->beta2,
             p->eps, p->clip, p->init_std, (unsigned long long)p->seed, p->loss == DFL_LOSS_ALL ? "all" : "target",
             (long long)p->eval_samples);
    /* appended only when set, so checkpoints made before the flag existed still resume */
    size_t n = strlen(buf);
    if (p->ablate_lambda && n < cap) snprintf(buf + n, cap - n, " lambda=0");
}

/* The learning-rate schedule (warm-up + cosine to min_lr over `steps`): a resume with
 * another one changes every later step, so it is refused unless force_schedule. */
static void sched_text(const dfl_train_params *p, char *buf, size_t cap)
{
    snprintf(buf, cap, "steps=%lld warmup=%lld lr=%.17g min_lr=%.17g", (long long)p->steps, (long long)p->warmup, p->lr,
             p->min_lr);
}

/* What a checkpoint holds besides the model and moments: the CSV window in progress
 * (so that the first row after a resume averages the same steps as an uninterrupted
 * run) and the texts that a resume must match. */
typedef struct ckpt_meta {
    const char *args, *sched;
    double win[2]; /* loss sum and step count of the CSV window in progress */
} ckpt_meta;

/* --------------------------------------------------------------- files */

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* mkdir -p (train_internal.h) */
dfl_status dfl__train_make_dirs(const char *dir, dfl_error *err)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n >= sizeof buf) return dfl__fail(err, DFL_ERR_USAGE, "%s: path too long", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char keep = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return dfl__fail(err, DFL_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
        buf[i] = keep;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return dfl__fail(err, DFL_ERR_IO, "%s: not a directory", dir);
    return DFL_OK;
}

static void join(char *buf, size_t cap, const char *dir, const char *file)
{
    snprintf(buf, cap, "%s/%s", dir, file);
}

/* out/steps/step-NNNNNN/{config.json,model.safetensors}: the model at this step, kept
 * (--keep-every) so that analyses can pick the checkpoint where a skill level is reached. */
static dfl_status keep_model(const dfl_train_model *m, const char *out, int64_t step, dfl_error *err)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/steps/step-%06lld", out, (long long)step);
    dfl_status s = dfl__train_make_dirs(dir, err);
    return s ? s : dfl_train_save_model(m, dir, 1, err);
}

static const char *const OUT_FILES[] = {"config.json", "model.safetensors", "checkpoint.safetensors", "train.csv",
                                        "train.png"};

/* ---------------------------------------------------------- checkpoint */

#define CKPT_CHECKSUM "train.checksum"

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const dfl_tensor *const *)a)->name, (*(const dfl_tensor *const *)b)->name);
}

/* The checkpoint's checksum (docs/train.md "Checkpoints"): CRC-32 (zlib's, the IEEE
 * 802.3 polynomial) over the tensors ts[n] other than "train.checksum", taken in
 * strcmp order of their names, each as its name, one 0 byte, then its data bytes.
 * Sorts ts. */
static uint32_t ckpt_crc(const dfl_tensor **ts, size_t n)
{
    qsort(ts, n, sizeof *ts, by_name);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(ts[i]->name, CKPT_CHECKSUM)) continue;
        crc = crc32(crc, (const Bytef *)ts[i]->name, (uInt)strlen(ts[i]->name) + 1);
        const Bytef *d = ts[i]->data;
        for (size_t left = ts[i]->nbytes; left > 0;) { /* crc32 takes at most 4 GB at a time */
            uInt k = left > (1u << 30) ? (1u << 30) : (uInt)left;
            crc = crc32(crc, d, k);
            d += k, left -= k;
        }
    }
    return (uint32_t)crc;
}

/* The first element of x[n] that is not finite (or, nonneg, negative), as its index;
 * n when all are good. */
static size_t first_bad(const float *x, size_t n, int nonneg)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (nonneg && x[i] < 0)) return i;
    return n;
}

/* DFL_OK when the weights and both AdamW moments are finite and the second moment is
 * >= 0; else DFL_ERR_RANGE naming the tensor and element (what = the file or "the model"). */
static dfl_status check_state(const dfl_train_model *m, const char *what, dfl_error *err)
{
    const float *base[3] = {m->params, m->m, m->v};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < m->n_tensors; i++) {
            const dfl_train_tensor *t = &m->tensors[i];
            const float *x = base[k] + t->offset;
            size_t j = first_bad(x, t->numel, k == 2);
            if (j == t->numel) continue;
            return dfl__fail(err, DFL_ERR_RANGE, "%s: %s%s element %zu is %g (%s)", what,
                             k == 0   ? ""
                             : k == 1 ? "optimizer.exp_avg."
                                      : "optimizer.exp_avg_sq.",
                             t->name, j, (double)x[j], isfinite(x[j]) ? "a second moment below 0" : "not finite");
        }
    return DFL_OK;
}

static dfl_status save_checkpoint(const dfl_train_model *m, const char *dir, int64_t step, double elapsed,
                                  const ckpt_meta *meta, dfl_error *err)
{
    const char *args = meta->args;
    const size_t n = m->n_tensors, total = 3 * n + 6;
    dfl_tensor *ts = dfl__calloc_array(total, sizeof *ts);
    const dfl_tensor **sorted = dfl__calloc_array(total, sizeof *sorted);
    char(*names)[128] = dfl__calloc_array(2 * n, sizeof *names);
    dfl_status s = DFL_OK;
    if (!ts || !sorted || !names) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t step_v = step;
    const float *base[3] = {m->params, m->m, m->v};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < n; i++) {
            const dfl_train_tensor *t = &m->tensors[i];
            dfl_tensor *o = &ts[k * n + i];
            if (k == 0)
                o->name = t->name;
            else {
                snprintf(names[(k - 1) * n + i], sizeof names[0], "optimizer.%s.%s", k == 1 ? "exp_avg" : "exp_avg_sq",
                         t->name);
                o->name = names[(k - 1) * n + i];
            }
            o->dtype = DFL_DTYPE_F32;
            o->ndim = t->ndim;
            o->shape[0] = t->shape[0], o->shape[1] = t->shape[1];
            o->data = base[k] + t->offset;
            o->nbytes = t->numel * sizeof(float);
        }
    dfl_tensor *st = &ts[3 * n];
    st[0] = (dfl_tensor){"train.step", DFL_DTYPE_I64, 1, {1}, &step_v, 8};
    st[1] = (dfl_tensor){"train.elapsed_s", DFL_DTYPE_F64, 1, {1}, &elapsed, 8};
    st[2] = (dfl_tensor){"train.args", DFL_DTYPE_U8, 1, {(int64_t)strlen(args)}, args, strlen(args)};
    st[3] = (dfl_tensor){"train.schedule", DFL_DTYPE_U8,       1, {(int64_t)strlen(meta->sched)},
                         meta->sched,      strlen(meta->sched)};
    st[4] = (dfl_tensor){"train.window", DFL_DTYPE_F64, 1, {2}, meta->win, 16};
    /* last, so that every other tensor keeps the offset it had before checksums */
    for (size_t i = 0; i + 1 < total; i++)
        sorted[i] = &ts[i];
    int64_t crc = ckpt_crc(sorted, total - 1);
    st[5] = (dfl_tensor){CKPT_CHECKSUM, DFL_DTYPE_I64, 1, {1}, &crc, 8};
    char path[4096];
    join(path, sizeof path, dir, "checkpoint.safetensors");
    s = dfl_st_write(path, ts, total, 1, err);
done:
    free(ts);
    free(sorted);
    free(names);
    return s;
}

/* Load dir/checkpoint.safetensors into m; *step, *elapsed and meta->win from it. Its
 * checksum must match (a checkpoint made before checksums: hooks' warning), the stored
 * args must equal meta->args, and the schedule meta->sched unless force_schedule; the
 * step must lie in [0, steps], weights and moments be finite and the second moment >= 0.
 * DFL_ERR_FORMAT / DFL_ERR_USAGE / DFL_ERR_RANGE naming the file and what is wrong. */
static dfl_status load_checkpoint(dfl_train_model *m, const char *dir, ckpt_meta *meta, int force_schedule,
                                  int64_t steps, const dfl_train_hooks *hooks, int64_t *step, double *elapsed,
                                  dfl_error *err)
{
    const char *args = meta->args;
    char path[4096], name[160];
    join(path, sizeof path, dir, "checkpoint.safetensors");
    if (!exists(path)) return dfl__fail(err, DFL_ERR_IO, "%s: no checkpoint to resume from", path);
    dfl_st_file *f = NULL;
    const dfl_tensor **sorted = NULL;
    dfl_status s = dfl_st_open(path, &f, err);
    if (s) return s;
    const dfl_tensor *tck = dfl_st_find(f, CKPT_CHECKSUM);
    if (tck) {
        size_t nt = dfl_st_count(f);
        int64_t stored = -1;
        if (!(sorted = dfl__calloc_array(nt, sizeof *sorted))) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < nt; i++)
            sorted[i] = dfl_st_at(f, i);
        if (tck->dtype == DFL_DTYPE_I64 && tck->nbytes == 8) memcpy(&stored, tck->data, 8);
        uint32_t crc = ckpt_crc(sorted, nt);
        if (stored != (int64_t)crc) {
            s = dfl__fail(err, DFL_ERR_FORMAT,
                          "%s: checksum mismatch (stored %lld, computed %lu): the file was changed or damaged "
                          "after it was written; refusing to resume from it",
                          path, (long long)stored, (unsigned long)crc);
            goto done;
        }
    } else if (hooks && hooks->warn) {
        char w[4300];
        snprintf(w, sizeof w, "%s: no checksum (a checkpoint from before checksums); its values are checked only",
                 path);
        hooks->warn(hooks->user, w);
    }
    const dfl_tensor *ta = dfl_st_find(f, "train.args"), *tst = dfl_st_find(f, "train.step");
    const dfl_tensor *tel = dfl_st_find(f, "train.elapsed_s");
    if (!ta || ta->dtype != DFL_DTYPE_U8 || !tst || tst->dtype != DFL_DTYPE_I64 || tst->nbytes != 8 || !tel ||
        tel->dtype != DFL_DTYPE_F64 || tel->nbytes != 8) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a difflens training checkpoint", path);
        goto done;
    }
    if (ta->nbytes != strlen(args) || memcmp(ta->data, args, ta->nbytes)) {
        s = dfl__fail(err, DFL_ERR_USAGE, "%s: made with different flags (%.*s); --resume needs the same ones", path,
                      (int)(ta->nbytes < 300 ? ta->nbytes : 300), (const char *)ta->data);
        goto done;
    }
    const dfl_tensor *tsc = dfl_st_find(f, "train.schedule"), *tw = dfl_st_find(f, "train.window");
    if (tsc && tsc->dtype == DFL_DTYPE_U8 && !force_schedule &&
        (tsc->nbytes != strlen(meta->sched) || memcmp(tsc->data, meta->sched, tsc->nbytes))) {
        s = dfl__fail(err, DFL_ERR_USAGE,
                      "%s: made for the schedule %.*s; this run's %s would change every later learning rate "
                      "(--force-schedule to accept)",
                      path, (int)(tsc->nbytes < 200 ? tsc->nbytes : 200), (const char *)tsc->data, meta->sched);
        goto done;
    }
    meta->win[0] = meta->win[1] = 0.0;
    if (tw && tw->dtype == DFL_DTYPE_F64 && tw->nbytes == 16) memcpy(meta->win, tw->data, 16);
    memcpy(step, tst->data, 8);
    memcpy(elapsed, tel->data, 8);
    if (*step < 0 || *step > steps) {
        s = dfl__fail(err, DFL_ERR_RANGE, "%s: train.step %lld is not in [0, %lld] (--steps)", path, (long long)*step,
                      (long long)steps);
        goto done;
    }
    float *base[3] = {m->params, m->m, m->v};
    for (size_t k = 0; k < 3 && !s; k++)
        for (size_t i = 0; i < m->n_tensors && !s; i++) {
            const dfl_train_tensor *t = &m->tensors[i];
            if (k == 0)
                snprintf(name, sizeof name, "%s", t->name);
            else
                snprintf(name, sizeof name, "optimizer.%s.%s", k == 1 ? "exp_avg" : "exp_avg_sq", t->name);
            const dfl_tensor *x = dfl_st_find(f, name);
            if (!x || x->dtype != DFL_DTYPE_F32 || x->nbytes != t->numel * sizeof(float))
                s = dfl__fail(err, DFL_ERR_FORMAT, "%s: tensor '%s' is missing or has the wrong size", path, name);
            else
                memcpy(base[k] + t->offset, x->data, x->nbytes);
        }
    if (!s) s = check_state(m, path, err);
done:
    free(sorted);
    dfl_st_close(f);
    return s;
}

/* ---------------------------------------------------------------- CSV */

#define CSV_HEADER "step,lr,loss,eval_loss,eval_acc,tokens_per_s,elapsed_s\n"

/* On resume: keep the rows of an existing train.csv up to `step` (a crash after the
 * last checkpoint may have logged rows that the resumed run will log again). */
static dfl_status csv_restore(dfl_strbuf *csv, const char *dir, int64_t step, dfl_error *err)
{
    char path[4096];
    join(path, sizeof path, dir, "train.csv");
    dfl_strbuf_puts(csv, CSV_HEADER);
    if (csv->oom) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!exists(path)) return DFL_OK;
    char *text = NULL;
    size_t len;
    dfl_status s = dfl__read_file(path, &text, &len, err);
    if (s) return s;
    char *line = strchr(text, '\n'); /* skip the header */
    while (line && *++line) {
        char *end = strchr(line, '\n');
        if (!end) break;
        *end = '\0';
        long long st = strtoll(line, NULL, 10);
        if (st >= 1 && st <= step) dfl_strbuf_printf(csv, "%s\n", line);
        if (csv->oom) {
            free(text);
            return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        }
        line = end;
    }
    free(text);
    return DFL_OK;
}

/* ------------------------------------------------------------- batches */

/* Sample tokens/targets of `n` sequences, sample indices first..first+n−1 of stream. */
static void make_batch(const dfl_needle_params *task, uint64_t seed, uint64_t stream, uint64_t first, int64_t n,
                       int all_tokens, int last_only, int32_t *tokens, int32_t *targets)
{
    const int64_t T = task->seq_len;
    for (int64_t b = 0; b < n; b++) {
        dfl_needle_layout lay;
        dfl_needle_sample(task, seed, stream, first + (uint64_t)b, tokens + b * T, &lay);
        dfl_needle_targets(task, tokens + b * T, &lay, all_tokens, last_only, targets + b * T);
    }
}

/* Held-out loss (mean NLL of the answer digits) and retrieval accuracy (all answer
 * digits right under argmax, teacher-forced) over eval_samples of stream 1. */
static dfl_status evaluate(const dfl_train_model *m, dfl_train_ws *ws, const dfl_needle_params *task,
                           const dfl_train_params *p, int32_t *tokens, int32_t *targets, double *eval_loss,
                           double *eval_acc, dfl_error *err)
{
    const int64_t T = task->seq_len, V = m->config.vocab_size;
    double sum = 0.0;
    int64_t rows = 0, right = 0;
    for (int64_t s0 = 0; s0 < p->eval_samples; s0 += p->batch) {
        int64_t n = p->eval_samples - s0 < p->batch ? p->eval_samples - s0 : p->batch;
        make_batch(task, p->seed, STREAM_EVAL, (uint64_t)s0, n, 0, 1, tokens, targets);
        double loss;
        int64_t count;
        dfl_status s = dfl_train_forward(m, ws, tokens, targets, n, &loss, &count, err);
        if (s) return s;
        sum += loss * (double)count;
        rows += count;
        const float *logits = dfl_train_logits(ws);
        for (int64_t b = 0; b < n; b++) {
            int ok = 1;
            for (int64_t i = b * T; i < (b + 1) * T; i++) {
                if (targets[i] < 0) continue;
                const float *z = logits + i * V;
                int64_t best = 0;
                for (int64_t v = 1; v < V; v++)
                    if (z[v] > z[best]) best = v;
                ok &= best == targets[i];
            }
            right += ok;
        }
    }
    *eval_loss = rows ? sum / (double)rows : NAN;
    *eval_acc = (double)right / (double)p->eval_samples;
    return DFL_OK;
}

/* ------------------------------------------------------------- memory */

/* MemAvailable of /proc/meminfo in bytes (the kernel's estimate of what can be
 * allocated without swapping), or -1 when it cannot be read. */
static double mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024.0;
}

/* Every allocation whose size comes from a flag (the model's four arrays from --vocab,
 * --hidden, --layers, --ffn; the activations from those and --batch, --seq, --heads;
 * the batch) added up and compared with the memory available before any is made: a
 * size the machine cannot hold fails with one line instead of the OOM killer. */
static dfl_status check_memory(const dfl_config *c, const dfl_train_params *p, dfl_error *err)
{
    const double gb = 1e9;
    size_t ws = 0, np = dfl_train_param_count(c);
    dfl_status s = dfl__train_ws_bytes(c, p->batch, p->task.seq_len, &ws, err);
    if (s) return s;
    double model = 4.0 * (double)np * sizeof(float); /* params, grads, m, v */
    double batch = 2.0 * (double)p->batch * (double)p->task.seq_len * sizeof(int32_t);
    double need = model + (double)ws + batch, avail = mem_available();
    if (avail >= 0 && need > avail)
        return dfl__fail(err, DFL_ERR_NOMEM,
                         "%s: training needs %.2f GB (model and AdamW state %.2f GB for %zu parameters, activations "
                         "%.2f GB for batch %lld x %lld), more than the %.2f GB of memory available (MemAvailable); "
                         "use a smaller --vocab, --hidden, --layers, --ffn, --batch or --seq",
                         p->out, need / gb, model / gb, np, (double)ws / gb, (long long)p->batch,
                         (long long)p->task.seq_len, avail / gb);
    return DFL_OK;
}

/* ---------------------------------------------------------------- run */

/* Flush subnormal floats to zero in every worker thread: as training converges, tiny
 * gradients and attention weights turn subnormal and each operation on them costs a
 * hundred cycles (seen: sgemm slowing 3x within 1000 steps). The results differ from
 * IEEE only below 1.2e-38. */
static unsigned flush_subnormals(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned before = _mm_getcsr();
#pragma omp parallel
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) and DAZ (bit 6) */
    return before;
#else
    return 0;
#endif
}

/* Put the caller's floating-point mode back in every worker thread. */
static void restore_subnormals(unsigned before)
{
#if defined(__x86_64__) || defined(__i386__)
#pragma omp parallel
    _mm_setcsr((_mm_getcsr() & ~0x8040u) | (before & 0x8040u));
#else
    (void)before;
#endif
}

static dfl_status train_run(const dfl_train_params *p, const dfl_train_hooks *hooks, dfl_train_result *res,
                            dfl_error *err);

/* What a run that stopped on a non-finite value leaves on disk. */
static void kept_text(char *buf, size_t cap, int64_t last_ckpt)
{
    if (last_ckpt >= 0)
        snprintf(buf, cap, "checkpoint.safetensors and model.safetensors are those of step %lld", (long long)last_ckpt);
    else
        snprintf(buf, cap, "no checkpoint had been written yet");
}

/* A run that turned non-finite: the message names the step and the quantity and says
 * what is left on disk (nothing of this step is written). DFL_ERR_RANGE. */
static dfl_status diverged(dfl_error *err, const char *out, int64_t step, const char *what, double x, int64_t last_ckpt)
{
    char kept[160];
    kept_text(kept, sizeof kept, last_ckpt);
    char val[32];
    if (isnan(x))
        snprintf(val, sizeof val, "NaN");
    else
        snprintf(val, sizeof val, "%g", x);
    return dfl__fail(err, DFL_ERR_RANGE,
                     "%s: step %lld: %s is %s: training diverged (try a smaller --lr or --init-std, or --clip); "
                     "stopped without writing this step: %s",
                     out, (long long)step, what, val, kept);
}

/* Before a checkpoint or a kept model is written: weights and moments must be finite. */
static dfl_status check_finite(const dfl_train_model *m, const char *out, int64_t step, int64_t last_ckpt,
                               dfl_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "the model after step %lld", (long long)step);
    dfl_status s = check_state(m, what, err);
    if (!s) return DFL_OK;
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    char kept[160];
    kept_text(kept, sizeof kept, last_ckpt);
    return dfl__fail(err, DFL_ERR_RANGE, "%s: step %lld: training diverged (%s); stopped without writing this step: %s",
                     out, (long long)step, why, kept);
}

dfl_status dfl_train_run(const dfl_train_params *p, const dfl_train_hooks *hooks, dfl_train_result *res, dfl_error *err)
{
    unsigned mode = flush_subnormals();
    dfl_status s = train_run(p, hooks, res, err);
    restore_subnormals(mode);
    return s;
}

static dfl_status train_run(const dfl_train_params *p, const dfl_train_hooks *hooks, dfl_train_result *res,
                            dfl_error *err)
{
    dfl_train_result r;
    memset(&r, 0, sizeof r);
    r.loss = r.eval_loss = r.eval_acc = NAN;
    if (res) *res = r;
    dfl_needle_params task;
    dfl_config cfg;
    dfl_status s = check_params(p, &task, err);
    if (!s) s = dfl_train_params_config(p, &cfg, err);
    if (s) return s;

    char args[1024], sched[256], path[4096];
    args_text(p, args, sizeof args);
    sched_text(p, sched, sizeof sched);
    ckpt_meta meta = {args, sched, {0.0, 0.0}};
    dfl_train_model *m = NULL;
    dfl_train_ws *ws = NULL;
    int32_t *tokens = NULL, *targets = NULL;
    dfl_strbuf csv = {0};
    const int64_t T = task.seq_len, B = p->batch;

    if ((s = check_memory(&cfg, p, err))) return s;
    /* the directory: fresh (refusing or clearing old training files) or resumed */
    /* a resume makes nothing: a wrong DIR fails without leaving a new folder */
    join(path, sizeof path, p->out, "checkpoint.safetensors");
    if (p->resume && !exists(path)) return dfl__fail(err, DFL_ERR_IO, "%s: no checkpoint to resume from", path);
    if (!p->resume && (s = dfl__train_make_dirs(p->out, err))) return s;
    /* One writer per folder: the lock is a temporary file of atomic.h beside train.lock
     * (never renamed into place), held with flock for the whole run; a second run into
     * the folder finds it held and stops before it touches anything. */
    char *lock = NULL;
    join(path, sizeof path, p->out, "train.lock");
    if ((s = dfl__make_tmp(path, &lock, err))) {
        if (s == DFL_ERR_EXISTS) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            s = dfl__fail(err, DFL_ERR_EXISTS,
                          "%s: another train run is writing this folder (%s); wait for it or "
                          "choose another --out",
                          p->out, why);
        }
        return s;
    }
    if (!p->resume) {
        for (size_t i = 0; i < sizeof OUT_FILES / sizeof OUT_FILES[0]; i++) {
            join(path, sizeof path, p->out, OUT_FILES[i]);
            if (!exists(path)) continue;
            if (!p->overwrite) {
                s = dfl__fail(err, DFL_ERR_EXISTS, "%s: exists (use --force to start over or --resume to continue)",
                              path);
                goto done;
            }
            if (remove(path) != 0) {
                s = dfl__fail(err, DFL_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
                goto done;
            }
        }
    }
    if ((s = dfl_train_model_create(&cfg, &m, err))) goto done;
    r.n_params = m->n_params;
    int64_t step = 0;
    double elapsed0 = 0.0;
    if (p->resume)
        s = load_checkpoint(m, p->out, &meta, p->force_schedule, p->steps, hooks, &step, &elapsed0, err);
    else {
        dfl_train_init(m, p->seed, p->init_std);
        if (p->ablate_lambda) dfl_train_lambda_zero(m);
    }
    if (!s) s = dfl_train_ws_create(m, B, T, &ws, err);
    if (!s) s = csv_restore(&csv, p->out, step, err);
    size_t bt = (size_t)B * (size_t)T;
    if (!s && (!(tokens = dfl__alloc_array(bt, sizeof *tokens)) || !(targets = dfl__alloc_array(bt, sizeof *targets))))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (s) goto done;

    r.start_step = step;
    int64_t last_ckpt = p->resume ? step : -1; /* the step of the checkpoint on disk; -1: none */
    const double t_start = dfl_clock_seconds();
    double t_win = t_start, loss_sum = meta.win[0], steady_s = 0.0; /* steady: step times after the first */
    int64_t win_steps = (int64_t)meta.win[1];
    /* a resume at or past --stop-at trains nothing (a rerun of the same command is a no-op) */
    int stopped = p->stop_at > 0 && step >= p->stop_at && step < p->steps, plot_warned = 0;
    while (step < p->steps && !stopped) {
        /* one step: batch `step` of stream 0, forward, backward, clip, AdamW */
        double t_step = dfl_clock_seconds();
        double lr = dfl_train_lr(step, p->steps, p->warmup, p->lr, p->min_lr);
        make_batch(&task, p->seed, STREAM_TRAIN, (uint64_t)step * (uint64_t)B, B, p->loss == DFL_LOSS_ALL, 0, tokens,
                   targets);
        double loss;
        if ((s = dfl_train_forward(m, ws, tokens, targets, B, &loss, NULL, err))) goto done;
        if (!isfinite(loss)) {
            s = diverged(err, p->out, step + 1, "the training loss", loss, last_ckpt);
            goto done;
        }
        dfl_train_backward(m, ws);
        if (p->ablate_lambda) dfl_train_lambda_freeze(m);
        double gnorm = dfl_train_clip(m, p->clip);
        if (!isfinite(gnorm)) {
            s = diverged(err, p->out, step + 1, "the gradient norm", gnorm, last_ckpt);
            goto done;
        }
        dfl_adamw o = {lr, p->beta1, p->beta2, p->eps, p->weight_decay};
        dfl_train_adamw(m, &o, step + 1);
        step++;
        double t = dfl_clock_seconds();
        if (step > r.start_step + 1) steady_s += t - t_step;
        loss_sum += loss, win_steps++;
        r.loss = loss;
        r.steps_done = step;
        stopped = (hooks && hooks->stop && *hooks->stop) || (p->stop_at > 0 && step >= p->stop_at && step < p->steps);

        dfl_train_report rep;
        memset(&rep, 0, sizeof rep);
        rep.step = step, rep.steps = p->steps, rep.lr = lr, rep.loss = loss;
        rep.elapsed_s = t - t_start;
        rep.tokens_per_s = (double)(step - r.start_step) * (double)bt / (t - t_start);
        if (hooks && hooks->report) hooks->report(hooks->user, &rep);

        if ((p->eval_every > 0 && step % p->eval_every == 0) || step == p->steps) {
            if ((s = evaluate(m, ws, &task, p, tokens, targets, &r.eval_loss, &r.eval_acc, err))) goto done;
            if (!isfinite(r.eval_loss)) {
                s = diverged(err, p->out, step, "the held-out loss", r.eval_loss, last_ckpt);
                goto done;
            }
            r.eval_step = step;
            double t2 = dfl_clock_seconds();
            char row[256];
            snprintf(row, sizeof row, "%lld,%.6g,%.6f,%.6f,%.6f,%.1f,%.3f\n", (long long)step, lr,
                     loss_sum / (double)win_steps, r.eval_loss, r.eval_acc,
                     (double)win_steps * (double)bt / (t - t_win), elapsed0 + (t2 - t_start));
            rep.is_eval = 1;
            rep.eval_loss = r.eval_loss, rep.eval_acc = r.eval_acc, rep.train_loss_avg = loss_sum / (double)win_steps;
            if (hooks && hooks->report) hooks->report(hooks->user, &rep);
            loss_sum = 0.0, win_steps = 0;
            t_win = dfl_clock_seconds();
            dfl_strbuf_puts(&csv, row);
            if (csv.oom) {
                s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
                goto done;
            }
            join(path, sizeof path, p->out, "train.csv");
            if ((s = dfl__atomic_write(path, csv.p, csv.len, 1, err))) goto done;
            /* the curves: a failure here is worth a warning, not the run */
            char png[4096], title[160];
            const char *csvs[1] = {path}, *labels[1] = {dfl_model_type_name(p->type)};
            join(png, sizeof png, p->out, "train.png");
            snprintf(title, sizeof title, "%s on the needle task", dfl_model_type_name(p->type));
            dfl_error perr;
            if (dfl_train_plot(png, csvs, labels, 1, title, &perr) && hooks && hooks->warn && !plot_warned) {
                hooks->warn(hooks->user, perr.msg);
                plot_warned = 1;
            }
        }
        if (stopped || step == p->steps || (p->ckpt_every > 0 && step % p->ckpt_every == 0)) {
            double el = elapsed0 + (dfl_clock_seconds() - t_start);
            meta.win[0] = loss_sum, meta.win[1] = (double)win_steps;
            if ((s = check_finite(m, p->out, step, last_ckpt, err))) goto done;
            if ((s = save_checkpoint(m, p->out, step, el, &meta, err))) goto done;
            if ((s = dfl_train_save_model(m, p->out, 1, err))) goto done;
            last_ckpt = step;
        }
        if (p->keep_every > 0 && step % p->keep_every == 0 &&
            ((s = check_finite(m, p->out, step, last_ckpt, err)) || (s = keep_model(m, p->out, step, err))))
            goto done;
    }
    double t_end = dfl_clock_seconds();
    r.seconds = t_end - t_start;
    int64_t done_steps = step - r.start_step;
    r.tokens_per_s = done_steps > 0 ? (double)done_steps * (double)bt / r.seconds : 0.0;
    r.steady_tokens_per_s = done_steps > 1 ? (double)(done_steps - 1) * (double)bt / steady_s : r.tokens_per_s;
    r.interrupted = step < p->steps;
    r.steps_done = step;
done:
    free(tokens);
    free(targets);
    free(csv.p);
    dfl_train_ws_free(ws);
    dfl_train_model_free(m);
    dfl__discard_tmp(lock);
    free(lock);
    if (res) *res = r;
    return s;
}

/* ---------------------------------------------------------------- pair */

dfl_status dfl_train_pair_params(const dfl_train_params *p, dfl_train_params *llama, dfl_train_params *diff,
                                 dfl_error *err)
{
    if (p->heads < 2 || p->heads % 2)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "--pair needs an even number of heads (the Diff model gets half of them), got %lld",
                         (long long)p->heads);
    *llama = *p;
    *diff = *p;
    llama->type = DFL_MODEL_LLAMA;
    llama->ablate_lambda = 0; /* the ablation is the Diff model's */
    diff->type = DFL_MODEL_DIFF_TRANSFORMER;
    diff->heads = p->heads / 2; /* head_dim D/(H/2)/2 = D/H: the llama head_dim */
    dfl_config a, b;
    dfl_status s = dfl_train_params_config(llama, &a, err);
    if (!s) s = dfl_train_params_config(diff, &b, err);
    if (!s && a.head_dim != b.head_dim)
        s = dfl__fail(err, DFL_ERR_USAGE, "matched pair: head_dim %lld vs %lld", (long long)a.head_dim,
                      (long long)b.head_dim);
    return s;
}
