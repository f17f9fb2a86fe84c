/* noise_prompts.c — `noise prompts`: the needle task at chosen depths and lengths, and
 * template prompts for real tokenizers (see noise_prompts.h). */
#include "text/noise_prompts.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsondoc.h"
#include "base/rng.h"
#include "text/needle.h"
#include "text/tokenizer.h"

/* ---------------------------------------------------------------- template */

static const double default_depths[] = {0.0, 0.25, 0.5, 0.75, 1.0};
/* Bound of a template file's size: ids of a haystack of some 10^7 tokens */
#define TEMPLATE_MAX ((size_t)256 << 20)
static const int64_t default_lengths[] = {256};

void dfl_noise_template_free(dfl_noise_template *t)
{
    if (!t) return;
    free(t->haystack), free(t->needle), free(t->query), free(t->target);
    for (size_t i = 0; i < t->n_distractors; i++)
        free(t->distractor[i]);
    memset(t, 0, sizeof *t);
}

/* A JSON array of token ids into a malloc'ed int32 array. `name` names it in messages. */
static dfl_status parse_ids(const cJSON *arr, const char *label, const char *name, int32_t **out, size_t *n,
                            dfl_error *err)
{
    if (!cJSON_IsArray(arr)) return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s is not an array of token ids", label, name);
    size_t len = (size_t)cJSON_GetArraySize(arr);
    if (len == 0) return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s is empty", label, name);
    int32_t *v = dfl__alloc_array(len, sizeof *v);
    if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory for %s (%zu ids)", label, name, len);
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        /* integers only: 3.5 or "7" are mistakes, not ids */
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble)) {
            free(v);
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s[%zu] is not an integer token id", label, name, i);
        }
        if (e->valuedouble < 0 || e->valuedouble > (double)INT32_MAX) {
            free(v);
            return dfl__fail(err, DFL_ERR_RANGE, "%s: %s[%zu]: %.17g is not a token id (0 to %d)", label, name, i,
                             e->valuedouble, INT32_MAX);
        }
        v[i] = (int32_t)e->valuedouble;
    }
    *out = v;
    *n = len;
    return DFL_OK;
}

static dfl_status check_vocab(const int32_t *v, size_t n, int64_t vocab, const char *label, const char *name,
                              dfl_error *err)
{
    for (size_t i = 0; i < n; i++)
        if ((int64_t)v[i] >= vocab)
            return dfl__fail(err, DFL_ERR_RANGE, "%s: %s[%zu] = %d is not below the vocabulary size %lld", label, name,
                             i, (int)v[i], (long long)vocab);
    return DFL_OK;
}

/* Check every id of t against vocab (> 0). */
static dfl_status template_check_vocab(const dfl_noise_template *t, int64_t vocab, const char *label, dfl_error *err)
{
    dfl_status s;
    if ((s = check_vocab(t->haystack, t->n_haystack, vocab, label, "haystack", err)) ||
        (s = check_vocab(t->needle, t->n_needle, vocab, label, "needle", err)) ||
        (s = check_vocab(t->query, t->n_query, vocab, label, "query", err)) ||
        (s = check_vocab(t->target, t->n_target, vocab, label, "target", err)))
        return s;
    if (t->has_bos && (s = check_vocab(&t->bos, 1, vocab, label, "bos", err))) return s;
    for (size_t i = 0; i < t->n_distractors; i++) {
        char name[48];
        snprintf(name, sizeof name, "distractors[%zu]", i);
        if ((s = check_vocab(t->distractor[i], t->n_distractor[i], vocab, label, name, err))) return s;
    }
    return DFL_OK;
}

