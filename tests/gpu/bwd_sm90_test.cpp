// Hopper backward vs the float64 reference: dq, dk, dv of random problems with FA3's rule
//   max|g - ref| <= 2 * max|baseline - ref| + rounding step of the dtype at 0.3 + max|ref|,
// where the baseline is the reference with P and dS rounded to the input dtype and D = rowsum(dO * out)
// from its forward's out in the input dtype (the kernels read the stored out). Head dims 64 / 96 /
// 128 and (LargeDims*: the 64-key split shape, and in the default mode without softcap or left window edge
// the 80-key tile) 192 / 256 and d_qk 192 / d_v 128, both
// dtypes, odd lengths (1, 17, 113, 4097), s_q != s_k both ways, GQA 1/4/8, varlen with
// empty sequences, seqused, causal, local windows, softcap. The forward (out, lse) comes from the
// CUDA forward; gradients are poisoned before every run; each case runs twice: dk and dv must be
// bitwise equal always, dq too in deterministic mode (three runs there).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "bwd_case.h"  // BwdCase, run_bwd_case
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

class Sm90Bwd : public HopperTest {};

// Case families run for both shapes: d <= 128 (128-key CTAs) and d > 128 (64-key CTAs split on d).
void dtype_cases(std::initializer_list<int> dims) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int d : dims)
      for (bool causal : {false, true}) {
        BwdCase c = bcase(dt, d, 200, 300);
        c.batch = 2;
        c.causal = causal;
        run_bwd_case(c);
      }
}

// Deterministic mode: GQA causal (d_gqa), s_k > s_q (d_long_k), varlen with a window (d_varlen).
void deterministic_cases(int d_gqa, int d_long_k, int d_varlen, int dv = 0) {
  BwdCase c = bcase(DType::BF16, d_gqa, 1000, 1100, dv);
  c.hq = 4;
  c.hkv = 1;
  c.causal = true;
  c.deterministic = true;
  run_bwd_case(c);
  BwdCase u = bcase(DType::F16, d_long_k, 777, 2000, dv);
  u.batch = 2;
  u.hq = u.hkv = 2;
  u.deterministic = true;
  run_bwd_case(u);
  BwdCase v = bcase(DType::BF16, d_varlen, 0, 0, dv);
  v.lens_q = {300, 0, 129};
  v.lens_k = {500, 7, 129};
  v.wl = 100;
  v.wr = 0;
  v.deterministic = true;
  run_bwd_case(v);
}

// Softcap 5 without a mask (d_a) and 30 with causal (d_b): the derivative's two regimes.
void softcap_cases(int d_a, int d_b) {
  for (int d : {d_a, d_b}) {
    BwdCase c = bcase(DType::BF16, d, 300, 333);
    c.softcap = d == d_a ? 5.f : 30.f;
    c.causal = d == d_b;
    run_bwd_case(c);
  }
  // Deterministic mode (d 128: the softcap twin of the deterministic kernel; d 64: its run-time branch).
  BwdCase c = bcase(DType::F16, d_b, 300, 333);
  c.softcap = 30.f;
  c.causal = true;
  c.deterministic = true;
  run_bwd_case(c);
}

// The 80-row (d 128) and 80-key (d 256) tiles: varlen with empty sequences and tails of 80 on
// either side (GQA 4:1), and varlen + seqused ...
void tile80_varlen_cases(int d, bool causal, int dv = 0) {
  BwdCase v = bcase(DType::F16, d, 0, 0, dv);
  v.lens_q = {81, 0, 160, 1, 239};
  v.lens_k = {80, 3, 300, 0, 129};
  v.hq = 4;
  v.hkv = 1;
  v.causal = causal;
  run_bwd_case(v);
  BwdCase u = bcase(DType::BF16, d, 0, 0, dv);
  u.lens_q = {170, 79, 5};
  u.lens_k = {90, 200, 81};
  u.used_q = {161, 0, 5};
  u.used_k = {90, 113, 1};
  run_bwd_case(u);
}
// ... and the neighbours that keep the 64-row / 64-key kernel on the same kind of problem (softcap,
// deterministic mode), so that the host's choice is checked on both sides.
void tile80_neighbour_cases(int d, int dv = 0) {
  BwdCase cap = bcase(DType::BF16, d, 161, 200, dv);
  cap.softcap = 5.f;
  run_bwd_case(cap);
  BwdCase det = bcase(DType::F16, d, 161, 300, dv);
  det.hq = 4;
  det.hkv = 2;
  det.deterministic = true;
  run_bwd_case(det);
}

TEST_F(Sm90Bwd, HeadDimsAndDtypes) { dtype_cases({64, 96, 128}); }

TEST_F(Sm90Bwd, OddLengths) {
  for (int sq : {1, 17, 113})
    for (int sk : {1, 17, 113, 300})
      for (bool causal : {false, true}) {
        BwdCase c = bcase(DType::BF16, 128, sq, sk);
        c.causal = causal;
        run_bwd_case(c);
      }
}

TEST_F(Sm90Bwd, Long) {
  for (bool causal : {false, true}) {
    BwdCase c = bcase(DType::BF16, 128, 4097, 4097);
    c.hq = c.hkv = 1;
    c.causal = causal;
    run_bwd_case(c);
  }
  BwdCase c = bcase(DType::F16, 64, 1000, 4097);
  c.hq = c.hkv = 1;
  c.causal = true;
  run_bwd_case(c);
  BwdCase w = bcase(DType::BF16, 96, 1500, 700);  // s_q > s_k, causal: the first 800 rows keep no key
  w.causal = true;
  run_bwd_case(w);
}

