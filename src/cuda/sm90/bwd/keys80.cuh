// Hopper backward, d 256, d 192 and d_qk 192 / d_v 128 with 80 keys per CTA (BwdConfigKeys80: default
// mode, no softcap, no left window edge; bwd_keys80). One CTA per (key block of 80, sequence, KV head):
// K and V loaded once, a producer thread streams each kept q-block's (Q, lse, D) through a 2-stage ring
// and its dO through kDoStages stages; two consumer warpgroups run per q-block of 64 rows:
//   S = Q K^T, dP = dO V^T          warpgroup w: keys [40 w, 40 w + 40), all 64 q rows (SS, K-major)
//   P = exp2(S scale log2e - lse), dS = P (dP - D)   (masked by q row: keep-bits over 40 keys)
//   P^T -> smem (keys x 64 q, stmatrix.trans); both warpgroups meet; dV^T += dO^T P^T (runs behind dP)
//   dS^T -> smem; both warpgroups meet; dQ^T = K^T dS, dK^T += Q^T dS^T by halves
//                                      (swap-AB: warpgroup w's head-dim rows in M = 64 halves, whole
//                                       atoms: BwdConfigKeys80's shares; dK^T's last half runs on into
//                                       the next step, which frees the Q stage)
//   dQ^T added by vector fp32 atomics into the q-block's run (dq_layout.h, dq_t_accum_index)
// and at the end dK^T, dV^T staged transposed in the freed K / V tiles and stored by rows.
// The 64-key kernels (kernel.cuh) keep the deterministic mode, softcap and local windows. Where the
// warpgroups' shares differ (d 192) each runs its own code path (the halves are compile-time, so that
// the accumulators are registers); d 256's even shares keep one path with the warpgroup at run time.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/ptx>

#include "cuda/common/grid_dependency.cuh"
#include "cuda/common/math.cuh"            // pack2
#include "cuda/common/online_softmax.cuh"  // fast_exp2
#include "cuda/mask/keep_bits.cuh"
#include "cuda/sm90/bwd/config.h"
#include "cuda/sm90/bwd/epilogue.cuh"
#include "cuda/sm90/bwd/producer.cuh"  // bwd_load_kv
#include "cuda/sm90/bwd/smem.cuh"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/bwd/zero_rows.cuh"
#include "cuda/sm90/prim/bulk_copy.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/stmatrix.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

// The two consumer warpgroups meet (256 threads) on kBwdDsBar / kBwdPtBar. With even shares they run
// one code path, so each meeting is one instruction and the aligned bar.sync holds; otherwise each
// warpgroup reaches it from its own template instance, two instructions, where PTX defines only the
// non-aligned form (prim/regs.cuh; docs/notes/bwd-sm90.md, session 39).
template <class Cfg>
__device__ __forceinline__ void keys80_bar_sync(int id) {
  if constexpr (Cfg::kEvenShares)
    named_bar_sync(id, 256);
  else
    named_bar_sync_unaligned(id, 256);
}

// d 256: 222 KB of the 227: two Q stages do fit, a second dO stage does not (docs/notes/bwd-sm90.md).
// d 192: 197 KB with two dO stages; 192 / 128: 171 KB.
template <class Cfg>
struct BwdSmemKeys80 {
  static constexpr int kTileBytes = Cfg::kBlockN * kAtomRowBytes;  // keys x 64 q rows of 16 bits: one atom
  alignas(1024) uint8_t k[Cfg::kKBytes];
  alignas(1024) uint8_t v[Cfg::kVBytes];
  alignas(1024) uint8_t q[Cfg::kStages][Cfg::kQBytes];
  alignas(1024) uint8_t dout[Cfg::kDoStages][Cfg::kDoBytes];
  // P^T and dS^T, two deep (indexed by the Q stage): a warpgroup stores step i + 1's while the
  // other's MMAs may still read step i's, so the step's meetings order every reuse.
  alignas(1024) uint8_t pt[Cfg::kStages][kTileBytes];
  alignas(1024) uint8_t ds[Cfg::kStages][kTileBytes];
  alignas(16) float lse[Cfg::kStages][Cfg::kBlockM];
  alignas(16) float dpsum[Cfg::kStages][Cfg::kBlockM];
  uint64_t kv_full, q_full[Cfg::kStages], q_empty[Cfg::kStages], do_full[Cfg::kDoStages], do_empty[Cfg::kDoStages];
  // The kZeroQTail kernel's loads' barriers: its hand-over warp (bwd_hand_over_keys80) waits on them, zeroes
  // the rows past seqused_q and arrives at q_full / do_full, which the consumers wait on in either kernel.
  uint64_t q_landed[Cfg::kStages], do_landed[Cfg::kDoStages];
};
template <class Cfg>
inline constexpr int kBwdKeys80SmemBytes = int(sizeof(BwdSmemKeys80<Cfg>)) + kBwdAlignSlack;