static dfl_status parse_template(const cJSON *root, const char *label, dfl_noise_template *t, dfl_error *err)
{
    static const char *const known[] = {"haystack", "needle", "answer", "distractors",
                                        "query",    "target", "bos",    "vocab_size"};
    if (!cJSON_IsObject(root)) return dfl__fail(err, DFL_ERR_FORMAT, "%s: a template is a JSON object", label);
    for (const cJSON *e = root->child; e; e = e->next) {
        size_t k = 0;
        while (k < sizeof known / sizeof *known && strcmp(e->string, known[k]))
            k++;
        if (k == sizeof known / sizeof *known)
            return dfl__fail(err, DFL_ERR_FORMAT,
                             "%s: unknown key '%s' (keys: haystack, needle, answer, distractors, query, target, bos, "
                             "vocab_size)",
                             label, e->string);
    }
    static const char *const required[] = {"haystack", "needle", "query", "target"};
    int32_t **arrs[] = {&t->haystack, &t->needle, &t->query, &t->target};
    size_t *lens[] = {&t->n_haystack, &t->n_needle, &t->n_query, &t->n_target};
    dfl_status s;
    for (int k = 0; k < 4; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, required[k]);
        if (!a) return dfl__fail(err, DFL_ERR_FORMAT, "%s: missing key '%s'", label, required[k]);
        if ((s = parse_ids(a, label, required[k], arrs[k], lens[k], err))) return s;
    }

    t->answer.start = 0;
    t->answer.end = (int32_t)t->n_needle;
    const cJSON *ans = cJSON_GetObjectItemCaseSensitive(root, "answer");
    if (ans && !cJSON_IsNull(ans)) {
        if (!cJSON_IsArray(ans) || cJSON_GetArraySize(ans) != 2 || !cJSON_IsNumber(ans->child) ||
            !cJSON_IsNumber(ans->child->next) || ans->child->valuedouble != floor(ans->child->valuedouble) ||
            ans->child->next->valuedouble != floor(ans->child->next->valuedouble))
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: answer is not a pair of integers [start, end]", label);
        double a0 = ans->child->valuedouble, a1 = ans->child->next->valuedouble;
        if (a0 < 0 || a1 <= a0 || a1 > (double)t->n_needle)
            return dfl__fail(err, DFL_ERR_RANGE,
                             "%s: answer [%.17g, %.17g] is not a non-empty half-open span inside the needle "
                             "(0 <= start < end <= %zu)",
                             label, a0, a1, t->n_needle);
        t->answer.start = (int32_t)a0;
        t->answer.end = (int32_t)a1;
    }

    const cJSON *dis = cJSON_GetObjectItemCaseSensitive(root, "distractors");
    if (dis && !cJSON_IsNull(dis)) {
        if (!cJSON_IsArray(dis))
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: distractors is not an array of id arrays", label);
        size_t n = (size_t)cJSON_GetArraySize(dis);
        if (n > DFL_NOISE_MAX_DISTRACTORS)
            return dfl__fail(err, DFL_ERR_RANGE, "%s: %zu distractors (at most %d)", label, n,
                             DFL_NOISE_MAX_DISTRACTORS);
        for (const cJSON *e = dis->child; e; e = e->next) {
            char name[48];
            snprintf(name, sizeof name, "distractors[%zu]", t->n_distractors);
            if ((s = parse_ids(e, label, name, &t->distractor[t->n_distractors], &t->n_distractor[t->n_distractors],
                               err)))
                return s;
            t->n_distractors++;
        }
    }

    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(root, "bos");
    if (bos && !cJSON_IsNull(bos)) {
        if (!cJSON_IsNumber(bos) || bos->valuedouble != floor(bos->valuedouble))
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: bos is not a token id or null", label);
        if (bos->valuedouble < 0 || bos->valuedouble > (double)INT32_MAX)
            return dfl__fail(err, DFL_ERR_RANGE, "%s: bos: %.17g is not a token id (0 to %d)", label, bos->valuedouble,
                             INT32_MAX);
        t->has_bos = 1;
        t->bos = (int32_t)bos->valuedouble;
    }

    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(root, "vocab_size");
    if (vs && !cJSON_IsNull(vs)) {
        if (!cJSON_IsNumber(vs) || vs->valuedouble != floor(vs->valuedouble) || vs->valuedouble < 1 ||
            vs->valuedouble > (double)INT32_MAX + 1.0)
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: vocab_size is not a positive integer", label);
        t->vocab_size = (int64_t)vs->valuedouble;
        if ((s = template_check_vocab(t, t->vocab_size, label, err))) return s;
    }
    return DFL_OK;
}

/* A template file by the rules of every JSON reader (base/jsondoc.h: the last of a
 * repeated key wins, nothing after the document, UTF-8 only). */
static dfl_status parse_json(const char *json, size_t len, const char *label, cJSON **root, dfl_error *err)
{
    const char *why;
    size_t at;
    *root = dfl__json_parse(json, len, &why, &at);
    if (*root) return DFL_OK;
    if (!strcmp(why, "syntax error"))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: invalid JSON near byte %zu", label, at);
    if (!strcmp(why, "out of memory")) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", label);
    return dfl__fail(err, DFL_ERR_FORMAT, "%s: invalid JSON: %s at byte %zu", label, why, at);
}

