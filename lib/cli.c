/* cli.c — flag parsing, thread setting and the progress bar. */
#include "cli.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

dfl_status dfl_cli_int(const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out, dfl_error *err)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' is not an integer in [%lld, %lld]", flag, text,
                         (long long)lo, (long long)hi);
    *out = v;
    return DFL_OK;
}

dfl_status dfl_cli_double(const char *flag, const char *text, double lo, double hi, double *out, dfl_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < lo || v > hi)
        return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' is not a number in [%g, %g]", flag, text, lo, hi);
    *out = v;
    return DFL_OK;
}

void dfl_cli_set_threads(int n)
{
    if (n <= 0) return;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

dfl_progress dfl_progress_start(FILE *out, const char *label, int quiet)
{
    dfl_progress p = {out, !quiet && isatty(fileno(out)), label};
    return p;
}

void dfl_progress_update(dfl_progress *p, double done, double total, const char *unit, double rate,
                         const char *rate_unit, double eta)
{
    if (!p->enabled) return;
    enum { W = 24 };
    char bar[W + 1];
    int fill = total > 0 ? (int)(W * done / total) : 0;
    for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '-';
    bar[W] = '\0';
    fprintf(p->out, "\r%s [%s] %.0f/%.0f %s", p->label, bar, done, total, unit);
    if (rate > 0) fprintf(p->out, "  %.0f %s/s", rate, rate_unit);
    if (eta >= 0) fprintf(p->out, "  ETA %.0fs", eta);
    fprintf(p->out, "\033[K");
    fflush(p->out);
}

void dfl_progress_end(dfl_progress *p)
{
    if (!p->enabled) return;
    fprintf(p->out, "\r\033[K");
    fflush(p->out);
}
