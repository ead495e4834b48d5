// Helpers of the sm_90a primitive tests (prim_sm90_test.cu): the 128-byte-swizzled smem image on the
// host, the wgmma accumulator layout on the device, random inputs and element-wise checks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/test_rng.h"

// The file is compiled for every arch of FASTATTN_CUDA_ARCHS; TMA, wgmma, mbarrier tx-counts and
// setmaxnreg exist only on sm_90a, so kernel bodies are compiled in that pass alone (on other archs
// they are empty, and the tests' SetUp rejects any GPU that is not a Hopper).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FA_PRIM_SM90 1
#else
#define FA_PRIM_SM90 0
#endif

namespace fastattn::gputest {

// ---- host ----------------------------------------------------------------------------------

template <class T>
uint16_t to_bits(float x) {
  const T v(x);
  uint16_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
template <class T>
float to_float(uint16_t b) {
  T v;
  std::memcpy(static_cast<void*>(&v), &b, sizeof b);  // T is trivially copyable; its member is protected
  return float(v);
}

// n standard-normal values rounded to T, as bits.
template <class T>
std::vector<uint16_t> random_bits(testing::Rng& rng, size_t n) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = to_bits<T>(rng.normal());
  return v;
}

// The smem image TMA writes (CU_TENSOR_MAP_SWIZZLE_128B, 64-column boxes) for a rows x cols row-major
// matrix of 16-bit elements: ceil(cols / 64) atoms of rows x 128 bytes, one after another; inside an
// atom, 16-byte chunk c of row r lands at chunk c ^ (r % 8). Columns past `cols` are zero, TMA's fill.
inline std::vector<uint16_t> swizzled_atoms(const std::vector<uint16_t>& m, int rows, int cols) {
  const int atoms = (cols + 63) / 64;
  std::vector<uint16_t> img(size_t(atoms) * rows * 64, 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int a = c / 64, chunk = (c % 64) / 8;
      img[(size_t(a) * rows + r) * 64 + ((chunk ^ (r % 8)) * 8) + c % 8] = m[size_t(r) * cols + c];
    }
  return img;
}

// Every element of `got` must equal `want` bit for bit; the first few differences are printed.
inline void expect_same_bits(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " is 0x" << std::hex << got[i] << ", want 0x" << want[i];
  EXPECT_EQ(bad, 0u) << what << ": elements that differ";
}

// |got - ref| <= tol element-wise (a NaN, e.g. an unwritten poisoned element, never passes).
inline void expect_close(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& tol,
                         int cols, const char* what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= tol[i]) && ++bad <= 5)
      ADD_FAILURE() << what << ": (" << i / cols << ", " << i % cols << ") is " << got[i] << ", want " << ref[i]
                    << " +- " << tol[i];
  EXPECT_EQ(bad, 0u) << what << ": elements out of tolerance";
}

// ---- device --------------------------------------------------------------------------------

// Dynamic smem rounded up to 1024 bytes: the 128-byte swizzle repeats every 8 rows of 128 bytes and
// is computed from address bits, so atoms must start 1024-aligned (launch with 1024 bytes extra).
__device__ __forceinline__ uint8_t* aligned_smem() {
  extern __shared__ uint8_t smem_raw[];
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
}

// All threads of the block copy `bytes` (a multiple of 16) from global to smem.
__device__ __forceinline__ void copy_to_smem(uint8_t* dst, const uint8_t* src, int bytes) {
  for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
}

// The m64nN wgmma accumulator layout: thread t of the warpgroup holds rows 16 * (t / 32) + (t % 32) / 4
// + 8h and columns 8j + 2 * (t % 4) + e as acc[4j + 2h + e]. These move a 64 x N block (rows row0..,
// leading dim ld) between global memory and that layout.
__device__ __forceinline__ int acc_offset(int t, int i, int row0, int ld) {
  const int j = i / 4, h = (i / 2) % 2, e = i % 2;
  return (row0 + 16 * (t / 32) + (t % 32) / 4 + 8 * h) * ld + 8 * j + 2 * (t % 4) + e;
}
template <int N>
__device__ __forceinline__ void load_acc(float (&acc)[N], const float* src, int row0, int ld) {
  const int t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = src[acc_offset(t, i, row0, ld)];
}
template <int N>
__device__ __forceinline__ void store_acc(const float (&acc)[N], float* dst, int row0, int ld) {
  const int t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < N; ++i) dst[acc_offset(t, i, row0, ld)] = acc[i];
}

}  // namespace fastattn::gputest
