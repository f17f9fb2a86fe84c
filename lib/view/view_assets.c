/* view_assets.c — the page's static files, linked into the binary with the
 * assembler's .incbin (paths relative to the repository root, where make runs; the
 * Makefile makes this object depend on lib/view/assets/). No network, no build step. */
#include <stddef.h>

#include "view/view.h"

#define ASSET(sym, file)                                                                                               \
    __asm__(".section .rodata\n"                                                                                       \
            ".global " #sym "\n"                                                                                       \
            ".balign 16\n" #sym ":\n"                                                                                  \
            ".incbin \"" file "\"\n"                                                                                   \
            ".global " #sym "_end\n" #sym "_end:\n"                                                                    \
            ".byte 0\n"                                                                                                \
            ".previous\n")

ASSET(dfl__view_index_html, "lib/view/assets/index.html");
ASSET(dfl__view_app_js, "lib/view/assets/app.js");
ASSET(dfl__view_app_css, "lib/view/assets/app.css");

extern const unsigned char dfl__view_index_html[], dfl__view_index_html_end[];
extern const unsigned char dfl__view_app_js[], dfl__view_app_js_end[];
extern const unsigned char dfl__view_app_css[], dfl__view_app_css_end[];

const unsigned char *dfl__view_asset(int i, size_t *len, const char **type)
{
    static const char *const types[3] = {"text/html; charset=utf-8", "text/javascript; charset=utf-8",
                                         "text/css; charset=utf-8"};
    const unsigned char *b[3] = {dfl__view_index_html, dfl__view_app_js, dfl__view_app_css};
    const unsigned char *e[3] = {dfl__view_index_html_end, dfl__view_app_js_end, dfl__view_app_css_end};
    if (i < 0 || i > 2) return NULL;
    *len = (size_t)(e[i] - b[i]);
    *type = types[i];
    return b[i];
}
