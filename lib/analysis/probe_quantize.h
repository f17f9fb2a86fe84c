/* probe_quantize.h — probe --quantize in the dump: the root attributes that record what was
 * fake-quantized and how (docs/format.md "Root attributes", model/quantize.h). */
#ifndef DFL_PROBE_QUANTIZE_H
#define DFL_PROBE_QUANTIZE_H

#include "base/status.h"
#include "dump/dump.h"
#include "model/quantize.h"

/* Write `quantize` (the canonical SPEC) and the per-kind quant_* attributes on the root of
 * d; nothing when q is NULL or all off (dumps without --quantize are unchanged).
 * DFL_ERR_HDF5. */
dfl_status dfl__probe_quant_attrs(dfl_dump *d, const dfl_qspec *q, dfl_error *err);

#endif