// The producer (one thread): K and V once, then per step Q / lse / D into the ring's stage and dO
// into its stage (once both warpgroups' dV^T of that stage's last step has read it).
template <class Cfg, bool kZeroQTail>
__device__ __forceinline__ void bwd_produce_keys80(BwdSmemKeys80<Cfg>& sm, const BwdParams& p, const BwdTile& t,
                                                   const CUtensorMap* tq, const CUtensorMap* tk,
                                                   const CUtensorMap* tv, const CUtensorMap* tdo) {
  bwd_load_kv<Cfg>(sm.k, sm.v, &sm.kv_full, t, tk, tv);
  uint64_t* const q_land = kZeroQTail ? sm.q_landed : sm.q_full;  // (bwd_hand_over_keys80)
  uint64_t* const do_land = kZeroQTail ? sm.do_landed : sm.do_full;
  PipeState<Cfg::kStages> ps;
  PipeState<Cfg::kDoStages> dps;
  int h, m;
  t.first_step(p, h, m);
  for (int i = t.steps(p.attn.q_per_kv); i > 0; --i, ps.advance(), dps.advance(), t.next_step(p, h, m)) {
    const int s = ps.stage(), q_row = t.seq.q_offset + m * Cfg::kBlockM;
    mbar_wait(&sm.q_empty[s], ps.phase() ^ 1);
    mbar_expect_tx(&q_land[s], Cfg::kQBytes + 2 * Cfg::kBlockM * 4);
#pragma unroll
    for (int a = 0; a < Cfg::kAtoms; ++a)
      tma_load_4d(sm.q[s] + a * Cfg::kQAtomBytes, tq, a * kAtomCols, q_row, h, t.seq.batch_coord, &q_land[s]);
    const int64_t ws = t.ws_row<Cfg::kBlockM>(p, h, m);
    bulk_load(sm.lse[s], p.lse_log2 + ws, Cfg::kBlockM * 4, &q_land[s]);
    bulk_load(sm.dpsum[s], p.dpsum + ws, Cfg::kBlockM * 4, &q_land[s]);
    const int ds = Cfg::kDoStages == 1 ? 0 : dps.stage();
    mbar_wait(&sm.do_empty[ds], dps.phase() ^ 1);
    mbar_expect_tx(&do_land[ds], Cfg::kDoBytes);
#pragma unroll
    for (int a = 0; a < Cfg::kAtomsV; ++a)
      tma_load_4d(sm.dout[ds] + a * Cfg::kQAtomBytes, tdo, a * kAtomCols, q_row, h, t.seq.batch_coord, &do_land[ds]);
  }
}

// The kZeroQTail kernel (launched with seqused_q): between the producer's loads and the consumers, each
// step's Q (q_landed -> q_full) and dO (do_landed -> do_full) pass through this warp (warp 1, idle
// otherwise), which first zeroes their rows past seqused_q in the sequence's last q-block (zero_rows.cuh
// says why). In the consumers the same stores made ptxas serialize their wgmmas (C7515: d 256 0.81 x
// FA3), in the producer thread they spilled its 24 registers; here they cost a hand-off a step, under
// the ring's second stage. A kernel of its own: in the one kernel, unused, it cost the calls without
// seqused_q 0.3 % at d 256 and 1.2 % at d 192 (docs/notes/bwd-sm90.md, session 46).
// The steps in the walk's order (kBwdWalkUp: heads outer, q-blocks rising), counted with no tile walk of
// its own: the 24 registers again.
template <class Cfg>
__device__ __forceinline__ void bwd_hand_over_keys80(BwdSmemKeys80<Cfg>& sm, const BwdParams& p, const BwdTile& t) {
  const int lane = threadIdx.x % 32;
  const int begin = t.q_blocks.begin, last = t.q_blocks.end - 1;
  // Rows [tail_row, kBlockM) of the last q-block lie past seqused_q (kBlockM: none to zero).
  const int tail_row = max(0, t.seq.len_q - last * Cfg::kBlockM);
  PipeState<Cfg::kStages> ps;
  PipeState<Cfg::kDoStages> dps;
  int m = begin;
  for (int i = t.steps(p.attn.q_per_kv); i > 0; --i, ps.advance(), dps.advance(), m = m == last ? begin : m + 1) {
    const int s = ps.stage(), ds = Cfg::kDoStages == 1 ? 0 : dps.stage();
    const bool zero = m == last && tail_row < Cfg::kBlockM;
    hand_over_rows<Cfg::kBlockM, Cfg::kAtoms>(&sm.q_landed[s], ps.phase(), &sm.q_full[s],
                                              [&] { return smem_addr(sm.q[s]); }, Cfg::kQAtomBytes, zero, tail_row, lane);
    hand_over_rows<Cfg::kBlockM, Cfg::kAtomsV>(&sm.do_landed[ds], dps.phase(), &sm.do_full[ds],
                                               [&] { return smem_addr(sm.dout[ds]); }, Cfg::kQAtomBytes, zero, tail_row,
                                               lane);
  }
}

