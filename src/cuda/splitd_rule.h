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

// Which of the kernel's two schedules runs (sm90/fwd_splitd/kernel.cuh): the pipelined one (the PV of block n - 1
// under block n's softmax), except causal calls (window_right 0) at d_qk 320, where the lockstep one measured
// faster: pipelined / lockstep speed 1.05-1.11 at d 320 / 512 / 1024 full and d 512 / 1024 causal, 0.96 at d 320
// causal (bench/results/2026-11-28-s38.md, call 2; shorter causal tiles pay the pipeline's prologue and epilogue
// more, the fewer atoms a block has). d_qk 384 / 448 causal are unmeasured and take the pipelined one.
constexpr bool splitd_lockstep_schedule(int d_qk, int window_right) { return window_right == 0 && d_qk <= 320; }

// For messages: what it supports.
inline const char* splitd_dims_text() { return "320..1024 in steps of 64 (d_qk and d_v each, either above 256)"; }

}  // namespace fastattn::cuda_backend
