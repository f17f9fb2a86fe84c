/* fuzz_gguf.c — libFuzzer target for the GGUF reader: any input must either be refused
 * with a status and a message or yield keys and tensors whose every byte can be read
 * and whose rows dequantize. Seeds: fuzz/seeds/fuzz_gguf/ (tiny valid images written by
 * tests/ref/gguf.py). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/gguf_quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const void *p, size_t n, const uint8_t *data, size_t size)
{
    if (n && ((const uint8_t *)p < data || (const uint8_t *)p + n > data + size)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfl_gguf *g = NULL;
    dfl_error err;
    if (dfl_gguf_open_memory(data, size, "fuzz", &g, &err) != DFL_OK) {
        if (err.status == DFL_OK || err.msg[0] == '\0') abort(); /* a refusal must say why */
        return 0;
    }
    for (size_t i = 0; i < dfl_gguf_kv_count(g); i++) {
        const dfl_gguf_kv *kv = dfl_gguf_kv_at(g, i);
        if (dfl_gguf_find_kv(g, kv->key) != kv) abort();
        inside(kv->data, kv->nbytes, data, size);
        int64_t v;
        double d;
        if (kv->type == DFL_GGUF_ARRAY && kv->n) {
            (void)dfl_gguf_arr_int(kv, kv->n - 1, &v);
            (void)dfl_gguf_arr_num(kv, kv->n - 1, &d);
        }
        (void)dfl_gguf_get_int(g, kv->key, &v);
        (void)dfl_gguf_get_num(g, kv->key, &d);
    }
    for (size_t i = 0; i < dfl_gguf_tensor_count(g); i++) {
        const dfl_gguf_tensor *t = dfl_gguf_tensor_at(g, i);
        if (!t || dfl_gguf_find_tensor(g, t->name) != t) abort();
        inside(t->data, t->nbytes, data, size);
        if (!dfl_ggml_type_supported(t->type) || t->nbytes == 0) continue;
        size_t rb = dfl_ggml_row_bytes(t->type, t->ne[0]);
        if (rb == 0 || rb > t->nbytes || t->ne[0] > (1 << 20)) continue;
        float *row = malloc((size_t)t->ne[0] * sizeof *row);
        if (!row) continue;
        /* the last row: ASan checks that it lies inside the validated range */
        const uint8_t *last = (const uint8_t *)t->data + t->nbytes - rb;
        dfl_ggml_dequant_row(t->type, last, row, t->ne[0]);
        float v = dfl_ggml_dequant_at(t->type, last, t->ne[0] - 1);
        /* the twins agree (NaN payloads aside: vector code may pick either operand's) */
        if (!(isnan(v) && isnan(row[t->ne[0] - 1])) && memcmp(&v, &row[t->ne[0] - 1], sizeof v)) abort();
        free(row);
    }
    dfl_gguf_close(g);
    return 0;
}