dfl_status dfl_noise_template_parse(const char *json, size_t len, const char *label, dfl_noise_template *out,
                                    dfl_error *err)
{
    memset(out, 0, sizeof *out);
    if (memchr(json, '\0', len))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: a NUL byte in the file (not JSON text)", label);
    cJSON *root = NULL;
    dfl_status s = parse_json(json, len, label, &root, err);
    if (s) return s;
    s = parse_template(root, label, out, err);
    cJSON_Delete(root);
    if (s) dfl_noise_template_free(out);
    return s;
}

dfl_status dfl_noise_template_read(const char *path, dfl_noise_template *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    size_t len = 0;
    dfl_status s = dfl__read_file_max(path, TEMPLATE_MAX, "a noise template", &buf, &len, err);
    if (s) return s;
    s = dfl_noise_template_parse(buf, len, path, out, err);
    free(buf);
    return s;
}

/* Longest needle (answer or distractor) and their count. */
static size_t template_needles(const dfl_noise_template *t, size_t *maxlen, size_t *total)
{
    size_t mx = t->n_needle, tot = t->n_needle;
    for (size_t i = 0; i < t->n_distractors; i++) {
        if (t->n_distractor[i] > mx) mx = t->n_distractor[i];
        tot += t->n_distractor[i];
    }
    if (maxlen) *maxlen = mx;
    if (total) *total = tot;
    return 1 + t->n_distractors;
}

/* Shortest context: the needle alone; with distractors, room for every needle at
 * twice the longest one's length, which guarantees a free place for each distractor
 * wherever the others went (each placed needle of length n_i blocks fewer than
 * n_i + n starts of a needle of length n). */
static int64_t template_min_context(const dfl_noise_template *t)
{
    size_t mx, tot;
    size_t k = template_needles(t, &mx, &tot);
    if (t->n_distractors == 0) return (int64_t)t->n_needle;
    return (int64_t)(2 * k * mx);
}

int64_t dfl_noise_template_min_length(const dfl_noise_template *t)
{
    return (t->has_bos ? 1 : 0) + (int64_t)t->n_query + (int64_t)t->n_target + template_min_context(t);
}

/* ---------------------------------------------------------------- generation */

dfl_noise_prompts_params dfl_noise_prompts_default(void)
{
    dfl_noise_prompts_params p;
    memset(&p, 0, sizeof p);
    p.samples = 20;
    p.seed = 1;
    p.needles = 4;
    p.queries = 1;
    p.digits = 4;
    p.vocab_size = 128;
    return p;
}

/* "d25-s3", or "L1024-d25-s3" when several lengths are generated. */
static char *make_id(int with_length, int64_t length, double depth, int64_t sample)
{
    char buf[96];
    if (with_length)
        snprintf(buf, sizeof buf, "L%lld-d%g-s%lld", (long long)length, depth * 100.0, (long long)sample);
    else
        snprintf(buf, sizeof buf, "d%g-s%lld", depth * 100.0, (long long)sample);
    return strdup(buf);
}

/* First start in [0, C − n] at or after `from` (wrapping) where [s, s + n) overlaps no
 * placed [start[i], start[i] + len[i]); −1 when none (cannot happen above the minimum
 * context, see template_min_context). */
static int64_t free_place(const int64_t *start, const size_t *len, size_t k, int64_t n, int64_t C, int64_t from)
{
    int64_t span = C - n + 1;
    for (int64_t j = 0; j < span; j++) {
        int64_t s = (from + j) % span;
        int ok = 1;
        for (size_t i = 0; i < k && ok; i++)
            if (s < start[i] + (int64_t)len[i] && start[i] < s + n) ok = 0;
        if (ok) return s;
    }
    return -1;
}

