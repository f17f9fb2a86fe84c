/* fuzz_config.c — libFuzzer target for config.json parsing: any bytes must give a
 * config or a clean error, and an accepted config must satisfy its own invariants. */
#include <stdint.h>
#include <stdlib.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfl_config c;
    dfl_error err;
    if (dfl_config_parse((const char *)data, size, "fuzz", &c, &err) != DFL_OK) return 0;
    /* what the forward pass relies on */
    if (c.num_heads < 1 || c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads || c.head_dim < 2 || c.head_dim % 2 ||
        c.hidden_size < 1 || c.vocab_size < 1 || (c.type == DFL_MODEL_DIFFLLAMA && c.num_heads % 2))
        abort();
    (void)dfl_config_lambda_init(&c, c.num_layers - 1);
    return 0;
}
