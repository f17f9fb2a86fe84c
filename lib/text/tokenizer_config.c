/* tokenizer_config.c — what transformers' AutoTokenizer reads besides tokenizer.json:
 * tokenizer_config.json (the tokenizer class, add_bos_token / add_eos_token, the special
 * tokens, the chat template) and chat_template.jinja.
 *
 * The rule for add_bos_token / add_eos_token is transformers' (v4.4x):
 * LlamaTokenizerFast.__init__ and GemmaTokenizerFast.__init__ (src/transformers/models/
 * llama/tokenization_llama_fast.py, models/gemma/tokenization_gemma_fast.py) default
 * add_bos_token=True, add_eos_token=False and call update_post_processor(), which
 * replaces tokenizer.json's post-processor by TemplateProcessing
 *     single = "[bos:0 ]$A:0[ eos:0]"
 * with bos = bos_token (default "<s>" for Llama, "<bos>" for Gemma) when add_bos_token,
 * eos = eos_token ("</s>", "<eos>") when add_eos_token, and raises when one is wanted
 * but its token is None. AutoTokenizer picks those classes for tokenizer_class
 * "LlamaTokenizer"/"LlamaTokenizerFast" and "GemmaTokenizer"/"GemmaTokenizerFast". Every
 * other class (PreTrainedTokenizerFast, Qwen2Tokenizer, ...) keeps tokenizer.json's
 * post-processor, and so does difflens. A JSON null for a flag is Python's None: false.
 *
 * The chat template: chat_template.jinja when the folder has one (it takes precedence,
 * as in PreTrainedTokenizerBase.from_pretrained), else tokenizer_config.json's
 * "chat_template" (a string, or a list of {"name", "template"}: the one named "default").
 * The special tokens (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
 * mask_token, additional_special_tokens) are what apply_chat_template passes the
 * template besides the messages (special_tokens_map). */
#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/jsondoc.h"
#include "text/tokenizer_internal.h"

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir), m = strlen(name);
    char *p = malloc(n + m + 2);
    if (p) snprintf(p, n + m + 2, "%s/%s", dir, name);
    return p;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A special token as tokenizer_config.json writes it: "<s>", or an AddedToken
 * {"content": "<s>", ...}; NULL for null or absent. */
static const char *token_text(const cJSON *v)
{
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

/* The template step "[bos ]$A[ eos]" into t->post (the old one freed). */
static dfl_status set_template(dfl_tokenizer *t, const char *bos, const char *eos, const char *path, dfl_error *err)
{
    int64_t ids[2] = {-1, -1};
    const char *tok[2] = {bos, eos};
    for (int k = 0; k < 2; k++)
        if (tok[k] && (ids[k] = dfl_tokenizer_find(t, tok[k], strlen(tok[k]))) < 0)
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: %s '%.60s' is not in the vocabulary", path,
                             k ? "eos_token" : "bos_token", tok[k]);
    dfl__tk_step *st = calloc(1, sizeof *st);
    dfl__tk_piece *pieces = calloc(3, sizeof *pieces);
    if (!st || !pieces) {
        free(st), free(pieces);
        return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    }
    st->kind = DFL__PP_TEMPLATE;
    st->tmpl = pieces;
    for (int k = 0; k < 3; k++) {
        if (k == 1) {
            pieces[st->n_tmpl++].is_seq = 1;
            continue;
        }
        int64_t id = ids[k / 2];
        if (id < 0) continue;
        dfl__tk_piece *pc = &pieces[st->n_tmpl++];
        if (!(pc->ids = malloc(sizeof *pc->ids))) {
            dfl__step_free(st);
            free(st);
            return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
        }
        pc->ids[0] = (uint32_t)id, pc->n_ids = 1;
    }
    dfl__step_free(t->post);
    free(t->post);
    t->post = st;
    return DFL_OK;
}

