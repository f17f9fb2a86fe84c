/* probe_clip.c — `probe` on a DiffCLIP or CLIP model (model/clip.h): image prompts in,
 * the image tower's maps, object-vs-background shares, outliers, embeddings and
 * zero-shot scores out (docs/format.md "Image prompts" and the dump's image datasets).
 *
 * An image prompt line (JSON Lines; paths relative to the prompt file's folder):
 *   {"id": "cat", "image": "cat.jpg", "box": [x0, y0, x1, y1],
 *    "captions": ["a photo of a cat", ...] | "caption_tokens": [[49406, ..., 49407], ...],
 *    "rows": [0, 17]}
 * box: the object, in pixels of the original image, half-open; rows: the analysis rows
 * (tokens of the image tower: 0 the class token, 1 + p patch p in row-major order)
 * [0]. Text captions need a tokenizer (probe --tokenizer, or tokenizer.json in the model
 * folder). */
#include "analysis/probe_clip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/jsondoc.h"
#include "dump/dump.h"
#include "dump/dump_schema.h"
#include "model/clip.h"
#include "model/image.h"
#include "text/tokenizer.h"

/* ---------------------------------------------------------------- prompts */

typedef struct image_prompt {
    char *id, *image;
    int has_box;
    double box[4];
    int64_t n_caps, cap_len; /* captions, longest caption's tokens */
    int32_t *caps;           /* [n_caps, cap_len], −1 padded */
    int64_t *cap_n;          /* [n_caps] tokens of each */
    char **cap_text;         /* [n_caps] or NULL */
    int64_t *rows;           /* analysis rows */
    int64_t n_rows;
    size_t line;
} image_prompt;

static void prompt_free(image_prompt *p)
{
    free(p->id), free(p->image), free(p->caps), free(p->cap_n), free(p->rows);
    if (p->cap_text)
        for (int64_t i = 0; i < p->n_caps; i++)
            free(p->cap_text[i]);
    free(p->cap_text);
}

#define BAD(...) (s = dfl__fail(err, DFL_ERR_FORMAT, __VA_ARGS__))