// acc (M = 64 head-dim rows of the dO / Q atom `atom`, N = the 80 keys) += atom^T (MN-major A, K = the
// 64 q rows) times the keys x q tile whose descriptor low word is b_lo (K-major B).
template <class T, class Cfg>
__device__ __forceinline__ void mma_dkv_t(float (&acc)[40], const uint8_t* atom, uint32_t b_lo) {
  const uint32_t a_lo = desc_mn_major_lo(atom, Cfg::kQAtomBytes);
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockM / 16; ++kk)
    WgmmaSS<T, 80, Major::MN, Major::K>::run(acc, desc_mn_major_add(a_lo, kk), desc_k_major_add(b_lo, 0, kk),
                                             1);
}

// dQ^T (M = the 64 head-dim rows of K's atom `atom`, N = the 64 q rows) = atom^T (MN-major A, K = the
// 80 keys) times dS (the dS^T tile read MN-major).
template <class T, class Cfg>
__device__ __forceinline__ void mma_dq_t(float (&acc)[32], const uint8_t* atom, const uint8_t* ds_tile) {
  const uint32_t a_lo = desc_mn_major_lo(atom, Cfg::kKAtomBytes);
  const uint32_t b_lo = desc_mn_major_lo(ds_tile, BwdSmemKeys80<Cfg>::kTileBytes);
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
    WgmmaSS<T, 64, Major::MN, Major::MN>::run(acc, desc_mn_major_add(a_lo, kk), desc_mn_major_add(b_lo, kk),
                                              kk > 0);
}

// dQ^T of head-dim slice `slice` (64 rows) into the q-block's run at float 64 x 64 slice, thread t's
// registers 4 g .. 4 g + 3 as float4 t + 128 g (dq_layout.h), by fire-and-forget vector atomics.
__device__ __forceinline__ void add_dq_t(float* run, int slice, const float (&dq)[32]) {
  float4* at = reinterpret_cast<float4*>(run + 64 * 64 * slice) + threadIdx.x % 128;
#pragma unroll
  for (int g = 0; g < 8; ++g) atomicAdd(at + 128 * g, make_float4(dq[4 * g], dq[4 * g + 1], dq[4 * g + 2], dq[4 * g + 3]));
}

// Rows of one staged tensor (dK or dV: kChunks 16-byte chunks a row, chunk k of row r at chunk_at(r, k) of
// `base`) stored as keys n0 + r (r < kRows) of g0 by the 256 consumer threads (d_v != d_qk: dK's and dV's rows differ in
// length, so store_staged_dk_dv_rows' shared walk does not apply); keys past the sequence are skipped.
template <class T, int kChunks, int kRows, class ChunkAt>
__device__ __forceinline__ void store_staged_rows_keys80(const BwdTile& t, T* g0, int64_t stride_s, uint32_t base,
                                                         int tid, ChunkAt chunk_at) {
  const bool vec = reinterpret_cast<uintptr_t>(g0) % 16 == 0 && (stride_s * int64_t(sizeof(T))) % 16 == 0;
  for (int e = tid; e < kRows * kChunks; e += 256) {
    const int r = e / kChunks, k = e % kChunks, j = t.n0 + r;
    if (j >= t.seq.rows_k) continue;
    uint4 x;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(base + chunk_at(r, k)));
    T* g = g0 + (t.seq.k_offset + j) * stride_s + 8 * k;
    if (vec) {
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(g), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w) : "memory");
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) g[i] = reinterpret_cast<const T*>(&x)[i];
    }
  }
}

