/* tokenize — Hugging Face tokenizer.json from the command line: text → ids, pieces and
 * offsets as JSON Lines, or text prompts → token prompts (docs/tokenize.md). */
#include <cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/jsondoc.h"
#include "base/cli.h"
#include "model/gguf_tok.h"
#include "text/prompts.h"
#include "text/tokenizer.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tokenize --tokenizer PATH [--no-special] [--json] [--whole] [FILE ...]\n"
                 "       tokenize --tokenizer PATH --prompts IN.jsonl -o OUT.jsonl [--no-special] [--force]\n"
                 "\n"
                 "Encodes text exactly as Hugging Face tokenizers does with the tokenizer.json of a\n"
                 "checkpoint. Plain mode reads FILEs (default: standard input) and prints one JSON line per\n"
                 "text: {\"ids\": [...], \"tokens\": [vocabulary pieces], \"text\": [decoded pieces],\n"
                 "\"offsets\": [[start, end], ...]} with offsets in Unicode code points (half-open).\n"
                 "Prompts mode turns text prompts ({\"input\": \"...\", spans as character ranges or\n"
                 "substrings}) into the token prompts probe reads; chat prompts ({\"messages\": [...]})\n"
                 "are rendered with the folder's chat template first. A folder's tokenizer_config.json\n"
                 "add_bos_token / add_eos_token apply as in transformers.\n"
                 "\n"
                 "  --tokenizer PATH      tokenizer.json, a folder that holds one, or a GGUF file (required)\n"
                 "  --no-special          do not add the post-processor's special tokens (BOS/EOS)\n"
                 "                        (default: add them, as Hugging Face's encode does)\n"
                 "  --json                each input line is a JSON string (or {\"input\": string}), so texts\n"
                 "                        may hold newlines (default: each line is a text)\n"
                 "  --whole               each FILE is one text, newlines included (default: off)\n"
                 "  --prompts FILE        text prompts to convert (JSON Lines, docs/tokenize.md)\n"
                 "  -o, --out FILE        where prompts mode writes (never overwritten without --force;\n"
                 "                        never one of the inputs, even with --force)\n"
                 "  --force               overwrite an existing output\n"
                 "  --help                this text\n"
                 "  --version             the version of difflens\n"
                 "\n"
                 "Exit status: 0 ok, 1 runtime error (bad tokenizer.json, invalid UTF-8), 2 usage error.\n");
}

static int fail(const dfl_error *err)
{
    fprintf(stderr, "tokenize: %s\n", err->msg);
    return dfl_status_exit_code(err->status);
}

/* ------------------------------------------------------------ output ---- */

/* One text's tokens, kept until its line is written (the line lists every id before
 * any offset), as LEB128 numbers a token: the id; the length (zigzag-coded) times 2,
 * plus 1 when the start is not the last end; then that distance (zigzag-coded). About
 * 3-4 bytes a token instead of 12 (a whole text: the tokens can outweigh the text).
 * The record grows geometrically and is reused from text to text. */
typedef struct tok_list {
    uint8_t *rec;       /* [cap] */
    size_t n, len, cap; /* n tokens in len bytes */
    uint32_t last_end;
} tok_list;

/* One token as print_encoding reads it back from the record. */
typedef struct tok_rec {
    uint32_t id;
    int64_t start, end;
} tok_rec;

/* The JSON Lines writer: one buffer, numbers and strings formatted into it in place
 * (no allocation per value; the text of cJSON_PrintUnformatted byte for byte). */
typedef struct out_buf {
    char b[1 << 16];
    size_t n;
    int failed;
    char **labels;   /* [n_labels] each id's decoded piece, made on first use (a piece
                      * depends on its id alone); NULL: not made yet */
    size_t n_labels; /* the vocabulary size */
    tok_list tl;
} out_buf;

static void out_free(out_buf *o)
{
    if (!o) return;
    dfl_tokenizer_labels_free(o->labels, o->n_labels);
    free(o->tl.rec);
    free(o);
}

