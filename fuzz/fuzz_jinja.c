/* fuzz_jinja.c — libFuzzer target for the chat-template engine (lib/text/jinja.c).
 *
 * The input is a template, parsed and (when it parses) rendered with a small fixed
 * conversation. A failure must fill the message; a success must leave valid output.
 * Runaway templates stop at the engine's statement and memory bounds.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/strbuf.h"
#include "text/jinja.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) __builtin_trap();                                                                                    \
    } while (0)

static const char VARS[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \" Hi \"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nx\\n</think>\\n\\nHello\"}], \"add_generation_prompt\": true,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"tools\": null, \"documents\": null}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfl_jinja *t = NULL;
    dfl_error err;
    memset(&err, 0, sizeof err);
    dfl_status s = dfl_jinja_parse((const char *)data, size, &t, &err);
    if (s) {
        CHECK(t == NULL && err.status == s && err.msg[0] != '\0');
        return 0;
    }
    dfl_strbuf out = {0};
    memset(&err, 0, sizeof err);
    s = dfl_jinja_render(t, VARS, &out, &err);
    if (s)
        CHECK(err.status == s && err.msg[0] != '\0');
    else
        CHECK(out.len == 0 || (out.p && out.p[out.len] == '\0'));
    dfl_strbuf_free(&out);
    dfl_jinja_free(t);
    return 0;
}