// dK^T and dV^T (the warpgroup's halves of 64 head-dim rows x 80 keys: dK^T's half c is atom dk0 + c,
// dV^T's dv0 + c) staged transposed in the K and V tiles as 80 rows of d (d_v) elements (16-byte chunk
// c of row r at c ^ (r % 8) within its group of 8, so that stmatrix's eight rows and the row reads fall
// in distinct banks), then stored by rows. The caller has made sure no MMA reads K or V any more.
template <class T, class Cfg, int NK, int NV>
__device__ __forceinline__ void store_dk_dv_keys80(const BwdParams& p, const BwdTile& t, BwdSmemKeys80<Cfg>& sm,
                                                   float (&dkt)[NK][40], float (&dvt)[NV > 0 ? NV : 1][40],
                                                   int dk0, int dv0) {
  constexpr int kRowBytes = Cfg::kHeadDim * 2, kChunks = kRowBytes / 16;
  constexpr int kRowBytesV = Cfg::kHeadDimV * 2, kChunksV = kRowBytesV / 16;
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4, r8 = lane % 8;
  // Matrix lane / 8 of an x4: head-dim rows + 8 (its % 2) of the warp's 16, keys + 8 (its / 2).
  const uint32_t lane_off = (8 * (lane / 16) + r8) * kRowBytes;
  const uint32_t lane_off_v = (8 * (lane / 16) + r8) * kRowBytesV;
  const uint32_t k_base = smem_addr(sm.k), v_base = smem_addr(sm.v);
  constexpr int kHalves = NK > NV ? NK : NV;
#pragma unroll
  for (int c = 0; c < kHalves; ++c) {
    const int in_atom = (2 * warp_in_wg + (lane / 8) % 2) ^ r8;
    const uint32_t off = lane_off + 16 * (8 * (dk0 + c) + in_atom);
    const uint32_t off_v = lane_off_v + 16 * (8 * (dv0 + c) + in_atom);
#pragma unroll
    for (int j = 0; j < 10; j += 2) {
      uint32_t kf[4], vf[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) {  // x = 2 (j's pair) + row half
        const int i = 4 * (j + x / 2) + 2 * (x % 2);
        if (c < NK) kf[x] = cuda_backend::pack2<T>(dkt[c][i] * p.scale, dkt[c][i + 1] * p.scale);
        if (c < NV) vf[x] = cuda_backend::pack2<T>(dvt[c][i], dvt[c][i + 1]);
      }
      if (c < NK) stmatrix_x4_trans(k_base + off + 8 * j * kRowBytes, kf[0], kf[1], kf[2], kf[3]);
      if (c < NV) stmatrix_x4_trans(v_base + off_v + 8 * j * kRowBytesV, vf[0], vf[1], vf[2], vf[3]);
    }
  }
  keys80_bar_sync<Cfg>(kBwdDsBar);  // every row holds both warpgroups' columns
  if constexpr (Cfg::kHeadDimV == Cfg::kHeadDim) {
    store_staged_dk_dv_rows<T, kChunks, Cfg::kBlockN, 256>(
        p, t, k_base, v_base, 0, threadIdx.x - 128,
        [](int r, int k) { return uint32_t(r * kRowBytes + 16 * ((k & ~7) | ((k ^ r) & 7))); });
  } else {
    const int64_t b_off = t.seq.batch_coord;
    T* gk0 = static_cast<T*>(p.dk) + b_off * p.dk_stride_b + int64_t(t.kv_head) * p.dk_stride_h;
    T* gv0 = static_cast<T*>(p.dv) + b_off * p.dv_stride_b + int64_t(t.kv_head) * p.dv_stride_h;
    store_staged_rows_keys80<T, kChunks, Cfg::kBlockN>(t, gk0, p.dk_stride_s, k_base, threadIdx.x - 128, [](int r, int k) {
      return uint32_t(r * kRowBytes + 16 * ((k & ~7) | ((k ^ r) & 7)));
    });
    store_staged_rows_keys80<T, kChunksV, Cfg::kBlockN>(t, gv0, p.dv_stride_s, v_base, threadIdx.x - 128, [](int r, int k) {
      return uint32_t(r * kRowBytesV + 16 * ((k & ~7) | ((k ^ r) & 7)));
    });
  }
}

