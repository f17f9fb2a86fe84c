/* jinja.h — the Jinja subset that Hugging Face chat templates use, rendered as
 * transformers' apply_chat_template(..., tokenize=False) renders them: jinja2's
 * ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
 * extension, and the globals raise_exception and strftime_now (and the tojson filter
 * transformers installs: json.dumps with ensure_ascii=False).
 *
 * The subset (anything else is refused when the template is parsed, naming the
 * construct and its line):
 *   text, {{ expr }}, {# comments #}, whitespace control {%- -%} {{- -}} {%+ +%};
 *   {% if %}/{% elif %}/{% else %}/{% endif %}, {% for x in expr %}...{% else %}{% endfor %}
 *   with loop.index, index0, revindex, revindex0, first, last, length, previtem, nextitem,
 *   {% set name = expr %}, {% set ns.attr = expr %}, {% break %}, {% continue %},
 *   {% generation %}...{% endgeneration %} (transformers' assistant-mask tag: its body);
 *   expressions: literals (strings with Python escapes, integers, floats, true/false/none
 *   in either case, [lists], {dicts}, (tuples)), names, .attr and [index], Python slices
 *   [a:b:c], calls, a if c else b, or/and/not, == != < <= > >=, in / not in, + - * / // %
 *   ~ and unary -, filters (|f or |f(args)) and tests (is [not] t);
 *   globals namespace(k=v...), range(), raise_exception(msg), strftime_now(fmt);
 *   filters trim, length/count, tojson, upper, lower, capitalize, title, first, last,
 *   join, default/d, string, int, float, list, reverse, replace, items, abs;
 *   tests defined, undefined, none, string, number, integer, float, boolean, true,
 *   false, mapping, iterable, sequence, even, odd, eq/equalto/==, ne/!=;
 *   methods of strings (strip, lstrip, rstrip, split, startswith, endswith, upper,
 *   lower, replace, title, capitalize) and of dicts (get, items, keys, values).
 * Values follow Python: truthiness, `a or b` giving an operand, code-point string
 * indexing, slicing and length, repr-style printing of lists, True/False/None.
 * Undefined values print as "" and are false; their attributes, arithmetic on them and
 * calling them are errors, as with jinja2's default Undefined. */
#ifndef DFL_JINJA_H
#define DFL_JINJA_H

#include <stddef.h>

#include "base/status.h"
#include "base/strbuf.h"

typedef struct dfl_jinja dfl_jinja;

/* Parse a template (src[len], UTF-8, need not be NUL-terminated). *out is owned by the
 * caller (dfl_jinja_free). DFL_ERR_FORMAT naming the line and what is wrong: a syntax
 * error, or "outside the supported Jinja subset: <construct>"; DFL_ERR_NOMEM. */
dfl_status dfl_jinja_parse(const char *src, size_t len, dfl_jinja **out, dfl_error *err);

/* Render t with the variables of vars_json (a JSON object: each member a variable,
 * JSON null = None), appending to *out. DFL_ERR_FORMAT for an error while rendering
 * (raise_exception's message, an undefined attribute, a type error), naming the line;
 * DFL_ERR_USAGE when vars_json is not a JSON object; DFL_ERR_NOMEM. */
dfl_status dfl_jinja_render(const dfl_jinja *t, const char *vars_json, dfl_strbuf *out, dfl_error *err);

/* Free a parsed template; accepts NULL. */
void dfl_jinja_free(dfl_jinja *t);

#endif
