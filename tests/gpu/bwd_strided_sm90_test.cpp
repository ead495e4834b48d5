// The Hopper backward with strided tensors: gaps between heads, between tokens and between sequences in
// dq, dk, dv (and out; in the aligned layout in q, k, v and dout too), so that every strided store of the
// kernels writes next to memory it must not touch: dq's postprocess rows (16-byte and element stores),
// the dQ ring's and the recompute band's 4-byte pair stores (and their preprocess's dq = 0 for q-blocks
// no key block visits), dK / dV's staged row stores (16-byte and element) and their pair stores (d > 128). Each case runs the backward (bwd_case.h: every gradient element against
// the float64 reference with FA3's rule) in three layouts, with all gaps poisoned: the gaps must hold the
// poison afterwards, the inputs must come back unchanged, and the host must take the route the case is
// for (the stats probe: q-block rows, dQ ring, band). The API's stride rules (bwd_backend.cu,
// backend.cu): q, k, v, dout strides 16-byte multiples (TMA); out, dk, dv even; dq any (odd strides turn
// the ring and the band off: their pair stores need even ones).
#include <gtest/gtest.h>

#include <utility>

#include "bwd_case.h"
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

class Sm90BwdStrided : public HopperTest {};

// Gaps in elements (head, token, sequence). TMA's rule for the inputs: 16-byte multiples.
constexpr Pad kTmaPad{8, 16, 24};
// Stored tensors whose rows stay 16-byte aligned: the vector stores, with gaps on every side.
constexpr Pad kVecPad{8, 24, 40};
// Even strides whose rows are 4-byte aligned only (the least out, dk and dv may have; dq keeps the ring
// and the band): pair stores, and the staged rows' element stores. The token stride h (d + 2) + 2 is no
// multiple of 8 elements for h = 1, 2, 4, 8 (d a multiple of 8), so no head count here turns it 16-byte.
constexpr Pad kPairPad{2, 2, 10};
// dq only: odd strides, rows 2-byte aligned (the postprocess's element stores; no ring, no band).
constexpr Pad kOddPad{1, 3, 5};

enum class Layout { Aligned, Pairs, OddDq };
const char* layout_name(Layout l) { return l == Layout::Aligned ? "aligned" : l == Layout::Pairs ? "pairs" : "odd dq"; }

BwdPads pads_of(Layout l) {
  BwdPads p;
  switch (l) {
    case Layout::Aligned:  // every tensor strided
      p.q = p.k = p.v = p.dout = kTmaPad;
      p.out = p.dq = p.dk = p.dv = kVecPad;
      break;
    case Layout::Pairs:  // contiguous inputs, stored tensors 4-byte aligned only
      p.out = p.dq = p.dk = p.dv = kPairPad;
      break;
    case Layout::OddDq:  // dk aligned and dv not: the staged rows' vector test is on both at once
      p.q = p.k = p.v = p.dout = kTmaPad;
      p.out = p.dv = kPairPad;
      p.dk = kVecPad;
      p.dq = kOddPad;
      break;
  }
  return p;
}

// c in each layout, with its route: q-blocks of block_m rows, the ring or the band where dq's strides
// allow them (not with odd ones: the accumulator path then). dq of the band is one summation order:
// bitwise over three runs there.
void layouts(BwdCase c, int block_m, bool ring = false, bool band = false) {
  for (Layout l : {Layout::Aligned, Layout::Pairs, Layout::OddDq}) {
    SCOPED_TRACE(std::string("layout ") + layout_name(l));
    const bool pairs = l != Layout::OddDq;
    c.pads = pads_of(l);
    c.route = BwdRoute{block_m, ring && pairs, band && pairs};
    c.dq_bitwise = band && pairs;
    run_bwd_case(c);
  }
}

BwdCase heads(BwdCase c, int batch, int hq, int hkv, bool causal) {
  c.batch = batch;
  c.hq = hq;
  c.hkv = hkv;
  c.causal = causal;
  return c;
}

BwdCase windowed(BwdCase c, int wl, int wr) {
  c.wl = wl;
  c.wr = wr;
  return c;
}

// Varlen with empty sequences on both sides (strided varlen: gaps between heads and tokens).
BwdCase varlen(DType dt, int d, std::vector<int> lens_q, std::vector<int> lens_k, int hq, int hkv, int dv = 0) {
  BwdCase c = bcase(dt, d, 0, 0, dv);
  c.lens_q = std::move(lens_q);
  c.lens_k = std::move(lens_k);
  c.hq = hq;
  c.hkv = hkv;
  return c;
}

