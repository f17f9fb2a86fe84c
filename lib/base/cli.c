/* cli.c — flag parsing and the progress bar. */
#include "base/cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

dfl_status dfl_cli_index_list(const char *flag, const char *text, int64_t **out, size_t *n, dfl_error *err)
{
    *out = NULL;
    *n = 0;
    size_t cap = 16, len = 0;
    int64_t *v = malloc(cap * sizeof *v);
    char *copy = strdup(text), *save = NULL;
    dfl_status s = DFL_OK;
    if (!v || !copy) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    /* strtok_r would skip empty items ("1,,2"); they are typos, so refuse them */
    if (!s && (!*text || text[0] == ',' || text[strlen(text) - 1] == ',' || strstr(text, ",,")))
        s = dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' has an empty item (want a list like 0,3-5)", flag, text);
    for (char *tok = !s ? strtok_r(copy, ",", &save) : NULL; tok && !s; tok = strtok_r(NULL, ",", &save)) {
        int64_t lo, hi;
        char *dash = strchr(tok + 1, '-');
        if (dash) *dash = '\0';
        if ((s = dfl_cli_int(flag, tok, 0, INT32_MAX, &lo, err))) break;
        hi = lo;
        if (dash && (s = dfl_cli_int(flag, dash + 1, lo, INT32_MAX, &hi, err))) break;
        if (hi - lo > 1000000) {
            s = dfl__fail(err, DFL_ERR_USAGE, "%s: range %lld-%lld is too long", flag, (long long)lo, (long long)hi);
            break;
        }
        for (int64_t i = lo; i <= hi && !s; i++) {
            if (len == cap) {
                int64_t *nv = dfl__alloc_array(2 * cap, sizeof *v);
                if (!nv) {
                    s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
                    break;
                }
                memcpy(nv, v, len * sizeof *v);
                free(v);
                v = nv, cap *= 2;
            }
            v[len++] = i;
        }
    }
    free(copy);
    if (s) {
        free(v);
        return s;
    }
    qsort(v, len, sizeof *v, cmp_i64);
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
    *out = v;
    *n = k;
    return DFL_OK;
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

/* ---------------------------------------------------------------- signals */

void dfl_cli_signal_note(const char *tool, int sig)
{
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
    const char *parts[4] = {tool, ": stopped by ", name, "; nothing half-written left behind\n"};
    for (int i = 0; i < 4; i++)
        if (write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0) return;
}
