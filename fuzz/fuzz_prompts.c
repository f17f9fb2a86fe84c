/* fuzz_prompts.c — libFuzzer target for the prompt line parser.
 *
 * The input is parsed twice: whole, as one line (so multi-line JSON and any bytes at
 * all reach cJSON and our checks), and split on '\n' the way dfl_prompt_set_read
 * splits a file. Every accepted prompt must satisfy the format's invariants; a
 * violation traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/prompts.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) __builtin_trap();                                                                                    \
    } while (0)

static void exercise(const uint8_t *data, size_t size, size_t line)
{
    dfl_prompt p;
    dfl_error err;
    memset(&err, 0, sizeof err);
    dfl_status s = dfl_prompt_parse((const char *)data, size, "fuzz.jsonl", line, &p, &err);
    if (s != DFL_OK) {
        /* A failure fills the message and leaves nothing owned. */
        CHECK(err.status == s && err.msg[0] != '\0');
        CHECK(p.tokens == NULL && p.id == NULL && p.text == NULL && p.n_tokens == 0);
        dfl_prompt_free(&p);
        return;
    }
    if (p.n_tokens == 0) {
        /* a text prompt ("input", no "tokens"): character spans, tokenized later; a chat
         * prompt ("messages"): its variables, rendered later */
        CHECK((p.input != NULL) != (p.chat != NULL) && !p.tokens && p.line == line);
        for (int k = 0; k < DFL_SPAN_KINDS; k++)
            for (size_t j = 0; j < p.n_char_spans[k]; j++)
                CHECK(p.char_spans[k][j].start >= 0 && p.char_spans[k][j].start < p.char_spans[k][j].end);
        dfl_prompt_free(&p);
        return;
    }
    CHECK(p.n_tokens > 0 && p.tokens && p.line == line);
    int32_t max_tok = 0;
    for (size_t i = 0; i < p.n_tokens; i++) {
        CHECK(p.tokens[i] >= 0);
        if (p.tokens[i] > max_tok) max_tok = p.tokens[i];
        if (p.text) CHECK(p.text[i] != NULL);
    }
    for (int k = 0; k < DFL_SPAN_KINDS; k++)
        for (size_t j = 0; j < p.n_spans[k]; j++)
            CHECK(p.spans[k][j].start >= 0 && p.spans[k][j].start < p.spans[k][j].end &&
                  (size_t)p.spans[k][j].end <= p.n_tokens);

    uint8_t *seg = malloc(p.n_tokens);
    if (seg) {
        dfl_prompt_segments(&p, seg);
        for (size_t i = 0; i < p.n_tokens; i++)
            CHECK(seg[i] <= DFL_SEG_TARGET);
        free(seg);
    }
    CHECK(dfl_prompt_check_vocab(&p, (int64_t)max_tok + 1, "fuzz", &err) == DFL_OK);
    CHECK(dfl_prompt_check_vocab(&p, max_tok, "fuzz", &err) == (max_tok == 0 ? DFL_ERR_USAGE : DFL_ERR_RANGE));
    dfl_prompt_free(&p);
    CHECK(p.tokens == NULL && p.n_tokens == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    exercise(data, size, 0);
    size_t pos = 0, line = 1;
    while (pos < size) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t n = nl ? (size_t)(nl - (data + pos)) : size - pos;
        exercise(data + pos, n, line++);
        pos += n + (nl ? 1 : 0);
    }
    return 0;
}