// The 80-key kernels that cut the full mask's wave tail (wave_tail.h): d 256's even shares (one code path), the
// kernel without the seqused twin's hand-over (the host splits no seqused call).
template <class Cfg>
constexpr bool bwd_keys80_tail() {
  return Cfg::kEvenShares;
}

// A piece of a split tile (bwd_tail_gather_runs): warpgroup wg's dK^T / dV^T halves (NK, NV of 40 floats a
// thread) as the runs' chunks. The item is the block index (no ticket, and no longest-first order where the host
// splits); the verdict goes round by a barrier reduction, the tile's smem having no word to spare.
template <int NK, int NV, int R>
__device__ __forceinline__ bool bwd_tail_gather_keys80(const BwdParams& p, float (&dkt)[NK][40], float (&dvt)[R][40]) {
  int tile_item, slot, piece;
  bwd_tail_item(int(blockIdx.x), p.tail_from, p.tail_pieces, tile_item, slot, piece);
  if (slot < 0) return true;
  constexpr int kChunks = (NK + NV) * 10;
  auto chunk = [&](int c) -> float* {
    return c < NK * 10 ? &dkt[c / 10][4 * (c % 10)] : &dvt[(c - NK * 10) / 10][4 * ((c - NK * 10) % 10)];
  };
  uint32_t last = 0;
  auto post = [&](bool l) { last = l ? 1u : 0u; };
  auto verdict = [&] {
    uint32_t any;
    asm volatile(
        "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, 256, p;\n selp.u32 %0, 1, 0, q;\n}"
        : "=r"(any)
        : "r"(last), "n"(int(kBwdDsBar))
        : "memory");
    return any != 0;
  };
  return bwd_tail_gather_runs<kChunks>(p, slot, piece, chunk, post, verdict);
}

