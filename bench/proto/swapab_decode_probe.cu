// A swap-AB decode tile, as a standalone probe (issue #30's floor rows; docs/notes/inference.md, session 52):
// what one CTA streams when the few query rows of a decode tile are the WGMMA's N (8) and the keys its M,
// instead of 4 real rows padded to M = 64. Correctness against a float64 host reference, then the time.
//
// Problem: batch 1, s_q 1, 32 query heads on 8 KV heads (GQA 4: a KV head's 4 query rows, padded to 8),
// d 128, bf16, 8192 keys, no mask. CTA = (KV head, split of the keys). Warpgroup 0: one thread issues the
// K / V ring by TMA. Warpgroups 1 and 2 each keep their own softmax state over their blocks, and per step:
//   S^T = K Q^T        m64 n8 k16 x 8 per block (A = K, K-major; B = Q, K-major; keys are M)
//   column max over the step's keys (lane shuffles, then the 4 warps through smem), p = exp2(...)
//   P^T -> smem        8 rows x 64 keys a block, the B operand of
//   O^T += V^T P^T     m64 n8 k16 x 4 per block for each of d's two 64-row halves (A = V, MN-major: transposed)
// Modes (the table's "group" column): 1 or 2 = 64-key stages, the consumers taking alternate steps of that
// many stages (a template argument: under a run-time condition ptxas serialised every wgmma, C7520);
// 0 = 128-key stages whose two 64-key halves the two consumers take (the layout of the library's 128-key
// tile). At the end the two warpgroups merge through smem; the CTA writes its rows' normalised O and
// log2-sum-exp, and the host merges the splits. Each configuration is timed as a CUDA graph of 20 launches
// over 8 K / V copies (HBM reads, as bench/decode.py), median of 15 replays. Results: docs/notes/inference.md,
// sessions 52-53; the library's form: src/cuda/sm90/fwd/narrow_rows.cuh.
//
// Build and run (device machine):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src bench/proto/swapab_decode_probe.cu -lcuda -o /tmp/swapab_probe
//   /tmp/swapab_probe > swapab.md
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "probe_common.h"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace {

namespace sm90 = fastattn::sm90;

using probe::kDim;
using probe::kHeadsKv;
constexpr int kGqa = 4, kKeys = 8192, kBlock = 64, kMaxStages = 6, kMaxGroup = 4;
constexpr int kAtomBytes = kBlock * 128;     // 64 key rows x 64 columns, bf16
constexpr int kStageBytes = 4 * kAtomBytes;  // K atoms 0, 1; V atoms 0, 1
constexpr int kQBytes = 2 * 8 * 128;         // two atoms of 8 rows
constexpr int kPBytes = 8 * 128;             // P^T: 8 rows x 64 keys

struct Params {
  int stages, consumers, group, keys;  // keys a CTA; group: blocks a consumer step
  float scale_log2;             // softmax scale x log2(e)
  const __nv_bfloat16* q;       // (32 heads, 128)
  float* o_part;                // (splits, 8, 4, 128): normalised O of each split
  float* lse_part;              // (splits, 8, 4): log2-sum-exp of the scaled scores
};

// m64 n8 k16, A and B from smem; kTransA: A is MN-major (its M contiguous), else K-major.
template <int kTransA>
__device__ __forceinline__ void wgmma_m64n8k16(float (&d)[4], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, %7, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(a), "l"(b), "r"(accumulate), "n"(kTransA));
}

// Byte offset of 16-bit element (row, col) in a 128-byte-swizzled atom (64 columns a row).
__device__ __forceinline__ int swizzled(int row, int col) {
  return row * 128 + ((((col * 2) >> 4) ^ (row & 7)) << 4) + (col * 2 & 15);
}

__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }

