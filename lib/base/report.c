/* report.c — tables in table, csv, json and markdown (report.h). Cells are kept as
 * values, not text, so each format chooses its own rendering: table/markdown use the
 * display precision, csv/json the shortest exact form. */
#include "base/report.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "base/strbuf.h"

/* ------------------------------------------------------------------ model */

typedef struct cell {
    dfl_report_cell_kind kind;
    int own_fmt; /* NUM with its own display format */
    dfl_report_num num;
    int precision;
    double v;
    int64_t i;
    char *text; /* TEXT: the string; MISSING: what to show (NULL = "n/a") */
} cell;

typedef struct column {
    char *name;
    dfl_report_num num;
    int precision;
} column;

struct dfl_report_table {
    dfl_report *owner;
    char *name, *title;
    column *cols; /* [ncols] */
    size_t ncols, cap_cols;
    cell *cells; /* [nrows][ncols] */
    size_t nrows, cap_rows;
};

struct dfl_report {
    char *title;
    char **meta; /* [nmeta][2]: key, value */
    size_t nmeta;
    char **notes; /* [nnotes] */
    size_t nnotes;
    dfl_report_table **tables;
    size_t ntables;
    dfl_error first; /* the sticky first failure */
};

static const char *const format_names[] = {"table", "csv", "json", "markdown"};

const char *dfl_report_format_name(dfl_report_format f)
{
    return (unsigned)f < 4 ? format_names[f] : "?";
}

dfl_status dfl_report_format_parse(const char *name, dfl_report_format *out, dfl_error *err)
{
    int i = dfl__name_index(name, format_names, 4);
    if (i < 0 && !strcmp(name, "md")) i = DFL_REPORT_MARKDOWN;
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "--format: '%s' is not table, csv, json or markdown", name);
    *out = (dfl_report_format)i;
    return DFL_OK;
}

/* Record the first failure in the report, fill err, and return the status. */
static dfl_status fail(dfl_report *r, dfl_error *err, dfl_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static dfl_status fail(dfl_report *r, dfl_error *err, dfl_status s, const char *fmt, ...)
{
    dfl_error e = {s, ""};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    if (r && r->first.status == DFL_OK) r->first = e;
    if (err) *err = e;
    return s;
}

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Grow *p (elements of size sz, capacity *cap) to hold need elements. 0 on failure. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return 1;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return 0;
        ncap *= 2;
    }
    size_t bytes;
    if (!dfl__mul_ok(ncap, sz, &bytes)) return 0;
    void *q = realloc(*p, bytes);
    if (!q) return 0;
    *p = q;
    *cap = ncap;
    return 1;
}

dfl_status dfl_report_create(const char *title, dfl_report **out, dfl_error *err)
{
    *out = NULL;
    dfl_report *r = calloc(1, sizeof *r);
    if (!r) return dfl__fail(err, DFL_ERR_NOMEM, "report: out of memory");
    if (title && !(r->title = strdup(title))) {
        free(r);
        return dfl__fail(err, DFL_ERR_NOMEM, "report: out of memory");
    }
    *out = r;
    return DFL_OK;
}

static void table_free(dfl_report_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->ncols; i++)
        free(t->cols[i].name);
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i].text);
    free(t->cols);
    free(t->cells);
    free(t->name);
    free(t->title);
    free(t);
}

void dfl_report_destroy(dfl_report *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->nmeta * 2; i++)
        free(r->meta[i]);
    for (size_t i = 0; i < r->nnotes; i++)
        free(r->notes[i]);
    for (size_t i = 0; i < r->ntables; i++)
        table_free(r->tables[i]);
    free(r->meta);
    free(r->notes);
    free(r->tables);
    free(r->title);
    free(r);
}

dfl_status dfl_report_add_meta(dfl_report *r, const char *key, const char *value, dfl_error *err)
{
    char **m = realloc(r->meta, (r->nmeta + 1) * 2 * sizeof *m);
    if (!m) return fail(r, err, DFL_ERR_NOMEM, "report: out of memory");
    r->meta = m;
    m[2 * r->nmeta] = dup_str(key ? key : "");
    m[2 * r->nmeta + 1] = dup_str(value ? value : "");
    r->nmeta++;
    if (!m[2 * r->nmeta - 2] || !m[2 * r->nmeta - 1]) return fail(r, err, DFL_ERR_NOMEM, "report: out of memory");
    return DFL_OK;
}

