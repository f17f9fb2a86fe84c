/* jinja_harness — renders TEMPLATE with the JSON object in VARS through lib/text/jinja.c
 * and writes the text to stdout (exit 0), or the error message to stderr (exit 1: a
 * refusal at parse time starts "parse: ", an error while rendering "render: ").
 * For tests/test_jinja.py, which compares it with Python's jinja2. */
#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"
#include "base/strbuf.h"
#include "text/jinja.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: jinja_harness TEMPLATE VARS.json\n");
        return 2;
    }
    char *src = NULL, *vars = NULL;
    size_t n, m;
    dfl_error err = {DFL_OK, ""};
    dfl_jinja *t = NULL;
    dfl_strbuf out = {0};
    int rc = 1;
    if (dfl__read_file(argv[1], &src, &n, &err) || dfl__read_file(argv[2], &vars, &m, &err)) {
        fprintf(stderr, "io: %s\n", err.msg);
    } else if (dfl_jinja_parse(src, n, &t, &err)) {
        fprintf(stderr, "parse: %s\n", err.msg);
    } else if (dfl_jinja_render(t, vars, &out, &err)) {
        fprintf(stderr, "render: %s\n", err.msg);
    } else {
        if (out.len) fwrite(out.p, 1, out.len, stdout);
        rc = 0;
    }
    dfl_strbuf_free(&out);
    dfl_jinja_free(t);
    free(src), free(vars);
    return rc;
}
