// Tile shapes of the Hopper backward, per head dim. Masks, seqlens, GQA ratio, scale, softcap and
// deterministic mode are run-time arguments.
#pragma once

// K in registers for S^T (docs/notes/bwd-sm90.md, session 34): how many of S^T's 8 k-steps (16 head-dim
// columns each) take K from registers (an RS wgmma) in the d 128 64-row kernel of the default mode
// without the softcap path; 0: all from shared memory. Compile-time; 4 measured best (5 serialises the
// wgmmas unless FASTATTN_D128_KRS_DV_FIRST, 6 and up do not fit the registers).
#ifndef FASTATTN_D128_KRS
#define FASTATTN_D128_KRS 4
#endif
// The same for the other backward kernels (session 34): the largest counts that compile with no spill
// and no C7512 are 1 (d 128 80-row, full attention), 4 (d 64's 128-row q-blocks), 6 (d 96), 3 (d 128
// 64-row deterministic) and 1 (d 128 64-row softcap). Measured (H100): d 96 at 6 -9 to -10 %, the
// deterministic d 128 at 3 -2.5 %: taken; the 80-row at 1 +1.8 %, d 64 level at 4 and +0.5 % at 2:
// left at 0; the softcap kernel not timed: 0. FASTATTN_D128_KRS_DV_FIRST 1: the 64-row default kernel
// waits for dV before issuing dQ, so that P^T's registers are free at dQ (a fifth k-step fits only
// so; 5 with the wait measured level with 4: 0).
#ifndef FASTATTN_D128_R80_KRS
#define FASTATTN_D128_R80_KRS 0
#endif
#ifndef FASTATTN_D64_KRS
#define FASTATTN_D64_KRS 0
#endif
#ifndef FASTATTN_D96_KRS
#define FASTATTN_D96_KRS 6
#endif
#ifndef FASTATTN_D128_DET_KRS
#define FASTATTN_D128_DET_KRS 3
#endif
#ifndef FASTATTN_D128_CAP_KRS
#define FASTATTN_D128_CAP_KRS 0
#endif
#ifndef FASTATTN_D128_KRS_DV_FIRST
#define FASTATTN_D128_KRS_DV_FIRST 0
#endif

#include <type_traits>

