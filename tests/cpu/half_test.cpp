// Host fp16/bf16 conversions: exhaustive round trips and round-to-nearest-even on random floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "util/half.h"
#include "support/test_rng.h"

namespace fastattn::util {
namespace {

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);        // halfway to 2^16 rounds to even = inf
  EXPECT_EQ(float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);        // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);        // half of it: ties to even (0)
  EXPECT_EQ(float_to_half(0x1.8p-24f), 0x0002);      // 1.5 ulp: ties to even (2)
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00); // tie below: stays even
  EXPECT_EQ(float_to_half(1.0f + 0x1.8p-10f), 0x3c02);
  EXPECT_EQ(float_to_half(INFINITY), 0x7c00);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
}

// Nearest of the two neighbours in the target format, ties to the even code.
template <typename ToBits, typename FromBits>
void expect_nearest_even(float f, ToBits to, FromBits from, uint64_t seed) {
  const uint16_t code = to(f);
  const float got = from(code);
  const double err = std::abs(double(got) - double(f));
  for (int delta : {-1, 1}) {
    const uint16_t other = uint16_t(code + delta);
    const float alt = from(other);
    if (std::isnan(alt) || std::signbit(alt) != std::signbit(got)) continue;
    const double alt_err = std::abs(double(alt) - double(f));
    ASSERT_LE(err, alt_err) << f << " seed " << seed;
    if (err == alt_err) {
      ASSERT_EQ(code & 1u, 0u) << "tie not to even for " << f;
    }
  }
}

TEST(Half, RandomFloatsRoundToNearestEven) {
  const uint64_t seed = fastattn::testing::test_seed();
  fastattn::testing::Rng rng(seed);
  for (int i = 0; i < 200000; ++i) {
    const int e = rng.uniform_int(-26, 14);  // |f| < 2^15: overflow is checked in KnownValues
    const float f = std::ldexp(rng.uniform(-2.0f, 2.0f), e);
    expect_nearest_even(f, float_to_half, half_to_float, seed);
#ifdef __FLT16_MAX__
    ASSERT_EQ(half_to_float(float_to_half(f)), float(_Float16(f))) << f << " seed " << seed;
#endif
  }
}

TEST(Bf16, RandomFloatsRoundToNearestEven) {
  const uint64_t seed = fastattn::testing::test_seed();
  fastattn::testing::Rng rng(seed);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(rng.uniform(-2.0f, 2.0f), rng.uniform_int(-130, 120));
    expect_nearest_even(f, float_to_bf16, bf16_to_float, seed);
  }
  // Exact ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1.8p-7f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xff80);
}

TEST(Bf16, EveryBf16RoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_float(uint16_t(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), b) << std::hex << b;
  }
}

}  // namespace
}  // namespace fastattn::util