// Paired key blocks (d 128 default mode under a causal-like mask, sm90/bwd/lpt_order.h): the host
// pairs where the pairs fill the SMs, which FASTATTN_MAX_CTAS = 3 makes every case here do. Odd key
// block counts (a middle block alone), one block (17, 113: no second tile), s_q != s_k both ways,
// GQA, a right-edged window without a left edge, varlen with empty sequences and seqused.
struct CtaCap {
  ScopedEnv env{"FASTATTN_MAX_CTAS", "3"};
};
TEST_F(Sm90Bwd, PairedKeyBlocks) {
  CtaCap cap;
  struct S {
    int sq, sk, batch;
  };
  for (const S& sh : {S{1, 1, 3}, S{17, 17, 3}, S{113, 113, 3}, S{300, 300, 2}, S{700, 700, 1}, S{17, 300, 2},
                      S{300, 17, 3}, S{1500, 700, 1}, S{4097, 4097, 1}}) {
    BwdCase c = bcase(sh.sq == 300 ? DType::F16 : DType::BF16, 128, sh.sq, sh.sk);
    c.batch = sh.batch;
    c.hq = c.hkv = 1;
    c.causal = true;
    run_bwd_case(c);
  }
  BwdCase g = bcase(DType::F16, 128, 257, 300);
  g.hq = 8;
  g.hkv = 2;
  g.causal = true;
  run_bwd_case(g);
  BwdCase w = bcase(DType::BF16, 128, 333, 400);
  w.wl = -1;
  w.wr = 20;
  run_bwd_case(w);
  bwd_varlen_cases(128, 128, 128);
}

TEST_F(Sm90Bwd, Gqa) {
  for (int ratio : {1, 4, 8}) {
    BwdCase c = bcase(DType::F16, 128, 257, 300);
    c.hkv = 2;
    c.hq = 2 * ratio;
    c.causal = ratio == 4;
    run_bwd_case(c);
  }
  BwdCase c = bcase(DType::BF16, 64, 130, 129);
  c.hkv = 1;
  c.hq = 8;
  c.wl = 40;
  c.wr = 7;
  run_bwd_case(c);
}

TEST_F(Sm90Bwd, LocalWindows) {
  struct W {
    int wl, wr, sq, sk;
  };
  for (const W& w : {W{64, 0, 700, 900}, W{100, 50, 900, 700}, W{30, -1, 333, 333}, W{-1, 20, 333, 400},
                     W{0, 0, 256, 256}}) {
    BwdCase c = bcase(DType::BF16, 128, w.sq, w.sk);
    c.wl = w.wl;
    c.wr = w.wr;
    run_bwd_case(c);
  }
  BwdCase c = bcase(DType::F16, 96, 500, 600);
  c.wl = 17;
  c.wr = 3;
  c.causal = true;
  run_bwd_case(c);
}

// d 128 default mode under a window with both edges: dQ through the L2-resident ring (sm90/bwd/dq_ring.h:
// no accumulator, no postprocess; the last key block to add into a q-block stores its dq). Odd
// lengths, s_q != s_k both ways, rows and whole q-blocks with no key (dq = 0 from the preprocess),
// GQA, varlen with empty sequences and seqused, softcap; each first with the ring's full size, then
// with the fewest slots the order allows (FASTATTN_BWD_RING_SLOTS = 1), so that slots are reused and
// writers wait for them, over several sections of units.
struct RingSlots {
  explicit RingSlots(const char* n) : env("FASTATTN_BWD_RING_SLOTS", n) {}
  ScopedEnv env;
};
// FASTATTN_BWD_BAND (bwd_backend.cu): "0" keeps the recompute band off (its windows, right = 0 and
// left <= 64, then take the accumulator path, or the ring where FASTATTN_BWD_RING_SLOTS > 0 forces
// it), n > 0 sets its key blocks a band.
struct BandBlocks {
  explicit BandBlocks(const char* n) : env("FASTATTN_BWD_BAND", n) {}
  ScopedEnv env;
};
BwdCase windowed(BwdCase c, int wl, int wr) {
  c.wl = wl;
  c.wr = wr;
  return c;
}
void ring_cases() {
  struct W {
    int wl, wr, sq, sk, batch, heads;
  };
  for (const W& w : {W{64, 0, 1, 1, 2, 1}, W{64, 0, 17, 113, 2, 1}, W{64, 0, 113, 17, 1, 2}, W{0, 0, 17, 300, 1, 1},
                     W{64, 64, 113, 113, 3, 1}, W{300, 17, 300, 113, 1, 2}, W{64, 0, 700, 900, 1, 2},
                     W{100, 50, 900, 700, 2, 1}, W{0, 0, 500, 200, 2, 2}, W{64, 0, 1000, 1000, 3, 4},
                     W{300, 17, 1500, 1500, 1, 1}, W{64, 0, 4097, 4097, 1, 1}, W{64, 0, 2048, 2048, 2, 2},
                     W{64, 0, 4096, 4096, 2, 8}}) {  // the last: 512 CTAs, more than are resident
    BwdCase c = windowed(bcase((w.sq + w.wl) % 2 == 0 ? DType::BF16 : DType::F16, 128, w.sq, w.sk), w.wl, w.wr);
    c.batch = w.batch;
    c.hq = c.hkv = w.heads;
    run_bwd_case(c);
  }
  BwdCase g = windowed(bcase(DType::BF16, 128, 257, 300), 64, 64);  // GQA 4
  g.hq = 8;
  g.hkv = 2;
  run_bwd_case(g);
  BwdCase wide = windowed(bcase(DType::F16, 128, 2048, 2048), 64, 0);  // GQA 4, 256 CTAs: waits on later tickets
  wide.batch = 4;
  wide.hq = 16;
  wide.hkv = 4;
  run_bwd_case(wide);
  BwdCase v = windowed(bcase(DType::BF16, 128, 0, 0), 64, 0);  // varlen with empty sequences
  v.lens_q = {17, 200, 0, 64, 300};
  v.lens_k = {300, 30, 5, 0, 290};
  v.hq = 4;
  v.hkv = 2;
  run_bwd_case(v);
  BwdCase u = windowed(bcase(DType::F16, 128, 300, 400), 100, 3);  // seqused
  u.batch = 3;
  u.used_q = {300, 0, 129};
  u.used_k = {1, 400, 200};
  run_bwd_case(u);
  BwdCase cap = windowed(bcase(DType::BF16, 128, 333, 300), 64, 0);
  cap.softcap = 30.f;
  run_bwd_case(cap);
}
// The host takes the ring by default only for left = 0, right <= 64 (dq_ring.h, bwd_ring_by_default); the
// cases force it (512 slots: the ring's full size) at every window it serves.
TEST_F(Sm90Bwd, DqRingWindows) {
  BandBlocks off("0");  // the (64, 0) cases through the ring, as before the band
  RingSlots full("512");
  ring_cases();
}
TEST_F(Sm90Bwd, DqRingWindowsFewestSlots) {
  BandBlocks off("0");
  RingSlots fewest("1");
  ring_cases();
}