namespace fastattn::sm90 {

// d <= 128: one CTA per key block of 128 (two consumer warpgroups of 64 keys each, swap-AB: S^T,
// dP^T, dS^T have keys as rows), over q-blocks streamed through a 2-stage ring. d = 128 on 240
// registers: dK + dV 128, S^T + dP^T 64, P + dS packed 32 (q-blocks of 64 rows). d = 64: q-blocks
// of 128 rows (FA3's tile), so the step's fixed costs are paid per 128 rows: dK + dV 64, S^T +
// dP^T 128, P + dS packed 64; dQ = dS K split on the q rows (64 per warpgroup, all of d).
// d > 128 (kSplitD): dK + dV of 64 keys would be 192 / 256 registers, so a CTA holds 64 keys and
// both warpgroups share them: S^T / dP^T split on the q rows (32 each), P^T and dS^T through smem,
// dK / dV / dQ split on the head dim by whole atoms (docs/notes/bwd-sm90.md).
// BM = 80 (d 128, default mode, no mask, no softcap: bwd_rows80): FA3's full-mask tile, S^T / dP^T
// with N = 80, so a step's fixed costs are paid per 80 rows; dQ (80 rows: not a wgmma M) is computed
// swapped, dQ^T = K^T dS^T with M = d split over the warpgroups (kDqSwapAB).
// The tiles whose default-mode kernel is built twice, without the softcap path and with it
// (BwdConfig::kSoftcapKernel; the host's rule bwd_softcap_kernel): d 64 with 128-row q-blocks, d 128
// with 64-row. One function for both, so that the kernels built and the calls routed agree.
constexpr bool bwd_softcap_tile(int d, int block_m) { return (d == 64 && block_m == 128) || (d == 128 && block_m == 64); }
// And the tiles whose deterministic kernel is split so too (at d 64 the deterministic kernel without
// the softcap path spills: its dQ staging beside the exp2 split).
constexpr bool bwd_det_softcap_tile(int d, int block_m) { return d == 128 && block_m == 64; }

// DV (d_v, the head dim of V, dO, O and dV) differs from D (d_qk: Q, K, dQ, dK) at 192 / 128 only, on d 192's
// split shape: V / dO load in DV's atoms, dP^T = V dO^T runs over DV, dV splits DV over the warpgroups
// (kDvCols*), the preprocess sums dO * O over DV (notes, session 33).
template <int D, int BM = (D == 64 ? 128 : 64), int DV = D>
struct BwdConfig {
  static_assert(D == 64 || D == 96 || D == 128 || D == 192 || D == 256, "backward head dims: 64, 96, 128, 192, 256");
  static_assert(BM == (D == 64 ? 128 : 64) || (D == 128 && BM == 80), "q-block sizes: the head dim's, or 80 at d 128");
  static_assert(DV == D || (D == 192 && DV == 128 && BM == 64), "d_v != d_qk: 192 / 128 only");
  static constexpr int kHeadDim = D;
  static constexpr int kHeadDimV = DV;
  static constexpr bool kSplitD = D > 128;
  static constexpr int kBlockM = BM;  // q rows per step
  static constexpr int kBlockN = kSplitD ? 64 : 128;   // keys per CTA
  static constexpr int kStages = 2;                    // Q / dO ring depth
  static constexpr int kAtoms = (D + 63) / 64;
  static constexpr int kQAtomBytes = kBlockM * 128;
  static constexpr int kKAtomBytes = kBlockN * 128;
  static constexpr int kQBytes = kAtoms * kQAtomBytes;
  static constexpr int kKBytes = kAtoms * kKAtomBytes;
  static constexpr int kAtomsV = (DV + 63) / 64;  // V and dO: DV's atoms
  static constexpr int kVBytes = kAtomsV * kKAtomBytes;
  static constexpr int kDoBytes = kAtomsV * kQAtomBytes;
  // Warpgroup w's share of S^T / dP^T: keys from w * kWgKeyStride, q rows from w * kWgQStride.
  static constexpr int kWgKeyStride = kSplitD ? 0 : 64;
  static constexpr int kWgQStride = kSplitD ? 32 : 0;
  static constexpr int kSdpCols = kSplitD ? 32 : kBlockM;  // q rows per warpgroup: the N of S^T, dP^T
  // dK / dV columns of warpgroup 0 and 1 (d <= 128: all of d, for its own keys; else the atoms
  // from 0 and from kDkvCols0), and the accumulator size that holds the larger share.
  static constexpr int kDkvCols0 = kSplitD ? 128 : D;
  static constexpr int kDkvCols1 = kSplitD ? D - 128 : D;
  static constexpr int kDkvColsMax = kDkvCols0;
  // dV's columns per warpgroup where DV != D (192 / 128: atoms 64 + 64, so that with dK's 128 + 64 and dQ's 64 + 128
  // each warpgroup's MMAs have 256 columns); else dK's split. kDvColsMax: dV's accumulator holds the larger share.
  static constexpr int kDvCols0 = DV == D ? kDkvCols0 : DV / 2;
  static constexpr int kDvCols1 = DV == D ? kDkvCols1 : DV - kDvCols0;
  static constexpr int kDvColsMax = kDvCols0 > kDvCols1 ? kDvCols0 : kDvCols1;
  // dQ = dS K: each warpgroup takes whole 64-column atoms of K where it can (a wgmma B operand
  // cannot cross an atom boundary mid-N): d 128 64 + 64, d 96 64 + 32, d 64 32 + 32 (mid-atom);
  // d 192 64 + 128 (the reverse of its dK / dV split, to even the warpgroups' MMA work).
  // kBlockM 128 (kDqRowSplit): split on the q rows instead, warpgroup w's rows [64 w, 64 w + 64)
  // with all of d (atom w of the dS^T tile as A); each half's run is laid out as a 64-row run
  // whose columns are all "warpgroup 0's" (dq_layout.h with cols0 = d).
  // kBlockM 80 (kDqSwapAB): dQ^T = K^T dS^T, warpgroup w's head-dim rows [64 w, 64 w + 64) (atom w
  // of K as an MN-major A) times dS (stored q-major: kDsQMajor) with N = the 80 q rows; each
  // warpgroup's 64 x 80 run in the accumulator (dq_layout.h, dq_t_accum_index). kDqCols: the N.
  static constexpr bool kDqRowSplit = kBlockM == 128;
  static constexpr bool kDqSwapAB = kBlockM == 80;
  static constexpr bool kDsQMajor = kDqSwapAB;  // the dS tile: q rows x keys (else keys x q rows)
  // The accumulator run holds dQ^T's fragments (dq_layout.h, dq_t_accum_index): the postprocess reads it so.
  static constexpr bool kDqTransposed = kDqSwapAB;
  // Default mode on the 80-row tile: the consumers hand the staged dQ^T over without a proxy fence
  // each (its MEMBAR.ALL.CTA waited for their stores to leave the smem pipe); the writer thread fences
  // once, after its dq_full wait, before the bulk add reads the buffer (dq.cuh, stage_dq). Measured on
  // the H100: -1.6 % at d 128 s4k / s8k full; on the 64-row tile +0.2-0.5 % causal, deterministic
  // +0.6 %, so those keep the per-thread fence (notes, session 32).
  static constexpr bool kDqFenceByWriter = kDqSwapAB;
  static constexpr int kDqCols0 = kDqSwapAB ? kBlockM : kDqRowSplit ? D : D == 96 || D == 192 ? 64 : D / 2;
  static constexpr int kDqCols1 = kDqSwapAB ? kBlockM : kDqRowSplit ? D : D - kDqCols0;
  // The end of a step, and dQ into the accumulator. d 128 / 64 (kDqBeforeDk): dQ = dS K issued
  // before dK += dS^T Q and added while dK runs: d 128 staged in smem buffers of its own and
  // bulk-added by a writer warp, d 64 by vector atomics from registers (FA3's d 64 order; both
  // deterministic modes: staged, added in turn). d 96: dK issued before the dS^T barrier, dQ last,
  // added by vector atomics (deterministic mode: staged for the writer warp). d > 128: bulk
  // reduce-adds staged in the step's Q / dO stage, which the fp32 dQ fills exactly (a buffer of its
  // own does not fit; 192 / 128: dO's stage is allocated as large as Q's for it, smem.cuh). By
  // measurement (notes): the atomics held the consumer warps ~15% of their time at d 128 and took
  // as long as the rest of the step at d > 128; at d 64 the d 128 scheme lost 5-11%.
  static constexpr bool kDqBeforeDk = D == 128 || D == 64;
  // dQ of the default mode added by vector atomics from registers (d 64: issued while dK runs);
  // else staged for the writer warp.
  static constexpr bool kDqByAtomics = D == 64 || D == 96;
  // kBlockM 128: S^T and dP^T are both awaited before P^T and dS^T are packed (FA3's order), and dV
  // is issued once both are (behind dS^T's store: kernel.cuh): packing P^T as soon as S^T lands
  // (the 64-row step) would hold P^T's 32 registers beside S^T, dP^T, dK and dV (224) through dS,
  // which does not fit 240 (ptxas spills and serialises the wgmmas).
  // kBlockM 80 takes the same order: P^T packed early beside S^T (kept fp32 for dS), dP^T, dK, dV
  // would hold 228 registers before addresses.
  // A kernel built without the softcap path (kernel.cuh, BwdCap::Off) takes this order at every
  // tile: at d 64 and at d 128 64 rows the default mode's kernel, and at d 128 the deterministic
  // mode's, whose softcap calls go to a kernel of their own (kSoftcapKernel, kDetSoftcapKernel), so
  // that the tanh's registers are not beside it.
  static constexpr bool kPackAfterDs = kBlockM != 64;
  // kBlockM 128: lse and D of each 16 q rows are stored in the order a thread reads them (row
  // 8 jj + 2 qc + e at slot 4 qc + 2 jj + e, qc = the lane's quad column), so that a thread's four
  // values of a k-step are one 16-byte load (preprocess.cuh writes them so).
  static constexpr bool kStatsByQuad = kBlockM == 128;
  static constexpr bool kDqInStage = kSplitD;
  // d 256: warpgroup w's dV / dK read only atoms 2 w, 2 w + 1 of the stage's dO / Q, and its dQ
  // (64 x 128 fp32) is exactly as large as those four atoms: it is staged there (dO's once dV is
  // done, while dK runs; Q's once dK is done), with no meeting of both warpgroups (dq.cuh). d 192's
  // shares are uneven (its warpgroup 1 reads one atom of each but adds 128 columns).
  static constexpr bool kDqOwnAtoms = D == 256;
  // Deterministic mode's CTA order: key blocks in chunks of this many per head (2048 keys).
  static constexpr int kDetChunk = 2048 / kBlockN;
  // d 128 / 64: the default mode's CTA order under a causal mask (or a window with a right edge) is
  // longest-first, each CTA walking its q-blocks downwards (lpt_order.h; set in launch.cuh; d 64
  // from 16 key blocks: bwd_longest_first). On the 64-key d 256 kernel the same order measured
  // slower (notes, session 25; the 80-key d 256 tile takes it, walking upwards: BwdConfigKeys80).
  // The 80-row tile serves no mask (bwd_rows80), so it is built without this order and without
  // paired key blocks.
  static constexpr bool kLptOrder = (D == 128 && kBlockM == 64) || D == 64;
  // Paired key blocks (lpt_order.h, where longest first cannot act): d 128 only (at d 64 the second
  // tile's inlined consumer spilled).
  static constexpr bool kPairKeyBlocks = kLptOrder && D == 128;
  // dQ writer threads of the deterministic mode (d <= 128), taking the steps in turn: each waits for
  // its add to land before passing the q-block's turn on, which at d 128 took about as long as a
  // step, so one writer held the consumers back.
  static constexpr int kDetWriters = D == 128 ? 2 : 1;
  // The 80-row tile has room for one dQ staging buffer only (227 KB with it), and two writers need
  // two: deterministic mode keeps the 64-row tile (bwd_rows80), and no such kernel is built.
  static constexpr bool kHasDetKernel = kBlockM != 80;
  // The 80-row tile serves no softcap either (bwd_rows80), so its kernel is built without that path.
  static constexpr bool kHasSoftcap = kBlockM != 80;
  // d 64 and d 128 64 rows: the default mode's kernel (the accumulator path) is built twice, without
  // the softcap path and with it (bwd_softcap_kernel picks). At the softcap branches' merge points
  // ptxas cannot move the dP^T wait into the exp2 stream: with them a step's exp2 issue as one MUFU
  // burst and dS^T's math after it; without them dS^T's math runs in the MUFU's shadow (FA3's
  // schedule; at d 128 also FA3's order, kPackAfterDs, which beside the softcap's registers spills;
  // notes: session 28). So is the deterministic mode's kernel at d 128 (kDetSoftcapKernel, session
  // 30); d 64's deterministic kernel and the dQ ring's keep the run-time branch.
  static constexpr bool kSoftcapKernel = bwd_softcap_tile(D, BM);
  static constexpr bool kDetSoftcapKernel = bwd_det_softcap_tile(D, BM);
  // In the kernels of FA3's order without the softcap path (the default mode's at d 64, d 128 64 and
  // 80 rows, the deterministic mode's at d 128), P^T's exp2 of this many k-steps (16 q rows each)
  // run ahead of the dP^T wait, the rest in dS^T's math behind it (kernel.cuh). Measured (notes,
  // session 30): 3 of d 128's 4 k-steps -2 % on causal shapes (all 4: +1.5 %), 3 of d 64's 8 -5 to
  // -6 % (5-8: less and less, 8: +3 %), 2 of the 80-row tile's 5 -1.4 to -1.6 % at full s4k-s8k
  // (1: +0.2 %, 3: -1 %).
  static constexpr int kExpAheadSteps = BM == 80 ? 2 : 3;
  // S^T = K Q^T with K's A fragments held in registers for the first k-steps (loaded once a tile, after
  // kv_full), so that those k-steps read only Q from shared memory (2 KB a warpgroup a k-step). A thread
  // holds 4 registers a k-step over the whole tile, beside the accumulators, so each kernel takes what its
  // registers hold with no spill and no serialised wgmma (ptxas C7512); the largest such counts (sm_90a,
  // notes, session 34): d 128 64 rows 4 of 8 (5 with kDvBeforeDq), 80 rows 1, deterministic 3, softcap 1;
  // d 64 all 4; d 96 all 6.
  // kKRegSteps: the default mode's kernel without the softcap path (or, where the config builds no softcap kernel
  // of its own, d 96's, with the run-time branch); kKRegStepsDet: the deterministic mode's without it;
  // kKRegStepsCap: the default mode's softcap kernel. Every other kernel (the ring's, d 64's deterministic one)
  // keeps K in shared memory (kernel.cuh, bwd_k_reg_steps).
  static constexpr int kKRegSteps = D == 128 ? (BM == 64 ? FASTATTN_D128_KRS : FASTATTN_D128_R80_KRS)
                                  : D == 64 ? FASTATTN_D64_KRS : D == 96 ? FASTATTN_D96_KRS : 0;
  static constexpr int kKRegStepsDet = D == 128 && BM == 64 ? FASTATTN_D128_DET_KRS : 0;
  static constexpr int kKRegStepsCap = D == 128 && BM == 64 ? FASTATTN_D128_CAP_KRS : 0;
  static_assert(kKRegSteps >= 0 && kKRegSteps <= D / 16 && kKRegStepsDet >= 0 && kKRegStepsDet <= D / 16 &&
                    kKRegStepsCap >= 0 && kKRegStepsCap <= D / 16,
                "FASTATTN_*_KRS: 0 to d / 16 k-steps");
  // The d 128 64-row default kernel with K in registers: dV waited for before dQ is issued (bwd_dq).
  static constexpr bool kDvBeforeDq = D == 128 && BM == 64 && FASTATTN_D128_KRS_DV_FIRST != 0;
  static constexpr bool kKeys80 = false;  // the main kernel is kernel.cuh's (else keys80.cuh's)
  static constexpr bool kBlockList = false;  // the block-sparse kernel (BlockSparseBwdConfig) walks lists
  static constexpr bool kBitmask = false;    // its element-bitmask twin (BitmaskBwdConfig) applies bits too
  static constexpr bool kBias = false;       // the additive-bias kernel (BiasBwdConfig) reads the bias, adds dbias
  static constexpr bool kBiasF32 = false;    // (its F32-bias kernel)
  static constexpr bool kBiasAlibi = false;  // (its ALiBi kernel: the term computed, bias.cuh bwd_alibi_seed)
  // The default mode's dQ ring (dq_ring.h: d 128 windows with both edges; by default right-only ones) runs on
  // the 64-row tile and its longest-first order, in a kernel of its own (the accumulator path's kernels are
  // unchanged).
  static constexpr bool kHasRingKernel = D == 128 && kBlockM == 64;
  static constexpr int kThreads = 384;   // producer warpgroup + two consumer warpgroups
  // The launch's 168 registers a thread, moved by setmaxnreg: 128 x (168 - 24) = 256 x (240 - 168). 192 / 128: the
  // consumers hold 32 accumulator registers fewer than d 192's (dV's share), so 8 go to the producer warpgroup:
  // 128 x (168 - 32) >= 256 x (232 - 168). Its deterministic dQ writer spilled 16 B within 24 (notes, session 33).
  static constexpr int kProducerRegs = DV == D ? 24 : 32;
  static constexpr int kConsumerRegs = DV == D ? 240 : 232;
};

// The block-sparse backward (docs/notes/masks-sm90.md, "Backward"): Base's tile and schedule, each key
// tile walking its list of kept q-blocks (BwdListTile, tile.cuh) instead of the window's range. A kernel of
// its own, in the default mode's accumulator path only: no deterministic, ring, band or softcap kernel
// is built for it (the host refuses a deterministic or softcapped call: cuda/block_mask_rule.h; the
// kernel's softcap path is Off, as the default mode's kernel without it where Base splits one off), and
// no paired key blocks (a pair's second tile would take a header of its own; longest first stays).
template <class Base>
struct BlockSparseBwdConfig : Base {
  static_assert(!Base::kKeys80 && Base::kHeadDim <= 128 && Base::kHeadDimV == Base::kHeadDim && Base::kBlockM != 80,
                "block-sparse backward: the 64-row (d 64: 128-row) tile of d <= 128, d_v = d");
  using Dense = Base;  // the postprocess and the preprocess are Base's kernels
  static constexpr bool kBlockList = true;
  static constexpr bool kHasRingKernel = false;
  static constexpr bool kHasDetKernel = false;
  static constexpr bool kSoftcapKernel = false;
  static constexpr bool kDetSoftcapKernel = false;
  // d 64 / 128 (Base splits a softcap kernel off): the path Off, as Base's kernel without it; d 96: Base's
  // run-time branch, so that the kernel is Base's in every other respect.
  static constexpr bool kHasSoftcap = Base::kHasSoftcap && !Base::kSoftcapKernel;
  static constexpr bool kPairKeyBlocks = false;
};

// The element-bitmask backward (docs/notes/masks-sm90.md, "Bitmask backward"): the block-sparse kernel, each
// key tile walking its own list of non-empty q-blocks (bwd/bit_lists.h: entries q-block * 2 + needs-bits), and
// on a partial block the caller's bits, gathered by the prep in S^T's accumulator order, ANDed into the
// window's keep bits of the thread's two key rows. Full blocks read no bits; empty ones are not listed.
// A softcap runs as in the unmasked default mode: where Base splits a softcap kernel off (d 64, d 128),
// this config builds its twin (bwd_kernel's kSoftcap; the kernel without it keeps the path Off, as before),
// and d 96 keeps Base's run-time branch (BlockSparseBwdConfig's kHasSoftcap). The tanh and its derivative
// act on S^T and dS^T before and after the mask, which knows nothing of them, so the twin is the softcap
// kernel over the list walk. (The block-sparse config keeps refusing a softcap: no call for it so far.)
// The deterministic mode runs too (kHasDetKernel): Base's deterministic kernel over the list walk, each q-block's
// adds in key-tile order from the top, a key tile waiting for the count of the tiles above it that list the
// q-block (tile.cuh dq_turn, prepared by bwd/bit_lists.h). With a softcap: d 128's deterministic softcap twin
// (kDetSoftcapKernel, as Base), d 64's and d 96's run-time branch (kHasSoftcap as Base: the default mode's
// kernels, whose path kSoftcapKernel fixes at d 64 / 128, are unaffected).
template <class Base>
struct BitmaskBwdConfig : BlockSparseBwdConfig<Base> {
  static constexpr bool kBitmask = true;
  static constexpr bool kSoftcapKernel = Base::kSoftcapKernel;
  static constexpr bool kHasDetKernel = Base::kHasDetKernel;
  static constexpr bool kDetSoftcapKernel = Base::kDetSoftcapKernel;
  static constexpr bool kHasSoftcap = Base::kHasSoftcap;
};

// The additive-bias backward (docs/notes/bwd-sm90.md, "Bias backward"; bias.cuh): Base's tile, order and
// schedule, each step adding the bias to S^T before the exp2 and, where dbias is asked for, adding dS^T into
// it. A kernel of its own in the default mode's accumulator path only: no deterministic, ring, band or
// softcap kernel is built for it (the host refuses those calls by name: bwd_bias_support), the softcap path
// Off. K stays in registers for kKRegSteps* k-steps where the bias words fit beside it (bias.cuh's loads
// are held over the S^T MMA: kN / 2 registers).
// kF32: the bias kernel of F32 bias (loaded at the seed) apart from that of BF16 / F16 (loaded a step ahead,
// two keys a word): with both paths in one kernel the words' registers stayed live over the F32 loads (spills).
// kAlibi (with kF32's structure): ALiBi's term computed at the seed, nothing loaded; a kernel of its own, as its
// branch inside the F32 kernel made F32 biases 1.11-1.22 x slower (docs/notes/masks-sm90.md, "ALiBi").
template <class Base, bool kF32, bool kAlibi = false>
struct BiasBwdConfig : Base {
  static_assert(!Base::kKeys80 && Base::kHeadDim <= 128 && Base::kHeadDimV == Base::kHeadDim && Base::kBlockM != 80,
                "bias backward: the 64-row (d 64: 128-row) tile of d <= 128, d_v = d");
  using Dense = Base;  // the postprocess and the preprocess are Base's kernels
  static constexpr bool kBias = true;
  static constexpr bool kBiasF32 = kF32;
  static constexpr bool kBiasAlibi = kAlibi;
  static_assert(!kAlibi || kF32, "the ALiBi kernel has the F32 kernel's structure");
  static constexpr bool kHasRingKernel = false;
  static constexpr bool kHasDetKernel = false;
  static constexpr bool kSoftcapKernel = false;
  static constexpr bool kDetSoftcapKernel = false;
  static constexpr bool kHasSoftcap = false;
  static constexpr int kKRegSteps = 0;
};

// The config whose postprocess serves Cfg (a block-sparse config's base: the same kernel, not a twin).
template <class Cfg, class = void>
struct BwdDenseOf {
  using type = Cfg;
};
template <class Cfg>
struct BwdDenseOf<Cfg, std::void_t<typename Cfg::Dense>> {
  using type = typename Cfg::Dense;
};

// Whether a backward takes the 80-row tile (BwdConfig<128, 80>): d 128, default mode, no mask
// (no causal, no window: window_left = window_right = -1) and no softcap, as FA3 (which keeps 64 rows
// for causal, local and softcap, where masked steps and the tanh's registers favour the smaller tile).
constexpr bool bwd_rows80(int d, bool deterministic, int window_left, int window_right, float softcap) {
  return d == 128 && !deterministic && window_left < 0 && window_right < 0 && softcap == 0.f;
}

// Whether a backward takes a softcap kernel of its own (BwdConfig::kSoftcapKernel: d 64 with
// 128-row q-blocks, d 128 with 64-row): the accumulator path (no dQ ring) with a softcap, in the
// default mode, and at d 128 in the deterministic mode too (bwd_det_softcap_tile). The ring and
// d 64's deterministic kernel keep the softcap as a run-time branch; the 80-row tile serves none.
constexpr bool bwd_softcap_kernel(int d, int block_m, bool deterministic, bool ring, float softcap) {
  return bwd_softcap_tile(d, block_m) && (!deterministic || bwd_det_softcap_tile(d, block_m)) && !ring &&
         softcap != 0.f;
}

// d 256, d 192 and d_qk 192 / d_v 128 with 80 keys per CTA (FA3's d 256 tile; default mode without
// softcap or a left window edge: bwd_keys80). These kernels are L2-bound: per key block a step's Q / dO
// reads and dQ adds are fixed by the q-block, so 80 keys instead of 64 cut the bytes per FLOP by a
// fifth (docs/notes/bwd-sm90.md). Warpgroup w computes S = Q K^T and dP = dO V^T for its keys
// [40 w, 40 w + 40) and all 64 q rows (not swapped: N = 40), stores P^T and dS^T as keys x q tiles,
// and then computes dV^T, dK^T and dQ^T (swap-AB: the head dim is M) for its head-dim rows in halves
// of 64 (whole atoms). dQ^T is added by vector atomics into the q-block's run in dQ^T's fragment order
// (kDqTransposed). The q-block stays 64 rows, so the workspace is the 64-key kernel's.
template <int D, int DV = D>
struct BwdConfigKeys80 {
  static_assert((D == 256 && DV == 256) || (D == 192 && (DV == 192 || DV == 128)),
                "80-key tile: d 256, d 192, d_qk 192 / d_v 128");
  static constexpr int kHeadDim = D;
  static constexpr int kHeadDimV = DV;
  static constexpr int kBlockM = 64;  // q rows per step
  static constexpr int kBlockN = 80;  // keys per CTA
  static constexpr int kWgKeys = 40;  // keys of a warpgroup's S / dP: the N of S = Q K^T
  static constexpr int kStages = 2;   // Q ring depth
  // dO stages: d 256 one (two do not fit beside 80 keys); d 192 two (197 KB; 192 / 128: 171 KB), so that
  // the next step's dO loads while this step's dV^T still reads its stage (one stage measured 1.5-3.5 %
  // slower at d 192, 0.4-2.3 % at 192 / 128: notes, session 33).
  static constexpr int kDoStages = D == 256 ? 1 : 2;
  static constexpr int kAtoms = D / 64;
  static constexpr int kAtomsV = DV / 64;  // V and dO: d_v's atoms (bwd_load_kv reads these)
  static constexpr int kQAtomBytes = kBlockM * 128;
  static constexpr int kKAtomBytes = kBlockN * 128;
  static constexpr int kQBytes = kAtoms * kQAtomBytes;
  static constexpr int kKBytes = kAtoms * kKAtomBytes;
  static constexpr int kVBytes = kAtomsV * kKAtomBytes;
  static constexpr int kDoBytes = kAtomsV * kQAtomBytes;
  // Warpgroup w's halves (64 head-dim rows each, whole atoms): dV^T over dO's atoms [dv_atom0(w), + dv_halves(w)),
  // dK^T over Q's and dQ^T over K's [dk_atom0(w), + dk_halves(w)) (each dQ^T half issued before its dK^T half:
  // keys80.cuh). Warpgroup 0 takes dO's first two atoms, warpgroup 1 K's / Q's last two; so in halves of MMA
  // work (dV^T + dK^T + dQ^T) d 256 is 6 + 6, d 192 4 + 5 (dV^T 2 + 1, dK^T / dQ^T 1 + 2), 192 / 128 4 + 4
  // (dV^T 2 + 0). S and dP (40 keys each) are even. Accumulators: dV^T + dK^T 40 registers a half: d 256
  // 160 a thread, d 192 120 in either warpgroup, 192 / 128 120 / 80.
  static constexpr int kDvHalves0 = 2, kDvHalves1 = kAtomsV - 2;
  static constexpr int kDkHalves1 = 2, kDkHalves0 = kAtoms - 2;
  static constexpr bool kEvenShares = kDvHalves0 == kDvHalves1 && kDkHalves0 == kDkHalves1;  // one code path
  static constexpr int dv_halves(int w) { return w == 0 ? kDvHalves0 : kDvHalves1; }
  static constexpr int dk_halves(int w) { return w == 0 ? kDkHalves0 : kDkHalves1; }
  static constexpr int dv_atom0(int w) { return w == 0 ? 0 : kDvHalves0; }
  static constexpr int dk_atom0(int w) { return w == 0 ? 0 : kDkHalves0; }
  static constexpr bool kStatsByQuad = false;  // lse / D in plain row order (preprocess.cuh)
  static constexpr bool kDqTransposed = true;
  static constexpr bool kKeys80 = true;
  static constexpr bool kBlockList = false;
  static constexpr bool kBitmask = false;
  static constexpr bool kBias = false;
  static constexpr bool kBiasF32 = false;
  static constexpr bool kBiasAlibi = false;
  static constexpr bool kHasRingKernel = false;  // the dQ ring is d 128's (dq_ring.h)
  // Launch settings of the default mode only (launch.cuh): no deterministic kernel; under a right
  // edge the longest-first order in L2 sections (lpt_order.h), each CTA walking upwards and no
  // paired key blocks: FA3's causal d 256 order (notes: s4k causal +5 % over block order).
  static constexpr bool kLptOrder = true;
  static constexpr bool kPairKeyBlocks = false;
  static constexpr bool kHasDetKernel = false;
  static constexpr bool kSoftcapKernel = false;  // no softcap on this tile (bwd_keys80)
  static constexpr int kDetChunk = 2048 / kBlockN;
  static constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
};

// Whether a backward takes the 80-key tile (d 256, d 192, and d_qk 192 / d_v 128 with d = 192): default
// mode (the atomics' order is not fixed), no softcap (its tanh's registers do not fit beside dK^T + dV^T
// of 80 keys), no left window edge (full, causal and right-only windows; local windows keep the 64-key
// tile, as FA3 keeps its smaller tiles for local masks).
constexpr bool bwd_keys80(int d, bool deterministic, int window_left, float softcap) {
  return (d == 256 || d == 192) && !deterministic && window_left < 0 && softcap == 0.f;
}

// The q-block size of the backward at head dim d, for the host's workspace (each sequence padded
// to a multiple of it) and q-block count; the launch picks the config with the same size.
constexpr int bwd_block_m(int d, bool rows80) {
  return rows80 ? BwdConfig<128, 80>::kBlockM
       : d == 64 ? BwdConfig<64>::kBlockM : d == 96 ? BwdConfig<96>::kBlockM : d == 128 ? BwdConfig<128>::kBlockM
       : d == 192 ? BwdConfig<192>::kBlockM : BwdConfig<256>::kBlockM;
}

}  // namespace fastattn::sm90
