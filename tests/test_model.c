/* test_model.c — config.json parsing (defaults, every refusal) and weight binding
 * (missing tensor, wrong dtype, wrong shape, tied embeddings, λ). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/family.h"
#include "model/model.h"
#include "model/safetensors.h"

static dfl_status parse(const char *json, dfl_config *c, dfl_error *e)
{
    return dfl_config_parse(json, strlen(json), "config.json", c, e);
}

#define BASE "\"vocab_size\": 11, \"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 2, "

static void test_config_defaults(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2}", &c, &e), DFL_OK);
    assert_int_equal(c.type, DFL_MODEL_LLAMA);
    assert_int_equal(c.num_kv_heads, 2);
    assert_int_equal(c.head_dim, 4);
    assert_true(c.rms_norm_eps == 1e-6 && c.rope_theta == 10000.0);
    assert_int_equal(c.rope_interleaved, 0);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_int_equal(c.rope_kind, DFL_ROPE_NONE);
    assert_int_equal(dfl_config_analysis_heads(&c), 2);

    assert_int_equal(parse("{\"model_type\": \"diff_transformer\", " BASE "\"num_attention_heads\": 2}", &c, &e),
                     DFL_OK);
    assert_int_equal(c.head_dim, 2); /* D / H / 2 */
    assert_int_equal(c.rope_interleaved, 1);
    assert_int_equal(c.kv_pairing, DFL_KV_FLASH);
    assert_true(fabs(dfl_config_lambda_init(&c, 0) - 0.2) < 1e-12);
    assert_true(fabs(dfl_config_lambda_init(&c, 3) - (0.8 - 0.6 * exp(-0.9))) < 1e-12);

    assert_int_equal(parse("{\"model_type\": \"diffllama\", " BASE "\"num_attention_heads\": 4, "
                           "\"num_key_value_heads\": 2, \"diff_lambda_init\": 0.5, \"diff_kv_pairing\": \"naive\", "
                           "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
                           "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.head_dim, 2);
    assert_int_equal(dfl_config_analysis_heads(&c), 2);
    assert_true(dfl_config_lambda_init(&c, 5) == 0.5);
    assert_int_equal(c.kv_pairing, DFL_KV_NAIVE);
    assert_int_equal(c.rope_kind, DFL_ROPE_LLAMA3);
    assert_true(c.rope_factor == 8);

    /* the newer rope_parameters form, and an explicit head_dim */
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"head_dim\": 6, "
                           "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2, \"rope_theta\": 500}}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.head_dim, 6);
    assert_int_equal(c.rope_kind, DFL_ROPE_LINEAR);
    assert_true(c.rope_theta == 500);
}

/* Llama-family checkpoints: windows as Mistral and Qwen2 define them, biases, q/k norms. */
static void test_config_families(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
    assert_int_equal(
        parse("{\"model_type\": \"mistral\", " BASE "\"num_attention_heads\": 2, \"sliding_window\": 5}", &c, &e),
        DFL_OK);
    assert_int_equal(c.type, DFL_MODEL_LLAMA);
    assert_string_equal(c.model_type, "mistral");
    assert_int_equal(dfl_config_window(&c, 0), 5);
    assert_int_equal(dfl_config_window(&c, 1), 5);
    assert_int_equal(
        parse("{\"model_type\": \"mistral\", " BASE "\"num_attention_heads\": 2, \"sliding_window\": null}", &c, &e),
        DFL_OK);
    assert_int_equal(dfl_config_window(&c, 1), 0);
    /* Qwen2: the window needs use_sliding_window and starts at max_window_layers */
    assert_int_equal(parse("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"sliding_window\": 5, "
                           "\"max_window_layers\": 1, \"use_sliding_window\": false, \"use_mrope\": false}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(dfl_config_window(&c, 1), 0);
    assert_int_equal(parse("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"sliding_window\": 5, "
                           "\"max_window_layers\": 1, \"use_sliding_window\": true}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(dfl_config_window(&c, 0), 0);
    assert_int_equal(dfl_config_window(&c, 1), 5);
    assert_int_equal(parse("{\"model_type\": \"qwen3\", " BASE
                           "\"num_attention_heads\": 2, \"use_sliding_window\": true, "
                           "\"sliding_window\": 3, \"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.qk_norm, 1);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(c.head_dim, 128); /* Qwen3Config's default */
    assert_int_equal(dfl_config_window(&c, 0), 0);
    assert_int_equal(dfl_config_window(&c, 1), 3);
    /* dynamic rope: accepted, limited to the original context */
    assert_int_equal(parse("{\"model_type\": \"llama\", " BASE
                           "\"num_attention_heads\": 2, \"max_position_embeddings\": 64, "
                           "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.rope_kind, DFL_ROPE_DYNAMIC);
    assert_int_equal(c.rope_original_max_pos, 64);
    /* harmless keys are ignored */
    assert_int_equal(
        parse("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"use_cache\": true, "
              "\"initializer_range\": 0.02, \"transformers_version\": \"4.45.0\", \"torch_dtype\": \"bfloat16\", "
              "\"is_llama_config\": true, \"pretraining_tp\": 1}",
              &c, &e),
        DFL_OK);
}

static void expect_refused(const char *json, dfl_status want, const char *needle)
{
    dfl_config c;
    dfl_error e = {DFL_OK, ""};
    dfl_status s = parse(json, &c, &e);
    if (s != want || !strstr(e.msg, needle) || !strstr(e.msg, "config.json"))
        fail_msg("config %s\n  gave status %d message '%s', wanted %d with '%s'", json, s, e.msg, want, needle);
}

static void test_config_refusals(void **state)
{
    (void)state;
    expect_refused("{", DFL_ERR_FORMAT, "not valid JSON");
    expect_refused("[1]", DFL_ERR_FORMAT, "not a JSON object");
    expect_refused("{\"model_type\": \"bert\", " BASE "\"num_attention_heads\": 2}", DFL_ERR_CONFIG, "bert");
    expect_refused("{" BASE "\"num_attention_heads\": 2}", DFL_ERR_CONFIG, "model_type");
    expect_refused("{\"model_type\": \"llama\", \"vocab_size\": 11}", DFL_ERR_CONFIG, "hidden_size");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2.5}", DFL_ERR_CONFIG,
                   "num_attention_heads");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": \"2\"}", DFL_ERR_CONFIG,
                   "num_attention_heads");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 4, \"num_key_value_heads\": 3}",
                   DFL_ERR_CONFIG, "multiple");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 3}", DFL_ERR_CONFIG, "divisible");
    expect_refused("{\"model_type\": \"diffllama\", " BASE "\"num_attention_heads\": 1, \"head_dim\": 8}",
                   DFL_ERR_CONFIG, "even");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"head_dim\": 3}", DFL_ERR_CONFIG,
                   "head_dim");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 0}", DFL_ERR_CONFIG, ">= 1");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"attention_bias\": true}",
                   DFL_ERR_CONFIG, "attention_bias");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"mlp_bias\": true}",
                   DFL_ERR_CONFIG, "mlp_bias");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"hidden_act\": \"gelu\"}",
                   DFL_ERR_CONFIG, "gelu");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, "
                   "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4}}",
                   DFL_ERR_CONFIG, "yarn");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, "
                   "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 0}}",
                   DFL_ERR_CONFIG, "factor");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"rope_theta\": -1}",
                   DFL_ERR_CONFIG, "rope_theta");
    expect_refused("{\"model_type\": \"diff_transformer\", " BASE "\"num_attention_heads\": 2, "
                   "\"diff_kv_pairing\": \"other\"}",
                   DFL_ERR_CONFIG, "diff_kv_pairing");
    expect_refused("{\"model_type\": \"diff_transformer\", " BASE "\"num_attention_heads\": 2, "
                   "\"diff_lambda_init\": \"x\"}",
                   DFL_ERR_CONFIG, "diff_lambda_init");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"sliding_window\": 4}",
                   DFL_ERR_CONFIG, "sliding_window");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"attn_logit_softcapping\": 50}",
                   DFL_ERR_CONFIG, "attn_logit_softcapping");
    expect_refused("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": true, "
                   "\"sliding_window\": 3, \"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
                   DFL_ERR_CONFIG, "layer_types");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, "
                   "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}}",
                   DFL_ERR_CONFIG, "dynamic");
}

