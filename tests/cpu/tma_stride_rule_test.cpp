// The stride rule of TMA-read operands (cuda/tma_stride_rule.h), and where the CUDA backend is built, the
// operand check that applies it (tma_map.h: aligned16 over q / k / v / dout, tma_storable for out): host
// only, no device. A broadcast (stride 0) or reversed (negative) dim of more than one element fails, as a
// stride off 16 bytes does; a dim of one element or a tensor with no element passes whatever its stride.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/tma_stride_rule.h"
#include "fastattn/fastattn.h"
#ifdef FASTATTN_WITH_CUDA
#include "cuda/tma_map.h"
#endif

namespace fastattn::cuda_backend {
namespace {

TEST(TmaStrideRule, PositiveMultiplesOf16BytesWhereADimHasMoreThanOneElement) {
  EXPECT_TRUE(tma_stride_ok(4, 8, 2));     // 16 bytes
  EXPECT_TRUE(tma_stride_ok(4, 1024, 2));
  EXPECT_FALSE(tma_stride_ok(4, 4, 2));    // 8 bytes
  EXPECT_FALSE(tma_stride_ok(4, 0, 2));    // broadcast
  EXPECT_FALSE(tma_stride_ok(4, -8, 2));   // reversed, though a multiple of 16 bytes
  EXPECT_FALSE(tma_stride_ok(2, 12, 2));   // 24 bytes
  EXPECT_TRUE(tma_stride_ok(1, 0, 2));     // one element: the stride is never used
  EXPECT_TRUE(tma_stride_ok(1, -3, 2));
  EXPECT_TRUE(tma_stride_ok(0, 0, 2));
  EXPECT_TRUE(tma_stride_ok(3, 4, 4));     // fp32: 16 bytes
}

#ifdef FASTATTN_WITH_CUDA
TEST(TmaStrideRule, OperandCheck) {
  alignas(16) static uint16_t buf[64];  // only the base address is looked at
  auto at = [&](int64_t b, int64_t s, int64_t h, int64_t d, int64_t sb, int64_t ss, int64_t sh) {
    Tensor t = make_tensor(buf, DType::BF16, {b, s, h, d}, Device::CPU);
    t.stride[0] = sb;
    t.stride[1] = ss;
    t.stride[2] = sh;
    return tma_tensor(t);
  };
  EXPECT_TRUE(aligned16(at(2, 17, 4, 64, 17 * 4 * 64, 4 * 64, 64)));          // dense
  EXPECT_TRUE(aligned16(at(2, 17, 4, 64, 17 * 4 * 72, 4 * 72, 72)));          // padded heads
  EXPECT_FALSE(aligned16(at(2, 17, 4, 64, 17 * 64, 64, 0)));                  // heads broadcast
  EXPECT_FALSE(aligned16(at(2, 17, 4, 64, 0, 4 * 64, 64)));                   // batch broadcast
  EXPECT_FALSE(aligned16(at(2, 17, 4, 64, 17 * 4 * 64, -4 * 64, 64)));        // tokens reversed
  EXPECT_FALSE(aligned16(at(2, 17, 4, 64, 17 * 4 * 64, 4 * 64, -64)));        // heads reversed
  EXPECT_FALSE(aligned16(at(2, 17, 4, 64, 17 * 4 * 68, 4 * 68, 68)));         // 136-byte heads
  EXPECT_TRUE(aligned16(at(1, 17, 1, 64, 0, 64, 0)));                         // size-1 dims: any stride
  EXPECT_TRUE(aligned16(at(2, 0, 4, 64, 0, 4 * 64, 64)));                     // no element: never read
  EXPECT_FALSE(tma_storable(at(2, 17, 4, 64, 17 * 4 * 64, 4 * 64, -64)));     // out reversed: row stores
  EXPECT_TRUE(tma_storable(at(2, 17, 4, 64, 17 * 4 * 64, 4 * 64, 64)));
  // Varlen (total, h, d): no batch dim.
  Tensor vl = make_tensor(buf, DType::BF16, {50, 4, 64}, Device::CPU);
  EXPECT_TRUE(aligned16(tma_tensor(vl)));
  EXPECT_FALSE(tma_storable(tma_tensor(vl)));
  vl.stride[1] = 0;
  EXPECT_FALSE(aligned16(tma_tensor(vl)));
  Tensor misaligned = make_tensor(buf + 1, DType::BF16, {1, 17, 4, 64}, Device::CPU);
  EXPECT_FALSE(aligned16(tma_tensor(misaligned)));
}
#endif

}  // namespace
}  // namespace fastattn::cuda_backend