// Consumer warpgroup wg: every step of the tile, then dK / dV. A step never waits for all of its
// MMAs: dK^T's last half is still running when the next step's S is issued, so the tensor pipe has
// work queued while the step's last dQ^T atomics and the loop top issue. W: the warpgroup at compile
// time where the shares differ (Cfg::kEvenShares false), else -1 (wg at run time, one code path).
template <class T, class Cfg, int W, bool kTail = false>
__device__ __forceinline__ void bwd_consume_keys80(BwdSmemKeys80<Cfg>& sm, const BwdParams& p, const BwdTile& t,
                                                   int wg) {
  static_assert((W < 0) == Cfg::kEvenShares, "a code path per warpgroup exactly where the shares differ");
  constexpr int kW = W < 0 ? 0 : W;
  constexpr int NV = Cfg::dv_halves(kW), NK = Cfg::dk_halves(kW);  // dV^T's halves (may be 0), dK^T's = dQ^T's
  static_assert(NK >= 1 && NV >= 0, "every warpgroup takes a dK^T / dQ^T half");
  // The halves' first atoms: dV^T's half c reads dO's atom dv0 + c, dK^T's / dQ^T's Q's / K's atom dk0 + c
  // (even shares: NV wg, NK wg).
  const int dv0 = W < 0 ? NV * wg : Cfg::dv_atom0(kW), dk0 = W < 0 ? NK * wg : Cfg::dk_atom0(kW);
  constexpr int kN = Cfg::kWgKeys, kJ = kN / 8;  // S / dP columns, in groups of 8
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4, quad_col = lane % 4, r8 = lane % 8;
  const int q_row = 16 * warp_in_wg + lane / 4;  // this thread's q rows of the block: + 0 and + 8
  const int key0 = t.n0 + wg * kN;               // this warpgroup's first key
  float dkt[NK][40], dvt[NV > 0 ? NV : 1][40];   // dK^T / dV^T halves: head-dim rows 64 (dk0 + c) / 64 (dv0 + c)
  constexpr int kHalves = NK > NV ? NK : NV;
#pragma unroll
  for (int c = 0; c < kHalves; ++c)
#pragma unroll
    for (int i = 0; i < 40; ++i) {
      if (c < NK) dkt[c][i] = 0.f;
      if (c < NV) dvt[c][i] = 0.f;
    }
  // P / dS pairs (q rows + 8 h, keys 8 j ..) into the keys x q tiles by stmatrix.trans: matrix
  // lane / 8 of an x4 is (row half (lane / 8) % 2, key group j + lane / 16); key row 40 wg + 8 j .. of
  // the tile (40 wg is a multiple of the swizzle's 8 rows), its q chunk 2 warp + half.
  const uint32_t tile_off =
      (wg * kN + 8 * (lane / 16) + r8) * kAtomRowBytes + (((2 * warp_in_wg + (lane / 8) % 2) ^ r8) * 16);
  auto store_t = [&](uint8_t* tile, const uint32_t(&f)[kJ][2]) {
    const uint32_t at = smem_addr(tile) + tile_off;
    stmatrix_x4_trans(at, f[0][0], f[0][1], f[1][0], f[1][1]);
    stmatrix_x4_trans(at + 16 * kAtomRowBytes, f[2][0], f[2][1], f[3][0], f[3][1]);
    stmatrix_x2_trans(at + 32 * kAtomRowBytes, f[4][0], f[4][1]);
  };
  // dO free for the producer (this warp's arrival at the stage's empty barrier).
  auto release_do = [&](int ds) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&sm.do_empty[ds]);
  };

  const int steps = t.steps(p.attn.q_per_kv);
  if (steps > 0) mbar_wait(&sm.kv_full, 0);
  // Past seqused_k in the sequence's last key block: its K / V rows zeroed before any MMA reads them
  // (zero_rows.cuh); Q / dO past seqused_q, in the kZeroQTail kernel, by its hand-over warp (bwd_hand_over_keys80).
  if (steps > 0 && p.attn.seqused_k != nullptr && t.n0 + Cfg::kBlockN > t.seq.len_k)
    bwd_zero_rows<Cfg::kBlockN, Cfg::kAtoms, Cfg::kAtomsV>(sm.k, sm.v, Cfg::kKAtomBytes, t.seq.len_k - t.n0);
  const uint32_t k_lo = desc_k_major_lo(sm.k + wg * kN * kAtomRowBytes);
  const uint32_t v_lo = desc_k_major_lo(sm.v + wg * kN * kAtomRowBytes);
  const float scale_log2 = p.attn.scale_log2;
  PipeState<Cfg::kStages> ps;
  PipeState<Cfg::kDoStages> dps;
  int h, m;
  int q_release = -1;  // the Q stage whose dK^T last half is still in flight (none before the first step)
  t.first_step(p, h, m);
  for (int i = steps; i > 0; --i, ps.advance(), dps.advance(), t.next_step(p, h, m)) {
    const int s = ps.stage(), ds = Cfg::kDoStages == 1 ? 0 : dps.stage();
    float sa[kN / 2], dpa[kN / 2];  // S, dP: 64 q rows x this warpgroup's 40 keys
    mbar_wait(&sm.q_full[s], ps.phase());
    {
      const uint32_t q_lo = desc_k_major_lo(sm.q[s]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk)
        WgmmaSS<T, kN>::run(sa, desc_k_major_add(q_lo, Cfg::kQAtomBytes, kk),
                            desc_k_major_add(k_lo, Cfg::kKAtomBytes, kk), kk > 0);
      wgmma_commit();
      mbar_wait(&sm.do_full[ds], dps.phase());
      wgmma_fence();  // past the wait's loop (else ptxas injects one, C7519)
      const uint32_t do_lo = desc_k_major_lo(sm.dout[ds]);
#pragma unroll
      for (int kk = 0; kk < Cfg::kHeadDimV / 16; ++kk)  // over d_v
        WgmmaSS<T, kN>::run(dpa, desc_k_major_add(do_lo, Cfg::kQAtomBytes, kk),
                            desc_k_major_add(v_lo, Cfg::kKAtomBytes, kk), kk > 0);
      wgmma_commit();
    }
    // Element 4 j + 2 hh + e of S / dP: q row q_row + 8 hh, key key0 + 8 j + 2 quad_col + e.
    const uint32_t lse_addr = smem_addr(sm.lse[s] + q_row), dps_addr = smem_addr(sm.dpsum[s] + q_row);
    const float lse[2] = {lds_f32(lse_addr), lds_f32(lse_addr + 32)};
    wgmma_wait<1>();
    fence_operands(sa);
    // The previous step's dK^T last half was queued before this S, so it has retired too: its Q stage is
    // free (one step later than a wait at the step's end; the ring's second stage covers it).
    if (q_release >= 0) {
      fence_operands(dkt[NK - 1]);
      __syncwarp();
      if (lane == 0) mbar_arrive(&sm.q_empty[q_release]);
    }
    // Partial q-blocks (and key tails): masked scores to -inf by keep-bits, so P = 0 with no test after the exp.
    if (!t.q_blocks.full(m)) {
      const int row = m * Cfg::kBlockM + q_row;  // in the sequence
      cuda_backend::apply_keep_bits<kN, 0>(
          sa, cuda_backend::keep_bits<kN>(t.mask.lo(row) - key0, t.mask.hi(row) - key0, quad_col));
      cuda_backend::apply_keep_bits<kN, 1>(
          sa, cuda_backend::keep_bits<kN>(t.mask.lo(row + 8) - key0, t.mask.hi(row + 8) - key0, quad_col));
    }
    {  // P (kept fp32 in sa for dS) -> P^T tile, while dP runs
      uint32_t pf[kJ][2];
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          float& x0 = sa[4 * j + 2 * hh];
          float& x1 = sa[4 * j + 2 * hh + 1];
          x0 = cuda_backend::fast_exp2(x0 * scale_log2 - lse[hh]);
          x1 = cuda_backend::fast_exp2(x1 * scale_log2 - lse[hh]);
          pf[j][hh] = cuda_backend::pack2<T>(x0, x1);
        }
      store_t(sm.pt[s], pf);
    }
    // Every key's P^T in smem: dV^T (the warpgroup's halves) queues behind dP on the tensor pipe while
    // dS is made, and dO is free once it is done (a warpgroup without dV^T halves frees it after dP).
    fence_smem_for_tma();  // the MMAs read the tiles through the async proxy
    keys80_bar_sync<Cfg>(kBwdPtBar);
    if constexpr (NV > 0) {
      wgmma_fence();
#pragma unroll
      for (int c = 0; c < NV; ++c)
        mma_dkv_t<T, Cfg>(dvt[c], sm.dout[ds] + (dv0 + c) * Cfg::kQAtomBytes, desc_k_major_lo(sm.pt[s]));
      wgmma_commit();
    }
    const float dsum[2] = {lds_f32(dps_addr), lds_f32(dps_addr + 32)};
    wgmma_wait<(NV > 0 ? 1 : 0)>();  // dP done (dV^T may still run)
    fence_operands(dpa);
    if constexpr (NV == 0) release_do(ds);
    {  // dS = P (dP - D) -> dS^T tile
      uint32_t df[kJ][2];
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int i0 = 4 * j + 2 * hh;
          df[j][hh] = cuda_backend::pack2<T>(sa[i0] * (dpa[i0] - dsum[hh]), sa[i0 + 1] * (dpa[i0 + 1] - dsum[hh]));
        }
      store_t(sm.ds[s], df);
    }
    fence_smem_for_tma();
    keys80_bar_sync<Cfg>(kBwdDsBar);
    const uint32_t ds_lo = desc_k_major_lo(sm.ds[s]);
    float dq[32];
    float* run = p.dq_accum + t.ws_row<Cfg::kBlockM>(p, h, m) * Cfg::kHeadDim;
    // dQ^T and dK^T by halves, (dQ^T half c, dK^T half c): each dQ^T half's atomics issue while the
    // dK^T half behind it runs, so no atomic waits behind an idle tensor pipe.