/* One template prompt of T tokens with the answer needle at `depth`; spans filled. */
static dfl_status template_prompt(const dfl_noise_template *t, int64_t T, double depth, uint64_t seed, uint64_t index,
                                  dfl_prompt *out, dfl_error *err)
{
    const int64_t nb = t->has_bos ? 1 : 0, nq = (int64_t)t->n_query, nt = (int64_t)t->n_target;
    const int64_t C = T - nb - nq - nt;
    const size_t K = 1 + t->n_distractors;
    dfl_rng r = dfl_rng_make(seed, 3, index); /* stream 3: template prompts */

    /* needle k's context offset and length (k = 0 the answer) */
    int64_t start[1 + DFL_NOISE_MAX_DISTRACTORS];
    size_t len[1 + DFL_NOISE_MAX_DISTRACTORS];
    const int32_t *ids[1 + DFL_NOISE_MAX_DISTRACTORS];
    len[0] = t->n_needle;
    ids[0] = t->needle;
    start[0] = (int64_t)floor(depth * (double)(C - (int64_t)t->n_needle));
    for (size_t i = 1; i < K; i++) {
        len[i] = t->n_distractor[i - 1];
        ids[i] = t->distractor[i - 1];
        int64_t span = C - (int64_t)len[i] + 1;
        start[i] = free_place(start, len, i, (int64_t)len[i], C, (int64_t)dfl_rng_below(&r, (uint64_t)span));
        if (start[i] < 0) /* guarded by the minimum length; kept so a bug is an error, not a crash */
            return dfl__fail(err, DFL_ERR_USAGE, "template: no room for distractor %zu in %lld context tokens", i - 1,
                             (long long)C);
    }

    memset(out, 0, sizeof *out);
    out->tokens = dfl__alloc_array((size_t)T, sizeof(int32_t));
    out->spans[DFL_SPAN_ANSWER] = dfl__alloc_array(1, sizeof(dfl_span));
    out->spans[DFL_SPAN_QUERY] = dfl__alloc_array(1, sizeof(dfl_span));
    out->spans[DFL_SPAN_TARGET] = dfl__alloc_array(1, sizeof(dfl_span));
    if (K > 1) out->spans[DFL_SPAN_DISTRACTOR] = dfl__alloc_array(K - 1, sizeof(dfl_span));
    if (!out->tokens || !out->spans[DFL_SPAN_ANSWER] || !out->spans[DFL_SPAN_QUERY] || !out->spans[DFL_SPAN_TARGET] ||
        (K > 1 && !out->spans[DFL_SPAN_DISTRACTOR])) {
        dfl_prompt_free(out);
        return dfl__fail(err, DFL_ERR_NOMEM, "template: out of memory for a prompt of %lld tokens", (long long)T);
    }
    int32_t *tok = out->tokens; /* [T] */
    if (nb) tok[0] = t->bos;

    /* context: haystack read cyclically from a random offset, needles written in
     * place; the haystack continues after a needle where it stopped before it, so
     * the filler reads as one running text */
    uint8_t *owner = dfl__calloc_array((size_t)C, 1); /* [C] 1 + needle index, 0 = filler */
    if (!owner) {
        dfl_prompt_free(out);
        return dfl__fail(err, DFL_ERR_NOMEM, "template: out of memory");
    }
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < len[i]; j++)
            owner[start[i] + (int64_t)j] = (uint8_t)(1 + i);
    size_t h = (size_t)dfl_rng_below(&r, (uint64_t)t->n_haystack);
    for (int64_t c = 0; c < C; c++) {
        if (owner[c]) {
            size_t i = owner[c] - 1u;
            tok[nb + c] = ids[i][c - start[i]];
        } else {
            tok[nb + c] = t->haystack[h];
            h = (h + 1) % t->n_haystack;
        }
    }
    free(owner);
    memcpy(tok + nb + C, t->query, (size_t)nq * sizeof *tok);
    memcpy(tok + nb + C + nq, t->target, (size_t)nt * sizeof *tok);

    out->n_tokens = (size_t)T;
    out->bos = t->has_bos;
    out->has_depth = 1;
    out->depth = depth;
    dfl_span a = {(int32_t)(nb + start[0] + t->answer.start), (int32_t)(nb + start[0] + t->answer.end)};
    dfl_span q = {(int32_t)(nb + C), (int32_t)(nb + C + nq)};
    dfl_span g = {(int32_t)(nb + C + nq), (int32_t)T};
    out->spans[DFL_SPAN_ANSWER][0] = a;
    out->spans[DFL_SPAN_QUERY][0] = q;
    out->spans[DFL_SPAN_TARGET][0] = g;
    out->n_spans[DFL_SPAN_ANSWER] = out->n_spans[DFL_SPAN_QUERY] = out->n_spans[DFL_SPAN_TARGET] = 1;
    /* distractors listed by position, as the synthetic task lists its needles */
    size_t nd = 0;
    for (int64_t c = 0; c < C; c++)
        for (size_t i = 1; i < K; i++)
            if (start[i] == c) {
                dfl_span d = {(int32_t)(nb + c), (int32_t)(nb + c + (int64_t)len[i])};
                out->spans[DFL_SPAN_DISTRACTOR][nd++] = d;
            }
    out->n_spans[DFL_SPAN_DISTRACTOR] = nd;
    return DFL_OK;
}

