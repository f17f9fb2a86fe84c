/* report.h — the tables that analysis tools print, in four formats from one model:
 *
 *   table     aligned plain text for a terminal (numbers right-aligned, text left)
 *   markdown  GitHub pipe tables, one per table, to paste into papers and READMEs
 *   csv       RFC 4180 for pandas.read_csv: one header row. A report with several
 *             tables becomes ONE csv block whose first column is `table` (the table's
 *             name) followed by the union of all tables' columns in order of first
 *             appearance; a row leaves the columns of other tables empty. So
 *             df[df.table == "per_layer"].dropna(axis=1, how="all") gives one table
 *             back. A report with one table has no `table` column.
 *             Numbers are written with the fewest digits that round-trip (at most
 *             17 significant); NaN and missing cells are empty (pandas NaN); ±inf
 *             are "inf" / "-inf" (pandas reads both).
 *   json      {"title": ..., "meta": {key: value, ...}, "notes": [...],
 *              "tables": [{"name": ..., "title": ..., "columns": [...],
 *                          "data": [[cell, ...], ...]}]}
 *             "columns"/"data" are pandas' orient="split", so
 *             pd.DataFrame(t["data"], columns=t["columns"]) rebuilds a table. Numbers
 *             round-trip exactly (shortest form that reads back bit-identical, at
 *             most %.17g); NaN, ±inf and missing cells are null.
 *
 * A report has a title, meta lines (key: value; under the title in table/markdown,
 * "meta" in json, left out of csv so that it loads without options), notes (free
 * text under the tables; "notes" in json; left out of csv) and tables. A table has a
 * machine name (csv/json), a human title, columns, and rows of cells. A cell is text,
 * a number (double, shown with its column's display format unless the cell carries
 * its own), an integer, or missing (shown as its text, "n/a" by default, in
 * table/markdown; empty in csv; null in json). Display precision affects only table
 * and markdown; csv and json always carry the full value.
 *
 * Errors are sticky: every adding function returns a status, and the first failure
 * is also kept in the report, so a caller may add a whole table and check once with
 * dfl_report_status (dfl_report_render / _write also refuse a failed report).
 *
 * Ownership: the report copies every string it is given; tables belong to the report.
 * The library never prints: dfl_report_render builds the text in a malloc'ed buffer;
 * dfl_report_write fwrite()s it to a caller-given FILE* and returns DFL_ERR_IO on a
 * write error (it prints nothing else).
 */
#ifndef DFL_REPORT_H
#define DFL_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

typedef enum dfl_report_format {
    DFL_REPORT_TABLE = 0,
    DFL_REPORT_CSV,
    DFL_REPORT_JSON,
    DFL_REPORT_MARKDOWN
} dfl_report_format;

/* "table", "csv", "json", "markdown". */
const char *dfl_report_format_name(dfl_report_format f);
/* Parse a format name (also "md" for markdown). DFL_ERR_USAGE listing the names. */
dfl_status dfl_report_format_parse(const char *name, dfl_report_format *out, dfl_error *err);

/* How a number is shown in table and markdown output (csv/json: full precision). */
typedef enum dfl_report_num {
    DFL_NUM_GENERAL = 0, /* %.{p}g: p significant digits (default, p = 4) */
    DFL_NUM_FIXED,       /* %.{p}f: p decimals */
    DFL_NUM_EXP,         /* %.{p}e */
    DFL_NUM_AUTO         /* fixed with p significant digits for 1e-3 <= |v| < 1e6, else %.{p-1}e */
} dfl_report_num;

typedef struct dfl_report dfl_report;
typedef struct dfl_report_table dfl_report_table;

/* ------------------------------------------------------------- building */

/* An empty report; title may be NULL. DFL_ERR_NOMEM. The caller owns *out:
 * dfl_report_destroy (NULL ok). */
dfl_status dfl_report_create(const char *title, dfl_report **out, dfl_error *err);
void dfl_report_destroy(dfl_report *r);