// The full mask's wave tail (sm90/bwd/wave_tail.h): with the SMs capped (FASTATTN_MAX_CTAS) and the pieces
// forced (FASTATTN_BWD_TAIL), small problems end in split tiles whose pieces meet in the workspace. Every
// d <= 128 tile: d 64's 128-row, d 96's, d 128's 80-row and (softcap) 64-row, and d 64's softcap kernel, and
// d 256's 80-key tile (d 192's, with uneven warpgroup shares, never splits); more
// pieces than a tile's q-blocks (capped to them), odd lengths, s_q != s_k both ways, GQA, both dtypes. The
// route (pieces) is checked by the probe; dk and dv bitwise run to run (the runs are summed in piece order).
// One q-block, the deterministic mode and a causal mask never split.
TEST_F(Sm90Bwd, WaveTailPieces) {
  struct W {
    const char *ctas, *pieces;
    DType dt;
    int d, sq, sk, batch, hq, hkv;
    float softcap;
    int block_m, expect;
  };
  // tiles = ceil(sk / 128) x hkv x batch; a split needs tiles > ctas and tiles % ctas != 0.
  for (const W& w : {W{"5", "3", DType::BF16, 128, 1000, 1000, 2, 4, 4, 0.f, 80, 3},     // 64 tiles, 4 split
                     W{"4", "8", DType::F16, 128, 4097, 300, 1, 2, 2, 0.f, 80, 8},       // 6 tiles, 2 split
                     W{"5", "8", DType::BF16, 128, 113, 4097, 1, 8, 2, 0.f, 80, 2},      // 2 q-blocks: 2 pieces
                     W{"3", "3", DType::F16, 64, 777, 1000, 2, 4, 1, 0.f, 128, 3},       // 16 tiles, 1 split
                     W{"4", "4", DType::BF16, 96, 300, 333, 3, 2, 2, 0.f, 64, 4},        // 18 tiles, 2 split
                     W{"5", "3", DType::BF16, 128, 500, 700, 2, 2, 2, 5.f, 64, 3},       // softcap: 64-row tile
                     W{"3", "5", DType::F16, 64, 200, 1000, 1, 4, 2, 30.f, 128, 2},      // d 64's softcap kernel
                     W{"5", "3", DType::BF16, 128, 1, 1000, 2, 4, 4, 0.f, 80, 0},      // one q-block
                     W{"5", "3", DType::BF16, 256, 500, 700, 2, 2, 2, 0.f, 64, 3},     // 80-key tile: 36 tiles
                     W{"5", "8", DType::F16, 256, 113, 4097, 1, 4, 1, 0.f, 64, 2},     // 52 tiles, 2 q-blocks
                     W{"5", "3", DType::BF16, 192, 500, 700, 2, 2, 2, 0.f, 64, 0}}) {  // uneven shares: none
    SCOPED_TRACE(std::string("ctas ") + w.ctas + " pieces " + w.pieces + " d " + std::to_string(w.d));
    const ScopedEnv cap("FASTATTN_MAX_CTAS", w.ctas), tail("FASTATTN_BWD_TAIL", w.pieces);
    BwdCase c = bcase(w.dt, w.d, w.sq, w.sk);
    c.batch = w.batch;
    c.hq = w.hq;
    c.hkv = w.hkv;
    c.softcap = w.softcap;
    c.route = BwdRoute{w.block_m, false, false, w.expect};
    run_bwd_case(c);
  }
  const ScopedEnv cap("FASTATTN_MAX_CTAS", "5"), tail("FASTATTN_BWD_TAIL", "3");
  // A CUDA-graph capture replayed: the runs' workspace and the counts' clear inside the graph.
  BwdCase graph = bcase(DType::BF16, 128, 1000, 1000);
  graph.batch = 2;
  graph.hq = graph.hkv = 4;
  graph.graph = true;
  graph.route = BwdRoute{80, false, false, 3};
  run_bwd_case(graph);
  BwdCase det = bcase(DType::BF16, 128, 1000, 1000);
  det.batch = 2;
  det.deterministic = true;
  det.route = BwdRoute{64, false, false, 0};
  run_bwd_case(det);
  BwdCase causal = bcase(DType::F16, 128, 1000, 1000);
  causal.batch = 2;
  causal.causal = true;
  causal.route = BwdRoute{64, false, false, 0};
  run_bwd_case(causal);
}