/* One caption's ids into p (growing the padded table). */
static dfl_status add_caption(image_prompt *p, const int32_t *ids, int64_t n, dfl_error *err)
{
    int64_t len = n > p->cap_len ? n : p->cap_len;
    int32_t *caps = dfl__alloc_array((size_t)((p->n_caps + 1) * len), sizeof *caps);
    int64_t *cn = realloc(p->cap_n, (size_t)(p->n_caps + 1) * sizeof *cn);
    if (!caps || !cn) {
        free(caps);
        if (cn) p->cap_n = cn;
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    p->cap_n = cn;
    for (int64_t i = 0; i < (p->n_caps + 1) * len; i++)
        caps[i] = -1;
    for (int64_t i = 0; i < p->n_caps; i++)
        memcpy(caps + i * len, p->caps + i * p->cap_len, (size_t)p->cap_n[i] * sizeof *caps);
    memcpy(caps + p->n_caps * len, ids, (size_t)n * sizeof *caps);
    free(p->caps);
    p->caps = caps, p->cap_len = len, p->cap_n[p->n_caps++] = n;
    return DFL_OK;
}

static dfl_status parse_line(const char *text, size_t len, const char *label, size_t line, const char *dir,
                             const dfl_clip_config *c, dfl_tokenizer *tok, image_prompt *p, dfl_error *err)
{
    static const char *const keys[] = {"id", "image", "box", "captions", "caption_tokens", "rows", "comment", "note"};
    const char *why;
    size_t at;
    memset(p, 0, sizeof *p);
    p->line = line;
    cJSON *o = dfl__json_parse(text, len, &why, &at);
    if (!o) return dfl__fail(err, DFL_ERR_FORMAT, "%s:%zu: not valid JSON: %s at byte %zu", label, line, why, at + 1);
    dfl_status s = DFL_OK;
    int64_t T = 1 + (c->tower[DFL_CLIP_VISION].image_size / c->tower[DFL_CLIP_VISION].patch_size) *
                        (c->tower[DFL_CLIP_VISION].image_size / c->tower[DFL_CLIP_VISION].patch_size);
    if (!cJSON_IsObject(o)) BAD("%s:%zu: an image prompt must be a JSON object", label, line);
    for (const cJSON *k = o->child; !s && k; k = k->next) {
        int known = 0;
        for (size_t i = 0; i < sizeof keys / sizeof *keys && !known; i++)
            known = !strcmp(k->string, keys[i]);
        if (!known) BAD("%s:%zu: unknown key \"%s\" in an image prompt", label, line, k->string);
    }
    const cJSON *im = cJSON_GetObjectItemCaseSensitive(o, "image");
    if (!s && !cJSON_IsString(im)) BAD("%s:%zu: \"image\" (a path) is required", label, line);
    if (!s) {
        size_t n = strlen(dir) + strlen(im->valuestring) + 2;
        if (!(p->image = malloc(n)))
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else if (im->valuestring[0] == '/' || !dir[0])
            snprintf(p->image, n, "%s", im->valuestring);
        else
            snprintf(p->image, n, "%s/%s", dir, im->valuestring);
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    if (!s && id && !cJSON_IsString(id)) BAD("%s:%zu: \"id\" must be a string", label, line);
    if (!s && id && !(p->id = strdup(id->valuestring))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    const cJSON *box = cJSON_GetObjectItemCaseSensitive(o, "box");
    if (!s && box) {
        if (!cJSON_IsArray(box) || cJSON_GetArraySize(box) != 4)
            BAD("%s:%zu: \"box\" must be [x0, y0, x1, y1]", label, line);
        for (int i = 0; !s && i < 4; i++) {
            const cJSON *v = cJSON_GetArrayItem(box, i);
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
                BAD("%s:%zu: \"box\" must hold 4 numbers", label, line);
            else
                p->box[i] = v->valuedouble;
        }
        if (!s && !(p->box[0] < p->box[2] && p->box[1] < p->box[3]))
            BAD("%s:%zu: \"box\" [%g, %g, %g, %g] is empty or reversed", label, line, p->box[0], p->box[1], p->box[2],
                p->box[3]);
        p->has_box = !s;
    }
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(o, "captions"),
                *ctok = cJSON_GetObjectItemCaseSensitive(o, "caption_tokens");
    const dfl_clip_tower_config *tc = &c->tower[DFL_CLIP_TEXT];
    if (!s && caps && ctok) BAD("%s:%zu: give \"captions\" or \"caption_tokens\", not both", label, line);
    if (!s && ctok) {
        if (!cJSON_IsArray(ctok)) BAD("%s:%zu: \"caption_tokens\" must be a list of token lists", label, line);
        for (const cJSON *cap = ctok ? ctok->child : NULL; !s && cap; cap = cap->next) {
            int64_t n = cJSON_GetArraySize(cap);
            if (!cJSON_IsArray(cap) || n < 1 || n > tc->context_length) {
                BAD("%s:%zu: each caption must be a list of 1 to %lld token ids", label, line,
                    (long long)tc->context_length);
                break;
            }
            int32_t ids[1 << 12];
            int64_t i = 0;
            for (const cJSON *v = cap->child; !s && v; v = v->next, i++)
                if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (double)tc->vocab_size ||
                    v->valuedouble != floor(v->valuedouble))
                    BAD("%s:%zu: caption token %lld is not an id in [0, %lld)", label, line, (long long)i,
                        (long long)tc->vocab_size);
                else
                    ids[i] = (int32_t)v->valuedouble;
            if (!s) s = add_caption(p, ids, n, err);
        }
    }
    if (!s && caps) {
        if (!cJSON_IsArray(caps)) BAD("%s:%zu: \"captions\" must be a list of strings", label, line);
        if (!s && !tok)
            s = dfl__fail(err, DFL_ERR_USAGE,
                          "%s:%zu: text captions need a tokenizer (probe --tokenizer, or tokenizer.json in the model "
                          "folder); or give caption_tokens",
                          label, line);
        int64_t n = caps ? cJSON_GetArraySize(caps) : 0;
        if (!s && !(p->cap_text = calloc((size_t)n + 1, sizeof *p->cap_text)))
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        int64_t k = 0;
        for (const cJSON *cap = caps ? caps->child : NULL; !s && cap; cap = cap->next, k++) {
            if (!cJSON_IsString(cap)) {
                BAD("%s:%zu: captions[%lld] is not a string", label, line, (long long)k);
                break;
            }
            dfl_encoding enc;
            s = dfl_tokenizer_encode(tok, cap->valuestring, strlen(cap->valuestring), 1, &enc, err);
            if (s) break;
            if ((int64_t)enc.n < 1 || (int64_t)enc.n > tc->context_length)
                s = dfl__fail(err, DFL_ERR_RANGE,
                              "%s:%zu: captions[%lld] has %zu tokens (the text tower takes 1 to %lld)", label, line,
                              (long long)k, enc.n, (long long)tc->context_length);
            int32_t ids[1 << 12];
            for (size_t i = 0; !s && i < enc.n; i++)
                ids[i] = (int32_t)enc.ids[i];
            if (!s) s = add_caption(p, ids, (int64_t)enc.n, err);
            dfl_encoding_free(&enc);
            if (!s && !(p->cap_text[k] = strdup(cap->valuestring))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        }
    }
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(o, "rows");
    int64_t nr = rows && cJSON_IsArray(rows) ? cJSON_GetArraySize(rows) : 1;
    if (!s && rows && (!cJSON_IsArray(rows) || nr < 1)) BAD("%s:%zu: \"rows\" must be a non-empty list", label, line);
    if (!s && !(p->rows = calloc((size_t)nr, sizeof *p->rows))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    p->n_rows = s ? 0 : nr;
    int64_t i = 0;
    for (const cJSON *v = rows ? rows->child : NULL; !s && v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (double)T ||
            v->valuedouble != floor(v->valuedouble))
            BAD("%s:%zu: rows[%lld] is not a token of the image tower [0, %lld)", label, line, (long long)i,
                (long long)T);
        else
            p->rows[i] = (int64_t)v->valuedouble;
    }
    cJSON_Delete(o);
    if (s) prompt_free(p);
    return s;
}

/* ---------------------------------------------------------------- capture */

typedef struct capture {
    int64_t L, H, T, M, D, G, K; /* layers, heads, tokens, maps (1 or 3), width, grid, top-K */
    const int64_t *rows;         /* stored map rows [R] */
    int64_t R;
    const int64_t *arows; /* analysis rows [Ra] */
    int64_t Ra;
    const uint8_t *seg;  /* [T] 1 cls, 2 object, 0 background */
    float *maps[3];      /* [L, H, R, T] map1, map2, diff */
    float *shares, *abs; /* [M, L, H, 3] */
    float *top;          /* [L, K] */
    int32_t *top_index;  /* [L, K, 4] */
    float *token_norm;   /* [L, T] */
    float *lambda;       /* [L] */
} capture;

static const int SEG_SLOT[3] = {2, 0, 1}; /* segment code → share slot: cls 0, object 1, background 2 */

static dfl_status on_layer(void *user, dfl_clip_tower_kind tower, int64_t l, const dfl_clip_layer_maps *m,
                           dfl_error *err)
{
    (void)tower, (void)err;
    capture *c = user;
    int64_t T = c->T, H = c->H;
    const float *src[3] = {m->map1, m->map2, m->diff};
    for (int k = 0; k < c->M; k++)
        for (int64_t h = 0; h < H; h++) {
            const float *a = src[k] + h * T * T;
            for (int64_t r = 0; r < c->R; r++)
                memcpy(c->maps[k] + ((l * H + h) * c->R + r) * T, a + c->rows[r] * T, (size_t)T * sizeof(float));
            double sh[3] = {0}, ab[3] = {0};
            for (int64_t r = 0; r < c->Ra; r++) {
                const float *row = a + c->arows[r] * T;
                double seg[3] = {0}, sabs[3] = {0}, tot = 0, tabs = 0;
                for (int64_t j = 0; j < T; j++) {
                    int slot = SEG_SLOT[c->seg[j]];
                    seg[slot] += row[j], sabs[slot] += fabs(row[j]), tot += row[j], tabs += fabs(row[j]);
                }
                for (int s = 0; s < 3; s++)
                    sh[s] += tot != 0 ? seg[s] / tot : 0, ab[s] += tabs > 0 ? sabs[s] / tabs : 0;
            }
            for (int s = 0; s < 3; s++) {
                c->shares[((k * c->L + l) * H + h) * 3 + s] = (float)(sh[s] / (double)c->Ra);
                c->abs[((k * c->L + l) * H + h) * 3 + s] = (float)(ab[s] / (double)c->Ra);
            }
        }
    if (c->lambda) c->lambda[l] = m->lambda;
    /* the K largest abs(hidden) with token, channel and patch position (−1, −1 for the
     * class token): ViTs' massive activations sit in a few "register-like" patches */
    float *top = c->top + l * c->K;
    int32_t *ix = c->top_index + l * c->K * 4;
    int64_t n = 0;
    for (int64_t t = 0; t < T; t++) {
        double ss = 0;
        for (int64_t d = 0; d < c->D; d++) {
            float v = fabsf(m->hidden[t * c->D + d]);
            ss += (double)v * v;
            if (n == c->K && !(v > top[n - 1])) continue;
            int64_t i = n < c->K ? n++ : n - 1;
            for (; i > 0 && top[i - 1] < v; i--) {
                top[i] = top[i - 1];
                memcpy(ix + i * 4, ix + (i - 1) * 4, 4 * sizeof *ix);
            }
            top[i] = v;
            int32_t e[4] = {(int32_t)t, (int32_t)d, t ? (int32_t)((t - 1) / c->G) : -1,
                            t ? (int32_t)((t - 1) % c->G) : -1};
            memcpy(ix + i * 4, e, sizeof e);
        }
        c->token_norm[l * T + t] = (float)sqrt(ss);
    }
    for (int64_t i = n; i < c->K; i++) {
        top[i] = NAN;
        for (int j = 0; j < 4; j++)
            ix[i * 4 + j] = -1;
    }
    return DFL_OK;
}

/* The text tower's maps of one caption: every layer, head and row (causal, C × C). */
typedef struct text_capture {
    int64_t L, H, T, M; /* layers, heads as analysed, the caption's tokens, maps (1 or 3) */
    float *maps[3];     /* [L, H, T, T] map1, map2, diff */
} text_capture;

static dfl_status on_text_layer(void *user, dfl_clip_tower_kind tower, int64_t l, const dfl_clip_layer_maps *m,
                                dfl_error *err)
{
    (void)tower;
    text_capture *c = user;
    if (m->heads != c->H || m->T != c->T || l < 0 || l >= c->L)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "the text tower's layer %lld has %lld heads over %lld tokens, not %lld x %lld", (long long)l,
                         (long long)m->heads, (long long)m->T, (long long)c->H, (long long)c->T);
    const float *src[3] = {m->map1, m->map2, m->diff};
    size_t n = (size_t)(c->H * c->T * c->T);
    for (int k = 0; k < c->M; k++)
        memcpy(c->maps[k] + (size_t)l * n, src[k], n * sizeof(float));
    return DFL_OK;
}

/* text/NNN/ of caption i: its tokens, token text (with a tokenizer) and the text
 * tower's maps [Lt, Ht, C, C] with the dimension scales of a text dump's attn/. */
static dfl_status put_caption_maps(dfl_dump *d, const dfl_tokenizer *tok, int64_t i, const int32_t *ids,
                                   const text_capture *tc, dfl_error *err)
{
    char g[64], name[96];
    snprintf(g, sizeof g, DFL_DS_TEXT_GROUP, (size_t)i);
    int64_t T = tc->T, big = tc->L > T ? tc->L : (tc->H > T ? tc->H : T);
    int32_t *seq = dfl__alloc_array((size_t)big, sizeof *seq);
    if (!seq) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < big; j++)
        seq[j] = (int32_t)j;
    snprintf(name, sizeof name, "%s/%s", g, DFL_DS_TOKENS);
    dfl_status s = dfl_dump_put(d, name, DFL_H5_I32, 1, &T, ids, err);
    if (!s && tok) {
        uint32_t *u = dfl__alloc_array((size_t)T, sizeof *u);
        char **labels = NULL;
        if (!u) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t j = 0; !s && j < T; j++)
            u[j] = (uint32_t)ids[j];
        if (!s) s = dfl_tokenizer_labels(tok, u, (size_t)T, &labels, err);
        snprintf(name, sizeof name, "%s/%s", g, DFL_DS_TOKEN_TEXT);
        if (!s) s = dfl_dump_put_strings(d, name, (const char *const *)labels, (size_t)T, err);
        if (labels) dfl_tokenizer_labels_free(labels, (size_t)T);
        free(u);
    }
    static const char *scale[4] = {DFL_DS_ATTN_LAYERS, DFL_DS_ATTN_HEADS, DFL_DS_ATTN_ROWS, DFL_DS_ATTN_KEYS};
    static const char *labels[4] = {"layer", "head", "query", "key"};
    int64_t n4[4] = {tc->L, tc->H, T, T};
    char sc[4][96];
    const char *scp[4];
    for (int k = 0; !s && k < 4; k++) {
        snprintf(sc[k], sizeof sc[k], "%s/%s", g, scale[k]);
        scp[k] = sc[k];
        s = dfl_dump_put(d, sc[k], DFL_H5_I32, 1, &n4[k], seq, err);
    }
    static const char *maps[3] = {DFL_DS_ATTN_MAP1, DFL_DS_ATTN_MAP2, DFL_DS_ATTN_DIFF};
    for (int k = 0; !s && k < tc->M; k++) {
        snprintf(name, sizeof name, "%s/%s", g, maps[k]);
        s = dfl_dump_put_deflated(d, name, DFL_H5_F32, 4, n4, tc->maps[k], err);
        if (!s) s = dfl_dump_attach_scales(d, name, 4, scp, labels, err);
    }
    free(seq);
    return s;
}