// kHalves: 128-key stages, both consumers on every stage (each its 64-key half), as the library's narrow
// tile; else 64-key stages, the consumers taking alternate steps of kGroup stages.
template <int kGroup, bool kHalves>
__global__ void __launch_bounds__(384, 1)
    swapab_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map, Params p) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* ring = smem;
  constexpr int kSB = kHalves ? 2 * kStageBytes : kStageBytes;  // a stage's bytes
  constexpr int kAS = kHalves ? 2 * kAtomBytes : kAtomBytes;     // its atoms' stride
  uint8_t* q_smem = ring + p.stages * kSB;            // 1024-aligned: stages are 32 or 64 KB
  uint8_t* p_smem = q_smem + kQBytes;                 // one P^T buffer a consumer warpgroup
  float* red = reinterpret_cast<float*>(p_smem + 2 * kMaxGroup * kPBytes);  // [wg 2][parity 2][warp 4][col 8]
  float* merge = red + 2 * 2 * 4 * 8;                           // [128 d][8 cols] O^T, then m, l
  uint64_t* full = reinterpret_cast<uint64_t*>(merge + 128 * 8 + 16);
  uint64_t* empty = full + kMaxStages;

  const int head = blockIdx.x % kHeadsKv, split = blockIdx.x / kHeadsKv, first_key = split * p.keys;
  const int blocks = p.keys / (kHalves ? 2 * kBlock : kBlock);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      sm90::mbar_init(&full[s], 1);
      sm90::mbar_init(&empty[s], kHalves ? 8 : 4);  // each warp of the stage's consumer(s), after its PVs
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (wg == 1) {  // Q's 4 rows (padded to 8 with zeros) into two swizzled atoms: one 16-byte chunk a thread
    const int row = t / 16, atom = (t / 8) % 2, chunk = t % 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < kGqa) v = *reinterpret_cast<const uint4*>(p.q + (head * kGqa + row) * kDim + atom * 64 + chunk * 8);
    *reinterpret_cast<uint4*>(q_smem + atom * 1024 + row * 128 + ((chunk ^ row) << 4)) = v;
    sm90::fence_smem_for_tma();  // generic writes, read by the async proxy (wgmma)
  }
  __syncthreads();

  if (wg == 0) {
    if (t != 0) return;
    for (int j = 0; j < blocks; ++j) {
      const int s = j % p.stages, round = j / p.stages;
      sm90::mbar_wait(&empty[s], (round & 1) ^ 1);
      sm90::mbar_expect_tx(&full[s], kSB);
      uint8_t* dst = ring + s * kSB;
      for (int half = 0; half < (kHalves ? 2 : 1); ++half) {
        const int key = first_key + (kHalves ? 2 * j + half : j) * kBlock;
        for (int a = 0; a < 2; ++a) {
          sm90::tma_load_4d(dst + a * kAS + half * kAtomBytes, &k_map, 64 * a, key, head, 0, &full[s]);
          sm90::tma_load_4d(dst + (2 + a) * kAS + half * kAtomBytes, &v_map, 64 * a, key, head, 0, &full[s]);
        }
      }
    }
    return;
  }
  const int c = wg - 1;  // consumer index
  if (c >= p.consumers) {
    // A second warpgroup with nothing to do still meets the merge barrier.
    asm volatile("bar.sync 5, 256;\n" ::: "memory");
    return;
  }
  // Fragment of m64 n8: rows (keys or d) r0 = 16 warp + lane / 4 and r0 + 8, columns c0 = 2 (lane % 4), c0 + 1.
  const int r0 = 16 * warp + lane / 4, c0 = 2 * (lane % 4);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[2][4] = {};  // O^T of d rows [64 h, 64 h + 64) for h = 0, 1
  const uint32_t q_lo = sm90::desc_k_major_lo(q_smem);
  uint8_t* my_p = p_smem + c * kMaxGroup * kPBytes;  // P^T of a step: one 8 x 64 atom a block
  float* my_red = red + c * 2 * 4 * 8;
  int parity = 0;
  // A step takes `group` consecutive blocks (stages): their QKs in one commit, one softmax round (one cross-warp
  // max), their PVs in one commit. Consumers take alternate steps; stages % (group x consumers) == 0 keeps each
  // stage with one consumer (a barrier is never waited on two phases ahead).
  // The group is a template argument: a wgmma under a run-time condition is serialised by ptxas (C7520).
  const int steps = blocks / kGroup;  // the host keeps blocks a multiple of the group
  const int half_off = kHalves ? c * kAtomBytes : 0;
  for (int q = kHalves ? 0 : c; q < steps; q += kHalves ? 1 : p.consumers, parity ^= 1) {
    const int j0 = q * kGroup;
    int st[kGroup];
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      st[i] = (j0 + i) % p.stages;
      sm90::mbar_wait(&full[st[i]], ((j0 + i) / p.stages) & 1);
    }
    float sc[kGroup][4];
    sm90::wgmma_fence();
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      const uint32_t k_lo = sm90::desc_k_major_lo(ring + st[i] * kSB + half_off);
#pragma unroll
      for (int kk = 0; kk < kDim / 16; ++kk)
        wgmma_m64n8k16<0>(sc[i], sm90::desc_k_major(k_lo, kAS, kk), sm90::desc_k_major(q_lo, 1024, kk), kk > 0);
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < kGroup; ++i) sm90::fence_operands(sc[i]);
    // sc[i]: (key r0, col c0), (r0, c0 + 1), (r0 + 8, c0), (r0 + 8, c0 + 1) of block i. Column max over the step.
    float bm[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[i][e] *= p.scale_log2;
      bm[0] = fmaxf(bm[0], fmaxf(sc[i][0], sc[i][2]));
      bm[1] = fmaxf(bm[1], fmaxf(sc[i][1], sc[i][3]));
    }
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int x = 4; x < 32; x <<= 1) bm[e] = fmaxf(bm[e], __shfl_xor_sync(~0u, bm[e], x));
    float* slot = my_red + parity * 32;
    if (lane < 4) {
      slot[warp * 8 + c0] = bm[0];
      slot[warp * 8 + c0 + 1] = bm[1];
    }
    wg_bar(1 + c);
    float alpha[2], m_new[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float mx = fmaxf(fmaxf(slot[c0 + e], slot[8 + c0 + e]), fmaxf(slot[16 + c0 + e], slot[24 + c0 + e]));
      m_new[e] = fmaxf(m[e], mx);
      alpha[e] = exp2f(m[e] - m_new[e]);
      m[e] = m_new[e];
      l[e] *= alpha[e];
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      o[h][0] *= alpha[0];
      o[h][1] *= alpha[1];
      o[h][2] *= alpha[0];
      o[h][3] *= alpha[1];
    }
    // P^T (row = column c of S^T, 64 keys a row a block) for the PV GEMMs' B operand.
    auto put = [&](int i, int row, int key, float v) {
      *reinterpret_cast<__nv_bfloat16*>(my_p + i * kPBytes + swizzled(row, key)) = __float2bfloat16(v);
    };
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[i][e] = exp2f(sc[i][e] - m_new[e & 1]);
      l[0] += sc[i][0] + sc[i][2];
      l[1] += sc[i][1] + sc[i][3];
      put(i, c0, r0, sc[i][0]);
      put(i, c0 + 1, r0, sc[i][1]);
      put(i, c0, r0 + 8, sc[i][2]);
      put(i, c0 + 1, r0 + 8, sc[i][3]);
    }
    sm90::fence_smem_for_tma();
    wg_bar(1 + c);
    sm90::wgmma_fence();
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      const uint32_t p_lo = sm90::desc_k_major_lo(my_p + i * kPBytes);
      uint8_t* v_atoms = ring + st[i] * kSB + 2 * kAS + half_off;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t v_lo = sm90::desc_mn_major_lo(v_atoms + h * kAS, kAS);
