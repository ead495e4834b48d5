// Online softmax over the rows of a 64xN warpgroup accumulator (each thread: 2 rows, g and g+8,
// of N/4 columns each; the 4 threads of a quad share a row). exp2 with the scale folded into one
// FFMA; the row sum stays per-thread until the end (one quad reduction in the epilogue).
#pragma once

#include <cfloat>
#include <cstdint>

namespace fastattn::cuda_backend {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1/x and log2(x) in one MUFU op each (about 1 ulp; x is a row sum >= 1 here): the IEEE division's
// and logf's slow paths need registers that the d = 256 epilogue does not have (they spilled).
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// -inf or NaN (fmaxf ignores both) computed from v: a data dependency that costs one LOP3.
__device__ __forceinline__ float neutral_for_max(float v) {
  uint32_t r;
  asm("or.b32 %0, %1, 0xff800000;" : "=r"(r) : "r"(__float_as_uint(v)));
  return __uint_as_float(r);
}

// The default hook of OnlineSoftmax::step: nothing between the rows.
struct NoHook {
  __device__ __forceinline__ void operator()() const {}
};

template <int N>
struct OnlineSoftmax {
  // Running max, already scaled by scale_log2; -FLT_MAX, not -inf, while a row has kept nothing,
  // so masked scores give exp2(-inf + FLT_MAX) = 0 with no -inf check (was FSETP + FSEL).
  float max_scaled[2] = {-FLT_MAX, -FLT_MAX};
  float row_sum[2] = {0.f, 0.f};  // this thread's share

  // Replaces scores s by p = exp2(scale_log2 * s - max) with the running max updated, and returns
  // in alpha the factor by which earlier sums and outputs must be rescaled: exactly 1 when the max
  // did not change (both maxima are the same rounded product), which lets the caller skip O *= alpha.
  // `between_rows` runs once both alphas are known, after row 0's exps and before row 1's: the sm90
  // loop waits for its PV there, so that row 1's exps, in the same basic block as the caller's
  // conversion of P that follows, hide it (FA3's SASS shows the same interleave).
  template <class Hook = NoHook>
  __device__ __forceinline__ void step(float (&s)[N / 2], float scale_log2, float (&alpha)[2],
                                       Hook&& between_rows = Hook{}) {
    // Row 1's max reduction starts from a value derived from row 0's first exp, so it runs under
    // row 0's exps; without it ptxas reduces both rows before the first exp (+~65 cycles).
    float after_row0 = -INFINITY;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = after_row0;
#pragma unroll
      for (int j = 0; j < N / 8; ++j) m = fmaxf(m, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      take_max(h, m, scale_log2, alpha);
      if (h == 1) between_rows();
      exp_row(s, h, scale_log2, alpha);
      if (h == 0) after_row0 = neutral_for_max(s[0]);  // row 0's first exp
    }
  }

  // The same step with both rows' maxima reduced before the first exp (FA3's order): the exps of
  // both rows then run back to back, paced by MUFU alone, with `between_rows` between them. The
  // sm90 forward uses it on three warpgroups (d = 64), whose MUFU is shared by two softmaxes at once
  // (FwdConfig::kMaximaFirst).
  template <class Hook = NoHook>
  __device__ __forceinline__ void step_maxima_first(float (&s)[N / 2], float scale_log2, float (&alpha)[2],
                                                    Hook&& between_rows = Hook{}) {
    float m[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float a = s[2 * h], b = s[2 * h + 1];  // two chains per row
#pragma unroll
      for (int j = 1; j < N / 8; ++j) {
        a = fmaxf(a, s[4 * j + 2 * h]);
        b = fmaxf(b, s[4 * j + 2 * h + 1]);
      }
      m[h] = fmaxf(a, b);
    }
    take_max(0, m[0], scale_log2, alpha);
    take_max(1, m[1], scale_log2, alpha);
    exp_row(s, 0, scale_log2, alpha);
    between_rows();
    exp_row(s, 1, scale_log2, alpha);
  }

  // The running max moves only when a block's max passes it by more than this (log2 units;
  // FlashAttention-4's rule). A stale max leaves p = exp2(s - max) at most 2^kMaxSlack = 256, which
  // the fp32 sum and O and the 16-bit P hold with their full relative precision, and spares the O
  // rescale of most blocks whose max grew a little.
  static constexpr float kMaxSlack = 8.f;