dfl_status dfl_report_add_note(dfl_report *r, dfl_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) return fail(r, err, DFL_ERR_NOMEM, "report: out of memory");
    char **m = realloc(r->notes, (r->nnotes + 1) * sizeof *m);
    if (!m) {
        free(s);
        return fail(r, err, DFL_ERR_NOMEM, "report: out of memory");
    }
    r->notes = m;
    m[r->nnotes++] = s;
    return DFL_OK;
}

static int valid_name(const char *s)
{
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '.' || *s == '-'))
            return 0;
    return 1;
}

dfl_status dfl_report_add_table(dfl_report *r, const char *name, const char *title, dfl_report_table **out,
                                dfl_error *err)
{
    if (out) *out = NULL;
    if (!valid_name(name))
        return fail(r, err, DFL_ERR_USAGE, "report: table name '%s' is not [A-Za-z0-9_.-]+", name ? name : "");
    if (dfl_report_table_find(r, name))
        return fail(r, err, DFL_ERR_USAGE, "report: a table named '%s' exists already", name);
    dfl_report_table **ts = realloc(r->tables, (r->ntables + 1) * sizeof *ts);
    if (!ts) return fail(r, err, DFL_ERR_NOMEM, "report: out of memory");
    r->tables = ts;
    dfl_report_table *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name)) || (title && !(t->title = strdup(title)))) {
        table_free(t);
        return fail(r, err, DFL_ERR_NOMEM, "report: out of memory");
    }
    t->owner = r;
    ts[r->ntables++] = t;
    if (out) *out = t;
    return DFL_OK;
}

dfl_status dfl_report_add_column(dfl_report_table *t, const char *name, dfl_report_num num, int precision,
                                 dfl_error *err)
{
    if (t->nrows)
        return fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: column '%s' added after the first row", t->name,
                    name ? name : "");
    if (!name || !*name || !strcmp(name, "table"))
        return fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: column name '%s' is empty or reserved", t->name,
                    name ? name : "");
    if (dfl_report_column_find(t, name) >= 0)
        return fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: duplicate column '%s'", t->name, name);
    if (precision < 0 || precision > 17 || (unsigned)num > DFL_NUM_AUTO)
        return fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: column '%s': precision %d not in 0..17", t->name,
                    name, precision);
    if (!grow((void **)&t->cols, &t->cap_cols, t->ncols + 1, sizeof *t->cols))
        return fail(t->owner, err, DFL_ERR_NOMEM, "report: out of memory");
    column *c = &t->cols[t->ncols];
    if (!(c->name = strdup(name))) return fail(t->owner, err, DFL_ERR_NOMEM, "report: out of memory");
    c->num = num;
    c->precision = precision;
    t->ncols++;
    return DFL_OK;
}

dfl_status dfl_report_add_row(dfl_report_table *t, dfl_error *err)
{
    if (!t->ncols) return fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: a row before any column", t->name);
    size_t need;
    if (!dfl__mul_ok(t->nrows + 1, t->ncols, &need) || !grow((void **)&t->cells, &t->cap_rows, need, sizeof *t->cells))
        return fail(t->owner, err, DFL_ERR_NOMEM, "report: out of memory");
    memset(t->cells + t->nrows * t->ncols, 0, t->ncols * sizeof *t->cells);
    t->nrows++;
    return DFL_OK;
}

/* The cell (current row, col) emptied for a new value, or NULL after filling err. */
static cell *slot(dfl_report_table *t, size_t col, dfl_error *err)
{
    if (!t->nrows) {
        fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: a cell set before dfl_report_add_row", t->name);
        return NULL;
    }
    if (col >= t->ncols) {
        fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: column %zu out of range (%zu columns)", t->name, col,
             t->ncols);
        return NULL;
    }
    cell *c = &t->cells[(t->nrows - 1) * t->ncols + col];
    free(c->text);
    memset(c, 0, sizeof *c);
    return c;
}

