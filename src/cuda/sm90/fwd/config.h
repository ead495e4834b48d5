// Tile shapes of the Hopper forward, per head dim. Only these change the kernel's layout; masks,
// seqlens, GQA ratio, scale and softcap are run-time arguments.
#pragma once

namespace fastattn::sm90 {

// Keys per KV tile. d = 64: 192 (fewer row reductions, O rescales and barrier hand-offs per score;
// FA3's choice too). d > 128: 80 keep S + O + P within 240 registers and K + V (2 stages) + Q
// within 227 KB. Launch-time alternatives (fwd/launch.cuh): d = 64 three warpgroups, or short keys
// 128 with a 3-deep ring; d = 128 narrow windows 64 with 4 stages.
constexpr int default_block_n(int d) { return d <= 64 ? 192 : d <= 128 ? 128 : 80; }

// Consumer warpgroups, 64 query rows each: 2 (a 128-row tile), or 3 (192 rows) where the softmax
// is as long as a warpgroup's GEMMs (d = 64: exp count and MMA cycles per score are equal) and
// needs two other warpgroups' GEMMs to hide under (FA3's choice at d = 64). Three warpgroups leave
// 160 registers each: S + P + O of a 64 x 128 x 64 tile fit, 192 keys do not.
template <int D, int N = default_block_n(D), int Stages = 2, int ConsumerWGs = 2>
struct FwdConfig {
  static_assert(ConsumerWGs == 2 || ConsumerWGs == 3, "two or three consumer warpgroups");
  static constexpr int kHeadDim = D;
  static constexpr int kConsumerWarpgroups = ConsumerWGs;
  static constexpr int kBlockM = 64 * ConsumerWGs;
  static constexpr int kBlockN = N;
  static constexpr int kStages = Stages;             // K/V smem ring depth
  static constexpr int kAtoms = (D + 63) / 64;       // 64-column swizzle atoms per row
  static constexpr int kQAtomBytes = kBlockM * 128;
  static constexpr int kKVAtomBytes = kBlockN * 128;
  // Two Q buffers let a consumer issue the next tile's first QK beside the current tile's last PV
  // (no per-tile prologue or epilogue bubble); d = 256 has no room for the second (Q 64 KB + the
  // K/V ring 160 KB), so there a tile ends before the next begins.
  static constexpr int kQBytes = kAtoms * kQAtomBytes;
  // V, O and the PV GEMM span d_v's atoms (VHeadDim below: d_v < d).
  static constexpr int kHeadDimV = D;
  static constexpr int kVAtoms = kAtoms;
  static constexpr int kRingBytes = kStages * (kAtoms + kVAtoms) * kKVAtomBytes;
  // 227 KB of dynamic smem per block; 1 KB of it aligns the base, 1 KB holds the barriers.
  static constexpr int kQBuffers = 2 * kQBytes + kRingBytes + 2048 <= 227 * 1024 ? 2 : 1;
  // InterWG ping-pong pays where softmax is a large share of the loop (d <= 128: +5..20%); at
  // d = 256 with 64-wide KV tiles it cost up to 25% (docs/notes/fwd-sm90.md).
  static constexpr bool kPingPong = D <= 128;
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  // setmaxnreg budgets: 24 x 128 + 240 x 256 = 64512 of the SM's 65536 registers (2 consumers),
  // 24 x 128 + 160 x 384 = 64512 (3 consumers).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = ConsumerWGs == 2 ? 240 : 160;
  // V's wait between the QK and PV issues (so that it runs while QK is on the tensor cores) fits
  // in two warpgroups' 240 registers; three (160) spilled 4 bytes with it, and wait before the turn.
  static constexpr bool kVWaitUnderQK = ConsumerWGs == 2;
  // Three warpgroups reduce both rows' maxima before the first exp (FA3's order): with the plain
  // loop body (fwd/mainloop.cuh) and the PV wait between the rows' exps, d = 64 ran 2.2-3.6% faster
  // at s 1k-8k full and causal. The same wait with row 1's max
  // reduced under row 0's exps (softmax.step) spilled 46 bytes there. Two warpgroups keep
  // softmax.step: there the overlap saved ~65 static cycles a block.
  static constexpr bool kMaximaFirst = ConsumerWGs == 3;
  // Partial blocks above the full ones (causal diagonal, a window's right edge) run in the plain
  // loop body, which then tests each block against the full range and masks the partial ones,
  // instead of in the generic body. Three warpgroups (d = 64): causal s 4k +1.9%, 8k +0.8%,
  // window (64, 0) +3.2%. Two warpgroups keep a test-free plain body: d = 128 causal level,
  // d = 64 s 1k causal -1.4%, GQA -6% (noisy).
  static constexpr bool kMaskInPlainBody = ConsumerWGs == 3;
  // Plain blocks take their exps with no row max first (OnlineSoftmax::step_deferred, session 20:
  // d = 128 +6.6-8.6% causal, +7.5% unmasked s 4k, GQA +6.6%; d = 256 level; d = 64 short causal
  // +1.7%). It keeps the scores beside P: 176 or 192 keys on two warpgroups
  // spilled (60 and 36 bytes), and three warpgroups have 160 registers.
  static constexpr bool kDeferredMax = ConsumerWGs == 2 && N <= 128;
  // A packed (GQA) tile's warpgroups whose rows are all past the pack's heads skip their GEMMs
  // (fwd/tile.cuh: idle_for; a GQA-4 decode's second warpgroup: its CTA streams 1.27 x faster at
  // d 128). d > 128: the condition spilled 12 bytes at d 256, and the rate was measured at 128 only.
  static constexpr bool kPackedIdle = D <= 128;
  // Split-KV (SplitConfig below): off in the menu's configs, whose kernels stay as they are.
  static constexpr bool kSplit = false;
  // K/V tiles in smem by key half (SplitConfig's PageHalves below): off in the menu's configs.
  static constexpr bool kPageHalves = false;
  // Split partials merged inside a thread-block cluster (SplitConfig's InCluster below): off.
  static constexpr bool kClusterMerge = false;
  // Key blocks from a per-tile list of a block-sparse mask (BlockSparseConfig below): off.
  static constexpr bool kBlockList = false;
  // Block lists of an element bitmask, partial blocks' bits applied (BitmaskConfig below): off.
  static constexpr bool kBitmask = false;
  // An additive score bias read per block (BiasConfig below): off.
  static constexpr bool kBias = false;
  // The bias staged in smem by the consumer warps (BiasConfig below): off.
  static constexpr bool kBiasStaged = false;
  // Split tiles of at most 8 stored rows run swapped, keys as the wgmma's M (NarrowConfig below): off.
  static constexpr bool kNarrowRows = false;
};

// A config with a narrower V than Q and K (d_v < d: DeepSeek's d_qk 192, d_v 128): V's tiles, the
// PV GEMM's N, O and the output span d_v's atoms; Q, K and QK keep d's. A type of its own, so that
// the d_v = d kernels keep their configs (and symbols) as they are. With V smaller the ring may
// leave room for the second Q buffer, so that is decided again.
template <class Base, int DV>
struct VHeadDim : Base {
  static_assert(DV < Base::kHeadDim && DV % 64 == 0, "d_v: whole 64-column atoms, below d");
  static constexpr int kHeadDimV = DV;
  static constexpr int kVAtoms = DV / 64;
  static constexpr int kRingBytes = Base::kStages * (Base::kAtoms + kVAtoms) * Base::kKVAtomBytes;
  static constexpr int kQBuffers = 2 * Base::kQBytes + kRingBytes + 2048 <= 227 * 1024 ? 2 : 1;
};

// A config's split-KV twin: the tile space gains a split index (each split walks a balanced
// share of its tile's key blocks) and the epilogue writes fp32 partial O and LSE into the split
// workspace instead of out and lse (sm90/fwd/split.h). A layout change of the store, hence a
// type: the number of splits stays a run-time argument. Its own type name keeps the kernel's
// symbol apart from the unsplit one's.
// PageHalves: a paged cache whose pages hold half a key block (page 64 at 128 keys) gets its K and
// V tiles in smem as [key half][atom][kBlockN / 2 rows] instead of [atom][kBlockN rows], so that
// one TMA copy (a 3-D box: 64 columns x kBlockN / 2 rows x every atom) brings one page's keys:
// 2 copies a tile instead of 4. The consumers then take QK as two N = kBlockN / 2 wgmmas (the
// same columns of S, the same sums: bitwise the contiguous tile's S) and read V's halves from
// their own addresses (fwd/mainloop.cuh).
// InCluster: the kernel is launched in thread-block clusters of `splits` CTAs, one CTA per split
// tile, and keeps its partials in smem, where the cluster merges them (cluster_merge.cuh; the rule:
// sched/split_plan.h, merge_in_cluster). A type of its own, so that the split kernels merged by the
// combine kernel stay as they are (no cluster code, no run-time flag).
template <class Base, bool PageHalves = false, bool InCluster = false>
struct SplitConfig : Base {
  static_assert(!PageHalves || Base::kBlockN == 128, "page halves: 128-key tiles (64-key wgmma halves)");
  static_assert(!PageHalves || Base::kVAtoms == Base::kAtoms, "page halves: K and V tiles of one shape");
  static_assert(!InCluster || Base::kQBuffers == 2, "the cluster merge keeps its partials in the spare Q buffer");
  static constexpr bool kSplit = true;
  static constexpr bool kPageHalves = PageHalves;
  static constexpr bool kClusterMerge = InCluster;
};

// A split config's narrow-tile twin (fwd/narrow_rows.cuh): a decode tile whose stored rows all lie in
// its first 8 (sched/split_plan.h: narrow_rows_fit) takes S^T = K Q^T and O^T += V^T P^T with N = 8, the
// two consumer warpgroups on alternate 64-key blocks, instead of 64 rows of which 4 are real. A
// different consumer, hence a type (the split kernels without it keep their code and symbols); the smem
// layout and the producer are the base's (launch_split.cuh: NarrowBase, 64 keys x 4 stages).
template <class Base>
struct NarrowConfig : Base {
  static_assert(Base::kSplit && Base::kBlockN == 64 && Base::kConsumerWarpgroups == 2 &&
                    Base::kHeadDimV == Base::kHeadDim,
                "narrow tiles: d = d_v split twins of a two-warpgroup 64-key config");
  static constexpr bool kNarrowRows = true;
};

// A config's block-sparse twin: each tile walks the kept key blocks of its block-sparse mask row
// (mask/block_source.cuh's BlockList, built per launch by sm90/fwd/block_lists.cuh) instead of its
// window's whole block range. A type of its own (the kernels without a mask keep their code and
// symbols); the layout is the base config's. Every kernel tile must lie inside one mask block
// (cuda/block_mask_rule.h), so a listed block is kept whole and only the window's edges mask.
template <class Base>
struct BlockSparseConfig : Base {
  static_assert(!Base::kSplit, "block-sparse: no split-KV twin");
  static_assert(Base::kBlockM == 128 && Base::kBlockN == 128, "block-sparse: 128 x 128 tiles");
  static constexpr bool kBlockList = true;
};

// A block-sparse config's element-bitmask twin: each tile walks its own list of the key blocks its
// bits keep (mask/block_source.cuh's BitList, built per launch by sm90/fwd/bit_lists.h): empty blocks
// are not listed, full ones run as the window's full blocks do, and partial ones AND the caller's bits
// (gathered at prep time in accumulator order, mask/bit_order.h) into the window's keep bits. A type
// of its own: the block-sparse and unmasked kernels keep their code and symbols.
template <class Base>
struct BitmaskConfig : BlockSparseConfig<Base> {
  static_assert(Base::kBlockN == 128, "bitmask: one 32-bit keep word per thread row (128-key tiles)");
  static constexpr bool kBitmask = true;
};

// A config's additive-bias twin (AttnArgs::bias): every block adds its bias tile (staged in smem or
// read from global memory straight into the accumulator layout) after softcap and before the mask,
// the scores scaled with it to natural units. The full blocks run the plain loop body (no softcap
// there; the deferred max where the base has it) as the dense kernel's do; FwdBias::plain = false
// (FASTATTN_BIAS_PLAIN=0) keeps every block in the generic body. A type of its own, so that the
// kernels without a bias keep their code and symbols; the layout is the base config's. Over a
// BlockSparseConfig or BitmaskConfig it walks the mask's block lists as they do (empty blocks skipped).
template <class Base>
struct BiasConfig : Base {
  static_assert(!Base::kSplit, "bias: no split-KV twin (refused by bias_rule)");
  static constexpr bool kBias = true;
  // Each consumer warp's 16 rows of a block's bias staged in smem (fwd/tile.cuh BiasStageSmem: 32 KB at
  // d 128, 48 KB at d 64's 192 keys) where the layout leaves room: not beside the bitmask's bit slots
  // (d 128: Q 64 KB + K/V 128 KB + bias 32 KB + bits 4 KB > 227 KB). Else every block loads it.
  static constexpr bool kBiasStaged = !Base::kBitmask;
};

}  // namespace fastattn::sm90
