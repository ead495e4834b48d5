// Per-tensor validation rules; each failure message names the tensor and the rule.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "fastattn/types.h"

namespace fastattn::detail {

// Rank `ndim` (described as e.g. "(batch, seqlen, heads, head_dim)"), a known dtype and device,
// non-negative sizes, data present when there are elements, unit stride on the last dim.
Status check_form(const char* name, const Tensor& t, int32_t ndim, const char* dims);

// dtype equal to `want`; `rule` says why, e.g. "q, k, v must share a dtype".
Status check_dtype(const char* name, const Tensor& t, DType want, const char* rule);

// Exact shape, described by `dims` e.g. "(batch, seqlen_q, heads_q, head_dim_v)".
Status check_shape(const char* name, const Tensor& t, std::initializer_list<int64_t> want,
                   const char* dims);

// Same device (and device index) as q.
Status check_device(const char* name, const Tensor& t, const Tensor& q);

}  // namespace fastattn::detail