#pragma unroll
        for (int kk = 0; kk < kBlock / 16; ++kk)
          wgmma_m64n8k16<1>(o[h], sm90::desc_mn_major(v_lo, kk), sm90::desc_k_major(p_lo, kPBytes, kk), 1);
      }
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int h = 0; h < 2; ++h) sm90::fence_operands(o[h]);
    // This warp's part of the PVs has read its stages (and P^T: the next step writes it after its first
    // barrier, which every warp meets after this wait).
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        sm90::mbar_arrive(&empty[st[i]]);
    }
  }
  // The row sums: over the lanes of a column, then the 4 warps (the warpgroup's parity-0 slots are free now:
  // the last block's readers have passed the barrier after them).
#pragma unroll
  for (int e = 0; e < 2; ++e)
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) l[e] += __shfl_xor_sync(~0u, l[e], x);
  float* sums = my_red + parity * 32;  // the slot the last block did not use (parity flipped after it)
  if (lane < 4) {
    sums[warp * 8 + c0] = l[0];
    sums[warp * 8 + c0 + 1] = l[1];
  }
  wg_bar(1 + c);
#pragma unroll
  for (int e = 0; e < 2; ++e) l[e] = sums[c0 + e] + sums[8 + c0 + e] + sums[16 + c0 + e] + sums[24 + c0 + e];
  // Merge: warpgroup 2 hands its (m, l, O^T) to warpgroup 1 through smem.
  if (p.consumers == 2 && c == 1) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      merge[(64 * h + r0) * 8 + c0] = o[h][0];
      merge[(64 * h + r0) * 8 + c0 + 1] = o[h][1];
      merge[(64 * h + r0 + 8) * 8 + c0] = o[h][2];
      merge[(64 * h + r0 + 8) * 8 + c0 + 1] = o[h][3];
    }
    if (t < 4) {
      merge[128 * 8 + c0] = m[0];
      merge[128 * 8 + c0 + 1] = m[1];
      merge[128 * 8 + 8 + c0] = l[0];
      merge[128 * 8 + 8 + c0 + 1] = l[1];
    }
  }
  asm volatile("bar.sync 5, 256;\n" ::: "memory");
  if (c == 1) return;
  float w_mine[2] = {1.f, 1.f}, w_other[2] = {0.f, 0.f};
  if (p.consumers == 2) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float m2 = merge[128 * 8 + c0 + e], l2 = merge[128 * 8 + 8 + c0 + e];
      const float mm = fmaxf(m[e], m2);
      w_mine[e] = exp2f(m[e] - mm);
      w_other[e] = exp2f(m2 - mm);
      l[e] = l[e] * w_mine[e] + l2 * w_other[e];
      m[e] = mm;
    }
  }
  const int row_base = (split * kHeadsKv + head) * kGqa;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int d = 64 * h + r0 + (i >= 2 ? 8 : 0), col = c0 + (i & 1), e = i & 1;
      if (col >= kGqa) continue;
      float v = o[h][i] * w_mine[e];
      if (p.consumers == 2) v += merge[d * 8 + col] * w_other[e];
      p.o_part[(row_base + col) * kDim + d] = v / l[e];
    }
  }
  if (t < 4) {
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (c0 + e < kGqa) p.lse_part[row_base + c0 + e] = m[e] + log2f(l[e]);
  }
}

}  // namespace

