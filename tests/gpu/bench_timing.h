// The sm80 benches' timing of one library call (fastattn_sm80_bench: forward; fastattn_sm80_bwd_bench:
// backward): the median of `iters` CUDA-event timings after `warmup` untimed calls (a call that fails
// prints its message and ends the process: a bench has no test framework to report to), and the JSON
// line of a path's rounds.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_check.h"
#include "fastattn/types.h"

namespace fastattn::gputest {

template <class Call>
float median_call_ms(const char* what, Call&& call, int warmup, int iters) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < warmup + iters; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    const Status st = call();
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", what, st.message.c_str());
      std::exit(1);
    }
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warmup) ms.push_back(t);
  }
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// One JSON line of a bench: the median over rounds of a path's measurements `t` (sorted here), its
// min / max, and TFLOPS from `flops`.
inline void print_rounds_line(const char* path, int b, int s, int h, int d, bool causal, std::vector<float>& t,
                              int rounds, double flops) {
  std::sort(t.begin(), t.end());
  const float ms = t[t.size() / 2];
  std::printf("{\"path\": \"%s\", \"b\": %d, \"s\": %d, \"h\": %d, \"d\": %d, \"causal\": %s, \"ms\": %.4f, "
              "\"ms_min\": %.4f, \"ms_max\": %.4f, \"rounds\": %d, \"tflops\": %.1f}\n",
              path, b, s, h, d, causal ? "true" : "false", ms, t.front(), t.back(), rounds, flops / ms * 1e-9);
}

}  // namespace fastattn::gputest