dfl_status dfl_report_set_text(dfl_report_table *t, size_t col, const char *text, dfl_error *err)
{
    cell *c = slot(t, col, err);
    if (!c) return t->owner->first.status;
    if (!(c->text = strdup(text ? text : ""))) return fail(t->owner, err, DFL_ERR_NOMEM, "report: out of memory");
    c->kind = DFL_CELL_TEXT;
    return DFL_OK;
}

dfl_status dfl_report_set_num(dfl_report_table *t, size_t col, double v, dfl_error *err)
{
    cell *c = slot(t, col, err);
    if (!c) return t->owner->first.status;
    c->kind = DFL_CELL_NUM;
    c->v = v;
    return DFL_OK;
}

dfl_status dfl_report_set_num_fmt(dfl_report_table *t, size_t col, double v, dfl_report_num num, int precision,
                                  dfl_error *err)
{
    if (precision < 0 || precision > 17 || (unsigned)num > DFL_NUM_AUTO)
        return fail(t->owner, err, DFL_ERR_USAGE, "report: table %s: precision %d not in 0..17", t->name, precision);
    cell *c = slot(t, col, err);
    if (!c) return t->owner->first.status;
    c->kind = DFL_CELL_NUM;
    c->v = v;
    c->own_fmt = 1;
    c->num = num;
    c->precision = precision;
    return DFL_OK;
}

dfl_status dfl_report_set_int(dfl_report_table *t, size_t col, int64_t v, dfl_error *err)
{
    cell *c = slot(t, col, err);
    if (!c) return t->owner->first.status;
    c->kind = DFL_CELL_INT;
    c->i = v;
    return DFL_OK;
}

dfl_status dfl_report_set_missing(dfl_report_table *t, size_t col, const char *shown, dfl_error *err)
{
    cell *c = slot(t, col, err);
    if (!c) return t->owner->first.status;
    if (shown && !(c->text = strdup(shown))) return fail(t->owner, err, DFL_ERR_NOMEM, "report: out of memory");
    return DFL_OK;
}

dfl_status dfl_report_status(const dfl_report *r, dfl_error *err)
{
    if (r->first.status && err) *err = r->first;
    return r->first.status;
}

/* ---------------------------------------------------------------- reading */

size_t dfl_report_table_count(const dfl_report *r)
{
    return r->ntables;
}

dfl_report_table *dfl_report_table_at(const dfl_report *r, size_t i)
{
    return i < r->ntables ? r->tables[i] : NULL;
}

dfl_report_table *dfl_report_table_find(const dfl_report *r, const char *name)
{
    for (size_t i = 0; i < r->ntables; i++)
        if (!strcmp(r->tables[i]->name, name)) return r->tables[i];
    return NULL;
}

const char *dfl_report_table_name(const dfl_report_table *t)
{
    return t->name;
}
size_t dfl_report_columns(const dfl_report_table *t)
{
    return t->ncols;
}
size_t dfl_report_rows(const dfl_report_table *t)
{
    return t->nrows;
}

long dfl_report_column_find(const dfl_report_table *t, const char *name)
{
    for (size_t i = 0; i < t->ncols; i++)
        if (!strcmp(t->cols[i].name, name)) return (long)i;
    return -1;
}

const char *dfl_report_column_name(const dfl_report_table *t, size_t col)
{
    return col < t->ncols ? t->cols[col].name : NULL;
}

static const cell *cell_at(const dfl_report_table *t, size_t row, size_t col)
{
    return row < t->nrows && col < t->ncols ? &t->cells[row * t->ncols + col] : NULL;
}

dfl_report_cell_kind dfl_report_cell_kind_at(const dfl_report_table *t, size_t row, size_t col)
{
    const cell *c = cell_at(t, row, col);
    return c ? c->kind : DFL_CELL_MISSING;
}

double dfl_report_cell_num(const dfl_report_table *t, size_t row, size_t col)
{
    const cell *c = cell_at(t, row, col);
    if (c && c->kind == DFL_CELL_NUM) return c->v;
    if (c && c->kind == DFL_CELL_INT) return (double)c->i;
    return NAN;
}

