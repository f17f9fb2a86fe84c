/* unicode_harness.c — lib/text/tokenizer_unicode.c from the command line, for
 * tests/test_tokenizer_unicode.py: each input line is code points in hex ("0044 0307");
 * each output line is its NFC;NFD;NFKC;NFKD the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

static void put(const dfl__uc_buf *b, int last)
{
    for (size_t i = 0; i < b->n; i++)
        printf(i ? " %04X" : "%04X", (unsigned)b->cp[i]);
    putchar(last ? '\n' : ';');
}

int main(void)
{
    char line[4096];
    uint32_t in[512];
    dfl__uc_buf tmp[2] = {{0}}, out = {0};
    while (fgets(line, sizeof line, stdin)) {
        size_t n = 0;
        for (char *p = line, *e; n < 512; p = e) {
            unsigned long v = strtoul(p, &e, 16);
            if (e == p) break;
            in[n++] = (uint32_t)v;
        }
        for (int f = 0; f < 4; f++) {
            int compat = f >= 2, compose = f % 2 == 0;
            if (dfl__uc_normalize(in, n, compat, compose, tmp, &out)) return 1;
            put(&out, f == 3);
        }
    }
    dfl__uc_buf_free(&tmp[0]);
    dfl__uc_buf_free(&tmp[1]);
    dfl__uc_buf_free(&out);
    return 0;
}
