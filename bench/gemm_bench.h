/* gemm_bench.h — what bench/sgemm_rate.c and bench/gemm_shapes.c share: a monotonic
 * clock and their command line, "T D F V L THREADS [REPEATS]" (each a positive integer;
 * REPEATS 5 unless given). Header-only: sgemm_rate is built against OpenBLAS alone. */
#ifndef DFL_BENCH_GEMM_BENCH_H
#define DFL_BENCH_GEMM_BENCH_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Positive int argument in [1, max]; 0 on success, else 1 with a message naming prog. */
static int parse_int(const char *prog, const char *name, const char *s, long max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > max) {
        fprintf(stderr, "%s: %s: '%s' is not an integer in [1, %ld]\n", prog, name, s, max);
        return 1;
    }
    *out = (int)v;
    return 0;
}

/* The shape of the forward pass and how to time it. */
typedef struct gemm_bench_args {
    int T, D, F, V, L, threads, repeats;
} gemm_bench_args;

/* argv of prog into a; 0 on success, else 2 (the exit status) with the usage or the
 * bad argument on stderr. */
static int parse_gemm_bench_args(const char *prog, int argc, char **argv, gemm_bench_args *a)
{
    a->repeats = 5;
    if (argc < 7 || argc > 8) {
        fprintf(stderr, "usage: %s T D F V L THREADS [REPEATS]\n", prog);
        return 2;
    }
    if (parse_int(prog, "T", argv[1], INT_MAX, &a->T) || parse_int(prog, "D", argv[2], INT_MAX, &a->D) ||
        parse_int(prog, "F", argv[3], INT_MAX, &a->F) || parse_int(prog, "V", argv[4], INT_MAX, &a->V) ||
        parse_int(prog, "L", argv[5], 100000, &a->L) || parse_int(prog, "THREADS", argv[6], 1024, &a->threads) ||
        (argc == 8 && parse_int(prog, "REPEATS", argv[7], 1000, &a->repeats)))
        return 2;
    return 0;
}

#endif