const char *dfl_report_cell_text(const dfl_report_table *t, size_t row, size_t col)
{
    const cell *c = cell_at(t, row, col);
    return c && c->kind == DFL_CELL_TEXT ? c->text : NULL;
}

/* ------------------------------------------------------------ text buffer */

static void pad(dfl_strbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dfl_strbuf_add(b, " ", 1);
}

/* -------------------------------------------------------------- numbers */

char *dfl_report_fmt_exact(double v, char *buf, size_t cap)
{
    if (isnan(v))
        snprintf(buf, cap, "nan");
    else if (isinf(v))
        snprintf(buf, cap, v > 0 ? "inf" : "-inf");
    else {
        /* the shortest %.Ng that reads back bit-identical; 17 always does */
        for (int p = 1; p <= 17; p++) {
            snprintf(buf, cap, "%.*g", p, v);
            if (strtod(buf, NULL) == v) break;
        }
    }
    return buf;
}

/* A number for table/markdown. */
static void fmt_display(double v, dfl_report_num num, int prec, char *out, size_t cap)
{
    if (isnan(v)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v > 0 ? "inf" : "-inf");
        return;
    }
    switch (num) {
    case DFL_NUM_FIXED: snprintf(out, cap, "%.*f", prec, v); break;
    case DFL_NUM_EXP: snprintf(out, cap, "%.*e", prec, v); break;
    case DFL_NUM_AUTO: {
        double a = fabs(v);
        int p = prec < 1 ? 1 : prec;
        if (v == 0)
            snprintf(out, cap, "0");
        else if (a >= 1e-3 && a < 1e6) {
            /* p significant digits written as fixed-point: 318.0, 0.0123, 12.50 */
            int mag = (int)floor(log10(a));
            int dec = p - 1 - mag;
            if (dec < 0) dec = 0;
            snprintf(out, cap, "%.*f", dec, v);
        } else
            snprintf(out, cap, "%.*e", p - 1, v);
        break;
    }
    default: snprintf(out, cap, "%.*g", prec < 1 ? 1 : prec, v); break;
    }
}

/* The display text of a cell into out[cap]. */
static void cell_display(const dfl_report_table *t, size_t col, const cell *c, char *out, size_t cap)
{
    switch (c->kind) {
    case DFL_CELL_TEXT: snprintf(out, cap, "%s", c->text); break;
    case DFL_CELL_INT: snprintf(out, cap, "%lld", (long long)c->i); break;
    case DFL_CELL_NUM:
        if (c->own_fmt)
            fmt_display(c->v, c->num, c->precision, out, cap);
        else
            fmt_display(c->v, t->cols[col].num, t->cols[col].precision, out, cap);
        break;
    default: snprintf(out, cap, "%s", c->text ? c->text : "n/a"); break;
    }
}

/* Display width of UTF-8 text in code points (continuation bytes do not count). */
static size_t text_width(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80) n++;
    return n;
}

static int right_aligned(const cell *c)
{
    return c->kind == DFL_CELL_NUM || c->kind == DFL_CELL_INT;
}

/* ------------------------------------------------------- table, markdown */

#define CELL_CAP 4096

/* Column widths and alignment (right when every non-missing cell is a number). */
static int measure(const dfl_report_table *t, size_t *width, int *right)
{
    char *tmp = malloc(CELL_CAP);
    if (!tmp) return 0;
    for (size_t j = 0; j < t->ncols; j++) {
        width[j] = text_width(t->cols[j].name);
        int any_text = 0;
        for (size_t i = 0; i < t->nrows; i++) {
            const cell *c = &t->cells[i * t->ncols + j];
            cell_display(t, j, c, tmp, CELL_CAP);
            size_t w = text_width(tmp);
            if (w > width[j]) width[j] = w;
            if (c->kind == DFL_CELL_TEXT) any_text = 1;
        }
        right[j] = !any_text;
    }
    free(tmp);
    return 1;
}

/* Markdown cells may not hold '|' or newlines. */
static void put_md_cell(dfl_strbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            dfl_strbuf_puts(b, "\\|");
        else if (*s == '\n' || *s == '\r')
            dfl_strbuf_puts(b, " ");
        else
            dfl_strbuf_add(b, s, 1);
    }
}