/* A meta line "key: value" (e.g. "dump A", "run.h5"). DFL_ERR_NOMEM. */
dfl_status dfl_report_add_meta(dfl_report *r, const char *key, const char *value, dfl_error *err);
/* A printf-style note shown under the tables. DFL_ERR_NOMEM. */
dfl_status dfl_report_add_note(dfl_report *r, dfl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Append a table. name: [A-Za-z0-9_.-]+, unique in the report (DFL_ERR_USAGE
 * otherwise); title may be NULL (then the name is shown). *out (may be NULL) is owned
 * by the report and stays valid until dfl_report_destroy. */
dfl_status dfl_report_add_table(dfl_report *r, const char *name, const char *title, dfl_report_table **out,
                                dfl_error *err);

/* Append a column: its name (non-empty, unique in the table; "table" is reserved for
 * csv) and how numbers in it are shown (precision 0..17). Columns must all be added
 * before the first row (DFL_ERR_USAGE). */
dfl_status dfl_report_add_column(dfl_report_table *t, const char *name, dfl_report_num num, int precision,
                                 dfl_error *err);

/* Start a new row, every cell missing ("n/a"); the set functions below fill the
 * current (last) row. DFL_ERR_USAGE when the table has no columns; DFL_ERR_NOMEM. */
dfl_status dfl_report_add_row(dfl_report_table *t, dfl_error *err);

/* Set cell `col` of the current row. DFL_ERR_USAGE when there is no row or col is
 * out of range; DFL_ERR_NOMEM.
 *   _text: a string (copied);  _num: a double (NaN/inf allowed), column format;
 *   _num_fmt: a double with its own display format;  _int: an integer (shown exactly);
 *   _missing: no value, shown as `shown` in table/markdown (NULL = "n/a"). */
dfl_status dfl_report_set_text(dfl_report_table *t, size_t col, const char *text, dfl_error *err);
dfl_status dfl_report_set_num(dfl_report_table *t, size_t col, double v, dfl_error *err);
dfl_status dfl_report_set_num_fmt(dfl_report_table *t, size_t col, double v, dfl_report_num num, int precision,
                                  dfl_error *err);
dfl_status dfl_report_set_int(dfl_report_table *t, size_t col, int64_t v, dfl_error *err);
dfl_status dfl_report_set_missing(dfl_report_table *t, size_t col, const char *shown, dfl_error *err);

/* The first error any adding function met (DFL_OK if none), copied into err. */
dfl_status dfl_report_status(const dfl_report *r, dfl_error *err);

/* -------------------------------------------------------------- reading */

/* For in-process callers and tests: tables by index or name (NULL if none), their
 * shape and cells. */
size_t dfl_report_table_count(const dfl_report *r);
dfl_report_table *dfl_report_table_at(const dfl_report *r, size_t i);
dfl_report_table *dfl_report_table_find(const dfl_report *r, const char *name);
const char *dfl_report_table_name(const dfl_report_table *t);
size_t dfl_report_columns(const dfl_report_table *t);
size_t dfl_report_rows(const dfl_report_table *t);
/* Index of the column named `name`, or -1. */
long dfl_report_column_find(const dfl_report_table *t, const char *name);
const char *dfl_report_column_name(const dfl_report_table *t, size_t col);

typedef enum dfl_report_cell_kind {
    DFL_CELL_MISSING = 0,
    DFL_CELL_TEXT,
    DFL_CELL_NUM,
    DFL_CELL_INT
} dfl_report_cell_kind;

/* Kind of cell (row, col); DFL_CELL_MISSING when out of range. */
dfl_report_cell_kind dfl_report_cell_kind_at(const dfl_report_table *t, size_t row, size_t col);
/* The cell as a double (NUM, INT; NaN otherwise) and as text (TEXT; NULL otherwise). */
double dfl_report_cell_num(const dfl_report_table *t, size_t row, size_t col);
const char *dfl_report_cell_text(const dfl_report_table *t, size_t row, size_t col);

/* -------------------------------------------------------------- output */

/* The whole report in format f as a NUL-terminated malloc'ed string the caller owns
 * (free()); *len (may be NULL) gets its length. The returned status of a failed
 * report (dfl_report_status) or DFL_ERR_NOMEM. */
dfl_status dfl_report_render(const dfl_report *r, dfl_report_format f, char **out, size_t *len, dfl_error *err);

/* Render and fwrite to out (e.g. stdout). DFL_ERR_IO when the write fails, or the
 * statuses of dfl_report_render. Does not close out. */
dfl_status dfl_report_write(const dfl_report *r, dfl_report_format f, FILE *out, dfl_error *err);

/* The shortest "%.{p}g" (p <= 17) of v that reads back as v ("nan", "inf", "-inf" for
 * non-finite values) into buf[cap] (cap >= 32). Returns buf. Used by csv and json. */
char *dfl_report_fmt_exact(double v, char *buf, size_t cap);

#endif