// The default routes of d 128 windows (no switch set): the band for right = 0 and 0 < left <= 64, the
// ring for left = 0 and right <= 64 at GQA groups up to 4, the accumulator path for the rest (session 35's A/B), each checked by
// the stats probe and against the reference.
TEST_F(Sm90Bwd, WindowRoutes) {
  const ScopedEnv ring("FASTATTN_BWD_RING_SLOTS", nullptr), band("FASTATTN_BWD_BAND", nullptr);
  struct W {
    int wl, wr, hq, hkv;
    bool ring, band;
  };
  for (const W& w : {W{64, 0, 4, 2, false, true}, W{1, 0, 2, 2, false, true}, W{0, 64, 4, 1, true, false},
                     W{0, 0, 2, 2, true, false}, W{0, 65, 2, 2, false, false}, W{65, 0, 2, 1, false, false},
                     W{0, 64, 8, 1, false, false},
                     W{64, 64, 8, 2, false, false}, W{100, 50, 2, 2, false, false}, W{256, 0, 2, 2, false, false}}) {
    BwdCase c = windowed(bcase(w.wl % 2 == 0 ? DType::BF16 : DType::F16, 128, 700, 900), w.wl, w.wr);
    c.hq = w.hq;
    c.hkv = w.hkv;
    c.route = BwdRoute{64, w.ring, w.band};
    run_bwd_case(c);
  }
  // A softcap keeps the default ring (the ring's kernel takes it at run time; the band does not); the
  // deterministic mode never takes the ring (ordered adds on the accumulator path), the band as it stands.
  BwdCase cap = windowed(bcase(DType::F16, 128, 333, 300), 0, 17);
  cap.softcap = 30.f;
  cap.route = BwdRoute{64, true, false};
  run_bwd_case(cap);
  for (auto [wl, wr, banded] : {std::tuple{0, 64, false}, std::tuple{64, 0, true}}) {
    BwdCase det = windowed(bcase(DType::BF16, 128, 700, 900), wl, wr);
    det.deterministic = true;
    det.route = BwdRoute{64, false, banded};
    run_bwd_case(det);
  }
}

// d 128 default mode under a window with right = 0 and 0 < left <= 64: the recompute band
// (sm90/bwd/band.h, band_kernel.cuh: bands of key blocks, each q-block's dQ summed in the one CTA that
// owns it, its lower visitor's partial held on chip, the halo block before a band recomputed for dQ;
// no accumulator, no ring, no postprocess). Odd lengths (1, 17, 113, 4097: a last band of one block),
// s_q != s_k both ways (key blocks no row sees: dK = dV = 0; q-blocks no key block visits: dq = 0 from
// the preprocess; diagonals off the q-blocks' grid: two q-blocks held across a switch), left 1, 17,
// 33, 63, 64, batch and heads, GQA 4 and 8 (partials held in the global slots past the two in smem),
// varlen with empty sequences, seqused, a CUDA-graph replay. dq must be bitwise equal run to run (one
// summation order).
// band_cases(false): every third of them and the varlen case; det: in deterministic mode, which the band
// serves as it stands (dq, dk, dv then checked bitwise over three runs).
// Sm90BwdStats.D128Band / D128BandDeterministic check that the band ran (the host's route).
void band_cases(bool all, bool det = false) {
  struct W {
    int wl, sq, sk, batch, hq, hkv;
  };
  int i = 0;
  // (A left edge at or past the longest key sequence is no edge, launch_plan.cpp: s_k = 17 takes left <= 16.)
  for (const W& w : {W{64, 1, 113, 2, 1, 1}, W{15, 17, 17, 1, 2, 2}, W{63, 113, 113, 2, 1, 1}, W{1, 17, 113, 1, 1, 1},
                     W{16, 113, 17, 1, 2, 2}, W{64, 700, 900, 1, 2, 2}, W{17, 900, 700, 2, 1, 1},
                     W{63, 1000, 1000, 3, 4, 4}, W{64, 300, 257, 1, 8, 2}, W{33, 257, 300, 1, 8, 1},
                     W{1, 1000, 1111, 1, 2, 1}, W{64, 2048, 2048, 2, 2, 2}, W{64, 4097, 4097, 1, 1, 1},
                     W{63, 4097, 4000, 1, 2, 1}}) {
    if (!all && i++ % 3 != 0) continue;
    BwdCase c = windowed(bcase((w.sq + w.wl + w.hq) % 2 == 0 ? DType::BF16 : DType::F16, 128, w.sq, w.sk), w.wl, 0);
    c.batch = w.batch;
    c.hq = w.hq;
    c.hkv = w.hkv;
    c.dq_bitwise = true;
    c.deterministic = det;
    run_bwd_case(c);
  }
  BwdCase v = windowed(bcase(DType::BF16, 128, 0, 0), 64, 0);  // varlen with empty sequences
  v.lens_q = {17, 200, 0, 64, 300, 1};
  v.lens_k = {300, 30, 5, 0, 290, 700};
  v.hq = 4;
  v.hkv = 2;
  v.dq_bitwise = true;
  v.deterministic = det;
  run_bwd_case(v);
  if (!all) return;
  BwdCase u = windowed(bcase(DType::F16, 128, 300, 400), 50, 0);  // seqused
  u.batch = 3;
  u.used_q = {300, 0, 129};
  u.used_k = {1, 400, 200};
  u.dq_bitwise = true;
  run_bwd_case(u);
  BwdCase gr = windowed(bcase(DType::BF16, 128, 1500, 1300), 64, 0);  // replays of one CUDA-graph capture
  gr.hq = 4;
  gr.hkv = 2;
  gr.graph = true;
  gr.dq_bitwise = true;
  run_bwd_case(gr);
}
TEST_F(Sm90Bwd, BandWindows) { band_cases(true); }
TEST_F(Sm90Bwd, BandDeterministic) { band_cases(false, true); }
// One small case for compute-sanitizer (bench/band-ab.sh): bands of 3 over 5 key blocks (a short
// last band, halos), s_q != s_k off the q-blocks' grid, GQA 4 (partials in the global slots too).
TEST_F(Sm90Bwd, BandSmall) {
  BandBlocks width("3");
  BwdCase c = windowed(bcase(DType::BF16, 128, 300, 557), 63, 0);
  c.hq = 8;
  c.hkv = 2;
  c.dq_bitwise = true;
  run_bwd_case(c);
}
// Other band widths: 1 (every band one key block, every one with a halo), 3 (short last bands), 64
// (one band a sequence at these lengths).
TEST_F(Sm90Bwd, BandWidths) {
  for (const char* b : {"1", "3", "64"}) {
    SCOPED_TRACE(std::string("FASTATTN_BWD_BAND=") + b);
    BandBlocks width(b);
    band_cases(false);
  }
}