/* The needle task of p at one length and depth. */
static dfl_needle_params needle_params(const dfl_noise_prompts_params *p, int64_t len, double depth)
{
    dfl_needle_params np = dfl_needle_params_default();
    np.vocab_size = p->vocab_size;
    np.seq_len = len;
    np.needles = p->needles;
    np.queries = p->queries;
    np.digits = p->digits;
    np.depth = depth;
    return np;
}

static dfl_status check_params(const dfl_noise_prompts_params *p, const int64_t *lengths, size_t nl,
                               const double *depths, size_t nd, dfl_error *err)
{
    if (p->samples < 1 || p->samples > 1000000)
        return dfl__fail(err, DFL_ERR_USAGE, "--samples %lld is not in [1, 1000000]", (long long)p->samples);
    if (nl == 0) return dfl__fail(err, DFL_ERR_USAGE, "--length: no lengths");
    if (nd == 0) return dfl__fail(err, DFL_ERR_USAGE, "--depths: no depths");
    for (size_t i = 0; i < nd; i++)
        if (!(depths[i] >= 0.0 && depths[i] <= 1.0))
            return dfl__fail(err, DFL_ERR_USAGE, "--depths: %g is not in [0, 1]", depths[i]);
    size_t total;
    if (!dfl__mul_ok(nl * nd, (size_t)p->samples, &total) || total > 10000000)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "%zu lengths x %zu depths x %lld samples is too many prompts (at most 10^7)", nl, nd,
                         (long long)p->samples);
    for (size_t i = 0; i < nl; i++) {
        if (lengths[i] < 1 || lengths[i] > (1 << 24))
            return dfl__fail(err, DFL_ERR_USAGE, "--length %lld is not in [1, %d]", (long long)lengths[i], 1 << 24);
        if (p->tmpl) {
            int64_t min = dfl_noise_template_min_length(p->tmpl);
            if (lengths[i] < min)
                return dfl__fail(err, DFL_ERR_USAGE,
                                 "--length %lld is too short for the template's pieces (at least %lld tokens%s)",
                                 (long long)lengths[i], (long long)min,
                                 p->tmpl->n_distractors ? ": with distractors the context must hold twice the "
                                                          "longest needle per needle"
                                                        : "");
        } else {
            dfl_needle_params np = needle_params(p, lengths[i], depths[0]);
            dfl_status s = dfl_needle_check(&np, err);
            if (s) return s;
        }
    }
    return DFL_OK;
}

dfl_status dfl_noise_prompts_make(const dfl_noise_prompts_params *p, dfl_prompt_set *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    const int64_t *lengths = p->lengths ? p->lengths : default_lengths;
    size_t nl = p->lengths ? p->n_lengths : 1;
    const double *depths = p->depths ? p->depths : default_depths;
    size_t nd = p->depths ? p->n_depths : sizeof default_depths / sizeof *default_depths;
    dfl_status s = check_params(p, lengths, nl, depths, nd, err);
    if (s) return s;
    if (p->tmpl) {
        int64_t vocab = p->vocab_size > 0 ? p->vocab_size : p->tmpl->vocab_size;
        if (vocab > 0 && (s = template_check_vocab(p->tmpl, vocab, "template", err))) return s;
    }

    size_t n = nl * nd * (size_t)p->samples; /* bounded by check_params */
    dfl_prompt *items = dfl__calloc_array(n, sizeof *items);
    if (!items) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for %zu prompts", n);
    size_t k = 0;
    for (size_t li = 0; li < nl && !s; li++)
        for (size_t di = 0; di < nd && !s; di++)
            for (int64_t i = 0; i < p->samples && !s; i++, k++) {
                uint64_t index = (uint64_t)((li * nd + di) * (size_t)p->samples) + (uint64_t)i;
                if (p->tmpl) {
                    s = template_prompt(p->tmpl, lengths[li], depths[di], p->seed, index, &items[k], err);
                } else {
                    dfl_needle_params np = needle_params(p, lengths[li], depths[di]);
                    s = dfl_needle_prompt(&np, p->seed, 2, index, &items[k], err);
                }
                if (s) break;
                char *id = make_id(nl > 1, lengths[li], depths[di], i);
                if (!id) {
                    s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
                    break;
                }
                free(items[k].id);
                items[k].id = id;
            }
    if (s) {
        for (size_t i = 0; i < n; i++)
            dfl_prompt_free(&items[i]);
        free(items);
        return s;
    }
    out->items = items;
    out->count = n;
    return DFL_OK;
}