static void put_leb(tok_list *l, uint64_t v)
{
    do {
        uint8_t b = v & 0x7F;
        v >>= 7;
        l->rec[l->len++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
}

static uint64_t zig(int64_t v)
{
    return v >= 0 ? (uint64_t)v << 1 : ((uint64_t)-v << 1) - 1;
}

static uint64_t get_leb(const uint8_t *p, size_t *at)
{
    uint64_t v = 0;
    for (int sh = 0;; sh += 7) {
        uint8_t b = p[(*at)++];
        v |= (uint64_t)(b & 0x7F) << sh;
        if (!(b & 0x80)) return v;
    }
}

/* dfl_tokenizer_encode_each's function: one token into the list. */
static dfl_status keep_token(void *ctx, uint32_t id, uint32_t start, uint32_t end, int special, dfl_error *err)
{
    (void)special;
    tok_list *l = ctx;
    if (l->cap - l->len < 3 * 10) { /* three numbers of at most 10 bytes */
        uint8_t *nv = dfl__grow_array(l->rec, &l->cap, 1, 4096);
        if (!nv) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        l->rec = nv;
    }
    int64_t gap = (int64_t)start - (int64_t)l->last_end, len = (int64_t)end - (int64_t)start;
    put_leb(l, id);
    put_leb(l, zig(len) << 1 | (gap != 0));
    if (gap) put_leb(l, zig(gap));
    l->n++;
    l->last_end = end;
    return DFL_OK;
}

static int64_t unzig(uint64_t v)
{
    return v & 1 ? -(int64_t)((v + 1) >> 1) : (int64_t)(v >> 1);
}

/* The token at byte *at of l->rec (moved past it); last_end: the previous token's end,
 * 0 for the first. */
static tok_rec get_tok(const tok_list *l, size_t *at, int64_t last_end)
{
    tok_rec r;
    r.id = (uint32_t)get_leb(l->rec, at);
    uint64_t v = get_leb(l->rec, at);
    r.start = last_end + (v & 1 ? unzig(get_leb(l->rec, at)) : 0);
    r.end = r.start + unzig(v >> 1);
    return r;
}

/* The decoded piece of id (cached in o; valid until out_free), or NULL with err filled. */
static const char *out_label(const dfl_tokenizer *t, out_buf *o, uint32_t id, dfl_error *err)
{
    if (!o->labels) {
        o->n_labels = dfl_tokenizer_vocab_size(t);
        o->labels = calloc(o->n_labels ? o->n_labels : 1, sizeof *o->labels);
        if (!o->labels) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory"), NULL;
    }
    if (id >= o->n_labels) return NULL;
    if (!o->labels[id]) {
        char **one = NULL;
        if (dfl_tokenizer_labels(t, &id, 1, &one, err)) return NULL;
        o->labels[id] = one[0];
        free(one);
    }
    return o->labels[id];
}

static void out_flush(out_buf *o)
{
    if (o->n && fwrite(o->b, 1, o->n, stdout) != o->n) o->failed = 1;
    o->n = 0;
}

static void out_bytes(out_buf *o, const char *s, size_t n)
{
    while (n) {
        if (o->n == sizeof o->b) out_flush(o);
        size_t k = sizeof o->b - o->n < n ? sizeof o->b - o->n : n;
        memcpy(o->b + o->n, s, k);
        o->n += k;
        s += k;
        n -= k;
    }
}

static void out_uint(out_buf *o, uint64_t v)
{
    char d[24];
    size_t k = sizeof d;
    do {
        d[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    out_bytes(o, d + k, sizeof d - k);
}

/* s as a JSON string, escaped as cJSON escapes (\" \\ \b \f \n \r \t, other controls \u00xx). */
static void out_string(out_buf *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    out_bytes(o, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        out_bytes(o, run, (size_t)(s - run));
        char e[6] = {'\\', 0};
        size_t m = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default: e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[c >> 4], e[5] = hex[c & 15]; m = 6;
        }
        out_bytes(o, e, m);
        run = s + 1;
    }
    out_bytes(o, run, (size_t)(s - run));
    out_bytes(o, "\"", 1);
}

/* Print one encoded text (o->tl) as a JSON line: ids, pieces, labels, offsets, each a
 * pass over the record. */
static dfl_status print_encoding(const dfl_tokenizer *t, out_buf *o, dfl_error *err)
{
    const tok_list *e = &o->tl;
    size_t at = 0;
    tok_rec r = {0};
    out_bytes(o, "{\"ids\":[", 8);
    for (size_t i = 0; i < e->n; i++) {
        r = get_tok(e, &at, r.end);
        if (i) out_bytes(o, ",", 1);
        out_uint(o, r.id);
    }
    out_bytes(o, "],\"tokens\":[", 12);
    at = 0, r.end = 0;
    for (size_t i = 0; i < e->n; i++) {
        r = get_tok(e, &at, r.end);
        if (i) out_bytes(o, ",", 1);
        const char *piece = dfl_tokenizer_piece(t, r.id, NULL);
        out_string(o, piece ? piece : "");
    }
    out_bytes(o, "],\"text\":[", 10);
    at = 0, r.end = 0;
    for (size_t i = 0; i < e->n; i++) {
        r = get_tok(e, &at, r.end);
        if (i) out_bytes(o, ",", 1);
        const char *label = out_label(t, o, r.id, err);
        if (!label) {
            if (err->status) return err->status;
            char **one = NULL; /* an id past the vocabulary: its piece alone */
            if (dfl_tokenizer_labels(t, &r.id, 1, &one, err)) return err->status;
            out_string(o, one[0]);
            dfl_tokenizer_labels_free(one, 1);
            continue;
        }
        out_string(o, label);
    }
    out_bytes(o, "],\"offsets\":[", 13);
    at = 0, r.end = 0;
    for (size_t i = 0; i < e->n; i++) {
        r = get_tok(e, &at, r.end);
        out_bytes(o, i ? ",[" : "[", i ? 2 : 1);
        out_uint(o, (uint64_t)r.start);
        out_bytes(o, ",", 1);
        out_uint(o, (uint64_t)r.end);
        out_bytes(o, "]", 1);
    }
    out_bytes(o, "]}\n", 3);
    return o->failed ? dfl__fail(err, DFL_ERR_IO, "cannot write the output") : DFL_OK;
}

static dfl_status encode_print(dfl_tokenizer *t, const char *text, size_t n, int special, const char *label,
                               size_t line, out_buf *o, dfl_error *err)
{
    o->tl.n = o->tl.len = 0;
    o->tl.last_end = 0;
    dfl_status st = dfl_tokenizer_encode_each(t, text, n, special, keep_token, &o->tl, err);
    if (st) return dfl__context(err, "%s:%zu", label, line);
    return print_encoding(t, o, err);
}

/* Code points in s[n] (valid UTF-8): a 0-based column. */
static size_t count_cp(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* A --json line: a JSON string, or an object with a string "input". */
static dfl_status json_text(const char *line, size_t n, const char *label, size_t ln, char **out, size_t *out_len,
                            dfl_error *err)
{
    const char *why;
    size_t at;
    /* the rules of every JSON reader: the last "input" wins; \u0000 is a character */
    cJSON *j = dfl__json_parse_opts(line, n, DFL_JSON_STRLEN, &why, &at);
    if (!j && !strcmp(why, "lone surrogate"))
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "%s:%zu:%zu: the escape %.6s is a lone surrogate (no character; UTF-8 cannot hold it)", label,
                         ln, count_cp(line, at) + 1, line + at);
    const cJSON *s = cJSON_IsString(j) ? j : cJSON_GetObjectItemCaseSensitive(j, "input");
    if (!cJSON_IsString(s)) {
        cJSON_Delete(j);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s:%zu: expected a JSON string or {\"input\": string}", label, ln);
    }
    *out_len = dfl__json_string_len(s);
    *out = malloc(*out_len + 1);
    if (*out) memcpy(*out, s->valuestring, *out_len + 1);
    cJSON_Delete(j);
    return *out ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
}

/* The most one text (a line, or a file with --whole) may hold: far beyond any prompt,
 * so that only an endless input (/dev/zero, a runaway pipe) meets it. */
#define TEXT_MAX ((size_t)256 << 20)

/* getline with a bound: the next line of f (without its '\n') into *buf, *cap;
 * returns its length with the '\n' counted, 0 at the end, or -1 (err filled) when a
 * line exceeds TEXT_MAX or memory runs out. */
static ssize_t read_line(FILE *f, char **buf, size_t *cap, const char *label, size_t line, dfl_error *err)
{
    size_t n = 0;
    int c = 0;
    while ((c = getc_unlocked(f)) != EOF) {
        if (n + 2 > *cap) {
            if (n >= TEXT_MAX) {
                dfl__fail(err, DFL_ERR_IO,
                          "%s:%zu: a line longer than 256 MiB, the bound for one text (is it the "
                          "right file?)",
                          label, line);
                return -1;
            }
            size_t nc = *cap ? 2 * *cap : 4096;
            char *nb = realloc(*buf, nc);
            if (!nb) {
                dfl__fail(err, DFL_ERR_NOMEM, "%s:%zu: out of memory", label, line);
                return -1;
            }
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
        if (c == '\n') break;
    }
    if (n) (*buf)[n] = '\0';
    return (ssize_t)n;
}

static dfl_status run_file(dfl_tokenizer *t, FILE *f, const char *label, int special, int json, int whole, out_buf *o,
                           dfl_error *err)
{
    char *buf = NULL;
    size_t cap = 0;
    dfl_status st = DFL_OK;
    if (whole) {
        size_t n = 0;
        st = dfl__read_stream(f, label, TEXT_MAX, "one text", &buf, &n, err);
        if (!st) st = encode_print(t, buf, n, special, label, 1, o, err);
        free(buf);
        return st;
    }
    ssize_t len;
    size_t line = 0;
    while ((len = read_line(f, &buf, &cap, label, line + 1, err)) > 0) {
        line++;
        size_t m = (size_t)len;
        if (m && buf[m - 1] == '\n') m--;
        if (m && buf[m - 1] == '\r') m--;
        if (json) {
            if (!m) continue;
            char *text = NULL;
            size_t tn = 0;
            st = json_text(buf, m, label, line, &text, &tn, err);
            if (!st) st = encode_print(t, text, tn, special, label, line, o, err);
            free(text);
        } else {
            st = encode_print(t, buf, m, special, label, line, o, err);
        }
        if (st) break;
    }
    if (len < 0) st = err->status;
    if (!st && ferror(f)) st = dfl__fail(err, DFL_ERR_IO, "%s: read error", label);
    free(buf);
    return st;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"tokenizer", required_argument, 0, 't'},
                                         {"no-special", no_argument, 0, 'S'},
                                         {"json", no_argument, 0, 'j'},
                                         {"whole", no_argument, 0, 'w'},
                                         {"prompts", required_argument, 0, 'p'},
                                         {"out", required_argument, 0, 'o'},
                                         {"force", no_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         DFL_CLI_COMMON_OPTIONS,
                                         {0, 0, 0, 0}};
    const char *tok_path = NULL, *prompts = NULL, *out = NULL;
    int special = 1, json = 0, whole = 0, force = 0, c;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': tok_path = optarg; break;
        case 'S': special = 0; break;
        case 'j': json = 1; break;
        case 'w': whole = 1; break;
        case 'p': prompts = optarg; break;
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case 'h': usage(stdout); return 0;
        case DFL_CLI_OPT_VERSION:
        case DFL_CLI_OPT_LIST: return dfl_cli_common(stdout, "tokenize", c, opts);
        default: usage(stderr); return 2;
        }
    }
    dfl_error err = {0};
    if (!tok_path) {
        fprintf(stderr, "tokenize: --tokenizer is required\n");
        return 2;
    }
    if (prompts && !out) {
        fprintf(stderr, "tokenize: --prompts needs -o OUT.jsonl\n");
        return 2;
    }
    if (!prompts && out) {
        fprintf(stderr, "tokenize: -o is only for --prompts\n");
        return 2;
    }
    if (prompts && optind < argc) {
        fprintf(stderr, "tokenize: FILE arguments are not used with --prompts\n");
        return 2;
    }
    if (json && whole) {
        fprintf(stderr, "tokenize: --json and --whole exclude each other\n");
        return 2;
    }

    /* an output never replaces an input, --force or not (the other tools' rule) */
    const char *inputs[] = {prompts, tok_path};
    if (out && dfl__check_not_input(out, inputs, 2, &err)) return fail(&err);

    dfl_tokenizer *t = NULL;
    if (dfl_model_tokenizer_open(tok_path, &t, &err)) return fail(&err);
    dfl_status st = DFL_OK;
    out_buf *o = NULL; /* plain mode's writer (64 KiB: not on the stack) */
    if (prompts) {
        st = dfl_prompt_file_tokenize(prompts, out, t, special, force, &err);
    } else if (!(o = calloc(1, sizeof *o))) {
        st = dfl__fail(&err, DFL_ERR_NOMEM, "out of memory");
    } else if (optind == argc) {
        st = run_file(t, stdin, "<stdin>", special, json, whole, o, &err);
    } else {
        for (int i = optind; i < argc && !st; i++) {
            FILE *f = fopen(argv[i], "rb");
            if (!f) {
                st = dfl__fail(&err, DFL_ERR_IO, "%s: cannot open", argv[i]);
                break;
            }
            st = run_file(t, f, argv[i], special, json, whole, o, &err);
            fclose(f);
        }
    }
    if (o) out_flush(o);
    if (!st && ((o && o->failed) || fflush(stdout))) st = dfl__fail(&err, DFL_ERR_IO, "cannot write the output");
    out_free(o);
    dfl_tokenizer_close(t);
    return st ? fail(&err) : 0;
}