static void render_table(const dfl_report *r, dfl_strbuf *b, int md)
{
    if (r->title) {
        if (md)
            dfl_strbuf_printf(b, "## %s\n\n", r->title);
        else
            dfl_strbuf_printf(b, "%s\n", r->title);
    }
    for (size_t i = 0; i < r->nmeta; i++) {
        if (md)
            dfl_strbuf_printf(b, "- %s: %s\n", r->meta[2 * i], r->meta[2 * i + 1]);
        else
            dfl_strbuf_printf(b, "  %s: %s\n", r->meta[2 * i], r->meta[2 * i + 1]);
    }
    if (r->title || r->nmeta) dfl_strbuf_puts(b, "\n");
    char *tmp = malloc(CELL_CAP);
    if (!tmp) {
        b->oom = 1;
        return;
    }
    for (size_t k = 0; k < r->ntables; k++) {
        const dfl_report_table *t = r->tables[k];
        size_t nc = t->ncols ? t->ncols : 1;
        size_t *width = calloc(nc, sizeof *width);
        int *right = calloc(nc, sizeof *right);
        if (!width || !right || !measure(t, width, right)) {
            free(width);
            free(right);
            b->oom = 1;
            break;
        }
        const char *title = t->title ? t->title : t->name;
        if (md)
            dfl_strbuf_printf(b, "### %s\n\n", title);
        else
            dfl_strbuf_printf(b, "%s\n", title);
        if (!t->ncols) {
            dfl_strbuf_puts(b, md ? "(no columns)\n\n" : "  (no columns)\n\n");
            free(width);
            free(right);
            continue;
        }
        /* header */
        for (size_t j = 0; j < t->ncols; j++) {
            const char *h = t->cols[j].name;
            size_t w = text_width(h);
            if (md) {
                dfl_strbuf_puts(b, "| ");
                put_md_cell(b, h);
                pad(b, width[j] - w);
                dfl_strbuf_puts(b, " ");
            } else {
                dfl_strbuf_puts(b, j ? "  " : "  ");
                if (right[j]) pad(b, width[j] - w);
                dfl_strbuf_puts(b, h);
                if (!right[j] && j + 1 < t->ncols) pad(b, width[j] - w);
            }
        }
        dfl_strbuf_puts(b, md ? "|\n" : "\n");
        /* rule */
        for (size_t j = 0; j < t->ncols; j++) {
            if (md) {
                dfl_strbuf_puts(b, "|");
                size_t n = width[j] + 2;
                if (right[j]) {
                    for (size_t q = 0; q + 1 < n; q++)
                        dfl_strbuf_puts(b, "-");
                    dfl_strbuf_puts(b, ":");
                } else
                    for (size_t q = 0; q < n; q++)
                        dfl_strbuf_puts(b, "-");
            } else {
                dfl_strbuf_puts(b, "  ");
                for (size_t q = 0; q < width[j]; q++)
                    dfl_strbuf_puts(b, "-");
            }
        }
        dfl_strbuf_puts(b, md ? "|\n" : "\n");
        /* rows */
        if (!t->nrows) dfl_strbuf_puts(b, md ? "" : "  (no rows)\n");
        for (size_t i = 0; i < t->nrows; i++) {
            for (size_t j = 0; j < t->ncols; j++) {
                const cell *c = &t->cells[i * t->ncols + j];
                cell_display(t, j, c, tmp, CELL_CAP);
                size_t w = text_width(tmp);
                int ra = right[j] || right_aligned(c);
                if (md) {
                    dfl_strbuf_puts(b, "| ");
                    if (ra) pad(b, width[j] - w);
                    put_md_cell(b, tmp);
                    if (!ra) pad(b, width[j] - w);
                    dfl_strbuf_puts(b, " ");
                } else {
                    dfl_strbuf_puts(b, "  ");
                    if (ra) pad(b, width[j] - w);
                    dfl_strbuf_puts(b, tmp);
                    if (!ra && j + 1 < t->ncols) pad(b, width[j] - w);
                }
            }
            dfl_strbuf_puts(b, md ? "|\n" : "\n");
        }
        dfl_strbuf_puts(b, "\n");
        free(width);
        free(right);
    }
    free(tmp);
    for (size_t i = 0; i < r->nnotes; i++) {
        if (md)
            dfl_strbuf_printf(b, "%s\n\n", r->notes[i]);
        else
            dfl_strbuf_printf(b, "%s\n", r->notes[i]);
    }
}