/* add_bos_token / add_eos_token for the classes that read them. */
static dfl_status apply_flags(dfl_tokenizer *t, const cJSON *cfg, const char *path, dfl_error *err)
{
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class");
    if (!cJSON_IsString(cls)) return DFL_OK;
    const char *c = cls->valuestring;
    int llama = !strcmp(c, "LlamaTokenizer") || !strcmp(c, "LlamaTokenizerFast");
    int gemma = !strcmp(c, "GemmaTokenizer") || !strcmp(c, "GemmaTokenizerFast");
    if (!llama && !gemma) return DFL_OK;
    const char *names[2] = {"add_bos_token", "add_eos_token"}, *keys[2] = {"bos_token", "eos_token"};
    const char *defaults[2][2] = {{"<s>", "</s>"}, {"<bos>", "<eos>"}};
    const char *tok[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(cfg, names[k]);
        int on = f ? cJSON_IsTrue(f) : k == 0;
        if (f && !cJSON_IsBool(f) && !cJSON_IsNull(f))
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"%s\" is neither true, false nor null", path, names[k]);
        if (!on) continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, keys[k]);
        tok[k] = v ? token_text(v) : defaults[gemma][k];
        if (!tok[k])
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: %s = true but %s = None (transformers refuses it too)", path,
                             names[k], keys[k]);
    }
    return set_template(t, tok[0], tok[1], path, err);
}

/* The special tokens apply_chat_template passes to the template, as a JSON object. */
static dfl_status read_specials(dfl_tokenizer *t, const cJSON *cfg, dfl_error *err)
{
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    for (size_t k = 0; ok && cfg && k < sizeof keys / sizeof *keys; k++) {
        const char *s = token_text(cJSON_GetObjectItemCaseSensitive(cfg, keys[k]));
        if (s) ok = cJSON_AddStringToObject(o, keys[k], s) != NULL;
    }
    const cJSON *extra = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "additional_special_tokens") : NULL;
    if (ok && cJSON_IsArray(extra)) {
        cJSON *a = cJSON_AddArrayToObject(o, "additional_special_tokens");
        ok = a != NULL;
        for (const cJSON *e = extra->child; ok && e; e = e->next) {
            const char *s = token_text(e);
            cJSON *str = s ? cJSON_CreateString(s) : NULL;
            if (s && !str) ok = 0;
            if (str) cJSON_AddItemToArray(a, str);
        }
    }
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    free(t->chat_specials);
    t->chat_specials = text;
    return DFL_OK;
}

static dfl_status read_template(dfl_tokenizer *t, const cJSON *cfg, const char *path, dfl_error *err)
{
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *text = NULL;
    if (cJSON_IsString(ct)) {
        text = ct->valuestring;
    } else if (cJSON_IsArray(ct)) {
        for (const cJSON *e = ct->child; e && !text; e = e->next) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"),
                        *v = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (cJSON_IsString(n) && !strcmp(n->valuestring, "default") && cJSON_IsString(v)) text = v->valuestring;
        }
        if (!text)
            return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"chat_template\" lists no template named \"default\"", path);
    } else if (ct && !cJSON_IsNull(ct)) {
        return dfl__fail(err, DFL_ERR_CONFIG, "%s: \"chat_template\" is neither a string nor a list", path);
    }
    if (!text) return DFL_OK;
    free(t->chat_template);
    if (!(t->chat_template = strdup(text))) return dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    return DFL_OK;
}

dfl_status dfl__tokenizer_read_config(dfl_tokenizer *t, const char *dir, dfl_error *err)
{
    char *path = join(dir, "tokenizer_config.json"), *jinja = join(dir, "chat_template.jinja");
    char *buf = NULL;
    size_t len = 0;
    cJSON *cfg = NULL;
    dfl_status s = path && jinja ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "tokenizer: out of memory");
    if (!s && exists(path)) {
        s = dfl__read_file_max(path, (size_t)64 << 20, "a tokenizer_config.json", &buf, &len, err);
        const char *why = NULL;
        size_t at = 0;
        if (!s && !(cfg = dfl__json_parse(buf, len, &why, &at)))
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s at byte %zu", path, why, at);
        if (!s && !cJSON_IsObject(cfg)) s = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a JSON object", path);
        if (!s) s = apply_flags(t, cfg, path, err);
        if (!s) s = read_template(t, cfg, path, err);
    }
    if (!s) s = read_specials(t, cfg, err);
    if (!s && exists(jinja)) {
        char *tmpl = NULL;
        size_t n;
        s = dfl__read_file_max(jinja, (size_t)16 << 20, "a chat_template.jinja", &tmpl, &n, err);
        if (!s) {
            free(t->chat_template);
            t->chat_template = tmpl;
        }
    }
    cJSON_Delete(cfg);
    free(buf), free(path), free(jinja);
    return s;
}

const char *dfl_tokenizer_chat_template(const dfl_tokenizer *t)
{
    return t->chat_template;
}

const char *dfl_tokenizer_chat_specials(const dfl_tokenizer *t)
{
    return t->chat_specials ? t->chat_specials : "{}";
}
