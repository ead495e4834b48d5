// Named-barrier ids (bar.sync / bar.arrive) of the Hopper kernels, in one registry so that no two
// uses in a kernel collide. Id 0 is __syncthreads; the hardware has 16 per CTA. Each kernel family
// has its own enum (ids are per kernel: a backward's may reuse the forward's numbers).
#pragma once

namespace fastattn::sm90 {

// The forward (sm90/fwd): consumer warpgroup w (0..2) waits on kPingPongBar + w for its turn to
// issue, and syncs its four warps on kStoreBar + w once its O rows are staged in smem for TMA.
// Narrow tiles (fwd/narrow_rows.cuh, no ping-pong): warpgroup w syncs its warps on kNarrowBar + w
// (maxima, P^T, V's zeroed rows, sums), and both on kNarrowMergeBar to merge at the tile's end.
enum FwdNamedBarrier : int {
  kPingPongBar = 1,  // 1..3
  kStoreBar = 4,     // 4..6
  kNarrowBar = 1,    // 1..2: the ping-pong's ids, unused by a narrow kernel
  kNarrowMergeBar = 7,
  kFwdBarrierEnd = 8,
};

// The backward (sm90/bwd): both consumer warpgroups sync on kBwdDsBar once this step's dS^T (at
// d > 128 also P^T) is in smem, and the 80-key d 256 tile's also on kBwdPtBar once its P^T is;
// staged dQ goes to the writer warp by mbarriers; at d <= 128 warpgroup w syncs its four warps on
// kBwdEpiBar + w once its dK / dV rows are staged in the K / V tiles; the dQ ring's writer warps
// (warps 1-3) sync on kBwdRingBar to hand a q-block's store job over, and its storers (warps 2-3)
// on kBwdRingStoreBar once they are done with it. Both consumer warpgroups sync on kBwdZeroBar once
// they have zeroed the K / V rows past seqused_k or a step's Q / dO rows past seqused_q
// (bwd/zero_rows.cuh).
enum BwdNamedBarrier : int {
  kBwdDsBar = 1,
  kBwdEpiBar = 2,  // 2..3
  kBwdRingBar = 4,
  kBwdPtBar = 5,
  kBwdRingStoreBar = 6,
  kBwdZeroBar = 7,
  kBwdBarrierEnd = 8,
};

}  // namespace fastattn::sm90