// Window edges past every row's reach (up to INT32_MAX) bound nothing: the same answers as the
// unbounded side (the kernels' int arithmetic on rows and edges must not wrap; the ring must not
// take such a window for a narrow one: its rule is forced on, since by default the host asks it only
// at left = 0).
void huge_window_edge_cases(int d) {
  const ScopedEnv ring_rule("FASTATTN_BWD_RING_SLOTS", "512");
  for (auto [wl, wr] : {std::pair{1 << 30, 1 << 30}, std::pair{INT32_MAX, 0}, std::pair{-1, INT32_MAX},
                        std::pair{INT32_MAX, INT32_MAX}, std::pair{64, INT32_MAX}})
    run_bwd_case(windowed(bcase(DType::BF16, d, 300, 257), wl, wr));
}
TEST_F(Sm90Bwd, HugeWindowEdges) { huge_window_edge_cases(128); }
// d 256 under the LargeDims* name, which a run on a build without d 256 leaves out
// (--gtest_filter='-*LargeDims*').
TEST_F(Sm90Bwd, LargeDimsHugeWindowEdges) { huge_window_edge_cases(256); }

TEST_F(Sm90Bwd, Softcap) { softcap_cases(64, 128); }

// c with GQA hq:hkv, the mask, a softcap and the mode.
BwdCase capped(BwdCase c, int hq, int hkv, bool causal, float softcap, bool deterministic = false) {
  c.hq = hq;
  c.hkv = hkv;
  c.causal = causal;
  c.softcap = softcap;
  c.deterministic = deterministic;
  return c;
}

// The softcap kernels of their own (bwd_softcap_kernel: d 64 with 128-row q-blocks, d 128 with
// 64-row): causal GQA (masked diagonal steps) and causal odd lengths with paired key blocks
// (FASTATTN_MAX_CTAS), full with odd lengths, varlen with empty sequences, a local window (both edges:
// the accumulator path's softcap kernel since session 35; the ring's kernel, which keeps the run-time
// branch, is DqRingWindows' softcap case); and the deterministic mode (d 128: the
// deterministic kernel's softcap twin; d 64: its run-time branch), causal GQA, full, a local window
// and varlen with empty sequences.
void softcap_kernel_cases(int d) {
  {
    CtaCap pairs;
    run_bwd_case(capped(bcase(DType::F16, d, 1000, 1000), 8, 2, true, 30.f));
    run_bwd_case(capped(bcase(DType::BF16, d, 113, 4097), 1, 1, true, 5.f));
  }
  run_bwd_case(capped(bcase(DType::F16, d, 4097, 113), 1, 1, false, 5.f));
  BwdCase v = bcase(DType::BF16, d, 0, 0);
  v.lens_q = {17, 200, 0, 129, 300};
  v.lens_k = {300, 30, 5, 0, 290};
  run_bwd_case(capped(v, 4, 2, true, 30.f));
  run_bwd_case(windowed(capped(bcase(DType::F16, d, 700, 900), 2, 1, false, 30.f), 100, 50));
  run_bwd_case(capped(bcase(DType::BF16, d, 1000, 1100), 4, 1, true, 30.f, true));
  run_bwd_case(capped(bcase(DType::F16, d, 777, 300), 1, 1, false, 5.f, true));
  run_bwd_case(windowed(capped(bcase(DType::BF16, d, 700, 900), 2, 1, false, 30.f, true), 100, 50));
  run_bwd_case(capped(v, 4, 2, true, 30.f, true));
}

TEST_F(Sm90Bwd, D64SoftcapKernels) { softcap_kernel_cases(64); }