// d 64: q-blocks of 128 rows, GQA, causal and not, odd lengths, varlen.
TEST_F(Sm90BwdStrided, D64) {
  layouts(heads(bcase(DType::BF16, 64, 113, 300), 2, 4, 2, true), 128);
  layouts(heads(bcase(DType::F16, 64, 17, 113), 1, 2, 2, false), 128);
  BwdCase v = varlen(DType::BF16, 64, {17, 200, 0, 64, 300}, {300, 30, 5, 0, 290}, 4, 2);
  v.causal = true;
  layouts(v, 128);
}

// d 96: a row of 12 16-byte chunks (the staged stores' swizzle leaves the last four in place).
TEST_F(Sm90BwdStrided, D96) {
  layouts(heads(bcase(DType::F16, 96, 113, 17), 2, 2, 1, true), 64);
  layouts(heads(bcase(DType::BF16, 96, 200, 300), 1, 2, 2, false), 64);
}

// d 128 without mask: the 80-row q-blocks (dQ^T through the postprocess's 80-row runs), a last block of
// 1 row (81), s_q != s_k both ways, GQA 4, varlen with empty sequences.
TEST_F(Sm90BwdStrided, D128Rows80) {
  layouts(heads(bcase(DType::BF16, 128, 161, 300), 2, 2, 2, false), 80);
  layouts(heads(bcase(DType::F16, 128, 81, 17), 1, 4, 1, false), 80);
  layouts(varlen(DType::F16, 128, {81, 0, 160, 1, 239}, {80, 3, 300, 0, 129}, 4, 1), 80);
}

// d 128 causal: the 64-row tile (paired key blocks), odd lengths, s_q > s_k (rows that keep no key),
// seqused (rows past it: dq = 0; keys past it: dk = dv = 0).
TEST_F(Sm90BwdStrided, D128Causal) {
  layouts(heads(bcase(DType::BF16, 128, 300, 300), 2, 2, 2, true), 64);
  for (int sq : {17, 113})
    for (int sk : {17, 113}) layouts(heads(bcase(DType::F16, 128, sq, sk), 1, 2, 2, true), 64);
  BwdCase u = heads(bcase(DType::F16, 128, 300, 400), 3, 2, 1, true);
  u.used_q = {300, 0, 129};
  u.used_k = {1, 400, 200};
  layouts(u, 64);
}

// Paired key blocks (key blocks j and N - 1 - j in one CTA, the second tile's epilogue an inline copy of
// its own): FASTATTN_MAX_CTAS = 3 makes the host pair every causal d 128 case (as Sm90Bwd.PairedKeyBlocks);
// an odd block count (a middle block alone), s_q < s_k, GQA.
TEST_F(Sm90BwdStrided, D128PairedKeyBlocks) {
  const ScopedEnv cap("FASTATTN_MAX_CTAS", "3");
  layouts(heads(bcase(DType::BF16, 128, 700, 700), 1, 1, 1, true), 64);
  layouts(heads(bcase(DType::F16, 128, 17, 300), 2, 1, 1, true), 64);
  layouts(heads(bcase(DType::F16, 128, 257, 300), 1, 8, 2, true), 64);
}

// The softcap kernels (d 64 with 128-row q-blocks, d 128 with 64-row: kernels of their own), causal and
// not, GQA, and d 128's deterministic softcap twin.
TEST_F(Sm90BwdStrided, Softcap) {
  BwdCase a = heads(bcase(DType::BF16, 64, 300, 333), 1, 2, 2, false);
  a.softcap = 5.f;
  layouts(a, 128);
  BwdCase b = heads(bcase(DType::F16, 128, 300, 333), 1, 4, 2, true);
  b.softcap = 30.f;
  layouts(b, 64);
  b.deterministic = true;
  layouts(b, 64);
}

// Window (64, 0) and narrower: the recompute band (dq stored by the band kernel, q-blocks no key block
// visits zeroed by its preprocess), GQA 4 (partials past the two held in smem), odd lengths, varlen.
TEST_F(Sm90BwdStrided, D128Band) {
  layouts(windowed(heads(bcase(DType::BF16, 128, 700, 900), 1, 8, 2, false), 64, 0), 64, false, true);
  layouts(windowed(heads(bcase(DType::F16, 128, 113, 17), 2, 2, 2, false), 16, 0), 64, false, true);
  layouts(windowed(varlen(DType::BF16, 128, {17, 200, 0, 64, 300, 1}, {300, 30, 5, 0, 290, 700}, 4, 2), 64, 0), 64,
          false, true);
}

// Bands of 4 key blocks (the host's width rule gives these shapes 1): each band's later blocks' dK / dV
// staged behind the next block's K / V load.
TEST_F(Sm90BwdStrided, D128BandWide) {
  const ScopedEnv width("FASTATTN_BWD_BAND", "4");
  layouts(windowed(heads(bcase(DType::BF16, 128, 700, 900), 1, 4, 2, false), 64, 0), 64, false, true);
  layouts(windowed(heads(bcase(DType::F16, 128, 1000, 1111), 1, 2, 1, false), 33, 0), 64, false, true);
}

