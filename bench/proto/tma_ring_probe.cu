// What one CTA can stream through a TMA ring, with and without compute per stage (issue #30's decode floor
// rows; docs/notes/inference.md, session 52). A decode CTA's rate is bounded by the bytes it keeps in
// flight (Little's law: ring bytes / HBM latency) and by the work it does per block; this probe measures the
// first bound and how a fixed compute time per stage eats into it, before a swap-AB decode tile is built.
//
// Layout as the decode kernels read it: K and V (batch 1, s_k keys, 8 KV heads, d 128, bf16), boxes of
// 64 columns x `rows` keys of one head (the 128-byte swizzle), a stage = K's two atoms + V's two atoms of
// `rows` keys. CTA c streams head c % 8, keys [part * n, part * n + n) with part = c / 8 (a split-KV grid).
// A producer warp issues the stages; one consumer warpgroup per CTA (or two taking alternate stages) waits
// for each, spins `spin` clock cycles (the modelled QK + softmax + PV of the block) and frees the stage.
// Each configuration runs as a CUDA graph of 20 launches rotating over 8 K/V copies (so every launch reads
// HBM, as bench/decode.py does), median of 15 replays.
//
// Build and run (device machine):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src bench/proto/tma_ring_probe.cu -lcuda -o /tmp/tma_ring_probe
//   /tmp/tma_ring_probe > ring.md
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_common.h"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/tma.cuh"

namespace {

using fastattn::sm90::mbar_arrive;
using fastattn::sm90::mbar_expect_tx;
using fastattn::sm90::mbar_init;
using fastattn::sm90::mbar_wait;
using fastattn::sm90::tma_load_4d;

using probe::kDim;
constexpr int kHeads = probe::kHeadsKv, kMaxStages = 8;

struct Probe {
  int rows;       // keys per stage
  int stages;     // ring depth
  int consumers;  // consumer warpgroups (1 or 2; with 2, stage j goes to warpgroup j % 2)
  int spin;       // clock cycles a consumer spends on a stage before freeing it
  int keys;       // keys per CTA
};

__global__ void __launch_bounds__(384, 1)
    ring_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map, Probe p,
                int* sink) {
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle wants 1024-byte aligned boxes: the ring starts at the first such address (the
  // launch adds 1 KB of slack), the barriers after it.
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int stage_bytes = 4 * p.rows * 128;  // K and V, two 64-column atoms each
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + p.stages * stage_bytes);
  uint64_t* empty = full + kMaxStages;
  const int head = blockIdx.x % kHeads, first_key = (blockIdx.x / kHeads) * p.keys;
  const int blocks = p.keys / p.rows;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    if (threadIdx.x != 0) return;
    for (int j = 0; j < blocks; ++j) {
      const int s = j % p.stages, round = j / p.stages;
      mbar_wait(&empty[s], (round & 1) ^ 1);
      mbar_expect_tx(&full[s], stage_bytes);
      uint8_t* dst = smem + s * stage_bytes;
      const int key = first_key + j * p.rows;
      for (int a = 0; a < 2; ++a) {
        tma_load_4d(dst + a * p.rows * 128, &k_map, 64 * a, key, head, 0, &full[s]);
        tma_load_4d(dst + (2 + a) * p.rows * 128, &v_map, 64 * a, key, head, 0, &full[s]);
      }
    }
    return;
  }
  const int consumer = wg - 1;
  if (consumer >= p.consumers) return;
  int acc = 0;
  for (int j = consumer; j < blocks; j += p.consumers) {
    const int s = j % p.stages, round = j / p.stages;
    mbar_wait(&full[s], round & 1);
    acc += smem[s * stage_bytes + (threadIdx.x % 128) * 16];  // one read so the data is used
    const long long t0 = clock64();
    while (clock64() - t0 < p.spin) {
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");  // the warpgroup is done with it
    if (threadIdx.x % 128 == 0) mbar_arrive(&empty[s]);
  }
  if (acc == 12345) sink[0] = acc;
}

}  // namespace

// argv[1]: keys a head (default 8192: b1 8k of bench/decode.py; 4096: b1 4k).
int main(int argc, char** argv) {
  const int total_keys = argc > 1 ? std::atoi(argv[1]) : 8192, copies = 8, calls = 20, replays = 15;
  const size_t tensor_bytes = size_t(total_keys) * kHeads * kDim * 2;
  std::vector<void*> k(copies), v(copies);
  for (int c = 0; c < copies; ++c) {
    PROBE_CHECK(cudaMalloc(&k[c], tensor_bytes));
    PROBE_CHECK(cudaMalloc(&v[c], tensor_bytes));
    PROBE_CHECK(cudaMemset(k[c], 0, tensor_bytes));
    PROBE_CHECK(cudaMemset(v[c], 0, tensor_bytes));
  }
  int* sink;
  PROBE_CHECK(cudaMalloc(&sink, 4));
  PROBE_CHECK(cudaFuncSetAttribute(ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 222 * 1024));
  cudaStream_t stream;
  PROBE_CHECK(cudaStreamCreate(&stream));

  std::printf("# TMA ring probe (bench/proto/tma_ring_probe.cu): K + V of 8 heads x %d keys, d 128 bf16, "
              "a CTA per (head, split)\n\n", total_keys);
  std::printf("| rows a stage | stages | ring KB | consumers | spin cycles a stage | CTAs | keys a CTA | us a launch | "
              "GB/s a CTA | TB/s total |\n|---|---|---|---|---|---|---|---|---|---|\n");
  const int splits_of[] = {1, 2, 4, 8, 16};
  for (int rows : {64, 128}) {
    for (int stages : {2, 3, 4, 6}) {
      const int ring_kb = stages * 4 * rows * 128 / 1024;
      if (ring_kb > 220 || stages > kMaxStages) continue;
      for (int consumers : {1, 2}) {
        // Two consumers take alternate stages; with an even ring each stage keeps one consumer, so no
        // consumer waits for a stage's phase while another still holds the phase before it.
        if (consumers == 2 && stages % 2) continue;
        for (int spin : {0, 600, 1200, 2400}) {
          for (int splits : splits_of) {
            Probe p{rows, stages, consumers, spin, total_keys / splits};
            if (p.keys % rows) continue;
            std::vector<CUtensorMap> km(copies), vm(copies);
            for (int c = 0; c < copies; ++c) {
              km[c] = probe::kv_map(k[c], total_keys, rows);
              vm[c] = probe::kv_map(v[c], total_keys, rows);
            }
            const int ctas = kHeads * splits;
            const size_t smem = size_t(ring_kb) * 1024 + 1024 + 2 * kMaxStages * sizeof(uint64_t);
            const float us = probe::graph_us(stream, calls, replays, [&](int i) {
              ring_kernel<<<ctas, 384, smem, stream>>>(km[i % copies], vm[i % copies], p, sink);
            });
            const double cta_bytes = 2.0 * p.keys * kDim * 2;
            std::printf("| %d | %d | %d | %d | %d | %d | %d | %.2f | %.0f | %.2f |\n", rows, stages, ring_kb, consumers,
                        spin, ctas, p.keys, us, cta_bytes / us * 1e-3, cta_bytes * ctas / us * 1e-6);
          }
        }
      }
    }
  }
  PROBE_CHECK(cudaGetLastError());
  return 0;
}
