/* cli.c — flag parsing, --version / --list-options and the progress bar. */
#include "base/cli.h"
#include "base/version.h"

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
        return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' is not an integer in [%lld, %lld]", flag, text, (long long)lo,
                         (long long)hi);
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

/* ------------------------------------------------------------------ lists */

dfl_status dfl_cli_split(const char *flag, const char *text, size_t max, char ***items, size_t *n, dfl_error *err)
{
    *items = NULL;
    *n = 0;
    size_t len = strlen(text), count = 1;
    for (const char *c = text; *c; c++)
        count += *c == ',';
    if (!len || text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,"))
        return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' has an empty item (items are separated by single commas)", flag,
                         text);
    if (max && count > max)
        return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' has %zu items, at most %zu are allowed", flag, text, count, max);
    /* One block: count pointers, then a copy of text cut at the commas. */
    size_t head;
    if (!dfl__mul_ok(count, sizeof(char *), &head) || head > SIZE_MAX - len - 1)
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", flag);
    char **v = malloc(head + len + 1);
    if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", flag);
    char *copy = (char *)v + head;
    memcpy(copy, text, len + 1);
    size_t k = 0;
    for (char *p = copy;; p++) {
        v[k++] = p;
        p = strchr(p, ',');
        if (!p) break;
        *p = '\0';
    }
    *items = v;
    *n = k;
    return DFL_OK;
}

/* Numbers in lists: strtoll/strtod would skip leading white space ("1, 2"); refuse it
 * so that every list reads the same way. */
static dfl_status no_space(const char *flag, const char *text, const char *item, dfl_error *err)
{
    for (const char *c = item; *c; c++)
        if (*c == ' ' || (*c >= '\t' && *c <= '\r'))
            return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' has white space in an item", flag, text);
    return DFL_OK;
}

/* A list of numbers: split, then each item checked and parsed by `one` into the
 * elem-byte slot it is given; range is one's [lo, hi]. */
typedef dfl_status (*parse_one)(const char *flag, const char *item, const void *range, void *dst, dfl_error *err);

static dfl_status number_list(const char *flag, const char *text, size_t max, size_t elem, parse_one one,
                              const void *range, void **out, size_t *n, dfl_error *err)
{
    *out = NULL;
    *n = 0;
    char **it;
    size_t k;
    dfl_status s = dfl_cli_split(flag, text, max, &it, &k, err);
    if (s) return s;
    unsigned char *v = dfl__alloc_array(k, elem); /* [k] elements */
    if (!v) s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", flag);
    for (size_t i = 0; i < k && !s; i++)
        if (!(s = no_space(flag, text, it[i], err))) s = one(flag, it[i], range, v + i * elem, err);
    free(it);
    if (s) {
        free(v);
        return s;
    }
    *out = v;
    *n = k;
    return DFL_OK;
}

static dfl_status one_int(const char *flag, const char *item, const void *range, void *dst, dfl_error *err)
{
    const int64_t *r = range;
    return dfl_cli_int(flag, item, r[0], r[1], dst, err);
}

static dfl_status one_double(const char *flag, const char *item, const void *range, void *dst, dfl_error *err)
{
    const double *r = range;
    return dfl_cli_double(flag, item, r[0], r[1], dst, err);
}

dfl_status dfl_cli_int_list(const char *flag, const char *text, int64_t lo, int64_t hi, size_t max, int64_t **out,
                            size_t *n, dfl_error *err)
{
    const int64_t range[2] = {lo, hi};
    void *v;
    dfl_status s = number_list(flag, text, max, sizeof **out, one_int, range, &v, n, err);
    *out = v;
    return s;
}

dfl_status dfl_cli_double_list(const char *flag, const char *text, double lo, double hi, size_t max, double **out,
                               size_t *n, dfl_error *err)
{
    const double range[2] = {lo, hi};
    void *v;
    dfl_status s = number_list(flag, text, max, sizeof **out, one_double, range, &v, n, err);
    *out = v;
    return s;
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
    char **it;
    size_t k;
    dfl_status s = dfl_cli_split(flag, text, 0, &it, &k, err);
    if (s) return s;
    size_t cap = 16, len = 0;
    int64_t *v = dfl__alloc_array(cap, sizeof *v);
    if (!v) s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", flag);
    for (size_t t = 0; t < k && !s; t++) {
        char *tok = it[t];
        int64_t lo, hi;
        if ((s = no_space(flag, text, tok, err))) break;
        char *dash = strchr(tok + 1, '-'); /* from tok + 1: "-3" is a bad index, not a range */
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
                    s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", flag);
                    break;
                }
                memcpy(nv, v, len * sizeof *v);
                free(v);
                v = nv, cap *= 2;
            }
            v[len++] = i;
        }
    }
    free(it);
    if (s) {
        free(v);
        return s;
    }
    qsort(v, len, sizeof *v, cmp_i64);
    size_t d = 0;
    for (size_t i = 0; i < len; i++)
        if (d == 0 || v[i] != v[d - 1]) v[d++] = v[i];
    *out = v;
    *n = d;
    return DFL_OK;
}

/* ------------------------------------------------------- --version, --list-options */

int dfl_cli_common(FILE *out, const char *tool, int opt, const struct option *opts)
{
    if (opt == DFL_CLI_OPT_VERSION) {
        fprintf(out, "%s (difflens) %s\n", tool, DFL_VERSION);
    } else {
        for (const struct option *o = opts; o->name; o++)
            if (o->val != DFL_CLI_OPT_LIST) fprintf(out, "--%s%s\n", o->name, o->has_arg == no_argument ? "" : "=");
    }
    return fflush(out) || ferror(out) ? 1 : 0;
}

/* ------------------------------------------------------------------ progress */

dfl_progress dfl_progress_start(FILE *out, const char *label, int quiet)
{
    const char *no_color = getenv("NO_COLOR");
    dfl_progress p = {out, !quiet && !(no_color && no_color[0]) && isatty(fileno(out)), label};
    return p;
}

void dfl_progress_update(dfl_progress *p, double done, double total, const char *unit, double rate,
                         const char *rate_unit, double eta)
{
    if (!p->enabled) return;
    enum { W = 24 };
    char bar[W + 1];
    int fill = total > 0 ? (int)(W * done / total) : 0;
    for (int i = 0; i < W; i++)
        bar[i] = i < fill ? '#' : '-';
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

void dfl_cli_catch_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* ------------------------------------------------------------------------ */
/* Suggestions                                                              */
/* ------------------------------------------------------------------------ */

/* Optimal string alignment distance of a[0..n) and b[0..m), stopping early at 3 (only
 * 0, 1, 2 and "more" matter here). Names longer than 63 bytes are "more". */
static size_t edit_distance(const char *a, size_t n, const char *b, size_t m)
{
    enum { MAXLEN = 63, FAR = 3 };
    if (n > MAXLEN || m > MAXLEN) return FAR;
    if ((n > m ? n - m : m - n) >= FAR) return FAR;
    size_t d[MAXLEN + 1][MAXLEN + 1]; /* d[i][j]: distance of a[0..i) and b[0..j) */
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] < FAR ? d[n][m] : FAR;
}

int dfl__name_index(const char *text, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(text, names[i])) return i;
    return -1;
}

const char *dfl__nearest_name(const char *word, const char *const *names)
{
    const char *best = NULL;
    size_t best_d = 3, n = strlen(word);
    for (; names && *names; names++) {
        size_t d = edit_distance(word, n, *names, strlen(*names));
        if (d < best_d && d < n) best = *names, best_d = d;
    }
    return best;
}