/* ------------------------------------------------------------------- csv */

static void put_csv_field(dfl_strbuf *b, const char *s)
{
    int quote = !*s ? 0 : strpbrk(s, ",\"\r\n") != NULL || s[0] == ' ' || s[strlen(s) - 1] == ' ';
    if (!quote) {
        dfl_strbuf_puts(b, s);
        return;
    }
    dfl_strbuf_puts(b, "\"");
    for (; *s; s++) {
        if (*s == '"')
            dfl_strbuf_puts(b, "\"\"");
        else
            dfl_strbuf_add(b, s, 1);
    }
    dfl_strbuf_puts(b, "\"");
}

static void put_csv_cell(dfl_strbuf *b, const cell *c)
{
    char tmp[64];
    switch (c->kind) {
    case DFL_CELL_TEXT: put_csv_field(b, c->text); break;
    case DFL_CELL_INT: dfl_strbuf_printf(b, "%lld", (long long)c->i); break;
    case DFL_CELL_NUM:
        if (!isnan(c->v)) dfl_strbuf_puts(b, dfl_report_fmt_exact(c->v, tmp, sizeof tmp));
        break;
    default: break; /* missing: empty, which pandas reads as NaN */
    }
}

static void render_csv(const dfl_report *r, dfl_strbuf *b)
{
    int multi = r->ntables > 1;
    /* union of the column names, in order of first appearance */
    size_t total = 0;
    for (size_t k = 0; k < r->ntables; k++)
        total += r->tables[k]->ncols;
    const char **names = calloc(total ? total : 1, sizeof *names);
    if (!names) {
        b->oom = 1;
        return;
    }
    size_t nu = 0;
    for (size_t k = 0; k < r->ntables; k++)
        for (size_t j = 0; j < r->tables[k]->ncols; j++) {
            const char *n = r->tables[k]->cols[j].name;
            size_t q = 0;
            while (q < nu && strcmp(names[q], n))
                q++;
            if (q == nu) names[nu++] = n;
        }
    if (multi) dfl_strbuf_puts(b, "table");
    for (size_t q = 0; q < nu; q++) {
        if (multi || q) dfl_strbuf_puts(b, ",");
        put_csv_field(b, names[q]);
    }
    dfl_strbuf_puts(b, "\r\n");
    long *map = calloc(nu ? nu : 1, sizeof *map);
    if (!map) {
        free(names);
        b->oom = 1;
        return;
    }
    for (size_t k = 0; k < r->ntables; k++) {
        const dfl_report_table *t = r->tables[k];
        for (size_t q = 0; q < nu; q++)
            map[q] = dfl_report_column_find(t, names[q]);
        for (size_t i = 0; i < t->nrows; i++) {
            if (multi) put_csv_field(b, t->name);
            for (size_t q = 0; q < nu; q++) {
                if (multi || q) dfl_strbuf_puts(b, ",");
                if (map[q] >= 0) put_csv_cell(b, &t->cells[i * t->ncols + (size_t)map[q]]);
            }
            dfl_strbuf_puts(b, "\r\n");
        }
    }
    free(map);
    free(names);
}

/* ------------------------------------------------------------------ json */

/* A JSON string literal, escaped by cJSON (the one JSON writer of the library). */
static void put_json_str(dfl_strbuf *b, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *lit = j ? cJSON_PrintUnformatted(j) : NULL;
    if (lit)
        dfl_strbuf_puts(b, lit);
    else
        b->oom = 1;
    cJSON_free(lit);
    cJSON_Delete(j);
}

static void put_json_cell(dfl_strbuf *b, const cell *c)
{
    char tmp[64];
    switch (c->kind) {
    case DFL_CELL_TEXT: put_json_str(b, c->text); break;
    case DFL_CELL_INT: dfl_strbuf_printf(b, "%lld", (long long)c->i); break;
    case DFL_CELL_NUM:
        if (isfinite(c->v))
            dfl_strbuf_puts(b, dfl_report_fmt_exact(c->v, tmp, sizeof tmp));
        else
            dfl_strbuf_puts(b, "null");
        break;
    default: dfl_strbuf_puts(b, "null"); break;
    }
}