TEST_F(Sm90Bwd, D128SoftcapKernels) { softcap_kernel_cases(128); }

TEST_F(Sm90Bwd, VarlenSeqused) { bwd_varlen_cases(128, 64, 96); }

// CUDA-graph replays of the backward (training loops capture it): the kernels launched early behind
// the one ahead (launch.cuh) and the stream-ordered workspace, for each main-kernel family: the 64-row
// causal tile (longest first), the 80-row tile, d 64, the dQ ring, the recompute band, deterministic GQA,
// softcap.
TEST_F(Sm90Bwd, GraphReplay) {
  auto graph_case = [](DType dt, int d, int sq, int sk) {
    BwdCase c = bcase(dt, d, sq, sk);
    c.graph = true;
    return c;
  };
  BwdCase causal = capped(graph_case(DType::BF16, 128, 1000, 1000), 2, 2, true, 0.f);
  causal.batch = 2;
  run_bwd_case(causal);
  run_bwd_case(capped(graph_case(DType::F16, 128, 700, 513), 4, 2, false, 0.f));
  run_bwd_case(capped(graph_case(DType::BF16, 64, 301, 301), 2, 2, true, 0.f));
  run_bwd_case(windowed(graph_case(DType::BF16, 128, 1500, 1500), 64, 0));  // the recompute band
  // The dQ ring: since session 35 the host takes it by default only for left = 0, right <= 64 (dq_ring.h,
  // bwd_ring_by_default; by default (64, 64) takes the accumulator path); then (64, 64) forced.
  run_bwd_case(windowed(graph_case(DType::F16, 128, 900, 1000), 0, 64));
  {
    const ScopedEnv forced("FASTATTN_BWD_RING_SLOTS", "512");
    run_bwd_case(windowed(graph_case(DType::F16, 128, 900, 1000), 64, 64));
  }
  run_bwd_case(capped(graph_case(DType::BF16, 128, 600, 650), 4, 1, true, 0.f, true));
  run_bwd_case(capped(graph_case(DType::BF16, 128, 400, 400), 2, 2, true, 30.f));
  run_bwd_case(capped(graph_case(DType::BF16, 64, 2100, 2100), 4, 2, true, 0.f));  // d 64 longest first (16+ key blocks)
}

// The same for the head dims over 128: causal on the 80-key tile (d 256, d 192), and a local window, which
// keeps d 192 on the 64-key tile split on d.
TEST_F(Sm90Bwd, LargeDimsGraphReplay) {
  for (int d : {256, 192}) {
    BwdCase c = bcase(DType::BF16, d, 300, 300);
    c.graph = true;
    c.causal = true;
    run_bwd_case(c);
  }
  BwdCase local = bcase(DType::BF16, 192, 300, 300);
  local.graph = true;
  run_bwd_case(windowed(local, 64, 0));
}

TEST_F(Sm90Bwd, DeterministicBitwise) { deterministic_cases(128, 64, 96); }

// d 64: q-blocks of 128 rows (BwdConfig<64>::kBlockM), the workspace padded to 128 per sequence,
// dQ split on the q rows. Lengths around 64 / 128 (a last block of one or two halves), windows
// whose edges fall in either half, varlen and the deterministic order on that tile.
TEST_F(Sm90Bwd, D64Tile) {
  for (int sq : {1, 63, 65, 128, 129, 191})
    for (int sk : {1, 113, 257}) {
      BwdCase c = bcase((sq + sk) % 2 == 0 ? DType::BF16 : DType::F16, 64, sq, sk);
      c.causal = sq % 2 == 1;
      run_bwd_case(c);
    }
  struct W {
    int wl, wr, sq, sk;
  };
  for (const W& w : {W{64, 0, 700, 900}, W{100, 50, 900, 700}, W{30, -1, 333, 333}, W{0, 0, 256, 256}}) {
    BwdCase c = bcase(DType::BF16, 64, w.sq, w.sk);
    c.wl = w.wl;
    c.wr = w.wr;
    run_bwd_case(c);
  }
  bwd_varlen_cases(64, 64, 64);
  deterministic_cases(64, 64, 64);
  // From 16 key blocks the causal / right-bounded order is longest first (bwd_longest_first): GQA
  // (the group's heads inner in the down walk), several units in a section, a window with both edges.
  BwdCase gqa = capped(bcase(DType::BF16, 64, 2100, 2100), 8, 2, true, 0.f);
  gqa.batch = 2;
  run_bwd_case(gqa);
  run_bwd_case(windowed(capped(bcase(DType::F16, 64, 1900, 2100), 3, 3, false, 0.f), 100, 50));
}

// d 128 without mask in the default mode: q-blocks of 80 rows (BwdConfig<128, 80>: S^T / dP^T with
// N = 80, dQ^T = K^T dS^T, dS stored q-major), the workspace padded to 80 per sequence. Lengths
// around 80 (a last block of 1, 79 or 80 rows), s_q != s_k both ways, GQA, varlen with empty
// sequences and seqused; then the neighbours that keep 64 rows on the same unmasked problems
// (softcap, deterministic mode), so that the host's choice is checked on both sides.
TEST_F(Sm90Bwd, D128Rows80) {
  for (int sq : {1, 79, 80, 81, 161, 4097})
    for (int sk : {17, 80, 300}) {
      BwdCase c = bcase((sq + sk) % 2 == 0 ? DType::BF16 : DType::F16, 128, sq, sk);
      run_bwd_case(c);
    }
  BwdCase g = bcase(DType::BF16, 128, 241, 250);
  g.hq = 8;
  g.hkv = 2;
  run_bwd_case(g);
  tile80_varlen_cases(128, false);
  tile80_neighbour_cases(128);
}

