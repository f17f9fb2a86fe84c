/* tokenize_speed.c — load time of a tokenizer.json and encoding speed of a text file,
 * one thread (used by bench/tokenizer.sh).
 *   tokenize_speed TOKENIZER.json TEXT_FILE [REPEATS]
 * Prints: load_s <wall seconds> load_cpu_s <CPU seconds, all threads> mb_per_s <MB/s>
 * tokens <count>: the load once, the encode the best of REPEATS (one thread). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "text/tokenizer.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tokenize_speed TOKENIZER.json TEXT_FILE [REPEATS]\n");
        return 2;
    }
    int repeats = argc > 3 ? atoi(argv[3]) : 3;
    if (repeats < 1) repeats = 1;
    dfl_error err = {0};
    double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    dfl_tokenizer *t = NULL;
    if (dfl_tokenizer_open(argv[1], &t, &err)) {
        fprintf(stderr, "tokenize_speed: %s\n", err.msg);
        return 1;
    }
    double load = now() - t0, load_cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "tokenize_speed: cannot open %s\n", argv[2]);
        dfl_tokenizer_close(t);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "tokenize_speed: read failed\n");
        return 1;
    }
    fclose(f);
    double best = 1e30;
    size_t ntok = 0;
    for (int r = 0; r < repeats; r++) {
        /* a fresh tokenizer each time would measure loading: the word cache stays warm
         * between repeats, as it does in the reference library */
        dfl_encoding e;
        double a = now();
        if (dfl_tokenizer_encode(t, buf, (size_t)n, 0, &e, &err)) {
            fprintf(stderr, "tokenize_speed: %s\n", err.msg);
            return 1;
        }
        double b = now() - a;
        if (b < best) best = b;
        ntok = e.n;
        dfl_encoding_free(&e);
    }
    printf("load_s %.3f load_cpu_s %.3f mb_per_s %.2f tokens %zu\n", load, load_cpu, (double)n / 1e6 / best, ntok);
    free(buf);
    dfl_tokenizer_close(t);
    return 0;
}
