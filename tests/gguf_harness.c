/* gguf_harness.c — drives lib/model/gguf.c and gguf_quant.c for tests/test_gguf.py
 * (built there against build/libdifflens.a).
 *
 *   gguf_harness dump FILE OUT   metadata and tensor table as JSON lines on stdout;
 *                                every supported tensor dequantized (row loops) into OUT
 *                                as raw f32, in tensor order; exit 3 when the naive
 *                                per-value twin differs from the row loop in any bit
 *   gguf_harness check FILE...   one line per file: "ok N_TENSORS" or "error STATUS MSG"
 *   gguf_harness memory FILE...  the same through dfl_gguf_open_memory on the bytes
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/gguf_quant.h"

static void print_value(const dfl_gguf *g, const dfl_gguf_kv *kv)
{
    int64_t i;
    double d;
    if (kv->type == DFL_GGUF_STRING) {
        const char *sv;
        size_t sl;
        if (dfl_gguf_get_str(g, kv->key, &sv, &sl) != 1) sl = 0, sv = "";
        putchar('"');
        for (size_t k = 0; k < sl; k++) {
            unsigned char c = (unsigned char)sv[k];
            if (c == '"' || c == '\\')
                printf("\\%c", c);
            else if (c < 0x20)
                printf("\\u%04x", c);
            else
                putchar(c);
        }
        putchar('"');
    } else if (kv->type == DFL_GGUF_ARRAY) {
        printf("{\"n\": %llu, \"elem\": \"%s\", \"first\": ", (unsigned long long)kv->n,
               dfl__gguf_vtype_name(kv->elem_type));
        if (kv->n && dfl_gguf_arr_int(kv, 0, &i))
            printf("%lld", (long long)i);
        else if (kv->n && dfl_gguf_arr_num(kv, 0, &d))
            printf("%.17g", d);
        else
            printf("null");
        printf(", \"last\": ");
        if (kv->n && dfl_gguf_arr_int(kv, kv->n - 1, &i))
            printf("%lld", (long long)i);
        else if (kv->n && dfl_gguf_arr_num(kv, kv->n - 1, &d))
            printf("%.17g", d);
        else
            printf("null");
        printf(", \"nbytes\": %zu}", kv->nbytes);
    } else if (kv->type == DFL_GGUF_U64 && dfl_gguf_get_int(g, kv->key, &i) != 1) { /* beyond int64 */
        uint64_t u;
        memcpy(&u, kv->data, 8);
        printf("%llu", (unsigned long long)u);
    } else { /* the library's typed getters */
        int b;
        if (dfl_gguf_get_bool(g, kv->key, &b) == 1)
            printf(b ? "true" : "false");
        else if ((kv->type == DFL_GGUF_F32 || kv->type == DFL_GGUF_F64) && dfl_gguf_get_num(g, kv->key, &d) == 1)
            printf("%.17g", d);
        else if (dfl_gguf_get_int(g, kv->key, &i) == 1)
            printf("%lld", (long long)i);
        else
            printf("\"getter failed\"");
    }
}

static int dump(const char *path, const char *out)
{
    dfl_gguf *g;
    dfl_error err;
    if (dfl_gguf_open(path, &g, &err)) {
        fprintf(stderr, "error %s: %s\n", dfl_status_str(err.status), err.msg);
        return 1;
    }
    for (size_t i = 0; i < dfl_gguf_kv_count(g); i++) {
        const dfl_gguf_kv *kv = dfl_gguf_kv_at(g, i);
        printf("{\"key\": \"%s\", \"type\": \"%s\", \"value\": ", kv->key, dfl__gguf_vtype_name(kv->type));
        print_value(g, kv);
        printf("}\n");
    }
    FILE *f = fopen(out, "wb");
    if (!f) return 1;
    int rc = 0;
    for (size_t i = 0; i < dfl_gguf_tensor_count(g); i++) {
        const dfl_gguf_tensor *t = dfl_gguf_tensor_at(g, i);
        printf("{\"tensor\": \"%s\", \"type\": \"%s\", \"ne\": [", t->name, dfl_ggml_type_name(t->type));
        for (int d = 0; d < t->ndim; d++)
            printf("%s%lld", d ? ", " : "", (long long)t->ne[d]);
        printf("], \"nbytes\": %zu, \"file\": \"%s\"}\n", t->nbytes, dfl_gguf_file_of(g, t));
        if (!dfl_ggml_type_supported(t->type)) continue;
        int64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
        size_t rb = dfl_ggml_row_bytes(t->type, cols);
        float *row = malloc((size_t)cols * sizeof *row);
        for (int64_t r = 0; r < rows && row; r++) {
            const unsigned char *src = (const unsigned char *)t->data + (size_t)r * rb;
            dfl_ggml_dequant_row(t->type, src, row, cols);
            for (int64_t k = 0; k < cols; k++) {
                float v = dfl_ggml_dequant_at(t->type, src, k);
                if (memcmp(&v, &row[k], sizeof v)) {
                    fprintf(stderr, "twin mismatch: %s row %lld col %lld: row loop %.9g, per value %.9g\n", t->name,
                            (long long)r, (long long)k, row[k], v);
                    rc = 3;
                }
            }
            fwrite(row, sizeof *row, (size_t)cols, f);
        }
        free(row);
    }
    fclose(f);
    dfl_gguf_close(g);
    return rc;
}

static int check(int argc, char **argv, int memory)
{
    for (int i = 0; i < argc; i++) {
        dfl_gguf *g = NULL;
        dfl_error err;
        dfl_status s;
        char *buf = NULL;
        if (memory) {
            FILE *f = fopen(argv[i], "rb");
            if (!f) return 1;
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            buf = malloc(n ? (size_t)n : 1);
            if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) return 1;
            fclose(f);
            s = dfl_gguf_open_memory(buf, (size_t)n, argv[i], &g, &err);
        } else {
            s = dfl_gguf_open(argv[i], &g, &err);
        }
        if (s)
            printf("error %s %s\n", dfl_status_str(s), err.msg);
        else
            printf("ok %zu\n", dfl_gguf_tensor_count(g));
        dfl_gguf_close(g);
        free(buf);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "dump")) return dump(argv[2], argv[3]);
    if (argc >= 2 && !strcmp(argv[1], "check")) return check(argc - 2, argv + 2, 0);
    if (argc >= 2 && !strcmp(argv[1], "memory")) return check(argc - 2, argv + 2, 1);
    fprintf(stderr, "usage: gguf_harness dump FILE OUT | check FILE... | memory FILE...\n");
    return 2;
}