#pragma unroll
    for (int c = 0; c < NK; ++c) {
      wgmma_fence();
      mma_dq_t<T, Cfg>(dq, sm.k + (dk0 + c) * Cfg::kKAtomBytes, sm.ds[s]);
      wgmma_commit();
      mma_dkv_t<T, Cfg>(dkt[c], sm.q[s] + (dk0 + c) * Cfg::kQAtomBytes, ds_lo);
      wgmma_commit();
      if constexpr (NV > 0) {
        if (c == 0) {
          wgmma_wait<2>();  // dV^T done: dO is free
#pragma unroll
          for (int v = 0; v < NV; ++v) fence_operands(dvt[v]);
          release_do(ds);
        }
      }
      wgmma_wait<1>();  // dQ^T half c done (dK^T half c may run)
      fence_operands(dq);
      if (c > 0) fence_operands(dkt[c - 1]);
      add_dq_t(run, dk0 + c, dq);
    }
    // dK^T's last half stays in flight: the next S queues behind it, and the next S wait frees this Q stage.
    q_release = s;
  }
  // The last step's dK^T last half has no next S to retire it: wait for it before dK^T is stored.
  wgmma_wait<0>();
  fence_operands(dkt[NK - 1]);
  // Both warpgroups past their last MMA: K and V are free for the staging.
  keys80_bar_sync<Cfg>(kBwdDsBar);
  // A piece of a split tile (wave_tail.h): its partial to the workspace; only the tile's last piece stores.
  if constexpr (kTail) {
    static_assert(W < 0, "the piece path's barriers are aligned: one code path");
    static_assert((NK + NV) * 10 == bwd_tail_run_chunks<Cfg>(), "a piece's run as the host sized it");
    if (p.tail_pieces > 1 && !bwd_tail_gather_keys80<NK, NV>(p, dkt, dvt)) return;
  }
  store_dk_dv_keys80<T, Cfg, NK, NV>(p, t, sm, dkt, dvt, dk0, dv0);
}