void launch(int group, int ctas, size_t smem, cudaStream_t stream, const CUtensorMap& k, const CUtensorMap& v,
            const Params& p) {
  if (group == 0) swapab_kernel<1, true><<<ctas, 384, smem, stream>>>(k, v, p);
  if (group == 1) swapab_kernel<1, false><<<ctas, 384, smem, stream>>>(k, v, p);
  if (group == 2) swapab_kernel<2, false><<<ctas, 384, smem, stream>>>(k, v, p);
}

int main() {
  const int copies = 8, calls = 20, replays = 15, max_splits = 16;
  const size_t kv_elems = size_t(kKeys) * kHeadsKv * kDim;

  // Inputs: normal q, k, v rounded to bf16 (the reference reads the rounded values).
  std::mt19937 rng(20261129);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<__nv_bfloat16> hq(kHeadsKv * kGqa * kDim), hk(kv_elems), hv(kv_elems);
  for (auto& x : hq) x = __float2bfloat16(normal(rng));
  for (auto& x : hk) x = __float2bfloat16(normal(rng));
  for (auto& x : hv) x = __float2bfloat16(normal(rng));
  __nv_bfloat16* dq;
  PROBE_CHECK(cudaMalloc(&dq, hq.size() * 2));
  PROBE_CHECK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
  std::vector<void*> dk(copies), dv(copies);
  for (int i = 0; i < copies; ++i) {
    PROBE_CHECK(cudaMalloc(&dk[i], kv_elems * 2));
    PROBE_CHECK(cudaMalloc(&dv[i], kv_elems * 2));
    PROBE_CHECK(cudaMemcpy(dk[i], hk.data(), kv_elems * 2, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(dv[i], hv.data(), kv_elems * 2, cudaMemcpyHostToDevice));
  }
  float *o_part, *lse_part;
  PROBE_CHECK(cudaMalloc(&o_part, size_t(max_splits) * kHeadsKv * kGqa * kDim * 4));
  PROBE_CHECK(cudaMalloc(&lse_part, size_t(max_splits) * kHeadsKv * kGqa * 4));
  std::vector<CUtensorMap> km(copies), vm(copies);
  for (int i = 0; i < copies; ++i) {
    km[i] = probe::kv_map(dk[i], kKeys, kBlock);
    vm[i] = probe::kv_map(dv[i], kKeys, kBlock);
  }

  // The float64 reference: out and log-sum-exp of each of the 32 query rows over all keys.
  const double scale = 1.0 / std::sqrt(double(kDim));
  std::vector<double> ref_o(size_t(kHeadsKv) * kGqa * kDim), ref_lse(kHeadsKv * kGqa);
  for (int h = 0; h < kHeadsKv; ++h) {
    for (int g = 0; g < kGqa; ++g) {
      const int row = h * kGqa + g;
      std::vector<double> s(kKeys);
      double mx = -INFINITY;
      for (int j = 0; j < kKeys; ++j) {
        double acc = 0;
        for (int x = 0; x < kDim; ++x)
          acc += double(__bfloat162float(hq[row * kDim + x])) *
                 __bfloat162float(hk[(size_t(j) * kHeadsKv + h) * kDim + x]);
        s[j] = acc * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int j = 0; j < kKeys; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int x = 0; x < kDim; ++x) {
        double acc = 0;
        for (int j = 0; j < kKeys; ++j) acc += s[j] * __bfloat162float(hv[(size_t(j) * kHeadsKv + h) * kDim + x]);
        ref_o[size_t(row) * kDim + x] = acc / sum;
      }
      ref_lse[row] = mx + std::log(sum);
    }
  }

  const int smem_max = 227 * 1024;
  PROBE_CHECK(cudaFuncSetAttribute(swapab_kernel<1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  PROBE_CHECK(cudaFuncSetAttribute(swapab_kernel<1, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  PROBE_CHECK(cudaFuncSetAttribute(swapab_kernel<2, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  cudaStream_t stream;
  PROBE_CHECK(cudaStreamCreate(&stream));
  std::printf("# swap-AB decode probe (bench/proto/swapab_decode_probe.cu): b1, h 32/8, d 128 bf16, %d keys, "
              "64-key stages\n\n", kKeys);
  std::printf("| group | stages | ring KB | consumers | splits | CTAs | keys a CTA | us a launch | GB/s a CTA | TB/s total | "
              "max |out - ref| | max |lse - ref| |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  bool all_ok = true;
  // (group, stages, consumers): stages % (group x consumers) == 0 (each stage stays with one consumer); group 0:
  // 128-key stages whose halves both consumers take (the library's narrow tile, fwd/narrow_rows.cuh).
  const int configs[][3] = {{0, 2, 2}, {0, 3, 2}, {1, 4, 2}, {1, 6, 2}, {2, 4, 1}};
  for (const auto& cfg : configs) {
    const int group = cfg[0], stages = cfg[1], consumers = cfg[2];
    {
      for (int splits : {4, 8, 16}) {
        Params p{stages, consumers, group, kKeys / splits, float(scale * 1.4426950408889634), dq, o_part, lse_part};
        const int ctas = kHeadsKv * splits;
        const int stage_bytes = (group == 0 ? 2 : 1) * kStageBytes;
        const size_t smem = size_t(stages) * stage_bytes + kQBytes + 2 * kMaxGroup * kPBytes +
                            4 * (2 * 2 * 4 * 8 + 128 * 8 + 16) + 2 * kMaxStages * 8 + 1024;
        // Correctness: one launch on copy 0, splits merged on the host.
        PROBE_CHECK(cudaMemsetAsync(o_part, 0xff, size_t(splits) * kHeadsKv * kGqa * kDim * 4, stream));  // NaN
        PROBE_CHECK(cudaMemsetAsync(lse_part, 0xff, size_t(splits) * kHeadsKv * kGqa * 4, stream));
        launch(group, ctas, smem, stream, km[0], vm[0], p);
        PROBE_CHECK(cudaGetLastError());
        PROBE_CHECK(cudaStreamSynchronize(stream));
        std::vector<float> ho(size_t(splits) * kHeadsKv * kGqa * kDim), hl(size_t(splits) * kHeadsKv * kGqa);
        PROBE_CHECK(cudaMemcpy(ho.data(), o_part, ho.size() * 4, cudaMemcpyDeviceToHost));
        PROBE_CHECK(cudaMemcpy(hl.data(), lse_part, hl.size() * 4, cudaMemcpyDeviceToHost));
        double err_o = 0, err_lse = 0, worst = 0;  // worst: error / its tolerance
        for (int row = 0; row < kHeadsKv * kGqa; ++row) {
          double lmax = -INFINITY;
          for (int sp = 0; sp < splits; ++sp) lmax = std::max(lmax, double(hl[sp * kHeadsKv * kGqa + row]));
          double wsum = 0;
          std::vector<double> acc(kDim, 0.0);
          for (int sp = 0; sp < splits; ++sp) {
            const double w = std::exp2(hl[sp * kHeadsKv * kGqa + row] - lmax);
            wsum += w;
            for (int x = 0; x < kDim; ++x) acc[x] += w * ho[(size_t(sp) * kHeadsKv * kGqa + row) * kDim + x];
          }
          for (int x = 0; x < kDim; ++x) {
            const double got = acc[x] / wsum, want = ref_o[size_t(row) * kDim + x];
            const double e = std::isfinite(got) ? std::abs(got - want) : INFINITY;
            err_o = std::max(err_o, e);
            worst = std::max(worst, e / (2e-4 + 1e-2 * std::abs(want)));
          }
          const double lse = (lmax + std::log2(wsum)) / 1.4426950408889634;  // natural log
          err_lse = std::max(err_lse, std::isfinite(lse) ? std::abs(lse - ref_lse[row]) : INFINITY);
        }
        // Outputs are ~1e-2 (8192 keys of softmax weight); bf16 P (relative 2^-9) moves them by ~1e-4 at most.
        // A layout error moves them by their own size: the tolerance 2e-4 + 1% of |ref| tells the two apart.
        const bool ok = worst <= 1.0 && err_lse <= 1e-3;
        all_ok = all_ok && ok;
        const float us = probe::graph_us(stream, calls, replays, [&](int i) {
          launch(group, ctas, smem, stream, km[i % copies], vm[i % copies], p);
        });
        const double cta_bytes = 2.0 * p.keys * kDim * 2;
        std::printf("| %d | %d | %d | %d | %d | %d | %d | %.2f | %.0f | %.2f | %.2e%s | %.2e |\n", group, stages,
                    stages * stage_bytes / 1024, consumers, splits, ctas, p.keys, us, cta_bytes / us * 1e-3,
                    cta_bytes * ctas / us * 1e-6, err_o, ok ? "" : " **FAIL**", err_lse);
        std::fflush(stdout);
      }
    }
  }
  std::printf("\n%s\n", all_ok ? "all outputs within tolerance" : "SOME OUTPUTS WRONG (see FAIL)");
  return all_ok ? 0 : 1;
}
