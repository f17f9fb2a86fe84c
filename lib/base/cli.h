/* cli.h — what every tool's main() shares: strict parsing of numbers and index lists
 * in flags, and a progress bar for long work. Nothing here exits. */
#ifndef DFL_CLI_H
#define DFL_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

/* Parse a whole decimal integer in [lo, hi] (no trailing text, no overflow).
 * DFL_ERR_USAGE naming the flag otherwise. */
dfl_status dfl_cli_int(const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out, dfl_error *err);

/* Parse a finite number in [lo, hi]. */
dfl_status dfl_cli_double(const char *flag, const char *text, double lo, double hi, double *out, dfl_error *err);

/* Lists in flags all follow one rule, here: items are separated by single commas and
 * taken verbatim; an empty text, a leading or trailing comma and ",," are refused (they
 * are typos, not empty items), and so is a numeric item with white space in it.
 *
 * Split text into its items: *items is one malloc'ed block (the caller frees *items
 * alone) holding *n pointers to NUL-terminated copies. max > 0 caps the count.
 * DFL_ERR_USAGE naming `flag`, DFL_ERR_NOMEM. */
dfl_status dfl_cli_split(const char *flag, const char *text, size_t max, char ***items, size_t *n, dfl_error *err);

/* Integers (or finite numbers) in [lo, hi], in the order given, repeats kept, at most
 * max (0: no cap); *out malloc'ed, caller frees. DFL_ERR_USAGE, DFL_ERR_NOMEM. */
dfl_status dfl_cli_int_list(const char *flag, const char *text, int64_t lo, int64_t hi, size_t max, int64_t **out,
                            size_t *n, dfl_error *err);
dfl_status dfl_cli_double_list(const char *flag, const char *text, double lo, double hi, size_t max, double **out,
                               size_t *n, dfl_error *err);

/* An index set "0,3-5" (items are indices or ranges a-b with a <= b, in [0, 2^31)) as
 * a sorted, distinct, malloc'ed array (caller frees). DFL_ERR_USAGE, DFL_ERR_NOMEM. */
dfl_status dfl_cli_index_list(const char *flag, const char *text, int64_t **out, size_t *n, dfl_error *err);

/* The index of text in names[n] (exact match), or -1: the lookup behind each enum's _parse. */
int dfl__name_index(const char *text, const char *const *names, int n);

/* The name of names[] (NULL-terminated) nearest to `word` by edit distance (insertions,
 * deletions, substitutions and swaps of two neighbours count one each), when that
 * distance is at most 2 and shorter than word itself; else NULL. For "did you mean"
 * hints on misspelt keys and flags; ties go to the earlier name. */
const char *dfl__nearest_name(const char *word, const char *const *names);

/* For a tool's SIGINT/SIGTERM/SIGHUP handler: writes "TOOL: stopped by SIGINT;
 * nothing half-written left behind" to stderr with write(2) only (async-signal-safe).
 * The tool removes its temporaries (dfl__tmp_unlink_all) and exits (_exit(128 + sig)). */
void dfl_cli_signal_note(const char *tool, int sig);

/* Install handler for SIGINT, SIGTERM and SIGHUP (the signals that stop a tool), with no
 * other signal blocked while it runs. For a tool's main; the library never calls it. */
void dfl_cli_catch_signals(void (*handler)(int));

/* --version and the hidden --list-options, the same in every tool: the tool puts
 * DFL_CLI_COMMON_OPTIONS in its getopt_long table and answers both with
 *     case DFL_CLI_OPT_VERSION: case DFL_CLI_OPT_LIST: return dfl_cli_common(stdout, "TOOL", c, opts);
 * --list-options prints the table, one long option a line ("--name" or, when the option
 * takes an argument, "--name="): what scripts/completion.py builds bash completion from. */
enum { DFL_CLI_OPT_VERSION = 0x4000, DFL_CLI_OPT_LIST = 0x4001 };
#define DFL_CLI_COMMON_OPTIONS                                                                                         \
    {"version", no_argument, 0, DFL_CLI_OPT_VERSION},                                                                  \
    {                                                                                                                  \
        "list-options", no_argument, 0, DFL_CLI_OPT_LIST                                                               \
    }

/* Print "TOOL (difflens) VERSION" for DFL_CLI_OPT_VERSION, the option list for
 * DFL_CLI_OPT_LIST, to out. Returns the exit code: 0, or 1 if out could not be written. */
int dfl_cli_common(FILE *out, const char *tool, int opt, const struct option *opts);

/* A one-line progress bar on `out` ("\r" updates) when out is a terminal, !quiet and
 * NO_COLOR is unset or empty (https://no-color.org: a user who asked for plain output):
 * `label [#####-----] done/total unit  rate/s  ETA`. */
typedef struct dfl_progress {
    FILE *out;
    int enabled;
    const char *label;
} dfl_progress;

dfl_progress dfl_progress_start(FILE *out, const char *label, int quiet);
/* done/total in `unit`s, rate = tokens (or units) per second, eta in seconds (<0 unknown). */
void dfl_progress_update(dfl_progress *p, double done, double total, const char *unit, double rate,
                         const char *rate_unit, double eta);
/* Clear the line. */
void dfl_progress_end(dfl_progress *p);

#endif