/* ---------------------------------------------------------------- one sample */

static dfl_status run_sample(const dfl_probe_params *pp, const dfl_clip_model *m, const dfl_tokenizer *tok, dfl_dump *d,
                             size_t index, const image_prompt *p, dfl_probe_report *rep, dfl_error *err)
{
    const dfl_clip_config *c = &m->config;
    const dfl_clip_tower_config *v = &c->tower[DFL_CLIP_VISION];
    int64_t S = v->image_size, P = v->patch_size, G = S / P, T = 1 + G * G, E = c->embed_dim;
    int64_t L = v->layers, H = c->diff ? v->heads / 2 : v->heads, M = c->diff ? 3 : 1;
    int64_t K = pp->topk, R = pp->maps.enabled ? T : p->n_rows;
    dfl_image im = {0};
    dfl_image_geometry geo;
    capture cp = {L,         H,    T,      M,    v->width, G,    K,    NULL, R,   p->rows,
                  p->n_rows, NULL, {NULL}, NULL, NULL,     NULL, NULL, NULL, NULL};
    float *px = dfl__alloc_array((size_t)(3 * S * S), sizeof(float));
    uint8_t *rgb = dfl__alloc_array((size_t)(S * S), 3), *seg = calloc((size_t)T, 1);
    int64_t *all = dfl__alloc_array((size_t)T, sizeof *all);
    float *img_embed = malloc((size_t)E * sizeof(float));
    float *txt = dfl__alloc_array((size_t)(p->n_caps ? p->n_caps * E : 1), sizeof(float));
    float *sims = dfl__alloc_array((size_t)(p->n_caps + 1), sizeof(float)),
          *probs = dfl__alloc_array((size_t)(p->n_caps + 1), sizeof(float));
    for (int k = 0; k < M; k++)
        cp.maps[k] = dfl__alloc_array((size_t)(L * H * R), (size_t)T * sizeof(float));
    cp.shares = dfl__alloc_array((size_t)(M * L * H * 3), sizeof(float));
    cp.abs = dfl__alloc_array((size_t)(M * L * H * 3), sizeof(float));
    cp.top = dfl__alloc_array((size_t)(L * K), sizeof(float));
    cp.top_index = dfl__alloc_array((size_t)(L * K * 4), sizeof(int32_t));
    cp.token_norm = dfl__alloc_array((size_t)(L * T), sizeof(float));
    cp.lambda = c->diff ? dfl__alloc_array((size_t)L, sizeof(float)) : NULL;
    dfl_status s = DFL_OK;
    int ok = px && rgb && seg && all && img_embed && txt && sims && probs && cp.shares && cp.abs && cp.top &&
             cp.top_index && cp.token_norm && (!c->diff || cp.lambda);
    for (int k = 0; k < M; k++)
        ok = ok && cp.maps[k];
    if (!ok) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for sample %zu", index);
    if (!s) s = dfl_image_read(p->image, &im, err);
    if (!s) s = dfl_image_preprocess(&im, &c->pre, px, &geo, rgb, err);
    /* segments: the class token, and each patch by where its centre falls: inside the
     * object box (mapped into the model's input: resized, then cropped) or not */
    if (!s) {
        seg[0] = 1;
        double sx = (double)geo.resized_w / (double)geo.width, sy = (double)geo.resized_h / (double)geo.height;
        for (int64_t t = 1; t < T; t++) {
            double cx = ((double)((t - 1) % G) + 0.5) * (double)P, cy = ((double)((t - 1) / G) + 0.5) * (double)P;
            int in = p->has_box && cx >= p->box[0] * sx - (double)geo.left && cx < p->box[2] * sx - (double)geo.left &&
                     cy >= p->box[1] * sy - (double)geo.top && cy < p->box[3] * sy - (double)geo.top;
            seg[t] = in ? 2 : 0;
        }
        for (int64_t t = 0; t < T; t++)
            all[t] = t;
        cp.rows = pp->maps.enabled ? all : p->rows;
        cp.seg = seg;
        dfl_clip_capture cap = {on_layer, &cp};
        double t0 = dfl_clock_seconds();
        s = dfl_clip_encode_image(m, px, &cap, NULL, img_embed, err);
        rep->forward_seconds += dfl_clock_seconds() - t0;
        rep->tokens += T;
    }
    /* the text tower's maps of each caption, kept until the sample is written */
    const dfl_clip_tower_config *tv = &c->tower[DFL_CLIP_TEXT];
    text_capture *tcs = calloc((size_t)(p->n_caps ? p->n_caps : 1), sizeof *tcs);
    if (!s && !tcs) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for sample %zu", index);
    for (int64_t i = 0; !s && i < p->n_caps; i++) {
        text_capture *tc = &tcs[i];
        tc->L = tv->layers, tc->H = c->diff ? tv->heads / 2 : tv->heads, tc->T = p->cap_n[i], tc->M = M;
        for (int k = 0; k < M && !s; k++)
            if (!(tc->maps[k] = dfl__alloc_array((size_t)(tc->L * tc->H * tc->T), (size_t)tc->T * sizeof(float))))
                s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory for sample %zu's caption maps", index);
        dfl_clip_capture tcap = {on_text_layer, tc};
        double t0 = dfl_clock_seconds();
        if (!s) s = dfl_clip_encode_text(m, p->caps + i * p->cap_len, p->cap_n[i], &tcap, NULL, txt + i * E, err);
        rep->forward_seconds += dfl_clock_seconds() - t0;
        rep->tokens += p->cap_n[i];
    }
    if (!s && p->n_caps) dfl_clip_scores(m, img_embed, txt, p->n_caps, sims, probs);

    /* the sample's datasets (dump/dump_schema.h) */
    if (!s) s = dfl_dump_sample_begin(d, index, p->id, NAN, err);
    int64_t dims3[3] = {S, S, 3}, two = 2, four = 4, seven = 7, dT = T, dE = E;
    int32_t size[2] = {(int32_t)im.width, (int32_t)im.height}, g7[7] = {(int32_t)geo.resized_w,
                                                                        (int32_t)geo.resized_h,
                                                                        (int32_t)geo.left,
                                                                        (int32_t)geo.top,
                                                                        (int32_t)geo.crop,
                                                                        (int32_t)P,
                                                                        (int32_t)G};
    if (!s) s = dfl_dump_put_deflated(d, DFL_DS_IMAGE_INPUT, DFL_H5_U8, 3, dims3, rgb, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_IMAGE_SIZE, DFL_H5_I32, 1, &two, size, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_IMAGE_GEOMETRY, DFL_H5_I32, 1, &seven, g7, err);
    if (!s)
        s = dfl_dump_attr_str(d, DFL_DS_IMAGE_GEOMETRY, DFL_ATTR_COLUMNS,
                              "resized_w,resized_h,left,top,crop,patch,grid", err);
    if (!s && p->has_box) {
        int32_t b[4];
        for (int i = 0; i < 4; i++)
            b[i] = (int32_t)lround(p->box[i]);
        s = dfl_dump_put(d, DFL_DS_IMAGE_BOX, DFL_H5_I32, 1, &four, b, err);
    }
    if (!s) s = dfl_dump_put(d, DFL_DS_VISION_SEGMENTS, DFL_H5_U8, 1, &dT, seg, err);
    const char *names[3] = {DFL_DS_VISION_MAP1, DFL_DS_VISION_MAP2, DFL_DS_VISION_DIFF};
    int64_t md[4] = {L, H, R, T};
    for (int k = 0; !s && k < M; k++)
        s = dfl_dump_put_deflated(d, names[k], DFL_H5_F32, 4, md, cp.maps[k], err);
    if (!s) {
        int32_t *r32 = dfl__alloc_array((size_t)(R > p->n_rows ? R : p->n_rows), sizeof *r32);
        if (!r32) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; !s && i < R; i++)
            r32[i] = (int32_t)cp.rows[i];
        int64_t dr = R;
        if (!s) s = dfl_dump_put(d, DFL_DS_VISION_ROWS, DFL_H5_I32, 1, &dr, r32, err);
        for (int64_t i = 0; !s && i < p->n_rows; i++)
            r32[i] = (int32_t)p->rows[i];
        dr = p->n_rows;
        if (!s) s = dfl_dump_put(d, DFL_DS_VISION_NOISE_ROWS, DFL_H5_I32, 1, &dr, r32, err);
        free(r32);
    }
    int64_t sd[4] = {M, L, H, 3}, td[2] = {L, K}, tid[3] = {L, K, 4}, nd[2] = {L, T};
    if (!s) s = dfl_dump_put(d, DFL_DS_VISION_SHARES, DFL_H5_F32, 4, sd, cp.shares, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_VISION_SHARES_ABS, DFL_H5_F32, 4, sd, cp.abs, err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_VISION_SHARES, DFL_ATTR_SEGMENTS, "cls,object,background", err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_VISION_SHARES, DFL_ATTR_MAPS, c->diff ? "map1,map2,diff" : "map1", err);
    if (!s) s = dfl_dump_put(d, DFL_DS_VISION_HIDDEN_TOP, DFL_H5_F32, 2, td, cp.top, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_VISION_HIDDEN_TOP_INDEX, DFL_H5_I32, 3, tid, cp.top_index, err);
    if (!s)
        s = dfl_dump_attr_str(d, DFL_DS_VISION_HIDDEN_TOP_INDEX, DFL_ATTR_COLUMNS, "token,channel,grid_row,grid_col",
                              err);
    if (!s) s = dfl_dump_put(d, DFL_DS_VISION_TOKEN_NORM, DFL_H5_F32, 2, nd, cp.token_norm, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_EMBED_IMAGE, DFL_H5_F32, 1, &dE, img_embed, err);
    if (!s && p->n_caps) {
        int64_t cd[2] = {p->n_caps, p->cap_len}, ed[2] = {p->n_caps, E}, n = p->n_caps;
        s = dfl_dump_put(d, DFL_DS_CAPTION_TOKENS, DFL_H5_I32, 2, cd, p->caps, err);
        if (!s && p->cap_text)
            s = dfl_dump_put_strings(d, DFL_DS_CAPTION_TEXT, (const char *const *)p->cap_text, (size_t)n, err);
        if (!s) s = dfl_dump_put(d, DFL_DS_EMBED_TEXT, DFL_H5_F32, 2, ed, txt, err);
        if (!s) s = dfl_dump_put(d, DFL_DS_SCORES_SIMILARITY, DFL_H5_F32, 1, &n, sims, err);
        if (!s) s = dfl_dump_put(d, DFL_DS_SCORES_ZERO_SHOT, DFL_H5_F32, 1, &n, probs, err);
        for (int64_t i = 0; !s && i < n; i++)
            s = put_caption_maps(d, tok, i, p->caps + i * p->cap_len, &tcs[i], err);
    }
    if (!s) s = dfl_dump_sample_end(d, err);
    if (s) dfl__context(err, "%s", p->image);
    dfl_image_free(&im);
    free(px), free(rgb), free(seg), free(all), free(img_embed), free(txt), free(sims), free(probs);
    for (int k = 0; k < M; k++)
        free(cp.maps[k]);
    free(cp.shares), free(cp.abs), free(cp.top), free(cp.top_index), free(cp.token_norm), free(cp.lambda);
    for (int64_t i = 0; tcs && i < p->n_caps; i++)
        for (int k = 0; k < 3; k++)
            free(tcs[i].maps[k]);
    free(tcs);
    return s;
}