  // Deferred max: a block's exps are taken against the running max as it stands, with no max
  // reduction first, into p (s is kept). step_deferred returns this thread's two row sums; when
  // every thread of the warp has both at most kDeferredLimit (deferred_ok, then a vote), every p is
  // at most that too, and the caller keeps p and adds the sums (accept_deferred): the max stays
  // and O needs no rescale. Otherwise (a max that rose past log2 of the limit, a row that has kept
  // nothing yet, inf or NaN) it drops p and runs step() on the kept s. The limit is what the
  // 16-bit P holds with full relative precision (fp16's largest finite value is 65504); the fp32
  // sum and O hold far more. A fresh row (-FLT_MAX) gives inf here, so it always falls back.
  static constexpr float kDeferredLimit = 32768.f;

  template <class Hook = NoHook>
  __device__ __forceinline__ void step_deferred(const float (&s)[N / 2], float (&p)[N / 2], float scale_log2,
                                                float (&sum)[2], Hook&& between_rows = Hook{}) {
    sum[0] = exps(s, p, 0, scale_log2);
    between_rows();
    sum[1] = exps(s, p, 1, scale_log2);
  }
  __device__ __forceinline__ static bool deferred_ok(const float (&sum)[2]) {
    return sum[0] <= kDeferredLimit && sum[1] <= kDeferredLimit;  // false for NaN
  }
  __device__ __forceinline__ void accept_deferred(const float (&sum)[2]) {
    row_sum[0] += sum[0];
    row_sum[1] += sum[1];
  }

  // Row h's new running max from this thread's max m of its scores: alpha[h] and max_scaled[h].
  // A fresh row (-FLT_MAX, which absorbs the slack) takes its first block's max.
  __device__ __forceinline__ void take_max(int h, float m, float scale_log2, float (&alpha)[2]) {
    const float m_block = quad_max(m) * scale_log2;
    const float m_scaled = m_block > max_scaled[h] + kMaxSlack ? m_block : max_scaled[h];
    alpha[h] = fast_exp2(max_scaled[h] - m_scaled);
    max_scaled[h] = m_scaled;
  }

  // Row h's scores to exp2(scale_log2 * s - max), added to its rescaled running sum.
  __device__ __forceinline__ void exp_row(float (&s)[N / 2], int h, float scale_log2, const float (&alpha)[2]) {
    row_sum[h] = row_sum[h] * alpha[h] + exps(s, s, h, scale_log2);
  }

  // Row h of p = exp2(scale_log2 * s - max) (p may be s itself); returns this thread's sum of it.
  __device__ __forceinline__ float exps(const float (&s)[N / 2], float (&p)[N / 2], int h, float scale_log2) const {
    float sum;
#pragma unroll
    for (int k = 0; k < N / 4; ++k) {
      const int i = 4 * (k / 2) + 2 * h + k % 2;
      p[i] = fast_exp2(fmaf(s[i], scale_log2, -max_scaled[h]));
      sum = k == 0 ? p[i] : sum + p[i];
    }
    return sum;
  }

  // Final per-row normaliser (0 for rows that kept no key) and natural-log LSE (-inf for those). A NaN
  // sum (a NaN among the row's kept scores) gives NaN for both, so that out and lse are NaN as the
  // reference's (docs/masks.md, "NaN"); the epilogues' out_pair zeroes only what has inv 0 (rows past
  // seqused_q too), and split-KV's merges turn a NaN split LSE into a NaN row (split_merge_math.cuh).
  __device__ __forceinline__ void finish(float (&inv)[2], float (&lse)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(row_sum[h]);
      inv[h] = sum == 0.f ? 0.f : fast_rcp(sum);
      lse[h] = sum == 0.f ? -INFINITY : (max_scaled[h] + fast_log2(sum)) * 0.69314718055994531f;
    }
  }
};

// Multiplies row half h of a 64xD accumulator (laid out acc[4*j + 2*h + e]) by f[h].
template <int D>
__device__ __forceinline__ void scale_rows(float (&acc)[D / 2], const float (&f)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[4 * j + i] *= f[i / 2];
  }
}

}  // namespace fastattn::cuda_backend