// Windows with both edges: the dQ ring (dq stored by its writer warps, from the staging buffer with one
// visitor, else from the ring's slot), GQA 4, odd lengths, s_q > s_k; then the fewest slots (writers
// wait for reused ones).
TEST_F(Sm90BwdStrided, D128Ring) {
  // The host's default windows first (left = 0, right <= 64, GQA up to 4: no switch set), then others forced.
  layouts(windowed(heads(bcase(DType::BF16, 128, 300, 257), 2, 4, 1, false), 0, 33), 64, true);
  const ScopedEnv full("FASTATTN_BWD_RING_SLOTS", "512");  // the host's default takes the ring at left = 0 only
  layouts(windowed(heads(bcase(DType::F16, 128, 900, 700), 2, 1, 1, false), 100, 50), 64, true);
  layouts(windowed(heads(bcase(DType::BF16, 128, 113, 113), 3, 1, 1, false), 64, 64), 64, true);
  layouts(windowed(heads(bcase(DType::BF16, 128, 257, 300), 1, 8, 2, false), 64, 64), 64, true);
  const ScopedEnv fewest("FASTATTN_BWD_RING_SLOTS", "1");
  layouts(windowed(heads(bcase(DType::F16, 128, 1000, 1000), 1, 2, 2, false), 300, 17), 64, true);
}

// Deterministic mode (dq, dk, dv bitwise over three runs; the 64-row tile also where 80 rows would serve).
TEST_F(Sm90BwdStrided, D128Deterministic) {
  BwdCase c = heads(bcase(DType::BF16, 128, 300, 333), 1, 4, 1, true);
  c.deterministic = true;
  layouts(c, 64);
  BwdCase u = heads(bcase(DType::F16, 128, 161, 300), 2, 2, 2, false);
  u.deterministic = true;
  layouts(u, 64);
}

// One side empty (fixed length): s_k 0 (dq = 0 from the postprocess alone, no main kernel), s_q 0 (dk = dv
// = 0 from the main kernel with no q rows); causal and not.
TEST_F(Sm90BwdStrided, D128EmptySides) {
  for (auto [sq, sk] : {std::pair{17, 0}, std::pair{0, 17}})
    for (bool causal : {false, true})
      for (Layout l : {Layout::Aligned, Layout::Pairs, Layout::OddDq}) {
        SCOPED_TRACE(std::string("layout ") + layout_name(l));
        BwdCase c = heads(bcase(DType::BF16, 128, sq, sk), 2, 2, 1, causal);
        c.pads = pads_of(l);
        run_bwd_case(c);
      }
}

// d 256: the 80-key tile (causal), the 64-key tile (a left window edge; deterministic mode), varlen.
// LargeDims*: a run on a build without d 192 / 256 leaves these out (--gtest_filter='-*LargeDims*').
TEST_F(Sm90BwdStrided, LargeDimsD256) {
  layouts(heads(bcase(DType::BF16, 256, 200, 300), 2, 2, 2, true), 64);
  layouts(windowed(heads(bcase(DType::F16, 256, 113, 300), 1, 2, 1, false), 50, 0), 64);
  BwdCase det = heads(bcase(DType::BF16, 256, 161, 300), 1, 4, 2, false);
  det.deterministic = true;
  layouts(det, 64);
  BwdCase v = varlen(DType::BF16, 256, {81, 0, 160, 1}, {80, 3, 300, 17}, 4, 1);
  v.causal = true;
  layouts(v, 64);
}

// d 192 (80-key tile, causal; the 64-key tile under a left edge) and d_qk 192 / d_v 128 (dV narrower
// than dK: their staged stores differ in row length).
TEST_F(Sm90BwdStrided, LargeDimsD192) {
  layouts(heads(bcase(DType::F16, 192, 113, 300), 1, 4, 2, true), 64);
  layouts(windowed(heads(bcase(DType::BF16, 192, 300, 300), 1, 2, 2, false), 50, 0), 64);
}

TEST_F(Sm90BwdStrided, LargeDims192x128) {
  layouts(heads(bcase(DType::BF16, 192, 200, 300, 128), 2, 2, 2, true), 64);
  layouts(heads(bcase(DType::F16, 192, 17, 113, 128), 1, 8, 2, false), 64);
  layouts(varlen(DType::BF16, 192, {130, 1, 70}, {0, 250, 70}, 2, 1, 128), 64);
}

}  // namespace
}  // namespace fastattn::gputest