/* ---------------------------------------------------------------- the run */

int dfl__probe_is_clip(const char *model_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    char *text = NULL;
    size_t len = 0;
    dfl_error err;
    if (dfl__read_file(path, &text, &len, &err)) return 0;
    int yes = dfl_clip_config_is_clip(text, len);
    free(text);
    return yes;
}

dfl_status dfl__probe_clip_run(const dfl_probe_params *pp, dfl_probe_report *report, dfl_error *err)
{
    dfl_clip_model *m = NULL;
    dfl_tokenizer *tok = NULL;
    dfl_dump *d = NULL;
    char *text = NULL;
    size_t len = 0, n_samples = 0;
    dfl_probe_report rep;
    memset(&rep, 0, sizeof rep);
    if (report) memset(report, 0, sizeof *report);
    if (pp->topk < 1 || pp->topk > 100000) return dfl__fail(err, DFL_ERR_USAGE, "--topk must be in [1, 100000]");
    dfl_status s = dfl_probe_check_out(pp, err);
    if (!s) s = dfl__read_file(pp->prompts_path, &text, &len, err);
    if (!s) s = dfl_clip_load(pp->model_dir, &m, err);
    if (!s) {
        char tp[4096];
        snprintf(tp, sizeof tp, "%s/tokenizer.json", pp->model_dir);
        FILE *f = pp->tokenizer_path ? NULL : fopen(tp, "rb");
        if (f) fclose(f);
        if (pp->tokenizer_path || f)
            s = dfl_tokenizer_open_path(pp->tokenizer_path ? pp->tokenizer_path : tp, &tok, err);
    }
    if (s) goto done;
    const dfl_clip_config *c = &m->config;
    const dfl_clip_tower_config *v = &c->tower[DFL_CLIP_VISION];
    dfl_dump_root root = {
        c->model_type,      m->config_text, pp->model_dir, "cls", v->layers, c->diff ? v->heads / 2 : v->heads,
        v->width / v->heads};
    if ((s = dfl_dump_create_root(pp->out_path, pp->overwrite, &root, &d, err))) goto done;
    if ((s = dfl_dump_attr_i64(d, ".", DFL_ATTR_TOPK, pp->topk, err))) goto done;
    if ((s = dfl_dump_attr_i64(d, ".", DFL_ATTR_NONFINITE_SAMPLES, 0, err))) goto done;
    if (c->diff) { /* λ per layer of both towers */
        for (int k = 0; k < 2 && !s; k++) {
            int64_t L = c->tower[k].layers;
            float *lam = dfl__alloc_array((size_t)L * 2, sizeof(float));
            if (!lam) {
                s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
                break;
            }
            for (int64_t l = 0; l < L; l++)
                lam[l] = m->tower[k].layers[l].lambda, lam[L + l] = (float)c->tower[k].lambda_init;
            s = dfl_dump_put(d, k ? DFL_DS_MODEL_TEXT_LAMBDA : DFL_DS_MODEL_LAMBDA, DFL_H5_F32, 1, &L, lam, err);
            if (!s)
                s = dfl_dump_put(d, k ? DFL_DS_MODEL_TEXT_LAMBDA_INIT : DFL_DS_MODEL_LAMBDA_INIT, DFL_H5_F32, 1, &L,
                                 lam + L, err);
            free(lam);
        }
        if (s) goto done;
    }
    /* the prompt file's folder: image paths are relative to it */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", pp->prompts_path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        dir[0] = 0;
    size_t line = 0;
    for (char *at = text; !s && at < text + len;) {
        char *end = memchr(at, '\n', (size_t)(text + len - at));
        size_t n = end ? (size_t)(end - at) : (size_t)(text + len - at);
        line++;
        size_t k = 0;
        while (k < n && (at[k] == ' ' || at[k] == '\t' || at[k] == '\r'))
            k++;
        if (k < n) {
            image_prompt p;
            s = parse_line(at, n, pp->prompts_path, line, dir, c, tok, &p, err);
            if (!s) {
                s = pp->cancel && *pp->cancel ? dfl__fail(err, DFL_ERR_CANCELLED, "cancelled")
                                              : run_sample(pp, m, tok, d, n_samples, &p, &rep, err);
                if (s && s != DFL_ERR_CANCELLED) dfl__context(err, "%s:%zu", pp->prompts_path, line);
                prompt_free(&p);
                n_samples++;
            }
        }
        at += n + 1;
    }
    if (!s && !n_samples) s = dfl__fail(err, DFL_ERR_FORMAT, "%s: no image prompts", pp->prompts_path);
    if (!s) {
        s = dfl_dump_finish(d, err);
        d = NULL;
    }
    rep.samples = n_samples;
    if (!s && report) *report = rep;
done:
    dfl_dump_abort(d);
    dfl_tokenizer_close(tok);
    dfl_clip_free(m);
    free(text);
    return s;
}