// kTail: the launch split the full mask's wave tail (bwd_keys80_tail's configs), a kernel of its own: the piece
// path's code in the one kernel cost the unsplit calls 0.2 % (session 48).
template <class T, class Cfg, bool kZeroQTail, bool kTail = false>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    bwd_kernel_keys80(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                      const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap tdo,
                      const __grid_constant__ BwdParams p) {
  using Smem = BwdSmemKeys80<Cfg>;
  static_assert(kBwdKeys80SmemBytes<Cfg> <= kBwdSmemMax, "the 80-key tile exceeds sm_90's 227 KB");
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
  if (threadIdx.x == 0) {
    prefetch_tma_maps(&tq, &tk, &tv, &tdo);
    mbar_init(&sm.kv_full, 1);
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbar_init(&sm.q_full[s], 1);  // the producer's expect_tx, or kZeroQTail's hand-over warp's arrival
      if constexpr (kZeroQTail) mbar_init(&sm.q_landed[s], 1);
      mbar_init(&sm.q_empty[s], 8);  // one arrival per consumer warp
    }
#pragma unroll
    for (int s = 0; s < Cfg::kDoStages; ++s) {
      mbar_init(&sm.do_full[s], 1);
      if constexpr (kZeroQTail) mbar_init(&sm.do_landed[s], 1);
      mbar_init(&sm.do_empty[s], 8);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    cuda_backend::grid_dependency_wait();  // the preprocess's writes, as bwd_kernel
  }
  __syncthreads();
  cuda_backend::grid_dependents_launch();
  int item = int(blockIdx.x);
  if (p.lpt_section > 0) item = bwd_lpt_item(item, p.attn.heads_kv * p.attn.batch, p.n_blocks, p.lpt_section);
  // The full mask's wave tail (wave_tail.h): the last tiles' items are pieces, each a share of the q-blocks.
  static_assert(!kTail || (bwd_keys80_tail<Cfg>() && !kZeroQTail), "the piece path: even shares, no seqused twin");
  BwdTile t = kTail ? make_bwd_tail_tile<Cfg::kBlockN, Cfg::kBlockM>(p, item) : make_bwd_tile<Cfg::kBlockN, Cfg::kBlockM>(p, item);
  // Upwards in either CTA order, as FA3: under a causal mask the down walk measured level at s 4k and
  // ~6 % slower at s 1k (docs/notes/bwd-sm90.md, session 27 d256c).
  t.walk = kBwdWalkUp;
  if (t.n0 >= t.seq.rows_k || t.n_block >= p.n_blocks) return;  // past the keys: nothing to load or store
  if (warp < 4) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x == 0 && t.steps(p.attn.q_per_kv) > 0)
      bwd_produce_keys80<Cfg, kZeroQTail>(sm, p, t, &tq, &tk, &tv, &tdo);
    if constexpr (kZeroQTail)
      if (warp == 1 && t.steps(p.attn.q_per_kv) > 0) bwd_hand_over_keys80<Cfg>(sm, p, t);  // (t.walk: kBwdWalkUp)
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    if constexpr (Cfg::kEvenShares)
      bwd_consume_keys80<T, Cfg, -1, kTail>(sm, p, t, warp / 4 - 1);
    else if (warp < 8)
      bwd_consume_keys80<T, Cfg, 0>(sm, p, t, 0);
    else
      bwd_consume_keys80<T, Cfg, 1>(sm, p, t, 1);
  }
}

}  // namespace fastattn::sm90