// d 192 / 256: 64-key CTAs, S^T / dP^T split on q rows, dK / dV / dQ split on d (BwdConfig::kSplitD).
TEST_F(Sm90Bwd, LargeDimsDtypes) { dtype_cases({192, 256}); }

TEST_F(Sm90Bwd, LargeDimsOddLengths) {
  for (int d : {192, 256})
    for (int sq : {1, 17, 113})
      for (int sk : {1, 17, 113, 300}) {
        BwdCase c = bcase(d == 256 ? DType::BF16 : DType::F16, d, sq, sk);
        c.causal = (sq + sk + d) % 2 == 0;  // both settings over the grid, for each d
        run_bwd_case(c);
      }
}

TEST_F(Sm90Bwd, LargeDimsLong) {
  BwdCase c = bcase(DType::BF16, 256, 4097, 4097);
  c.hq = c.hkv = 1;
  c.causal = true;
  run_bwd_case(c);
  BwdCase u = bcase(DType::F16, 192, 1000, 4097);
  u.hq = u.hkv = 1;
  run_bwd_case(u);
  BwdCase w = bcase(DType::BF16, 256, 1500, 700);  // s_q > s_k, causal: the first 800 rows keep no key
  w.causal = true;
  run_bwd_case(w);
}

TEST_F(Sm90Bwd, LargeDimsGqa) {
  for (int ratio : {1, 4, 8}) {
    BwdCase c = bcase(ratio == 4 ? DType::F16 : DType::BF16, ratio == 8 ? 192 : 256, 257, 300);
    c.hkv = 2;
    c.hq = 2 * ratio;
    c.causal = ratio == 4;
    run_bwd_case(c);
  }
}

TEST_F(Sm90Bwd, LargeDimsWindowsSoftcap) {
  struct W {
    int d, wl, wr, sq, sk;
  };
  for (const W& w : {W{256, 64, 0, 700, 900}, W{192, 100, 50, 900, 700}, W{256, 30, -1, 333, 333},
                     W{192, -1, 20, 333, 400}, W{256, 0, 0, 256, 256}}) {
    BwdCase c = bcase(DType::BF16, w.d, w.sq, w.sk);
    c.wl = w.wl;
    c.wr = w.wr;
    run_bwd_case(c);
  }
  softcap_cases(192, 256);
}

// d 256, d 192 and d_qk 192 / d_v 128 in the default mode without softcap or left window edge: 80 keys per
// CTA (BwdConfigKeys80<d, d_v>: S / dP not swapped with N = 40 per warpgroup, dK^T / dV^T / dQ^T swapped in
// 64-row halves, dQ^T by atomics into its own run order; at d 192 the warpgroups' halves differ). Key tails
// of 80 (s_k 1, 17, 79, 80, 81, 113, 161, 4097), s_q != s_k both ways, causal and a right-only window,
// rows that keep no key, GQA 1/4/8, varlen with empty sequences and seqused, a CUDA-graph replay; then
// the neighbours that keep the 64-key kernel on the same problems (softcap, deterministic mode, a left
// window edge), so that the host's choice is checked on both sides.
void keys80_cases(int d, int dv) {
  const int dv_arg = dv == d ? 0 : dv;
  auto kcase = [&](DType dt, int sq, int sk) { return bcase(dt, d, sq, sk, dv_arg); };
  for (int sq : {1, 65, 200})
    for (int sk : {1, 17, 79, 80, 81, 113, 161}) {
      BwdCase c = kcase((sq + sk) % 2 == 0 ? DType::BF16 : DType::F16, sq, sk);
      c.causal = (sq + sk) % 3 != 0;
      run_bwd_case(c);
    }
  for (bool causal : {false, true}) {
    BwdCase c = kcase(causal ? DType::BF16 : DType::F16, 129, 4097);
    c.hq = c.hkv = 1;
    c.causal = causal;
    run_bwd_case(c);
  }
  if (d != 256) {  // s_q 4097 (a partial last q-block past 64 full ones), s_q > s_k and s_q < s_k, odd lengths 17 / 113
    BwdCase c = kcase(DType::BF16, 4097, 4097);
    c.hq = c.hkv = 1;
    c.causal = true;
    run_bwd_case(c);
    for (bool causal : {false, true}) {
      BwdCase a = kcase(DType::F16, 113, 17);
      a.causal = causal;
      run_bwd_case(a);
      BwdCase b = kcase(DType::BF16, 17, 113);
      b.causal = causal;
      run_bwd_case(b);
    }
  }
  BwdCase none = kcase(DType::F16, 500, 170);  // causal, s_q > s_k: the first 330 rows keep no key
  none.causal = true;
  run_bwd_case(none);
  for (int ratio : {1, 4, 8}) {
    BwdCase g = kcase(ratio == 4 ? DType::F16 : DType::BF16, 161, 250);
    g.hkv = 2;
    g.hq = 2 * ratio;
    g.causal = ratio != 1;
    run_bwd_case(g);
  }
  BwdCase w = kcase(DType::BF16, 333, 400);
  w.wl = -1;
  w.wr = 20;
  run_bwd_case(w);
  tile80_varlen_cases(d, true, dv_arg);
  if (d != 256) {
    tile80_varlen_cases(d, false, dv_arg);
    BwdCase gr = kcase(DType::F16, 300, 300);  // CUDA-graph replays (bf16 causal: LargeDimsGraphReplay)
    gr.graph = true;
    run_bwd_case(gr);
  }
  tile80_neighbour_cases(d, dv_arg);
  BwdCase local = kcase(DType::BF16, 300, 300);
  local.wl = 50;
  local.wr = 0;
  run_bwd_case(local);
}