/* ---------------------------------------------------------- text templates ---- */

/* Tokenize one piece (no special tokens) into a fresh id array; also its offsets. */
static dfl_status piece_ids(dfl_tokenizer *t, const char *text, const char *label, const char *name, int32_t **out,
                            size_t *n, dfl_encoding *keep, dfl_error *err)
{
    dfl_encoding e;
    dfl_status s = dfl_tokenizer_encode(t, text, strlen(text), 0, &e, err);
    if (s) return dfl__context(err, "%s: %s", label, name);
    if (!e.n) {
        dfl_encoding_free(&e);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s gives no tokens", label, name);
    }
    *out = dfl__alloc_array(e.n, sizeof **out);
    if (!*out) {
        dfl_encoding_free(&e);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", label);
    }
    for (size_t i = 0; i < e.n; i++)
        (*out)[i] = (int32_t)e.ids[i];
    *n = e.n;
    if (keep)
        *keep = e;
    else
        dfl_encoding_free(&e);
    return DFL_OK;
}

static const char *text_of(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static dfl_status parse_text_template(const cJSON *root, const char *label, const char *dir, dfl_tokenizer *t,
                                      dfl_noise_template *o, dfl_error *err)
{
    static const char *known[] = {"haystack", "needle", "answer", "distractors", "query", "target", "bos"};
    if (!cJSON_IsObject(root)) return dfl__fail(err, DFL_ERR_FORMAT, "%s: a template must be a JSON object", label);
    for (const cJSON *k = root->child; k; k = k->next) {
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++)
            ok |= !strcmp(k->string, known[i]);
        if (!ok) return dfl__fail(err, DFL_ERR_FORMAT, "%s: unknown key \"%s\"", label, k->string);
    }
    const char *needle = text_of(root, "needle"), *query = text_of(root, "query"), *target = text_of(root, "target");
    if (!needle || !query || !target)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: \"needle\", \"query\" and \"target\" must be strings", label);
    /* the haystack: a string, or {"file": path} read relative to the template */
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(root, "haystack");
    char *hay = NULL;
    dfl_status s = DFL_OK;
    if (cJSON_IsString(h)) {
        hay = strdup(h->valuestring);
        if (!hay) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", label);
    } else if (cJSON_IsObject(h) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(h, "file"))) {
        const char *f = cJSON_GetObjectItemCaseSensitive(h, "file")->valuestring;
        char path[4096];
        if (f[0] == '/' || !dir)
            snprintf(path, sizeof path, "%s", f);
        else
            snprintf(path, sizeof path, "%s/%s", dir, f);
        size_t hl;
        if ((s = dfl__read_file_max(path, (size_t)1 << 30, "a haystack", &hay, &hl, err)))
            return dfl__context(err, "%s: haystack", label);
        if (strlen(hay) != hl) {
            free(hay);
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: haystack file %s holds a NUL byte", label, path);
        }
    } else {
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: \"haystack\" must be a string or {\"file\": path}", label);
    }
    s = piece_ids(t, hay, label, "haystack", &o->haystack, &o->n_haystack, NULL, err);
    free(hay);
    if (s) return s;
    dfl_encoding ne;
    if ((s = piece_ids(t, needle, label, "needle", &o->needle, &o->n_needle, &ne, err))) return s;
    /* answer: the needle's tokens overlapping the answer text's characters */
    o->answer = (dfl_span){0, (int32_t)o->n_needle};
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "answer");
    if (a && !cJSON_IsNull(a)) {
        const char *at = cJSON_IsString(a) && a->valuestring[0] ? strstr(needle, a->valuestring) : NULL;
        if (!cJSON_IsString(a))
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: \"answer\" must be a string", label);
        else if (!at)
            s = dfl__fail(err, DFL_ERR_RANGE, "%s: answer \"%.60s\" is not in the needle", label, a->valuestring);
        if (!s) {
            size_t cs = 0, ce;
            for (const char *q = needle; q < at; q++)
                cs += ((unsigned char)*q & 0xC0) != 0x80;
            ce = cs;
            for (const char *q = at; q < at + strlen(a->valuestring); q++)
                ce += ((unsigned char)*q & 0xC0) != 0x80;
            int64_t first = -1, last = -1;
            for (size_t i = 0; i < ne.n; i++)
                if (ne.start[i] < ne.end[i] && ne.start[i] < ce && ne.end[i] > cs) {
                    if (first < 0) first = (int64_t)i;
                    last = (int64_t)i;
                }
            o->answer = (dfl_span){(int32_t)first, (int32_t)(last + 1)};
        }
    }
    dfl_encoding_free(&ne);
    if (s) return s;
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(root, "distractors");
    if (ds && !cJSON_IsNull(ds)) {
        if (!cJSON_IsArray(ds))
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: \"distractors\" must be an array of strings", label);
        for (const cJSON *d = ds->child; d; d = d->next) {
            if (!cJSON_IsString(d))
                return dfl__fail(err, DFL_ERR_FORMAT, "%s: distractors[%zu] is not a string", label, o->n_distractors);
            if (o->n_distractors == DFL_NOISE_MAX_DISTRACTORS)
                return dfl__fail(err, DFL_ERR_RANGE, "%s: more than %d distractors", label, DFL_NOISE_MAX_DISTRACTORS);
            size_t k = o->n_distractors;
            if ((s = piece_ids(t, d->valuestring, label, "distractor", &o->distractor[k], &o->n_distractor[k], NULL,
                               err)))
                return s;
            o->n_distractors++;
        }
    }
    if ((s = piece_ids(t, query, label, "query", &o->query, &o->n_query, NULL, err))) return s;
    if ((s = piece_ids(t, target, label, "target", &o->target, &o->n_target, NULL, err))) return s;
    /* bos: what the post-processor puts first, if it puts a special token there */
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "bos");
    if (b && !cJSON_IsNull(b) && !cJSON_IsBool(b))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: \"bos\" must be true or false", label);
    if (!b || cJSON_IsNull(b) || cJSON_IsTrue(b)) {
        dfl_encoding e;
        if ((s = dfl_tokenizer_encode(t, "", 0, 1, &e, err))) return s;
        if (e.n && e.special[0]) {
            o->has_bos = 1;
            o->bos = (int32_t)e.ids[0];
        }
        dfl_encoding_free(&e);
    }
    o->vocab_size = (int64_t)dfl_tokenizer_vocab_size(t);
    return DFL_OK;
}

