// How many bytes of fastattn's stream-ordered workspace pool one call took at its peak (the pool
// trimmed and its high-water mark reset first): the split tests' proof that a split call ran the
// split path (its partials come from the pool) and that an unsplit one allocates nothing.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "cuda/stream_alloc.h"
#include "fastattn/fastattn.h"

namespace fastattn::gputest {

inline uint64_t workspace_high_water(const std::function<Status()>& call) {
  int dev = 0;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
  cudaMemPool_t pool = cuda_backend::workspace_pool();
  if (pool == nullptr) {
    EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, dev), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
  uint64_t zero = 0;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
  const Status st = call();
  EXPECT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  uint64_t high = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), cudaSuccess);
  return high;
}

}  // namespace fastattn::gputest
