// The sm_90a primitives (src/cuda/sm90/prim/) on the GPU against host references, one at a time, used
// the way the kernels (sm90/fwd/, sm90/bwd/) use them: TMA tensor maps (tma_map.h) and 4-D loads / stores,
// the mbarrier ring with PipeState, SS and RS wgmma with their smem descriptors and both operand majors,
// the fp32 bulk reduce-add, stmatrix, named-barrier
// ping-pong and setmaxnreg. Inputs are random (the seed is printed on failure), outputs poisoned beforehand.
#include <cuda.h>
#include <cuda/ptx>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/common/math.cuh"      // pack2: the kernels' own, not a copy
#include "cuda/sm90/prim/barriers.h"  // kPingPongBar
#include "cuda/sm90/prim/bulk_copy.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/stmatrix.cuh"
#include "cuda/common/quad_transpose.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"
#include "cuda/tma_map.h"
#include "gpu_buffers.h"
#include "prim_sm90_util.cuh"

namespace fastattn::gputest {
namespace {

using namespace fastattn::sm90;
using cuda_backend::pack2;
using bf16 = __nv_bfloat16;

// ---- kernels -------------------------------------------------------------------------------

// TMA round trip: one CTA per 64-row box of one (head, batch); the box's two 64-column atoms are
// loaded, copied out as they lie in smem, and stored to a second tensor.
constexpr int kTmaBoxRows = 64, kTmaAtoms = 2;
constexpr int kTmaAtomBytes = kTmaBoxRows * kAtomRowBytes;
constexpr int kTmaBoxBytes = kTmaAtoms * kTmaAtomBytes;

__global__ void tma_roundtrip_kernel(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst,
                                     uint8_t* dump, int seq, int dim) {
#if FA_PRIM_SM90
  __shared__ uint64_t bar;
  uint8_t* box = aligned_smem();
  const int row0 = blockIdx.x * kTmaBoxRows, head = blockIdx.y, batch = blockIdx.z;
  const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (threadIdx.x == 0) {
    prefetch_tma_map(&src);
    prefetch_tma_map(&dst);
    mbar_init(&bar, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);  // for the TMA unit
    mbar_expect_tx(&bar, kTmaBoxBytes);  // the whole box: zero-filled bytes count too
    for (int a = 0; a < kTmaAtoms; ++a)
      tma_load_4d(box + a * kTmaAtomBytes, &src, a * kAtomCols, row0, head, batch, &bar);
  }
  __syncthreads();  // nobody waits on the barrier before it is initialised
  mbar_wait(&bar, 0);
  uint4* chunks = reinterpret_cast<uint4*>(box);
  for (int i = threadIdx.x; i < kTmaBoxBytes / 16; i += blockDim.x) {
    reinterpret_cast<uint4*>(dump + size_t(cta) * kTmaBoxBytes)[i] = chunks[i];
    // Chunks out of the tensor get a marker the store must clip (it would show in the guard region
    // or in other elements). Chunk i holds row r, column chunk (i % 8) ^ (r % 8) of its atom.
    const int r = (i / 8) % kTmaBoxRows;
    const int col = (i / (kTmaAtomBytes / 16)) * kAtomCols + 8 * ((i % 8) ^ (r % 8));
    if (row0 + r >= seq || col >= dim) chunks[i] = make_uint4(0x5a5a5a5a, 0x5a5a5a5a, 0x5a5a5a5a, 0x5a5a5a5a);
  }
  fence_smem_for_tma();  // the markers are generic-proxy writes; TMA reads through the async proxy
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int a = 0; a < kTmaAtoms; ++a) tma_store_4d(&dst, box + a * kTmaAtomBytes, a * kAtomCols, row0, head, batch);
    tma_store_commit();
    tma_store_wait_all();  // smem must outlive the store's reads
  }
#endif
}

