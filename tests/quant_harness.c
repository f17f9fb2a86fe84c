/* quant_harness.c — drives model/quantize.c for tests/test_quantize.py (built there
 * against build/libdifflens.a):
 *
 *   quant_harness quant BITS ASYM CLIP D [naive]   f32 groups of D values, stdin → stdout
 *   quant_harness hadamard N                       f32 rows of N values, stdin → stdout
 *   quant_harness hadamard-ok N                    prints m (the Paley factor) or -1
 *   quant_harness spec SPEC...                     prints the canonical text, or the error (exit 2)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/quantize.h"

/* All of stdin as floats; *n their count. */
static float *read_all(size_t *n)
{
    size_t cap = 1024, len = 0;
    float *x = malloc(cap * sizeof *x);
    for (size_t got; x && (got = fread(x + len, sizeof *x, cap - len, stdin)) > 0;) {
        len += got;
        if (len == cap) {
            float *y = realloc(x, 2 * cap * sizeof *x);
            if (!y) free(x);
            x = y;
            cap *= 2;
        }
    }
    *n = len;
    return x;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && !strcmp(argv[1], "quant")) {
        dfl_quantizer z = {atoi(argv[2]), atoi(argv[3]), strtod(argv[4], NULL)};
        long d = atol(argv[5]);
        size_t n;
        float *x = read_all(&n);
        if (!x || d < 1 || n % (size_t)d) return 1;
        if (argc > 6)
            for (size_t g = 0; g < n / (size_t)d; g++)
                dfl_quant_group_naive(x + g * (size_t)d, d, 1, &z);
        else
            dfl_quant_groups(x, (int64_t)(n / (size_t)d), d, d, 1, &z);
        fwrite(x, sizeof *x, n, stdout);
        free(x);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "hadamard")) {
        long d = atol(argv[2]);
        size_t n;
        float *x = read_all(&n);
        if (!x || d < 1 || n % (size_t)d) return 1;
        dfl_hadamard_rows(x, (int64_t)(n / (size_t)d), d);
        fwrite(x, sizeof *x, n, stdout);
        free(x);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "hadamard-ok")) {
        int64_t m = -1;
        if (!dfl_hadamard_ok(atol(argv[2]), &m)) m = -1;
        printf("%lld\n", (long long)m);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "spec")) {
        dfl_qspec q = dfl_qspec_default();
        dfl_error err = {DFL_OK, ""};
        for (int i = 2; i < argc; i++)
            if (dfl_qspec_parse(argv[i], &q, &err)) {
                printf("%s\n", err.msg);
                return 2;
            }
        printf("%s\n", q.text);
        return 0;
    }
    fprintf(stderr, "usage: see quant_harness.c\n");
    return 1;
}
