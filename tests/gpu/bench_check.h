// The GPU benches' error exits (kvcache_bench, bwd_stamps_bench): a bench has no test framework to
// report to, so a failed CUDA call prints itself and ends the process.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(x)                                                   \
  do {                                                                  \
    cudaError_t e_ = (x);                                               \
    if (e_ != cudaSuccess) {                                            \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)