// S = A B^T as the kernel's QK^T: two warpgroups each take 64 rows of a 128-row A (like Q's two
// halves), B (N x K) is shared; both K-major in swizzled atoms, K / 16 SS wgmmas, the first of which
// overwrites the accumulators (poisoned with NaN through c_in).
template <class T, int N, int K>
__global__ void __launch_bounds__(256, 1)
    wgmma_ss_kernel(const uint8_t* a_img, const uint8_t* b_img, const float* c_in, float* s_out) {
#if FA_PRIM_SM90
  constexpr int kAtoms = K / kAtomCols, kAAtomBytes = 128 * kAtomRowBytes, kBAtomBytes = N * kAtomRowBytes;
  uint8_t* a = aligned_smem();
  uint8_t* b = a + kAtoms * kAAtomBytes;
  copy_to_smem(a, a_img, kAtoms * kAAtomBytes);
  copy_to_smem(b, b_img, kAtoms * kBAtomBytes);
  fence_smem_for_tma();  // wgmma, like TMA, reads smem through the async proxy
  __syncthreads();
  const int wg = threadIdx.x / 128;
  float s[N / 2];
  load_acc(s, c_in, 64 * wg, N);
  const uint32_t a_lo = desc_k_major_lo(a + wg * 64 * kAtomRowBytes), b_lo = desc_k_major_lo(b);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    WgmmaSS<T, N>::run(s, desc_k_major(a_lo, kAAtomBytes, kk), desc_k_major(b_lo, kBAtomBytes, kk), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(s);
  store_acc(s, s_out, 64 * wg, N);
#endif
}

// O = P V (+ C) as the kernel's PV: P (128 x K, two warpgroups) enters in the accumulator layout and
// becomes A fragments exactly as scores_to_p packs them; V (K x D) is N-major in swizzled atoms of
// K rows. With accumulate = 0 the first wgmma must ignore C (NaN).
template <class T, int D, int K>
__global__ void __launch_bounds__(256, 1)
    wgmma_rs_kernel(const float* p, const uint8_t* v_img, const float* c_in, float* o_out, int accumulate) {
#if FA_PRIM_SM90
  constexpr int kVAtomBytes = K * kAtomRowBytes;
  uint8_t* v = aligned_smem();
  copy_to_smem(v, v_img, (D + kAtomCols - 1) / kAtomCols * kVAtomBytes);
  fence_smem_for_tma();  // wgmma reads smem through the async proxy
  __syncthreads();
  const int wg = threadIdx.x / 128;
  float s[K / 2];
  load_acc(s, p, 64 * wg, K);
  uint32_t pf[K / 16][4];
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pf[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
  float o[D / 2];
  load_acc(o, c_in, 64 * wg, D);
  const uint32_t v_lo = desc_n_major_lo(v, kVAtomBytes);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) WgmmaRS<T, D>::run(o, pf[kk], desc_n_major(v_lo, kk), kk > 0 || accumulate);
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(o);
  store_acc(o, o_out, 64 * wg, D);
#endif
}

// dQ = dS K as the backward computes it: A = dS^T (K x 64, q rows contiguous: MN-major) in one
// 64-column atom, B = K (K x D, head-dim columns contiguous: MN-major) in D / 64 atoms. Warpgroup w
// takes the N = D / 2 columns from c_w = w N (at d = 64 the second starts mid-atom, 64 bytes in).
template <class T, int N, int D, int K>
__global__ void __launch_bounds__(256, 1)
    wgmma_ss_mn_kernel(const uint8_t* at_img, const uint8_t* b_img, const float* c_in, float* out) {
#if FA_PRIM_SM90
  constexpr int kAAtomBytes = K * kAtomRowBytes, kBAtomBytes = K * kAtomRowBytes;
  uint8_t* a = aligned_smem();
  uint8_t* b = a + kAAtomBytes;
  copy_to_smem(a, at_img, kAAtomBytes);
  copy_to_smem(b, b_img, D / kAtomCols * kBAtomBytes);
  fence_smem_for_tma();
  __syncthreads();
  const int wg = threadIdx.x / 128, c0 = wg * N;
  float acc[N / 2];
  load_acc(acc, c_in + c0, 0, D);
  const uint32_t a_lo = desc_mn_major_lo(a, kAAtomBytes);
  const uint32_t b_lo = desc_mn_major_lo(b + (c0 / kAtomCols) * kBAtomBytes + (c0 % kAtomCols) * 2, kBAtomBytes);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    WgmmaSS<T, N, Major::MN, Major::MN>::run(acc, desc_mn_major(a_lo, kk), desc_mn_major(b_lo, kk), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(acc);
  store_acc(acc, out + c0, 0, D);
#endif
}

// O = P B^T with B (N x K) K-major, A (P) from registers: RS with a K-major B.
template <class T, int N, int K>
__global__ void __launch_bounds__(128, 1) wgmma_rs_kb_kernel(const float* p, const uint8_t* b_img, float* o_out) {
#if FA_PRIM_SM90
  constexpr int kBAtomBytes = N * kAtomRowBytes;
  uint8_t* b = aligned_smem();
  copy_to_smem(b, b_img, K / kAtomCols * kBAtomBytes);
  fence_smem_for_tma();
  __syncthreads();
  float s[K / 2];
  load_acc(s, p, 0, K);
  uint32_t pf[K / 16][4];
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pf[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
  float o[N / 2];
  const uint32_t b_lo = desc_k_major_lo(b);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) WgmmaRS<T, N, Major::K>::run(o, pf[kk], desc_k_major(b_lo, kBAtomBytes, kk), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(o);
  store_acc(o, o_out, 0, N);
#endif
}

// Every CTA loads its run of `n` floats with bulk_load, then reduce-adds it (bulk_reduce_add_f32) into
// dst[offset, offset + n) in two halves (two operations in one bulk group).
__global__ void bulk_reduce_kernel(const float* src, float* dst, int n, int offset) {
#if FA_PRIM_SM90
  __shared__ uint64_t bar;
  float* buf = reinterpret_cast<float*>(aligned_smem());
  if (threadIdx.x == 0) {
    mbar_init(&bar, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    mbar_expect_tx(&bar, n * 4);
    bulk_load(buf, src + size_t(blockIdx.x) * n, n * 4, &bar);
    mbar_wait(&bar, 0);
    bulk_reduce_add_f32(dst + offset, buf, n / 2 * 4);
    bulk_reduce_add_f32(dst + offset + n / 2, buf + n / 2, n / 2 * 4);
    tma_store_commit();
    tma_store_wait_all();
  }
#endif
}

// The kernel's K/V ring in miniature: one producer thread TMA-loads item i (8 rows x 64 columns, 1 KB)
// into slot i % 2 once both consumer warps released it; each consumer warp copies every item out and
// releases the slot (warp-granular, as the kernel's release()). Everyone logs its (stage, phase).
constexpr int kRingStages = 2, kRingConsumers = 2, kItemRows = 8, kItemBytes = kItemRows * kAtomRowBytes;

__global__ void ring_kernel(const __grid_constant__ CUtensorMap src, uint8_t* out, uint32_t* stage_log, int items) {
#if FA_PRIM_SM90
  __shared__ uint64_t full[kRingStages], empty[kRingStages];
  uint8_t* slots = aligned_smem();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kRingStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kRingConsumers);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  PipeState<kRingStages> ps;
  if (warp == 0) {
    if (lane != 0) return;
    for (int i = 0; i < items; ++i, ps.advance()) {
      mbar_wait(&empty[ps.stage()], ps.phase() ^ 1);  // the first pass finds fresh barriers: no wait
      mbar_expect_tx(&full[ps.stage()], kItemBytes);
      tma_load_4d(slots + ps.stage() * kItemBytes, &src, 0, i * kItemRows, 0, 0, &full[ps.stage()]);
      stage_log[i] = uint32_t(ps.stage()) | ps.phase() << 8;
    }
    return;
  }
  const int c = warp - 1;
  for (int i = 0; i < items; ++i, ps.advance()) {
    mbar_wait(&full[ps.stage()], ps.phase());
    const uint4* slot = reinterpret_cast<const uint4*>(slots + ps.stage() * kItemBytes);
    uint4* dst = reinterpret_cast<uint4*>(out + (size_t(c) * items + i) * kItemBytes);
    dst[lane] = slot[lane];
    // Dawdle inside some items (the warps on different ones): a slot refilled before its release
    // would show as an item whose halves disagree.
    if ((i + 3 * c) % 7 == 0) __nanosleep(2000);
    asm volatile("" ::: "memory");  // the second half is read after the pause
    dst[lane + 32] = slot[lane + 32];
    if (lane == 0) stage_log[(1 + c) * items + i] = uint32_t(ps.stage()) | ps.phase() << 8;
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[ps.stage()]);
  }
#endif
}

// stmatrix_x4 by one warp: lane l holds in[l][0..3] and gives the address of 16-byte row slot
// slot[l] (of 32) for row l % 8 of matrix l / 8; the poisoned smem is copied out afterwards.
__global__ void stmatrix_kernel(const uint32_t* in, const int* slot, uint32_t* out) {
#if FA_PRIM_SM90
  __shared__ alignas(16) uint32_t rows[32 * 4];
  const int l = threadIdx.x;
  for (int i = l; i < 32 * 4; i += 32) rows[i] = 0xFFFFFFFFu;
  __syncwarp();
  stmatrix_x4(smem_addr(rows) + slot[l] * 16, in[4 * l], in[4 * l + 1], in[4 * l + 2], in[4 * l + 3]);
  __syncwarp();
  for (int i = l; i < 32 * 4; i += 32) out[i] = rows[i];
#endif
}

// quad_transpose by one warp: lane l gives in[l][0..3] and writes what it gets to out[l][0..3].
__global__ void quad_transpose_kernel(const uint32_t* in, uint32_t* out) {
  const int l = threadIdx.x;
  const uint32_t m[4] = {in[4 * l], in[4 * l + 1], in[4 * l + 2], in[4 * l + 3]};
  const uint4 v = cuda_backend::quad_transpose(m, l % 4);
  out[4 * l] = v.x;
  out[4 * l + 1] = v.y;
  out[4 * l + 2] = v.z;
  out[4 * l + 3] = v.w;
}

// PipeState<S> after i advances, for i = thread index.
template <int S>
__global__ void pipe_state_kernel(uint32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  PipeState<S> ps;
  for (int k = 0; k < i; ++k) ps.advance();
  out[i] = uint32_t(ps.stage()) | ps.phase() << 8;
}

// The kernel's register split and InterWG ping-pong: warpgroup 0 drops to 24 registers, warpgroups 1
// and 2 claim 240 and take turns (named barriers kPingPongBar + wg, as my_turn / your_turn), each warp
// logging (round, wg, warp) in its turn. kLive values per thread stay live across the loop: more than
// the 168 registers of the entry cap, so they fit only with the claimed 240 (otherwise ptxas spills,
// which --warn-on-spills reports at build time).
constexpr int kRounds = 50, kLive = 192;

__global__ void __launch_bounds__(384, 1)
    pingpong_kernel(const float* in, float* out, uint32_t* log, int* producer_done) {
#if FA_PRIM_SM90
  __shared__ int next_entry;
  if (threadIdx.x == 0) next_entry = 0;
  __syncthreads();
  if (threadIdx.x < 128) {
    regs_release<24>();
    if (threadIdx.x == 0) *producer_done = 1;
    return;
  }
  regs_claim<240>();
  const int wg = threadIdx.x / 128 - 1, warp = (threadIdx.x / 32) % 4, c = threadIdx.x - 128;
  float v[kLive];
#pragma unroll
  for (int i = 0; i < kLive; ++i) v[i] = in[c * kLive + i];
  if (wg == 1) named_bar_arrive(kPingPongBar, 256);  // warpgroup 0 goes first
  for (int round = 0; round < kRounds; ++round) {
    named_bar_sync(kPingPongBar + wg, 256);
    if (threadIdx.x % 32 == 0) {
      __nanosleep(200 * (3 - warp));  // the other warpgroup must still wait for the slowest warp
      log[atomicAdd(&next_entry, 1)] = uint32_t(round) << 8 | wg << 4 | warp;
    }
    __syncwarp();  // whole warps at the barriers (bar.sync is .aligned)
#pragma unroll
    for (int i = 0; i < kLive; ++i) v[i] += float(round);
    // Warpgroup 1 skips its last hand-over: each barrier then sees as many arrivals as syncs.
    if (round + 1 < kRounds || wg == 0) named_bar_arrive(kPingPongBar + 1 - wg, 256);
  }
#pragma unroll
  for (int i = 0; i < kLive; ++i) out[c * kLive + i] = v[i];
#endif
}

// ---- tests ---------------------------------------------------------------------------------

class PrimSm90 : public HopperTest {};

template <class Kernel>
void allow_smem(Kernel kernel, int bytes) {
  FA_CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

void check_launch() {
  FA_CUDA_OK(cudaGetLastError());
  FA_CUDA_OK(cudaDeviceSynchronize());
}

// A device tensor (b, s, h, d) and its TMA map with `box_rows`-row boxes.
void make_map(void* data, DType dt, std::initializer_list<int64_t> shape, int box_rows, CUtensorMap* map) {
  const Status st = cuda_backend::make_tma_map(cuda_backend::tma_tensor(make_tensor(data, dt, shape, Device::CUDA)), box_rows,
                                                    map);
  ASSERT_TRUE(st.ok()) << st.message;
}

// Fp32 accumulation of products exact in fp32 (8- or 11-bit significands): K / 16 wgmmas of a few
// roundings each stay far below 2^-14 of the sum of |terms|; a wrong layout is off by O(1).
constexpr double kMmaTol = 1.0 / (1 << 14);

// The M x N fp32 result in `dev` against C + sum_k A(m, k) B(k, n) in double (no C when c is null),
// each element within kMmaTol of the sum of its terms' magnitudes.
template <class A, class B>
void expect_mma(const DeviceBuffer& dev, int M, int N, int K, A a, B b, const float* c, const char* what) {
  std::vector<float> got(size_t(M) * N);
  dev.download(got.data());
  std::vector<double> ref(got.size()), tol(got.size());
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double sum = c ? c[m * N + n] : 0, mag = std::abs(sum);
      for (int k = 0; k < K; ++k) {
        const double t = double(a(m, k)) * b(k, n);
        sum += t;
        mag += std::abs(t);
      }
      ref[size_t(m) * N + n] = sum;
      tol[size_t(m) * N + n] = kMmaTol * mag;
    }
  expect_close(got, ref, tol, N, what);
}

template <class T>
void run_tma_roundtrip(DType dt) {
  constexpr int B = 2, S = 113, H = 3, D = 96;  // s and d not multiples of the 64 x 64 box
  constexpr int kRowBlocks = (S + kTmaBoxRows - 1) / kTmaBoxRows, kCtas = kRowBlocks * H * B;
  constexpr size_t kElems = size_t(B) * S * H * D, kGuard = size_t(kTmaBoxRows) * H * D;
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE(std::string(dtype_name(dt)) + " " + testing::seed_note(rng.seed()));
  const std::vector<uint16_t> in = random_bits<T>(rng, kElems);
  DeviceBuffer in_dev(kElems * 2), out_dev((kElems + kGuard) * 2), dump_dev(size_t(kCtas) * kTmaBoxBytes);
  in_dev.upload(in.data());
  out_dev.poison();
  dump_dev.poison();
  CUtensorMap src, dst;
  ASSERT_NO_FATAL_FAILURE(make_map(in_dev.get(), dt, {B, S, H, D}, kTmaBoxRows, &src));
  ASSERT_NO_FATAL_FAILURE(make_map(out_dev.get(), dt, {B, S, H, D}, kTmaBoxRows, &dst));
  ASSERT_NO_FATAL_FAILURE(allow_smem(tma_roundtrip_kernel, kTmaBoxBytes + 1024));
  tma_roundtrip_kernel<<<dim3(kRowBlocks, H, B), 128, kTmaBoxBytes + 1024>>>(src, dst, static_cast<uint8_t*>(dump_dev.get()), S, D);
  ASSERT_NO_FATAL_FAILURE(check_launch());

  // Each box as TMA must have laid it out: rows and columns past the tensor zero-filled, swizzled.
  std::vector<uint16_t> want_dump;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int rb = 0; rb < kRowBlocks; ++rb) {
        std::vector<uint16_t> box(kTmaBoxRows * kTmaAtoms * kAtomCols, 0);
        for (int r = 0; r < kTmaBoxRows && rb * kTmaBoxRows + r < S; ++r)
          for (int c = 0; c < D; ++c)
            box[r * kTmaAtoms * kAtomCols + c] = in[((size_t(b) * S + rb * kTmaBoxRows + r) * H + h) * D + c];
        const std::vector<uint16_t> img = swizzled_atoms(box, kTmaBoxRows, kTmaAtoms * kAtomCols);
        want_dump.insert(want_dump.end(), img.begin(), img.end());
      }
  std::vector<uint16_t> dump(want_dump.size());
  dump_dev.download(dump.data());
  expect_same_bits(dump, want_dump, "smem after tma_load_4d");

  // The stores wrote the tensor back exactly and nothing past its end.
  std::vector<uint16_t> out(kElems + kGuard), want(in);
  out_dev.download(out.data());
  want.resize(kElems + kGuard, 0xFFFF);
  expect_same_bits(out, want, "tensor after tma_store_4d (then the guard region)");
}

TEST_F(PrimSm90, TmaLoadStoreRoundTrip) {
  run_tma_roundtrip<bf16>(DType::BF16);
  run_tma_roundtrip<__half>(DType::F16);
}

template <class T, int N, int K>
void run_wgmma_ss() {
  constexpr int M = 128;  // two warpgroups of 64 rows
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE("N " + std::to_string(N) + " K " + std::to_string(K) + " " + testing::seed_note(rng.seed()));
  const std::vector<uint16_t> a = random_bits<T>(rng, M * K), b = random_bits<T>(rng, N * K);
  const std::vector<uint16_t> a_img = swizzled_atoms(a, M, K), b_img = swizzled_atoms(b, N, K);
  DeviceBuffer a_dev(a_img.size() * 2), b_dev(b_img.size() * 2), c_dev(M * N * 4), s_dev(M * N * 4);
  a_dev.upload(a_img.data());
  b_dev.upload(b_img.data());
  c_dev.poison();
  s_dev.poison();
  const int smem = int(a_img.size() + b_img.size()) * 2 + 1024;
  ASSERT_NO_FATAL_FAILURE(allow_smem(wgmma_ss_kernel<T, N, K>, smem));
  wgmma_ss_kernel<T, N, K><<<1, 256, smem>>>(static_cast<const uint8_t*>(a_dev.get()), static_cast<const uint8_t*>(b_dev.get()),
                                             static_cast<const float*>(c_dev.get()), static_cast<float*>(s_dev.get()));
  ASSERT_NO_FATAL_FAILURE(check_launch());
  expect_mma(
      s_dev, M, N, K, [&](int m, int k) { return to_float<T>(a[m * K + k]); },
      [&](int k, int n) { return to_float<T>(b[n * K + k]); }, nullptr, "S = A B^T");
}

template <class T, int K, int... N>
void ss_cases() {
  (run_wgmma_ss<T, N, K>(), ...);
}

// Every N of wgmma_ops.inc's SS list, one atom of K (d = 64) and two (d = 128).
TEST_F(PrimSm90, WgmmaSSBf16) {
  ss_cases<bf16, 64, 8, 80, 128, 192>();
  ss_cases<bf16, 128, 80, 128, 192>();
}
TEST_F(PrimSm90, WgmmaSSF16) {
  ss_cases<__half, 64, 8, 80, 128, 192>();
  ss_cases<__half, 128, 80, 128, 192>();
}

template <class T, int D, int K>
void run_wgmma_rs(bool accumulate) {
  constexpr int M = 128;
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE("D " + std::to_string(D) + " K " + std::to_string(K) + " accumulate " + std::to_string(accumulate) +
               " " + testing::seed_note(rng.seed()));
  const std::vector<uint16_t> p = random_bits<T>(rng, M * K), v = random_bits<T>(rng, K * D);
  std::vector<float> p_f(p.size()), c(M * D, std::nanf(""));
  for (size_t i = 0; i < p.size(); ++i) p_f[i] = to_float<T>(p[i]);
  if (accumulate)
    for (auto& x : c) x = 4 * rng.normal();
  const std::vector<uint16_t> v_img = swizzled_atoms(v, K, D);
  DeviceBuffer p_dev(p_f.size() * 4), v_dev(v_img.size() * 2), c_dev(c.size() * 4), o_dev(M * D * 4);
  p_dev.upload(p_f.data());
  v_dev.upload(v_img.data());
  c_dev.upload(c.data());
  o_dev.poison();
  const int smem = int(v_img.size()) * 2 + 1024;
  ASSERT_NO_FATAL_FAILURE(allow_smem(wgmma_rs_kernel<T, D, K>, smem));
  wgmma_rs_kernel<T, D, K><<<1, 256, smem>>>(static_cast<const float*>(p_dev.get()), static_cast<const uint8_t*>(v_dev.get()),
                                             static_cast<const float*>(c_dev.get()), static_cast<float*>(o_dev.get()),
                                             accumulate ? 1 : 0);
  ASSERT_NO_FATAL_FAILURE(check_launch());
  expect_mma(
      o_dev, M, D, K, [&](int m, int k) { return p_f[m * K + k]; },
      [&](int k, int n) { return to_float<T>(v[k * D + n]); }, accumulate ? c.data() : nullptr,
      accumulate ? "O = C + P V" : "O = P V");
}

// The kernel's (head dim, KV tile) pairs: d = 64 / N = 192, 96 / 128 (1.5 atoms of V), 128 / 128,
// 256 / 80 (four atoms: the descriptor's leading offset steps between them).
template <class T>
void rs_cases() {
  for (bool accumulate : {false, true}) {
    run_wgmma_rs<T, 64, 192>(accumulate);
    run_wgmma_rs<T, 96, 128>(accumulate);
    run_wgmma_rs<T, 128, 128>(accumulate);
    run_wgmma_rs<T, 256, 80>(accumulate);
  }
}
TEST_F(PrimSm90, WgmmaRSBf16) { rs_cases<bf16>(); }
TEST_F(PrimSm90, WgmmaRSF16) { rs_cases<__half>(); }

// dQ = dS K with both operands MN-major (wgmma imm-trans-a = imm-trans-b = 1), each warpgroup N = D / 2
// of the columns: d = 64 (32 + 32, the second mid-atom) and d = 128 (64 + 64). Read K-major, the
// same bytes give A^T / B^T products: every element would be off.
template <class T, int N, int D>
void run_wgmma_ss_mn() {
  constexpr int M = 64, K = 128;
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE("N " + std::to_string(N) + " D " + std::to_string(D) + " " + testing::seed_note(rng.seed()));
  const std::vector<uint16_t> at = random_bits<T>(rng, K * M), b = random_bits<T>(rng, K * D);  // at: K x M
  std::vector<float> c(M * D);
  for (auto& x : c) x = 4 * rng.normal();
  const std::vector<uint16_t> at_img = swizzled_atoms(at, K, M), b_img = swizzled_atoms(b, K, D);
  DeviceBuffer a_dev(at_img.size() * 2), b_dev(b_img.size() * 2), c_dev(c.size() * 4), o_dev(M * D * 4);
  a_dev.upload(at_img.data());
  b_dev.upload(b_img.data());
  c_dev.upload(c.data());
  o_dev.poison();
  const int smem = int(at_img.size() + b_img.size()) * 2 + 1024;
  ASSERT_NO_FATAL_FAILURE(allow_smem(wgmma_ss_mn_kernel<T, N, D, K>, smem));
  wgmma_ss_mn_kernel<T, N, D, K><<<1, 256, smem>>>(static_cast<const uint8_t*>(a_dev.get()),
                                                   static_cast<const uint8_t*>(b_dev.get()),
                                                   static_cast<const float*>(c_dev.get()), static_cast<float*>(o_dev.get()));
  ASSERT_NO_FATAL_FAILURE(check_launch());
  // The first wgmma overwrites (accumulate 0): C must not show.
  expect_mma(
      o_dev, M, D, K, [&](int m, int k) { return to_float<T>(at[k * M + m]); },
      [&](int k, int n) { return to_float<T>(b[k * D + n]); }, nullptr, "dQ = (dS^T)^T K, MN-major A and B");
}
TEST_F(PrimSm90, WgmmaSSMnMajor) {
  run_wgmma_ss_mn<bf16, 32, 64>();
  run_wgmma_ss_mn<bf16, 64, 128>();
  run_wgmma_ss_mn<__half, 32, 64>();
  run_wgmma_ss_mn<__half, 64, 128>();
}

// RS with a K-major B (imm-trans-b = 0): O = P B^T, B stored N x K row-major.
template <class T>
void run_wgmma_rs_kb() {
  constexpr int M = 64, N = 64, K = 64;
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE(testing::seed_note(rng.seed()));
  const std::vector<uint16_t> p = random_bits<T>(rng, M * K), b = random_bits<T>(rng, N * K);
  std::vector<float> p_f(p.size());
  for (size_t i = 0; i < p.size(); ++i) p_f[i] = to_float<T>(p[i]);
  const std::vector<uint16_t> b_img = swizzled_atoms(b, N, K);
  DeviceBuffer p_dev(p_f.size() * 4), b_dev(b_img.size() * 2), o_dev(M * N * 4);
  p_dev.upload(p_f.data());
  b_dev.upload(b_img.data());
  o_dev.poison();
  const int smem = int(b_img.size()) * 2 + 1024;
  ASSERT_NO_FATAL_FAILURE(allow_smem(wgmma_rs_kb_kernel<T, N, K>, smem));
  wgmma_rs_kb_kernel<T, N, K><<<1, 128, smem>>>(static_cast<const float*>(p_dev.get()), static_cast<const uint8_t*>(b_dev.get()),
                                                static_cast<float*>(o_dev.get()));
  ASSERT_NO_FATAL_FAILURE(check_launch());
  expect_mma(
      o_dev, M, N, K, [&](int m, int k) { return p_f[m * K + k]; }, [&](int k, int n) { return to_float<T>(b[n * K + k]); },
      nullptr, "O = P B^T, K-major B");
}
TEST_F(PrimSm90, WgmmaRSKMajorB) {
  run_wgmma_rs_kb<bf16>();
  run_wgmma_rs_kb<__half>();
}

// 37 CTAs reduce-add their runs into one buffer that starts non-zero, at an odd 16-byte offset:
// integer-valued floats, so the sum is exact in any order; a copy instead of an add, a lost add, or
// a write outside [offset, offset + n) shows.
TEST_F(PrimSm90, BulkReduceAddF32) {
  constexpr int kCtas = 37, kN = 2048, kOffset = 12, kTotal = kN + 2 * kOffset;
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE(testing::seed_note(rng.seed()));
  std::vector<float> src(size_t(kCtas) * kN), dst(kTotal);
  for (auto& x : src) x = std::round(64 * rng.normal());
  for (auto& x : dst) x = std::round(64 * rng.normal());
  DeviceBuffer src_dev(src.size() * 4), dst_dev(dst.size() * 4);
  src_dev.upload(src.data());
  dst_dev.upload(dst.data());
  ASSERT_NO_FATAL_FAILURE(allow_smem(bulk_reduce_kernel, kN * 4 + 1024));
  bulk_reduce_kernel<<<kCtas, 32, kN * 4 + 1024>>>(static_cast<const float*>(src_dev.get()),
                                                  static_cast<float*>(dst_dev.get()), kN, kOffset);
  ASSERT_NO_FATAL_FAILURE(check_launch());
  std::vector<float> got(kTotal);
  dst_dev.download(got.data());
  size_t bad = 0;
  for (int i = 0; i < kTotal; ++i) {
    double want = dst[i];
    if (i >= kOffset && i < kOffset + kN)
      for (int c = 0; c < kCtas; ++c) want += src[size_t(c) * kN + i - kOffset];
    if (got[i] != want && ++bad <= 5) ADD_FAILURE() << "element " << i << " is " << got[i] << ", want " << want;
  }
  EXPECT_EQ(bad, 0u) << "elements of the reduce-add target that differ";
}

TEST_F(PrimSm90, MbarrierRing) {
  constexpr int kItems = 1000;
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE(testing::seed_note(rng.seed()));
  const std::vector<uint16_t> in = random_bits<bf16>(rng, size_t(kItems) * kItemRows * kAtomCols);
  DeviceBuffer in_dev(in.size() * 2), out_dev(size_t(kRingConsumers) * kItems * kItemBytes),
      log_dev((1 + kRingConsumers) * kItems * 4);
  in_dev.upload(in.data());
  out_dev.poison();
  log_dev.poison();
  CUtensorMap src;
  ASSERT_NO_FATAL_FAILURE(make_map(in_dev.get(), DType::BF16, {1, kItems * kItemRows, 1, kAtomCols}, kItemRows, &src));
  const int smem = kRingStages * kItemBytes + 1024;
  ring_kernel<<<1, 32 * (1 + kRingConsumers), smem>>>(src, static_cast<uint8_t*>(out_dev.get()),
                                                      static_cast<uint32_t*>(log_dev.get()), kItems);
  ASSERT_NO_FATAL_FAILURE(check_launch());

  // Every consumer warp saw every item, in order, whole (as TMA lays out an 8-row box).
  std::vector<uint16_t> want;
  for (int i = 0; i < kItems; ++i) {
    const std::vector<uint16_t> item(in.begin() + size_t(i) * kItemRows * kAtomCols,
                                     in.begin() + size_t(i + 1) * kItemRows * kAtomCols);
    const std::vector<uint16_t> img = swizzled_atoms(item, kItemRows, kAtomCols);
    want.insert(want.end(), img.begin(), img.end());
  }
  std::vector<uint16_t> all = want;
  for (int c = 1; c < kRingConsumers; ++c) all.insert(all.end(), want.begin(), want.end());
  std::vector<uint16_t> got(all.size());
  out_dev.download(got.data());
  expect_same_bits(got, all, "items received (consumer warp 0's, then 1's)");

  std::vector<uint32_t> log((1 + kRingConsumers) * kItems);
  log_dev.download(log.data());
  size_t bad = 0;
  for (size_t j = 0; j < log.size(); ++j) {
    const uint32_t i = j % kItems, want_sp = (i % 2) | ((i / 2) % 2) << 8;
    if (log[j] != want_sp && ++bad <= 5)
      ADD_FAILURE() << "role " << j / kItems << " item " << i << ": (stage, phase) log 0x" << std::hex << log[j];
  }
  EXPECT_EQ(bad, 0u) << "PipeState (stage, phase) of the ring's roles";
}

template <int S>
void check_pipe_state() {
  constexpr int n = 1000;
  DeviceBuffer out_dev(n * 4);
  out_dev.poison();
  pipe_state_kernel<S><<<(n + 127) / 128, 128>>>(static_cast<uint32_t*>(out_dev.get()), n);
  ASSERT_NO_FATAL_FAILURE(check_launch());
  std::vector<uint32_t> out(n);
  out_dev.download(out.data());
  for (int i = 0; i < n; ++i)  // stage = advances mod S; the phase flips each time the ring wraps
    ASSERT_EQ(out[i], uint32_t(i % S) | uint32_t((i / S) % 2) << 8) << "PipeState<" << S << "> after " << i << " advances";
}

// Matrix m's row i (8 16-bit elements) is the 32-bit register m of lanes 4 i .. 4 i + 3, in lane
// order (the MMA accumulator layout), written to the slot that lane 8 m + i addressed.
TEST_F(PrimSm90, StmatrixX4) {
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE(testing::seed_note(rng.seed()));
  std::vector<uint32_t> in(32 * 4);
  for (uint32_t& v : in) v = uint32_t(rng.uniform_int(0, 0x7FFFFFFF)) * 2u + uint32_t(rng.uniform_int(0, 1));
  std::vector<int> slot(32);
  for (int i = 0; i < 32; ++i) slot[i] = i;
  for (int i = 31; i > 0; --i) std::swap(slot[i], slot[rng.uniform_int(0, i)]);  // a random permutation
  DeviceBuffer in_dev(in.size() * 4), slot_dev(slot.size() * 4), out_dev(32 * 16);
  in_dev.upload(in.data());
  slot_dev.upload(slot.data());
  out_dev.poison();
  stmatrix_kernel<<<1, 32>>>(static_cast<const uint32_t*>(in_dev.get()), static_cast<const int*>(slot_dev.get()),
                             static_cast<uint32_t*>(out_dev.get()));
  ASSERT_NO_FATAL_FAILURE(check_launch());
  std::vector<uint32_t> out(32 * 4);
  out_dev.download(out.data());
  int bad = 0;
  for (int m = 0; m < 4; ++m)
    for (int i = 0; i < 8; ++i)
      for (int q = 0; q < 4; ++q) {
        const uint32_t got = out[slot[8 * m + i] * 4 + q], want = in[(4 * i + q) * 4 + m];
        if (got != want && ++bad <= 5)
          ADD_FAILURE() << "matrix " << m << " row " << i << " word " << q << ": 0x" << std::hex << got << " want 0x" << want;
      }
  EXPECT_EQ(bad, 0) << "stmatrix.x4 layout";
}

// Lane 4 i + c ends with word k of lane 4 i + k's group c: the quad's 4 x 4 blocks transposed.
TEST_F(PrimSm90, QuadTranspose) {
  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE(testing::seed_note(rng.seed()));
  std::vector<uint32_t> in(32 * 4);
  for (uint32_t& v : in) v = uint32_t(rng.uniform_int(0, 0x7FFFFFFF)) * 2u + uint32_t(rng.uniform_int(0, 1));
  DeviceBuffer in_dev(in.size() * 4), out_dev(in.size() * 4);
  in_dev.upload(in.data());
  out_dev.poison();
  quad_transpose_kernel<<<1, 32>>>(static_cast<const uint32_t*>(in_dev.get()), static_cast<uint32_t*>(out_dev.get()));
  ASSERT_NO_FATAL_FAILURE(check_launch());
  std::vector<uint32_t> out(in.size());
  out_dev.download(out.data());
  for (int l = 0; l < 32; ++l)
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(out[4 * l + k], in[4 * (l / 4 * 4 + k) + l % 4]) << "lane " << l << " word " << k;
}

TEST_F(PrimSm90, PipeStateArithmetic) {
  check_pipe_state<1>();
  check_pipe_state<2>();
  check_pipe_state<3>();
}

TEST_F(PrimSm90, NamedBarrierPingPongWithSetmaxnreg) {
  // setmaxnreg moves registers within the CTA's allocation, fixed at launch by the entry count.
  cudaFuncAttributes attr{};
  FA_CUDA_OK(cudaFuncGetAttributes(&attr, pingpong_kernel));
  ASSERT_GE(attr.numRegs * 384, 24 * 128 + 240 * 256) << "entry register count " << attr.numRegs;

  testing::Rng rng(testing::test_seed());
  SCOPED_TRACE(testing::seed_note(rng.seed()));
  std::vector<float> in(256 * kLive);
  for (auto& x : in) x = float(rng.uniform_int(-1000, 1000));  // integers: the sums below are exact
  constexpr int kEntries = 2 * kRounds * 4;
  DeviceBuffer in_dev(in.size() * 4), out_dev(in.size() * 4), log_dev(kEntries * 4), flag_dev(4);
  in_dev.upload(in.data());
  out_dev.poison();
  log_dev.poison();
  flag_dev.poison();
  pingpong_kernel<<<1, 384>>>(static_cast<const float*>(in_dev.get()), static_cast<float*>(out_dev.get()),
                              static_cast<uint32_t*>(log_dev.get()), static_cast<int*>(flag_dev.get()));
  ASSERT_NO_FATAL_FAILURE(check_launch());
  int flag = 0;
  flag_dev.download(&flag);
  EXPECT_EQ(flag, 1) << "warpgroup 0 after regs_release<24>";

  // Turns alternate wg 0, wg 1, wg 0, ...; a turn is its warpgroup's 4 warps, once each.
  std::vector<uint32_t> log(kEntries);
  log_dev.download(log.data());
  for (int turn = 0; turn < 2 * kRounds; ++turn) {
    unsigned warps = 0;
    for (int x = 0; x < 4; ++x) {
      const uint32_t e = log[4 * turn + x];
      ASSERT_EQ(e >> 4, uint32_t(turn / 2) << 4 | uint32_t(turn % 2))
          << "log entry " << 4 * turn + x << " (0x" << std::hex << e << ") is not round " << std::dec << turn / 2
          << " of warpgroup " << turn % 2;
      warps |= 1u << (e & 0xF);
    }
    ASSERT_EQ(warps, 0xFu) << "turn " << turn << ": not each warp of the warpgroup once";
  }

  // The values kept live through the loop came out right.
  std::vector<float> out(in.size());
  out_dev.download(out.data());
  const float added = float(kRounds * (kRounds - 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < in.size(); ++i) bad += out[i] != in[i] + added;
  EXPECT_EQ(bad, 0u) << "consumer values wrong after the loop";
}

}  // namespace
}  // namespace fastattn::gputest
