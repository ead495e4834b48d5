// Register-blocked GEMM micro-kernels and a vector exp, written with GCC/Clang vector
// extensions: a 16-float vector is one zmm on AVX-512, two ymm on AVX2, four xmm on SSE2,
// so one source serves every clone and the accumulators stay in registers.
#include "cpu/tile_kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FASTATTN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FASTATTN_CLONES
#endif

// The vector helpers below are internal and always inlined; the "ABI changes" note GCC gives
// for passing 64-byte vectors by value does not concern them.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace fastattn::cpu {
namespace {

typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
constexpr int kW = 16;  // floats per vector
constexpr int kMR = 4;  // rows of C per micro-tile; kMR x kW accumulators

inline f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store16(float* p, f32x16 v) { std::memcpy(p, &v, sizeof v); }

// One kMR x kW block of C over the full K. `a_row_stride`/`a_k_stride` select A or A^T.
inline void block_full(int K, const float* A, int a_row_stride, int a_k_stride, const float* B,
                       int ldb, float* C, int ldc) {
  f32x16 acc[kMR];
  for (int r = 0; r < kMR; ++r) acc[r] = load16(C + r * ldc);
  for (int k = 0; k < K; ++k) {
    const f32x16 b = load16(B + k * ldb);
    const float* a = A + k * a_k_stride;
    for (int r = 0; r < kMR; ++r) acc[r] += a[r * a_row_stride] * b;
  }
  for (int r = 0; r < kMR; ++r) store16(C + r * ldc, acc[r]);
}

// Edges: any rows (< kMR) and columns (< kW); scalar, the compiler vectorizes what it can.
inline void block_edge(int rows, int cols, int K, const float* A, int a_row_stride,
                       int a_k_stride, const float* B, int ldb, float* C, int ldc) {
  for (int r = 0; r < rows; ++r) {
    float* c = C + r * ldc;
    for (int k = 0; k < K; ++k) {
      const float a = A[k * a_k_stride + r * a_row_stride];
      const float* b = B + k * ldb;
      for (int n = 0; n < cols; ++n) c[n] += a * b[n];
    }
  }
}

inline void gemm(int M, int N, int K, const float* A, int a_row_stride, int a_k_stride,
                 const float* B, int ldb, float* C, int ldc) {
  const int n_full = N - N % kW;
  int m = 0;
  for (; m + kMR <= M; m += kMR) {
    const float* a = A + m * a_row_stride;
    for (int n = 0; n < n_full; n += kW) {
      block_full(K, a, a_row_stride, a_k_stride, B + n, ldb, C + m * ldc + n, ldc);
    }
    if (n_full < N) {
      block_edge(kMR, N - n_full, K, a, a_row_stride, a_k_stride, B + n_full, ldb,
                 C + m * ldc + n_full, ldc);
    }
  }
  if (m < M) {
    block_edge(M - m, N, K, A + m * a_row_stride, a_row_stride, a_k_stride, B, ldb, C + m * ldc, ldc);
  }
}

// exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2 / 2; exp(r) by its Taylor series to
// r^7 (truncation < 6e-9 relative, below float's 6e-8 ulp).
inline f32x16 exp16(f32x16 x) {
  const f32x16 lo = x < -87.5f ? f32x16{} + 1.0f : f32x16{};  // underflow (and -inf) -> 0
  x = x < -87.5f ? f32x16{} - 87.5f : x;
  x = x > 88.5f ? f32x16{} + 88.5f : x;
  // Round to nearest by the 1.5 * 2^23 trick (exact in float without fast-math).
  const f32x16 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // r = x - n ln2, with ln2 split in two so n * ln2_hi is exact.
  f32x16 r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  f32x16 p = r * (1.0f / 5040) + (1.0f / 720);
  p = p * r + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const i32x16 e = (__builtin_convertvector(n, i32x16) + 127) << 23;
  f32x16 two_n;
  std::memcpy(&two_n, &e, sizeof two_n);
  const f32x16 y = p * two_n;
  return lo != 0.0f ? f32x16{} : y;
}

}  // namespace

FASTATTN_CLONES
void gemm_nn(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
             int ldc) {
  gemm(M, N, K, A, lda, 1, B, ldb, C, ldc);
}

FASTATTN_CLONES
void gemm_tn(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
             int ldc) {
  gemm(M, N, K, A, 1, lda, B, ldb, C, ldc);
}

FASTATTN_CLONES
float exp_shifted(float* x, int n, float shift) {
  f32x16 sum{};
  int j = 0;
  for (; j + kW <= n; j += kW) {
    const f32x16 y = exp16(load16(x + j) - shift);
    store16(x + j, y);
    sum += y;
  }
  float total = 0;
  for (int i = 0; i < kW; ++i) total += sum[i];
  if (j < n) {
    float tail[kW];
    for (int i = 0; i < kW; ++i) tail[i] = j + i < n ? x[j + i] - shift : -INFINITY;
    const f32x16 y = exp16(load16(tail));
    for (int i = 0; i < n - j; ++i) {
      x[j + i] = y[i];
      total += y[i];
    }
  }
  return total;
}

}  // namespace fastattn::cpu