TEST_F(Sm90Bwd, LargeDimsKeys80) { keys80_cases(256, 256); }
TEST_F(Sm90Bwd, LargeDimsKeys80At192) { keys80_cases(192, 192); }

TEST_F(Sm90Bwd, LargeDimsVarlen) { bwd_varlen_cases(256, 192, 256); }

TEST_F(Sm90Bwd, LargeDimsDeterministic) { deterministic_cases(256, 192, 256); }

// Deterministic mode with NaN in every row past seqused (an empty sequence, keys 1 of 400, 129 rows of 300).
void nan_past_seqused_deterministic(DType dtype, int d) {
  BwdCase c = bcase(dtype, d, 300, 400);
  c.batch = 3;
  c.used_q = {300, 0, 129};
  c.used_k = {1, 400, 200};
  c.causal = true;
  c.deterministic = true;
  c.nan_past = NanPast::All;
  run_bwd_case(c);
}

// d 64: the hand-over warp zeroes Q / dO past seqused_q (producer.cuh, bwd_hand_over_q).
TEST_F(Sm90Bwd, NanPastSequsedDeterministicD64) { nan_past_seqused_deterministic(DType::F16, 64); }

// d 256 runs the 64-key kernel (kernel.cuh), whose consumers zero Q / dO past seqused_q.
TEST_F(Sm90Bwd, LargeDimsNanPastSequsedDeterministic) { nan_past_seqused_deterministic(DType::BF16, 256); }

// d_qk 192, d_v 128 (DeepSeek's shape; BwdConfig<192, 64, 128>: V / dO / O / dV on d_v's atoms, dV split
// 64 + 64 over the warpgroups, dQ staged in a dO stage padded to Q's size, D summed over d_v), both
// dtypes: odd lengths (1, 17, 113, 4097), s_q != s_k both ways (and rows that keep no key), GQA 8 / 2,
// causal, local windows, softcap, varlen with empty sequences and seqused, deterministic mode (bitwise
// over three runs), a CUDA-graph replay. Under the LargeDims* name: a build without d 192 leaves it out.
BwdCase qk192_v128(DType dt, int sq, int sk) { return bcase(dt, 192, sq, sk, 128); }
// Split in five (ctest's 240 s a test): -R 'LargeDims192x128' runs them all.
TEST_F(Sm90Bwd, LargeDims192x128OddLengths) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int sq : {1, 17, 113})
      for (int sk : {1, 17, 113, 300}) {
        BwdCase c = qk192_v128(dt, sq, sk);
        c.causal = (sq + sk) % 2 == 0;
        run_bwd_case(c);
      }
}

TEST_F(Sm90Bwd, LargeDims192x128Shapes) {
  for (DType dt : {DType::BF16, DType::F16}) {
    for (bool causal : {false, true}) {  // s_q != s_k both ways; causal s_q > s_k: the first 100 rows keep no key
      BwdCase c = qk192_v128(dt, 200, 300);
      c.batch = 2;
      c.causal = causal;
      run_bwd_case(c);
      run_bwd_case(capped(qk192_v128(dt, 400, 300), 2, 2, causal, 0.f));
    }
    run_bwd_case(capped(qk192_v128(dt, 257, 300), 8, 2, true, 0.f));  // GQA 4
    run_bwd_case(capped(qk192_v128(dt, 130, 129), 8, 2, false, 0.f));
    run_bwd_case(windowed(qk192_v128(dt, 900, 700), 100, 50));
    run_bwd_case(windowed(qk192_v128(dt, 333, 400), -1, 20));
    run_bwd_case(capped(qk192_v128(dt, 300, 333), 2, 2, false, 5.f));
    run_bwd_case(capped(qk192_v128(dt, 300, 333), 4, 2, true, 30.f));
  }
  BwdCase g = qk192_v128(DType::BF16, 300, 300);  // CUDA-graph replays
  g.graph = true;
  g.causal = true;
  run_bwd_case(g);
}

TEST_F(Sm90Bwd, LargeDims192x128Long) {
  BwdCase c = qk192_v128(DType::BF16, 4097, 4097);
  c.hq = c.hkv = 1;
  c.causal = true;
  run_bwd_case(c);
  BwdCase u = qk192_v128(DType::F16, 1000, 4097);
  u.hq = u.hkv = 1;
  run_bwd_case(u);
}

TEST_F(Sm90Bwd, LargeDims192x128Varlen) { bwd_varlen_cases(192, 192, 192, 128); }

// Deterministic mode (dq, dk, dv bitwise over three runs): GQA causal, s_k > s_q, varlen with a
// window, softcap.
TEST_F(Sm90Bwd, LargeDims192x128Deterministic) {
  deterministic_cases(192, 192, 192, 128);
  run_bwd_case(capped(qk192_v128(DType::F16, 300, 333), 2, 2, true, 30.f, true));
}

// The 80-key tile at 192 / 128 (BwdConfigKeys80<192, 128>: warpgroup 1 takes no dV^T half) and its 64-key
// neighbours: keys80_cases.
TEST_F(Sm90Bwd, LargeDims192x128Keys80) { keys80_cases(192, 128); }

}  // namespace
}  // namespace fastattn::gputest
