/* probe_quantize.c — the --quantize root attributes of a dump (probe_quantize.h). */
#include "analysis/probe_quantize.h"

#include "dump/dump_schema.h"

/* bits, scheme and clip of one quantizer, as quant_<kind>_bits / _scheme / _clip */
static dfl_status kind_attrs(dfl_dump *d, const char *bits, const char *scheme, const char *clip,
                             const dfl_quantizer *z, dfl_error *err)
{
    dfl_status s = dfl_dump_attr_i64(d, ".", bits, z->bits, err);
    if (!s) s = dfl_dump_attr_str(d, ".", scheme, !z->bits ? "none" : z->asym ? "asym" : "sym", err);
    double r = z->bits ? z->clip : 0.0;
    if (!s) s = dfl_dump_attr_f64(d, ".", clip, &r, 1, err);
    return s;
}

dfl_status dfl__probe_quant_attrs(dfl_dump *d, const dfl_qspec *q, dfl_error *err)
{
    if (!dfl_qspec_any(q)) return DFL_OK;
    const char *tensors = !q->w.bits                ? "none"
                          : q->w_head && q->w_embed ? "blocks,head,embed"
                          : q->w_head               ? "blocks,head"
                          : q->w_embed              ? "blocks,embed"
                                                    : "blocks";
    dfl_status s = dfl_dump_attr_str(d, ".", DFL_ATTR_QUANTIZE, q->text, err);
    if (!s)
        s = kind_attrs(d, DFL_ATTR_QUANT_WEIGHT_BITS, DFL_ATTR_QUANT_WEIGHT_SCHEME, DFL_ATTR_QUANT_WEIGHT_CLIP, &q->w,
                       err);
    if (!s) s = dfl_dump_attr_i64(d, ".", DFL_ATTR_QUANT_WEIGHT_GROUP, q->w.bits ? q->w_group : 0, err);
    if (!s) s = dfl_dump_attr_str(d, ".", DFL_ATTR_QUANT_WEIGHT_TENSORS, tensors, err);
    if (!s) s = kind_attrs(d, DFL_ATTR_QUANT_ACT_BITS, DFL_ATTR_QUANT_ACT_SCHEME, DFL_ATTR_QUANT_ACT_CLIP, &q->a, err);
    if (!s)
        s = dfl_dump_attr_str(d, ".", DFL_ATTR_QUANT_ACT_GRANULARITY,
                              !q->a.bits    ? "none"
                              : q->a_tensor ? "tensor"
                                            : "token",
                              err);
    if (!s) s = kind_attrs(d, DFL_ATTR_QUANT_K_BITS, DFL_ATTR_QUANT_K_SCHEME, DFL_ATTR_QUANT_K_CLIP, &q->k, err);
    if (!s) s = kind_attrs(d, DFL_ATTR_QUANT_V_BITS, DFL_ATTR_QUANT_V_SCHEME, DFL_ATTR_QUANT_V_CLIP, &q->v, err);
    if (!s) s = dfl_dump_attr_i64(d, ".", DFL_ATTR_QUANT_K_HADAMARD, q->k_hadamard, err);
    if (!s) s = dfl_dump_attr_str(d, ".", DFL_ATTR_QUANT_ROTATE, q->rotate ? "hadamard" : "none", err);
    return s;
}