static void render_json(const dfl_report *r, dfl_strbuf *b)
{
    dfl_strbuf_puts(b, "{\n  \"title\": ");
    if (r->title)
        put_json_str(b, r->title);
    else
        dfl_strbuf_puts(b, "null");
    dfl_strbuf_puts(b, ",\n  \"meta\": {");
    for (size_t i = 0; i < r->nmeta; i++) {
        dfl_strbuf_puts(b, i ? ", " : "");
        put_json_str(b, r->meta[2 * i]);
        dfl_strbuf_puts(b, ": ");
        put_json_str(b, r->meta[2 * i + 1]);
    }
    dfl_strbuf_puts(b, "},\n  \"notes\": [");
    for (size_t i = 0; i < r->nnotes; i++) {
        dfl_strbuf_puts(b, i ? ", " : "");
        put_json_str(b, r->notes[i]);
    }
    dfl_strbuf_puts(b, "],\n  \"tables\": [");
    for (size_t k = 0; k < r->ntables; k++) {
        const dfl_report_table *t = r->tables[k];
        dfl_strbuf_puts(b, k ? ",\n    {" : "\n    {");
        dfl_strbuf_puts(b, "\"name\": ");
        put_json_str(b, t->name);
        dfl_strbuf_puts(b, ", \"title\": ");
        put_json_str(b, t->title ? t->title : t->name);
        dfl_strbuf_puts(b, ",\n     \"columns\": [");
        for (size_t j = 0; j < t->ncols; j++) {
            dfl_strbuf_puts(b, j ? ", " : "");
            put_json_str(b, t->cols[j].name);
        }
        dfl_strbuf_puts(b, "],\n     \"data\": [");
        for (size_t i = 0; i < t->nrows; i++) {
            dfl_strbuf_puts(b, i ? ",\n       [" : "\n       [");
            for (size_t j = 0; j < t->ncols; j++) {
                dfl_strbuf_puts(b, j ? ", " : "");
                put_json_cell(b, &t->cells[i * t->ncols + j]);
            }
            dfl_strbuf_puts(b, "]");
        }
        dfl_strbuf_puts(b, t->nrows ? "\n     ]}" : "]}");
    }
    dfl_strbuf_puts(b, r->ntables ? "\n  ]\n}\n" : "]\n}\n");
}

/* ---------------------------------------------------------------- output */

dfl_status dfl_report_render(const dfl_report *r, dfl_report_format f, char **out, size_t *len, dfl_error *err)
{
    *out = NULL;
    if (len) *len = 0;
    if (r->first.status) return dfl_report_status(r, err);
    dfl_strbuf b = {0};
    dfl_strbuf_puts(&b, ""); /* an empty report is still a string */
    switch (f) {
    case DFL_REPORT_TABLE: render_table(r, &b, 0); break;
    case DFL_REPORT_MARKDOWN: render_table(r, &b, 1); break;
    case DFL_REPORT_CSV: render_csv(r, &b); break;
    case DFL_REPORT_JSON: render_json(r, &b); break;
    default: free(b.p); return dfl__fail(err, DFL_ERR_USAGE, "report: unknown format %d", (int)f);
    }
    if (b.oom) {
        free(b.p);
        return dfl__fail(err, DFL_ERR_NOMEM, "report: out of memory");
    }
    *out = b.p;
    if (len) *len = b.len;
    return DFL_OK;
}

dfl_status dfl_report_write(const dfl_report *r, dfl_report_format f, FILE *out, dfl_error *err)
{
    char *text;
    size_t n;
    dfl_status s = dfl_report_render(r, f, &text, &n, err);
    if (s) return s;
    int bad = fwrite(text, 1, n, out) != n || fflush(out) != 0;
    free(text);
    if (bad) return dfl__fail(err, DFL_ERR_IO, "report: write failed: %s", strerror(errno));
    return DFL_OK;
}
