// The CPU backend's hot loops on fp32 tiles in row-major scratch memory. Each is compiled for
// several x86 ISA levels (AVX-512, AVX2+FMA, baseline) and picked at load time, so a generic
// -O3 build still runs wide vectors on the machine it lands on.
#pragma once

namespace fastattn::cpu {

// C[M][N] += A[M][K] * B[K][N]            (A row-major with leading dim lda, etc.)
void gemm_nn(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
             int ldc);

// C[M][N] += A[K][M]^T * B[K][N]          (A stored as K rows of M)
void gemm_tn(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
             int ldc);

// x[j] = exp(x[j] - shift) for j < n; returns the sum of the new x. -inf maps to exactly 0.
// Accurate to a few ulp (polynomial exp; see tile_kernels.cpp).
float exp_shifted(float* x, int n, float shift);

}  // namespace fastattn::cpu