/* Every key is read, ignored or refused by name (issue 24): refusals Hugging Face makes,
 * and values that would otherwise run as something else. */
static void test_config_key_rule(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
#define L3                                                                                                             \
    "{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"rope_scaling\": {\"rope_type\": \"llama3\", "
    /* llama3 rope_scaling: HF's _validate_llama3_parameters requires all four keys */
    expect_refused(L3 "\"factor\": 8}}", DFL_ERR_CONFIG, "needs \"low_freq_factor\"");
    expect_refused(L3 "\"factor\": 8, \"low_freq_factor\": 1}}", DFL_ERR_CONFIG, "needs \"high_freq_factor\"");
    expect_refused(L3 "\"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4}}", DFL_ERR_CONFIG,
                   "needs \"original_max_position_embeddings\"");
    expect_refused(L3 "\"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                      "\"original_max_position_embeddings\": null}}",
                   DFL_ERR_CONFIG, "needs \"original_max_position_embeddings\"");
    assert_int_equal(parse(L3 "\"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                              "\"original_max_position_embeddings\": 64}}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.rope_original_max_pos, 64);
#undef L3
    /* sliding_window 0 is no window: refused where the family would use it, not run as full attention */
    expect_refused("{\"model_type\": \"mistral\", " BASE "\"num_attention_heads\": 2, \"sliding_window\": 0}",
                   DFL_ERR_CONFIG, "\"sliding_window\" = 0");
    expect_refused("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": true, "
                   "\"sliding_window\": 0}",
                   DFL_ERR_CONFIG, "\"sliding_window\" = 0");
    /* unused when use_sliding_window is false (Qwen2Config sets it to None) */
    assert_int_equal(parse("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": "
                           "false, \"sliding_window\": 0}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(dfl_config_window(&c, 1), 0);
    /* qwen2 layer_types must agree with use_sliding_window / max_window_layers, also when sliding is off */
    expect_refused("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": false, "
                   "\"sliding_window\": 4, \"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                   DFL_ERR_CONFIG, "layer_types[1] is \"sliding_attention\" but sliding is off");
    expect_refused("{\"model_type\": \"qwen3\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": true, "
                   "\"sliding_window\": null, \"layer_types\": [\"sliding_attention\", \"sliding_attention\"]}",
                   DFL_ERR_CONFIG, "layer_types[0] is \"sliding_attention\" but sliding is off");
    expect_refused("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": true, "
                   "\"sliding_window\": 4, \"max_window_layers\": 1, "
                   "\"layer_types\": [\"sliding_attention\", \"sliding_attention\"]}",
                   DFL_ERR_CONFIG, "layer_types starts sliding at layer 0 but max_window_layers is 1");
    expect_refused("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": true, "
                   "\"sliding_window\": 4, \"max_window_layers\": 2, "
                   "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                   DFL_ERR_CONFIG, "layer_types starts sliding at layer 1 but max_window_layers is 2");
    /* agreeing ones load: all full with sliding off, and full then sliding from max_window_layers */
    assert_int_equal(parse("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": "
                           "false, \"sliding_window\": 4, \"max_window_layers\": 1, "
                           "\"layer_types\": [\"full_attention\", \"full_attention\"]}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(dfl_config_window(&c, 1), 0);
    assert_int_equal(parse("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": "
                           "true, \"sliding_window\": 4, \"max_window_layers\": 1, "
                           "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(dfl_config_window(&c, 0), 0);
    assert_int_equal(dfl_config_window(&c, 1), 4);
    assert_int_equal(parse("{\"model_type\": \"qwen2\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": "
                           "true, \"sliding_window\": 4, \"max_window_layers\": 9, "
                           "\"layer_types\": [\"full_attention\", \"full_attention\"]}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(dfl_config_window(&c, 1), 0);
    /* numbers beyond the doubles parse as infinity (as Python's json): named as out of range */
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"rms_norm_eps\": 1e309}",
                   DFL_ERR_CONFIG, "\"rms_norm_eps\" is out of range");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"rope_theta\": -1e309}",
                   DFL_ERR_CONFIG, "\"rope_theta\" is out of range");
    expect_refused("{\"model_type\": \"llama\", \"vocab_size\": 1E+400, \"hidden_size\": 8, \"intermediate_size\": 12, "
                   "\"num_hidden_layers\": 2, \"num_attention_heads\": 2}",
                   DFL_ERR_CONFIG, "\"vocab_size\" is out of range");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, "
                   "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 1e309}}",
                   DFL_ERR_CONFIG, "\"factor\" is out of range");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"bos_token_id\": 1e309}",
                   DFL_ERR_CONFIG, "\"bos_token_id\" is out of range");
    expect_refused("{\"model_type\": \"diffllama\", " BASE "\"num_attention_heads\": 2, \"diff_lambda_init\": -1e309}",
                   DFL_ERR_CONFIG, "\"diff_lambda_init\" is out of range");
    /* keys of other architectures that change the maths: refused by name, with what they are */
    expect_refused("{\"model_type\": \"mistral\", " BASE "\"num_attention_heads\": 2, \"num_local_experts\": 8}",
                   DFL_ERR_CONFIG, "\"num_local_experts\": mixture-of-experts");
    expect_refused("{\"model_type\": \"llama\", " BASE "\"num_attention_heads\": 2, \"final_logit_softcapping\": 30}",
                   DFL_ERR_CONFIG, "soft-capping");
    expect_refused("{\"model_type\": \"diffllama\", " BASE "\"num_attention_heads\": 2, \"sliding_window\": 4}",
                   DFL_ERR_CONFIG, "\"sliding_window\" is not a diffllama key");
    /* a key of another family: its default (null, false) is accepted, anything else refused */
    expect_refused("{\"model_type\": \"mistral\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": true}",
                   DFL_ERR_CONFIG, "key \"use_sliding_window\" is not supported for model_type mistral");
    assert_int_equal(parse("{\"model_type\": \"mistral\", " BASE "\"num_attention_heads\": 2, \"use_sliding_window\": "
                           "false, \"num_local_experts\": null}",
                           &c, &e),
                     DFL_OK);
    /* difflens's Diff keys mean nothing to softmax families: ignored there */
    assert_int_equal(
        parse("{\"model_type\": \"qwen3\", " BASE "\"num_attention_heads\": 2, \"diff_lambda_init\": 0.5}", &c, &e),
        DFL_OK);
    assert_int_equal(c.has_lambda_init, 0);
}

/* The family table: every model_type it names parses, and each one's head plan reads
 * every q head of width head_dim exactly once, stays inside k and v, and writes every
 * output column exactly once (what a new entry must keep true), under GQA. */
static void test_family_table(void **state)
{
    (void)state;
    char names[256];
    snprintf(names, sizeof names, "%s", dfl__family_names());
    int families = 0;
    for (char *save = NULL, *mt = strtok_r(names, ", ", &save); mt; mt = strtok_r(NULL, ", ", &save), families++) {
        char json[512];
        int plain = !strcmp(mt, "gpt2") || !strcmp(mt, "gpt_neox");
        snprintf(json, sizeof json,
                 "{\"model_type\": \"%s\", \"vocab_size\": 11, \"hidden_size\": 32, "
                 "\"intermediate_size\": 12, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": %d, \"head_dim\": %d, \"rms_norm_eps\": 0.25%s}",
                 mt,
                 /* GPT-2 and GPT-NeoX: H heads of D / H for q, k and v */
                 plain ? 4 : 2, plain ? 8 : 4,
                 /* GPT-NeoX rotates int(head_dim · rotary_pct [0.25]) values: 2 here */
                 strcmp(mt, "gpt_neox") ? "" : ", \"rotary_pct\": 0.25");
        dfl_config c;
        dfl_error e;
        if (parse(json, &c, &e)) fail_msg("%s: %s", mt, e.msg);
        assert_string_equal(c.model_type, mt);
        assert_ptr_equal(dfl__family_of(&c), dfl__family_find(mt));
        dfl__attn_shape sh = dfl__attn_shape_of(&c);
        int64_t hd = c.head_dim, maps = dfl_config_maps_per_head(&c);
        assert_int_equal(sh.heads, dfl_config_analysis_heads(&c));
        int q_reads[64] = {0}, out_writes[128] = {0};
        assert_true(sh.q_ld / hd <= 64 && sh.att_ld <= 128);
        for (int64_t h = 0; h < sh.heads; h++) {
            dfl__head_plan p = dfl__head_plan_make(&c, h);
            int64_t vw = 0;
            for (int t = 0; t < maps; t++) {
                assert_true(p.q_col[t] % hd == 0 && p.q_col[t] + hd <= sh.q_ld);
                assert_true(p.k_col[t] % hd == 0 && p.k_col[t] + hd <= sh.k_ld);
                q_reads[p.q_col[t] / hd]++;
            }
            for (int v = 0; v < p.n_vparts; v++) {
                assert_true(p.v_col[v] >= 0 && p.v_col[v] + p.v_width[v] <= sh.v_ld);
                vw += p.v_width[v];
            }
            assert_int_equal(vw, p.out_width);
            for (int64_t j = p.out_col; j < p.out_col + p.out_width; j++)
                out_writes[j]++;
        }
        for (int64_t i = 0; i < sh.q_ld / hd; i++)
            assert_int_equal(q_reads[i], 1);
        for (int64_t j = 0; j < sh.att_ld; j++)
            assert_int_equal(out_writes[j], 1);
        /* the Diff heads' sub-layer norm: unilm's fixed 1e-5, DiffLlama's rms_norm_eps */
        float want = c.type == DFL_MODEL_DIFF_TRANSFORMER || c.type == DFL_MODEL_MOTIF ? 1e-5f
                     : c.type == DFL_MODEL_DIFFLLAMA                                   ? 0.25f
                                                                                       : 0.0f;
        assert_true(dfl__subnorm_eps(&c) == want);
    }
    assert_int_equal(families, 15);
    assert_null(dfl__family_find("bert"));
}

/* GPT-2: GPT2Config's names of the common keys and its defaults (n_inner null = 4·n_embd,
 * tied head, layer_norm_epsilon 1e-5, n_positions 1024, gelu_new); its scaling switches;
 * what it refuses by name. */
static void test_config_gpt2(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
#define GPT2 "{\"model_type\": \"gpt2\", \"vocab_size\": 11, \"n_embd\": 16, \"n_layer\": 3, \"n_head\": 4, "
    assert_int_equal(parse(GPT2 "\"n_inner\": null, \"n_ctx\": 1024, \"attn_pdrop\": 0.1, \"summary_type\": "
                                "\"cls_index\", \"task_specific_params\": {}}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.hidden_size, 16);
    assert_int_equal(c.num_layers, 3);
    assert_int_equal(c.num_heads, 4);
    assert_int_equal(c.num_kv_heads, 4);
    assert_int_equal(c.head_dim, 4);
    assert_int_equal(c.intermediate_size, 64);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_int_equal(c.max_position_embeddings, 1024);
    assert_true(c.rms_norm_eps == 1e-5);
    assert_int_equal(c.act, DFL_ACT_GELU_TANH);
    assert_int_equal(c.attn_unscaled, 0);
    assert_int_equal(c.attn_scale_by_layer, 0);
    assert_int_equal(parse(GPT2 "\"n_inner\": 24, \"n_positions\": 32, \"layer_norm_epsilon\": 0.5, "
                                "\"activation_function\": \"gelu\", \"scale_attn_weights\": false, "
                                "\"scale_attn_by_inverse_layer_idx\": true, \"reorder_and_upcast_attn\": true, "
                                "\"tie_word_embeddings\": false}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.intermediate_size, 24);
    assert_int_equal(c.max_position_embeddings, 32);
    assert_true(c.rms_norm_eps == 0.5);
    assert_int_equal(c.act, DFL_ACT_GELU);
    assert_int_equal(c.attn_unscaled, 1);
    assert_int_equal(c.attn_scale_by_layer, 1);
    assert_int_equal(c.tie_word_embeddings, 0);
    expect_refused(GPT2 "\"hidden_size\": 16}", DFL_ERR_CONFIG, "both \"n_embd\" and \"hidden_size\"");
    expect_refused(GPT2 "\"activation_function\": \"relu\"}", DFL_ERR_CONFIG, "hidden_act \"relu\"");
    expect_refused(GPT2 "\"add_cross_attention\": true}", DFL_ERR_CONFIG, "cross-attention");
    expect_refused(GPT2 "\"n_positions\": 0}", DFL_ERR_CONFIG, "n_positions");
    expect_refused(GPT2 "\"attn_logit_softcapping\": 50}", DFL_ERR_CONFIG, "soft-capping");
    expect_refused(GPT2 "\"rotary_dim\": 4}", DFL_ERR_CONFIG, "key \"rotary_dim\" is not supported");
    /* false is every switch's default elsewhere: add_cross_attention false is GPT-2's own */
    assert_int_equal(parse(GPT2 "\"add_cross_attention\": false}", &c, &e), DFL_OK);
#undef GPT2
}

/* GPT-NeoX: GPTNeoXConfig's defaults (rotary_pct 0.25 of head_dim, rotary_emb_base
 * 10000, parallel residual, biases, untied, layer_norm_eps 1e-5, gelu) and its names. */
static void test_config_neox(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
#define NEOX                                                                                                           \
    "{\"model_type\": \"gpt_neox\", \"vocab_size\": 11, \"hidden_size\": 64, \"intermediate_size\": 12, "              \
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    assert_int_equal(parse(NEOX "\"classifier_dropout\": 0.1, \"hidden_dropout\": 0.0}", &c, &e), DFL_OK);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.rotary_dim, 4);
    assert_true(c.rope_theta == 10000.0);
    assert_int_equal(c.parallel_residual, 1);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_true(c.rms_norm_eps == 1e-5);
    assert_int_equal(c.act, DFL_ACT_GELU);
    assert_int_equal(parse(NEOX "\"rotary_pct\": 1.0, \"rotary_emb_base\": 500, \"use_parallel_residual\": false, "
                                "\"attention_bias\": false, \"layer_norm_eps\": 0.5, \"hidden_act\": \"gelu_fast\"}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.rotary_dim, 0); /* all of each head */
    assert_true(c.rope_theta == 500.0);
    assert_int_equal(c.parallel_residual, 0);
    assert_int_equal(c.qkv_bias, 0);
    assert_true(c.rms_norm_eps == 0.5);
    assert_int_equal(c.act, DFL_ACT_GELU_TANH);
    assert_int_equal(parse(NEOX "\"partial_rotary_factor\": 0.5}", &c, &e), DFL_OK);
    assert_int_equal(c.rotary_dim, 8);
    expect_refused(NEOX "\"rotary_pct\": 0.1}", DFL_ERR_CONFIG, "gives 1 rotary dimensions");
    expect_refused(NEOX "\"rotary_pct\": 0}", DFL_ERR_CONFIG, "\"rotary_pct\" must be in (0, 1]");
    expect_refused(NEOX "\"rotary_pct\": 0.5, \"partial_rotary_factor\": 0.5}", DFL_ERR_CONFIG, "both");
    expect_refused(NEOX "\"rotary_emb_base\": 5, \"rope_theta\": 5}", DFL_ERR_CONFIG, "both");
    expect_refused(NEOX "\"sliding_window\": 4}", DFL_ERR_CONFIG, "\"sliding_window\" is not a gpt_neox key");
    expect_refused(NEOX "\"hidden_act\": \"relu\"}", DFL_ERR_CONFIG, "hidden_act \"relu\"");
    expect_refused(NEOX "\"num_key_value_heads\": 2}", DFL_ERR_CONFIG, "must say the same");
    expect_refused(NEOX "\"head_dim\": 8}", DFL_ERR_CONFIG, "must say the same");
#undef NEOX
}

/* Gemma 2: Gemma2Config's defaults (head_dim 256, caps 50 and 30, window 4096 on even
 * layers, tied, query_pre_attn_scalar 256, √D), nulls, and what must agree. */
static void test_config_gemma2(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
#define GEMMA                                                                                                          \
    "{\"model_type\": \"gemma2\", \"vocab_size\": 11, \"hidden_size\": 16, \"intermediate_size\": 12, "                \
    "\"num_hidden_layers\": 4, \"num_attention_heads\": 2, "
    assert_int_equal(
        parse(GEMMA "\"cache_implementation\": \"hybrid\", \"hidden_act\": \"gelu_pytorch_tanh\"}", &c, &e), DFL_OK);
    assert_int_equal(c.head_dim, 256);
    assert_true(c.attn_softcap == 50.0 && c.final_softcap == 30.0);
    assert_true(c.attn_scale == 1.0 / 16.0);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_true(c.embed_scale == 4.0f);
    assert_int_equal(c.act, DFL_ACT_GELU_TANH);
    for (int l = 0; l < 4; l++)
        assert_int_equal(dfl_config_window(&c, l), l % 2 ? 0 : 4096);
    assert_int_equal(parse(GEMMA "\"attn_logit_softcapping\": null, \"final_logit_softcapping\": null, "
                                 "\"sliding_window\": 8, \"query_pre_attn_scalar\": 64, \"head_dim\": 8, "
                                 "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\", "
                                 "\"full_attention\"]}",
                           &c, &e),
                     DFL_OK);
    assert_true(c.attn_softcap == 0 && c.final_softcap == 0);
    assert_true(c.attn_scale == 1.0 / 8.0);
    assert_int_equal(dfl_config_window(&c, 2), 8);
    assert_int_equal(dfl_config_window(&c, 3), 0);
    expect_refused(GEMMA "\"layer_types\": [\"full_attention\", \"full_attention\", \"sliding_attention\", "
                         "\"full_attention\"]}",
                   DFL_ERR_CONFIG, "layer_types[0] is not \"sliding_attention\"");
    expect_refused(GEMMA "\"hidden_activation\": \"silu\"}", DFL_ERR_CONFIG, "hidden_activation \"silu\"");
    expect_refused(GEMMA "\"attn_logit_softcapping\": -1}", DFL_ERR_CONFIG, "soft-capping");
    expect_refused(GEMMA "\"sliding_window\": 0}", DFL_ERR_CONFIG, "\"sliding_window\" = 0");
    /* Gemma 3's text model: its defaults, and the keys Gemma 2 does not have */
    assert_int_equal(parse("{\"model_type\": \"gemma3_text\", \"vocab_size\": 11, \"hidden_size\": 16, "
                           "\"intermediate_size\": 12, \"num_hidden_layers\": 12, \"num_attention_heads\": 2}",
                           &c, &e),
                     DFL_OK);
    assert_true(c.rope_theta == 1e6 && c.rope_local_theta == 10000.0);
    assert_true(c.attn_softcap == 0 && c.final_softcap == 0);
    assert_int_equal(c.qk_norm, 1);
    for (int l = 0; l < 12; l++)
        assert_int_equal(dfl_config_window(&c, l), l == 5 || l == 11 ? 0 : 4096);
    expect_refused(GEMMA "\"rope_local_base_freq\": 10000}", DFL_ERR_CONFIG, "key \"rope_local_base_freq\"");
    expect_refused("{\"model_type\": \"gemma3_text\", \"vocab_size\": 11, \"hidden_size\": 16, \"intermediate_size\": "
                   "12, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"use_bidirectional_attention\": true}",
                   DFL_ERR_CONFIG, "use_bidirectional_attention");
#undef GEMMA
}

/* Phi-3: longrope as Hugging Face computes it (factor = max_position_embeddings /
 * original_max_position_embeddings, attention factor √(1 + ln factor / ln original)),
 * factor lists of head_dim/2, partial rotary refused. */
static void test_config_phi3(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
#define PHI3                                                                                                           \
    "{\"model_type\": \"phi3\", \"vocab_size\": 11, \"hidden_size\": 16, \"intermediate_size\": 12, "                  \
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, "                \
    "\"max_position_embeddings\": 131072, "
    assert_int_equal(parse(PHI3 "\"original_max_position_embeddings\": 4096, \"sliding_window\": 2047, "
                                "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1.5, 2, 3], "
                                "\"long_factor\": [2, 4, 8, 16]}}",
                           &c, &e),
                     DFL_OK);
    assert_int_equal(c.rope_kind, DFL_ROPE_LONGROPE);
    assert_int_equal(c.rope_original_max_pos, 4096);
    assert_true(c.rope_short[1] == 1.5 && c.rope_long[3] == 16.0);
    assert_true(fabs(c.rope_attn_factor - sqrt(1.0 + log(32.0) / log(4096.0))) < 1e-15);
    assert_int_equal(dfl_config_window(&c, 1), 2047);
    assert_int_equal(
        parse(PHI3 "\"rope_scaling\": {\"rope_type\": \"longrope\", \"factor\": 0.5, "
                   "\"attention_factor\": 1.25, \"short_factor\": [1, 1, 1, 1], \"long_factor\": [1, 1, 1, 1]}}",
              &c, &e),
        DFL_OK);
    assert_int_equal(c.rope_original_max_pos, 131072);
    assert_true(c.rope_attn_factor == 1.25);
    expect_refused(PHI3 "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1, 1], "
                        "\"long_factor\": [1, 1, 1, 1]}}",
                   DFL_ERR_CONFIG, "\"short_factor\" with head_dim/2 = 4 numbers");
    expect_refused(PHI3 "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1, 1, 1], "
                        "\"long_factor\": [1, 1, 1, 1]}}",
                   DFL_ERR_CONFIG, "needs \"factor\"");
    expect_refused(PHI3 "\"partial_rotary_factor\": 0.75}", DFL_ERR_CONFIG, "partial RoPE");
    assert_int_equal(parse(PHI3 "\"partial_rotary_factor\": 1.0}", &c, &e), DFL_OK);
#undef PHI3
}

/* OLMo 2: q/k norms over the whole projections, bound with their shapes. */
static void test_config_olmo2(void **state)
{
    (void)state;
    dfl_config c;
    dfl_error e;
    assert_int_equal(
        parse("{\"model_type\": \"olmo2\", \"vocab_size\": 11, \"hidden_size\": 16, \"intermediate_size\": "
              "12, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
              "\"rope_theta\": 500000, \"attention_bias\": false, \"pad_token_id\": 1}",
              &c, &e),
        DFL_OK);
    assert_int_equal(c.qk_norm, 2);
    assert_int_equal(c.tie_word_embeddings, 0);
    expect_refused("{\"model_type\": \"olmo2\", \"vocab_size\": 11, \"hidden_size\": 16, \"intermediate_size\": 12, "
                   "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"attention_bias\": true}",
                   DFL_ERR_CONFIG, "attention_bias");
}

/* Motif GDA's head plan, as published (40 q heads = 8 groups of 4 + 1 over 16 kv heads)
 * and with two noise heads on one kv pair: every signal q head is read once as map 1,
 * each group's noise q head gr times as map 2 (reported once: repeat), never a noise q
 * head as map 1; map 1 and map 2 read the two k heads of one pair; every output column
 * is written once; V1 and DIFF V2 plans read each q head once. */
static void test_grouped_and_v2_plans(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int64_t heads, att_ld, q_ld;
    } cases[] = {
        {"{\"model_type\": \"Motif\", \"vocab_size\": 11, \"hidden_size\": 64, \"intermediate_size\": 12, "
         "\"num_hidden_layers\": 1, \"num_attention_heads\": 40, \"num_key_value_heads\": 16, \"head_dim\": 2, "
         "\"num_noise_heads\": 8, \"k_ratio\": 1, \"hidden_act\": \"poly_norm\"}",
         32, 128, 80},
        {"{\"model_type\": \"motif\", \"vocab_size\": 11, \"hidden_size\": 64, \"intermediate_size\": 12, "
         "\"num_hidden_layers\": 1, \"num_attention_heads\": 10, \"num_key_value_heads\": 2, \"head_dim\": 2, "
         "\"num_noise_heads\": 2}",
         8, 32, 20},
        {"{\"model_type\": \"Motif\", \"vocab_size\": 11, \"hidden_size\": 64, \"intermediate_size\": 12, "
         "\"num_hidden_layers\": 1, \"num_attention_heads\": 8, \"num_key_value_heads\": 4}",
         4, 64, 64},
        {"{\"model_type\": \"diff_transformer_v2\", \"vocab_size\": 11, \"hidden_size\": 64, "
         "\"intermediate_size\": 12, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, "
         "\"num_key_value_heads\": 2}",
         4, 64, 128},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        dfl_config c;
        dfl_error e;
        if (parse(cases[ci].json, &c, &e)) fail_msg("case %zu: %s", ci, e.msg);
        dfl__attn_shape sh = dfl__attn_shape_of(&c);
        int64_t hd = c.head_dim, Gn = c.num_noise_heads, gr = Gn ? (c.num_heads - Gn) / Gn : 1;
        assert_int_equal(sh.heads, cases[ci].heads);
        assert_int_equal(sh.att_ld, cases[ci].att_ld);
        assert_int_equal(sh.q_ld, cases[ci].q_ld);
        int reads[2][64] = {{0}}, writes[256] = {0}, reported = 0;
        for (int64_t h = 0; h < sh.heads; h++) {
            dfl__head_plan p = dfl__head_plan_make(&c, h);
            for (int t = 0; t < 2; t++) {
                assert_true(p.q_col[t] % hd == 0 && p.q_col[t] + hd <= sh.q_ld);
                assert_true(p.k_col[t] + hd <= sh.k_ld && p.v_col[0] + p.v_width[0] <= sh.v_ld);
                reads[t][p.q_col[t] / hd]++;
            }
            reported += !p.repeat[1];
            if (c.type == DFL_MODEL_MOTIF) assert_int_equal(p.k_col[1], p.k_col[0] + hd); /* one (signal, noise) pair */
            if (c.type == DFL_MODEL_DIFF_V2) assert_int_equal(p.k_col[1], p.k_col[0]);    /* one GQA group */
            assert_int_equal(dfl_config_noise_group(&c, h), Gn ? h / gr : -1);
            for (int64_t j = p.out_col; j < p.out_col + p.out_width; j++)
                writes[j]++;
        }
        for (int64_t i = 0; i < sh.q_ld / hd; i++) {
            int noise = Gn && i % (gr + 1) == gr;
            assert_int_equal(reads[0][i], noise ? 0 : c.type == DFL_MODEL_MOTIF ? (i % 2 == 0 || Gn) : i % 2 == 0);
            assert_int_equal(reads[1][i], noise ? gr : Gn || reads[0][i] ? 0 : 1);
        }
        assert_int_equal(reported, Gn ? Gn : sh.heads);
        for (int64_t j = 0; j < sh.att_ld; j++)
            assert_int_equal(writes[j], 1);
    }
}

/* ------------------------------------------------------------ tiny model */

/* A 1-layer llama (D 8, H 2, F 12, V 11) or diff_transformer written to dir; `drop`
 * omits one tensor, `bad_shape` / `bad_dtype` corrupt one. */
typedef struct spec {
    const char *type;
    const char *drop, *bad_shape, *bad_dtype;
    int tied;
} spec;

static void write_model(const char *dir, spec sp)
{
    char path[512];
    int diff = !strcmp(sp.type, "diff_transformer");
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"model_type\": \"%s\", \"vocab_size\": 11, \"hidden_size\": 8, \"intermediate_size\": 12, "
            "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"tie_word_embeddings\": %s, "
            "\"diff_lambda_init\": 0.25}",
            sp.type, sp.tied ? "true" : "false");
    fclose(f);
    struct {
        const char *name;
        int64_t d0, d1;
    } t[] = {
        {"model.embed_tokens.weight", 11, 8},
        {"model.norm.weight", 8, 0},
        {"lm_head.weight", 11, 8},
        {"model.layers.0.input_layernorm.weight", 8, 0},
        {"model.layers.0.post_attention_layernorm.weight", 8, 0},
        {"model.layers.0.self_attn.q_proj.weight", 8, 8},
        {"model.layers.0.self_attn.k_proj.weight", 8, 8},
        {"model.layers.0.self_attn.v_proj.weight", 8, 8},
        {diff ? "model.layers.0.self_attn.out_proj.weight" : "model.layers.0.self_attn.o_proj.weight", 8, 8},
        {"model.layers.0.mlp.gate_proj.weight", 12, 8},
        {"model.layers.0.mlp.up_proj.weight", 12, 8},
        {"model.layers.0.mlp.down_proj.weight", 8, 12},
        {"model.layers.0.self_attn.lambda_q1", 2, 0},
        {"model.layers.0.self_attn.lambda_k1", 2, 0},
        {"model.layers.0.self_attn.lambda_q2", 2, 0},
        {"model.layers.0.self_attn.lambda_k2", 2, 0},
    };
    size_t nt = sizeof t / sizeof t[0] - (diff ? 0 : 4);
    dfl_tensor ts[16];
    static float data[16][128];
    size_t n = 0;
    for (size_t i = 0; i < nt; i++) {
        if (sp.drop && !strcmp(sp.drop, t[i].name)) continue;
        if (sp.tied && !strcmp(t[i].name, "lm_head.weight")) continue;
        dfl_tensor *x = &ts[n];
        memset(x, 0, sizeof *x);
        x->name = t[i].name;
        x->dtype = sp.bad_dtype && !strcmp(sp.bad_dtype, t[i].name) ? DFL_DTYPE_I32 : DFL_DTYPE_F32;
        x->ndim = t[i].d1 ? 2 : 1;
        x->shape[0] = t[i].d0 + (sp.bad_shape && !strcmp(sp.bad_shape, t[i].name) ? 1 : 0);
        x->shape[1] = t[i].d1;
        size_t numel = (size_t)x->shape[0] * (size_t)(t[i].d1 ? t[i].d1 : 1);
        for (size_t j = 0; j < numel; j++)
            data[n][j] = 0.1f * (float)((i * 7 + j * 3) % 11) - 0.5f;
        /* λ vectors: q1·k1 = 0.5, q2·k2 = 0.2 give λ = e^0.5 − e^0.2 + 0.25 */
        if (strstr(t[i].name, "lambda_q1")) data[n][0] = 1.0f, data[n][1] = 0.0f;
        if (strstr(t[i].name, "lambda_k1")) data[n][0] = 0.5f, data[n][1] = 9.0f;
        if (strstr(t[i].name, "lambda_q2")) data[n][0] = 0.0f, data[n][1] = 2.0f;
        if (strstr(t[i].name, "lambda_k2")) data[n][0] = 5.0f, data[n][1] = 0.1f;
        x->data = data[n];
        x->nbytes = numel * 4;
        n++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    dfl_error e;
    assert_int_equal(dfl_st_write(path, ts, n, 1, &e), DFL_OK);
}

static char tmpdir[] = "/tmp/dfl_model_XXXXXX";

static void test_load_ok_and_lambda(void **state)
{
    (void)state;
    dfl_model *m = NULL;
    dfl_error e;
    write_model(tmpdir, (spec){"diff_transformer", NULL, NULL, NULL, 0});
    assert_int_equal(dfl_model_load(tmpdir, &m, &e), DFL_OK);
    assert_true(fabs(m->layers[0].lambda - (exp(0.5) - exp(0.2) + 0.25)) < 1e-6);
    assert_true(m->layers[0].lambda_init == 0.25f);
    assert_null(m->layers[0].subln); /* absent = ones */
    assert_true(m->lm_head.data != m->embed.data);
    dfl_model_free(m);

    write_model(tmpdir, (spec){"llama", NULL, NULL, NULL, 1});
    assert_int_equal(dfl_model_load(tmpdir, &m, &e), DFL_OK);
    assert_ptr_equal(m->lm_head.data, m->embed.data);
    dfl_model_free(m);
    dfl_model_free(NULL);
}

static void expect_load_error(spec sp, dfl_status want, const char *needle)
{
    dfl_model *m = (dfl_model *)1;
    dfl_error e = {DFL_OK, ""};
    write_model(tmpdir, sp);
    dfl_status s = dfl_model_load(tmpdir, &m, &e);
    if (s != want || !strstr(e.msg, needle)) fail_msg("got %d '%s', wanted %d with '%s'", s, e.msg, want, needle);
    assert_null(m);
}

static void test_load_errors(void **state)
{
    (void)state;
    expect_load_error((spec){"llama", "model.layers.0.mlp.up_proj.weight", NULL, NULL, 0}, DFL_ERR_TENSOR,
                      "'model.layers.0.mlp.up_proj.weight' is missing");
    expect_load_error((spec){"llama", "lm_head.weight", NULL, NULL, 0}, DFL_ERR_TENSOR, "'lm_head.weight' is missing");
    expect_load_error((spec){"llama", NULL, "model.layers.0.self_attn.k_proj.weight", NULL, 0}, DFL_ERR_TENSOR,
                      "has shape [9, 8], config needs [8, 8]");
    expect_load_error((spec){"llama", NULL, NULL, "model.norm.weight", 0}, DFL_ERR_TENSOR, "dtype I32");
    expect_load_error((spec){"diff_transformer", "model.layers.0.self_attn.lambda_k2", NULL, NULL, 0}, DFL_ERR_TENSOR,
                      "lambda_k2");
    expect_load_error((spec){"diff_transformer", NULL, "model.layers.0.self_attn.lambda_q1", NULL, 0}, DFL_ERR_TENSOR,
                      "config needs [2]");
    /* no config.json at all, no weights at all */
    dfl_model *m = NULL;
    dfl_error e;
    assert_int_equal(dfl_model_load("/nonexistent/dir", &m, &e), DFL_ERR_IO);
    assert_non_null(strstr(e.msg, "config.json"));
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    remove(path);
    assert_int_equal(dfl_model_load(tmpdir, &m, &e), DFL_ERR_IO);
    assert_non_null(strstr(e.msg, "model.safetensors"));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),      cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_config_families),      cmocka_unit_test(test_config_key_rule),
        cmocka_unit_test(test_family_table),         cmocka_unit_test(test_config_gpt2),
        cmocka_unit_test(test_config_neox),          cmocka_unit_test(test_config_gemma2),
        cmocka_unit_test(test_config_olmo2),         cmocka_unit_test(test_config_phi3),
        cmocka_unit_test(test_grouped_and_v2_plans), cmocka_unit_test(test_load_ok_and_lambda),
        cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
