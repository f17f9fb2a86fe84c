/* fuzz_tokenizer_load.c — libFuzzer target for tokenizer.json loading: any bytes give a
 * tokenizer or a clean one-line error; an accepted tokenizer encodes a fixed text and
 * labels its tokens without crashing, and every id it returns is in its vocabulary. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfl_tokenizer *t = NULL;
    dfl_error err;
    if (dfl_tokenizer_load((const char *)data, size, &t, &err) != DFL_OK) {
        if (t || strchr(err.msg, '\n')) abort();
        return 0;
    }
    static const char text[] = "Hello  wörld 12345 <s>caf\xc3\xa9 \xf0\x9f\x98\x80\n";
    dfl_encoding e;
    if (dfl_tokenizer_encode(t, text, sizeof text - 1, 1, &e, &err) == DFL_OK) {
        for (size_t i = 0; i < e.n; i++)
            if (!dfl_tokenizer_piece(t, e.ids[i], NULL) || e.start[i] > e.end[i]) abort();
        char **labels = NULL;
        if (dfl_tokenizer_labels(t, e.ids, e.n, &labels, &err) == DFL_OK) dfl_tokenizer_labels_free(labels, e.n);
        dfl_encoding_free(&e);
    }
    dfl_tokenizer_close(t);
    return 0;
}
