// Which head dims the Hopper split-D forward (sm90/fwd_splitd/) takes: the one rule that the CUDA
// checks (backend.cu), the dispatch and the KV-cache / backward refusals ask. Host only.
#pragma once

namespace fastattn::cuda_backend {

// Head dims are run-time counts of 64-column atoms in that kernel: d_qk and d_v multiples of 64 up
// to 1024. It takes the calls that no menu row covers (d_qk or d_v above 256: 320 ... 1024, and
// d_qk != d_v such as 576 / 512); the ordinary kernels keep every (d, d_v) they have.
constexpr int kSplitDMaxHeadDim = 1024;
constexpr bool splitd_dims(int d, int dv) {
  return d % 64 == 0 && dv % 64 == 0 && d >= 64 && dv >= 64 && d <= kSplitDMaxHeadDim &&
         dv <= kSplitDMaxHeadDim && (d > 256 || dv > 256);
}

// For messages: what it supports.
inline const char* splitd_dims_text() { return "320..1024 in steps of 64 (d_qk and d_v each, either above 256)"; }

}  // namespace fastattn::cuda_backend
