// Validation of the additive score bias (AttnArgs::bias), of its gradient (AttnArgs::dbias) and of the
// ALiBi slopes (AttnArgs::alibi_slopes).
#pragma once

#include "api/index_arrays.h"
#include "fastattn/types.h"

namespace fastattn::detail {

// args.bias of a call whose tensors and index arrays already passed their checks: 4 dims
// (bias_batch 1 or batch, bias_heads dividing heads_q, rows and cols covering the longest
// sequences), F32 / BF16 / F16, unit last stride, on q's device. `idx`: host copies of the index
// arrays (varlen lengths come from them when max_seqlen is 0). Also refuses args.dbias given
// without a bias (a forward ignores dbias otherwise).
Status check_bias(const AttnArgs& args, bool varlen, const HostIndexArrays& idx);

// args.alibi_slopes: F32, 1 dim (heads_q) or 2 dims (batch, heads_q), unit last stride, on q's device.
// Undefined passes.
Status check_alibi(const AttnArgs& args, bool varlen);

// args.dbias of a backward: bias's shape, F32, unit last stride, no two entries at one address
// (stride 0 on a dim longer than 1), on q's device. Undefined dbias passes.
Status check_dbias(const AttnArgs& args);

}  // namespace fastattn::detail