dfl_status dfl_noise_template_parse_text(const char *json, size_t len, const char *label, const char *dir,
                                         dfl_tokenizer *t, dfl_noise_template *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    dfl_status s = parse_json(json, len, label, &root, err);
    if (s) return s;
    s = parse_text_template(root, label, dir, t, out, err);
    cJSON_Delete(root);
    if (s) dfl_noise_template_free(out);
    return s;
}

dfl_status dfl_noise_template_read_text(const char *path, dfl_tokenizer *t, dfl_noise_template *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    char *buf = NULL, *dir = NULL;
    size_t len = 0;
    dfl_status s = dfl__read_file_max(path, TEMPLATE_MAX, "a noise template", &buf, &len, err);
    if (s) return s;
    const char *slash = strrchr(path, '/');
    if (slash) dir = strndup(path, (size_t)(slash - path) + (slash == path));
    s = dfl_noise_template_parse_text(buf, len, path, dir, t, out, err);
    free(dir);
    free(buf);
    return s;
}

dfl_status dfl_noise_prompts_label(dfl_prompt_set *set, dfl_tokenizer *t, dfl_error *err)
{
    for (size_t i = 0; i < set->count; i++) {
        dfl_prompt *p = &set->items[i];
        uint32_t *ids = dfl__alloc_array(p->n_tokens ? p->n_tokens : 1, sizeof *ids);
        if (!ids) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < p->n_tokens; k++)
            ids[k] = (uint32_t)p->tokens[k];
        char **labels = NULL;
        dfl_status s = dfl_tokenizer_labels(t, ids, p->n_tokens, &labels, err);
        free(ids);
        if (s) return s;
        if (p->text)
            for (size_t k = 0; k < p->n_tokens; k++)
                free(p->text[k]);
        free(p->text);
        p->text = labels;
    }
    return DFL_OK;
}
