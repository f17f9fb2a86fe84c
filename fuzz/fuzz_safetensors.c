/* fuzz_safetensors.c — libFuzzer target for the safetensors header parser: any input
 * must either be refused with a status or yield tensors whose every byte can be read.
 * Seeds: fuzz/seeds/fuzz_safetensors/ (tiny valid images). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfl_st_file *f = NULL;
    dfl_error err;
    if (dfl_st_open_memory(data, size, "fuzz", &f, &err) != DFL_OK) {
        /* A refusal must say why. */
        if (err.status == DFL_OK || err.msg[0] == '\0') abort();
        return 0;
    }
    size_t n = dfl_st_count(f);
    for (size_t i = 0; i < n; i++) {
        const dfl_tensor *t = dfl_st_at(f, i);
        if (!t || dfl_st_find(f, t->name) != t) abort(); /* lookup agrees with order */
        /* The validated view must lie inside the input: ASan checks each byte read. */
        if (t->nbytes && ((const uint8_t *)t->data < data || (const uint8_t *)t->data + t->nbytes > data + size))
            abort();
        if (t->dtype != DFL_DTYPE_F32 && t->dtype != DFL_DTYPE_F16 && t->dtype != DFL_DTYPE_BF16) continue;
        size_t numel = dfl_tensor_numel(t);
        if (numel * dfl_dtype_size(t->dtype) != t->nbytes) abort();
        float *dst = malloc(numel ? numel * sizeof *dst : 1); /* numel <= size: no overflow */
        if (!dst) continue;
        if (dfl_tensor_to_f32(t, dst, &err) != DFL_OK) abort();
        free(dst);
    }
    dfl_st_close(f);
    return 0;
}
