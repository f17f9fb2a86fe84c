/* fuzz_noise_template.c — libFuzzer target for `noise prompts --template`: the template
 * parser (lib/text/noise_prompts.c) and the prompts it builds.
 *
 * The input is parsed as a template file. When it is accepted, its invariants are
 * checked, and prompts are generated from it at a length and depths drawn from the
 * input's last bytes (the shortest length it allows, and a little longer; depths 0, 1
 * and one in between). Every prompt must hold exactly what the template says where its
 * spans say: the answer part of the needle, each distractor, the query and the target,
 * the haystack around them, and a first token that is the template's bos. A violation
 * traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/noise_prompts.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) __builtin_trap();                                                                                    \
    } while (0)

static int same(const int32_t *a, const int32_t *b, size_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

static void check_template(const dfl_noise_template *t)
{
    CHECK(t->haystack && t->n_haystack >= 1 && t->needle && t->n_needle >= 1);
    CHECK(t->query && t->n_query >= 1 && t->target && t->n_target >= 1);
    CHECK(t->answer.start >= 0 && t->answer.start < t->answer.end && (size_t)t->answer.end <= t->n_needle);
    CHECK(t->n_distractors <= DFL_NOISE_MAX_DISTRACTORS);
    for (size_t i = 0; i < t->n_distractors; i++)
        CHECK(t->distractor[i] && t->n_distractor[i] >= 1);
    if (t->vocab_size > 0) {
        for (size_t i = 0; i < t->n_needle; i++)
            CHECK(t->needle[i] < t->vocab_size);
        if (t->has_bos) CHECK(t->bos < t->vocab_size);
    }
    CHECK(dfl_noise_template_min_length(t) >= (int64_t)(t->n_needle + t->n_query + t->n_target));
}

/* One generated prompt of T tokens against the template it came from. */
static void check_prompt(const dfl_noise_template *t, const dfl_prompt *p, int64_t T, double depth)
{
    CHECK(p->n_tokens == (size_t)T && p->tokens && p->has_depth && p->depth == depth);
    CHECK(p->bos == t->has_bos);
    if (t->has_bos) CHECK(p->tokens[0] == t->bos);
    for (size_t i = 0; i < p->n_tokens; i++)
        CHECK(p->tokens[i] >= 0);
    CHECK(p->n_spans[DFL_SPAN_ANSWER] == 1 && p->n_spans[DFL_SPAN_QUERY] == 1 && p->n_spans[DFL_SPAN_TARGET] == 1);
    CHECK(p->n_spans[DFL_SPAN_DISTRACTOR] == t->n_distractors);
    for (int k = 0; k < DFL_SPAN_KINDS; k++)
        for (size_t j = 0; j < p->n_spans[k]; j++)
            CHECK(p->spans[k][j].start >= 0 && p->spans[k][j].start < p->spans[k][j].end && p->spans[k][j].end <= T);
    dfl_span a = p->spans[DFL_SPAN_ANSWER][0], q = p->spans[DFL_SPAN_QUERY][0], g = p->spans[DFL_SPAN_TARGET][0];
    CHECK((size_t)(a.end - a.start) == (size_t)(t->answer.end - t->answer.start));
    CHECK(same(p->tokens + a.start, t->needle + t->answer.start, (size_t)(a.end - a.start)));
    /* the whole needle stands around the answer */
    int64_t n0 = a.start - t->answer.start;
    CHECK(n0 >= (t->has_bos ? 1 : 0) && n0 + (int64_t)t->n_needle <= q.start);
    CHECK(same(p->tokens + n0, t->needle, t->n_needle));
    CHECK((size_t)(q.end - q.start) == t->n_query && same(p->tokens + q.start, t->query, t->n_query));
    CHECK(q.end == g.start && g.end == T);
    CHECK((size_t)(g.end - g.start) == t->n_target && same(p->tokens + g.start, t->target, t->n_target));
    /* distractors: listed by position, each one of the template's, none overlapping another
     * needle; every template distractor used once */
    uint64_t used = 0;
    int64_t prev_end = -1;
    for (size_t j = 0; j < p->n_spans[DFL_SPAN_DISTRACTOR]; j++) {
        dfl_span d = p->spans[DFL_SPAN_DISTRACTOR][j];
        CHECK(d.start >= prev_end && d.end <= q.start);
        CHECK(d.end <= n0 || d.start >= n0 + (int64_t)t->n_needle);
        prev_end = d.end;
        size_t i = 0;
        while (i < t->n_distractors && ((used >> i & 1) || t->n_distractor[i] != (size_t)(d.end - d.start) ||
                                        !same(p->tokens + d.start, t->distractor[i], t->n_distractor[i])))
            i++;
        CHECK(i < t->n_distractors);
        used |= (uint64_t)1 << i;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfl_noise_template t;
    dfl_error err;
    memset(&err, 0, sizeof err);
    dfl_status s = dfl_noise_template_parse((const char *)data, size, "fuzz.json", &t, &err);
    if (s != DFL_OK) {
        /* a failure fills the message and leaves nothing owned */
        CHECK(err.status == s && err.msg[0] != '\0');
        CHECK(t.haystack == NULL && t.needle == NULL && t.query == NULL && t.target == NULL);
        dfl_noise_template_free(&t);
        return 0;
    }
    check_template(&t);
    int64_t min = dfl_noise_template_min_length(&t);
    uint8_t extra = size ? data[size - 1] : 0, dsel = size > 1 ? data[size - 2] : 0;
    if (min <= 4096) {
        int64_t lengths[2] = {min, min + extra % 64};
        double depths[3] = {0.0, dsel / 255.0, 1.0};
        dfl_noise_prompts_params p = dfl_noise_prompts_default();
        p.lengths = lengths, p.n_lengths = 2;
        p.depths = depths, p.n_depths = 3;
        p.samples = 2;
        p.seed = extra;
        p.vocab_size = 0;
        p.tmpl = &t;
        dfl_prompt_set set;
        s = dfl_noise_prompts_make(&p, &set, &err);
        CHECK(s == DFL_OK); /* the template was checked: only the vocabulary could refuse it */
        CHECK(set.count == 12);
        for (size_t k = 0; k < set.count; k++)
            check_prompt(&t, &set.items[k], lengths[k / 6], depths[(k / 2) % 3]);
        dfl_prompt_set_free(&set);
        /* one token short of the minimum is a usage error naming it */
        lengths[0] = min - 1;
        p.n_lengths = 1;
        if (min > 1) {
            s = dfl_noise_prompts_make(&p, &set, &err);
            CHECK(s == DFL_ERR_USAGE && set.count == 0 && strstr(err.msg, "too short"));
        }
    }
    dfl_noise_template_free(&t);
    return 0;
}
