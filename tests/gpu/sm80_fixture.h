// The sm80 (Ampere / Ada) path's GPU test fixture: any GPU of major >= 8 runs it, forced onto the sm80
// kernels (an H100 / H200 runs their compute_80 PTX: cuda_backend::set_forced_arch_major) for the test and
// released after; a build without "80" in FASTATTN_CUDA_ARCHS (CI's and scripts/gpu-check's default is
// 90a;80) has no sm80 kernels of the family, and the test is skipped.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cuda/built_kernels.h"
#include "cuda/device_info.h"
#include "gpu_buffers.h"

namespace fastattn::gputest {

inline bool sm80_built(cuda_backend::KernelFamily family, DType dt, int d) {
  return cuda_backend::kernel_built(family, 8, dt, d, d);
}

template <cuda_backend::KernelFamily kFamily>
class Sm80PathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_present()) GTEST_FAIL() << "no GPU: these tests are registered only on GPU machines";
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    if (major < 8) GTEST_FAIL() << "the sm80 path needs a GPU of compute capability 8.0 or later";
    bool any = false;
    for (DType dt : {DType::BF16, DType::F16})
      for (int d : {64, 128}) any = any || sm80_built(kFamily, dt, d);
    if (!any) GTEST_SKIP() << "no sm80 kernels of this family in this build (FASTATTN_CUDA_ARCHS without 80)";
    cuda_backend::set_forced_arch_major(8);
  }
  void TearDown() override { cuda_backend::set_forced_arch_major(0); }
};

}  // namespace fastattn::gputest
