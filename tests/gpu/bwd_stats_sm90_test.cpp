// The Hopper backward's stored lse and D (the preprocess's output, which the main kernel reads)
// checked directly, every workspace row, through the test hook cuda/bwd_stats_probe.h (both arrays
// poisoned before the kernels, copied out after them). Per row of a q head's padded workspace:
//   a used row (i < seqused): D within gamma_{d-1} sum_j |dO_j out_j| (+ the float64 sum's own
//     gamma) of the float64 rowsum(dO * out) of the stored (rounded) out and dO; lse_log2 within
//     2^-23 (1 + 2^-23) relative of lse * log2(e) from the forward's stored lse, +inf where that lse
//     is -inf (the row keeps no key);
//   a row past the used ones in a q-block the preprocess writes: D = 0 and lse_log2 = +inf (so that
//     the main kernel's P there is exactly 0 and dS finite);
//   a row of no written q-block (varlen padding between sequences, the workspace's tail): untouched.
// The bound's derivation: docs/notes/bwd-sm90.md, session 32. Every preprocess instance the kernels
// use: the stats layouts (d 64's 128-row q-blocks in quad order, 64-row q-blocks at d 96 / 128 /
// 192 / 256 (the 80-key and the 64-key d 256 tiles; d 192 / d_v 128, D summed over d_v), d 128's
// 80-row q-blocks) and the dQ ring's preprocess, both dtypes; s 1 / 17 / 113 / 4097, s_q > s_k, GQA, varlen with empty sequences,
// seqused and rows that keep no key. Each case then hands the check faulted copies of what it read,
// which it must reject: a check that cannot fail fails the test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/bwd_stats_probe.h"
#include "cuda/sm90/bwd/config.h"
#include "fwd_case.h"
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

class Sm90BwdStats : public HopperTest {};

// A preprocess instance, and the mask that makes the host pick it (sm90/bwd/config.h, dq_ring.h).
struct Variant {
  int d;
  bool causal;
  int wl, wr;
  int block_m;  // the q-block size (and the workspace's padding) the host must choose
  bool ring;    // the dQ ring's preprocess (bwd_ring_prepare)
  int dv = 0;   // d_v of v, out and dO (0: d)
  bool band = false;  // the recompute band's preprocess and kernel (sm90/bwd/band.h)
  bool deterministic = false;
};

// Whether a q-block's lse / D are stored in quad order (BwdConfig::kStatsByQuad).
bool stats_by_quad(int d, int block_m) {
  static_assert(sm90::BwdConfig<256>::kStatsByQuad == sm90::BwdConfigKeys80<256>::kStatsByQuad &&
                    sm90::BwdConfig<192>::kStatsByQuad == sm90::BwdConfigKeys80<192>::kStatsByQuad &&
                    sm90::BwdConfig<192, 64, 128>::kStatsByQuad == sm90::BwdConfigKeys80<192, 128>::kStatsByQuad,
                "the 64-key and 80-key tiles of a head dim share one preprocess instance");
  if (block_m == sm90::BwdConfig<128, 80>::kBlockM) return sm90::BwdConfig<128, 80>::kStatsByQuad;
  switch (d) {
    case 64: return sm90::BwdConfig<64>::kStatsByQuad;
    case 96: return sm90::BwdConfig<96>::kStatsByQuad;
    case 128: return sm90::BwdConfig<128>::kStatsByQuad;
    case 192: return sm90::BwdConfig<192>::kStatsByQuad;
    default: return sm90::BwdConfig<256>::kStatsByQuad;
  }
}

// The slot of a q-block's row r: r, or in quad order (preprocess.cuh) row 8 jj + 2 qc + e of each
// 16 at 4 qc + 2 jj + e.
int stat_slot(int r, bool by_quad) {
  if (!by_quad) return r;
  const int jj = r / 8 % 2, qc = r / 2 % 4, e = r % 2;
  return r / 16 * 16 + 4 * qc + 2 * jj + e;
}

// What each slot of the copied arrays must hold.
enum class Slot : uint8_t { Unwritten, Used, Past };
struct Expected {
  int d = 0;  // D's length: d_v
  std::vector<Slot> kind;
  std::vector<double> dpsum, dpsum_abs, lse_log2;  // Used slots: rowsum(dO out), sum |dO out|, lse log2(e)
  std::vector<int32_t> seq, row;                   // written slots: the sequence and row they hold
  size_t misplaced = 0;                            // rows put in a claimed slot or past the arrays (a test fault)
};

double gamma_n(int n, double u) { return n * u / (1 - n * u); }

// The allowed |D - rowsum| of a row: fp32 sums of d exact products (bf16 / fp16 products fit fp32's
// 24 bits), in any order: gamma_{d-1} of the absolute sum; the float64 reference's own, 2^-53 based.
double dpsum_bound(const Expected& x, size_t i) {
  return (gamma_n(x.d - 1, std::ldexp(1.0, -24)) + gamma_n(x.d, std::ldexp(1.0, -53))) * x.dpsum_abs[i];
}
// lse_log2 = fl(lse fl(log2 e)): two roundings of unit 2^-24.
constexpr double kLog2e = 1.4426950408889634074;
constexpr double kLseRel = 1.0 / (1 << 23) * (1 + 1.0 / (1 << 23));

struct Report {
  size_t used = 0, past = 0, unwritten = 0;
  size_t dpsum_bad = 0, lse_bad = 0, past_bad = 0, stray = 0;
  double worst = 0;  // max over used rows of |D - rowsum| / bound
  std::string first;
};

std::string num(double v) {  // enough digits to tell fp32 neighbours apart
  std::ostringstream o;
  o << std::setprecision(9) << v;
  return o.str();
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

Report check_stats(const Expected& x, int64_t padded_rows, const std::vector<float>& lse,
                   const std::vector<float>& dps) {
  Report r;
  auto note = [&](size_t i, const char* what) {
    if (!r.first.empty()) return;
    r.first = std::string(what) + " at slot " + std::to_string(i) + " (head " +
              std::to_string(int64_t(i) / padded_rows) + ", sequence " + std::to_string(x.seq[i]) + ", row " +
              std::to_string(x.row[i]) + "): lse_log2 " + num(lse[i]) + " D " + num(dps[i]);
    if (x.kind[i] == Slot::Used)
      r.first += " expected " + num(x.lse_log2[i]) + " / " + num(x.dpsum[i]) + " +- " + num(dpsum_bound(x, i));
  };
  for (size_t i = 0; i < x.kind.size(); ++i) {
    switch (x.kind[i]) {
      case Slot::Unwritten:
        ++r.unwritten;
        if (bits_of(lse[i]) != 0xFFFFFFFFu || bits_of(dps[i]) != 0xFFFFFFFFu) {
          ++r.stray;
          if (r.first.empty()) r.first = "a slot of no q-block written: " + std::to_string(i);
        }
        break;
      case Slot::Past:
        ++r.past;
        if (!(dps[i] == 0.f && lse[i] == INFINITY)) {
          ++r.past_bad;
          note(i, "a row past the used ones not (D 0, lse_log2 +inf)");
        }
        break;
      case Slot::Used: {
        ++r.used;
        const double err = std::abs(double(dps[i]) - x.dpsum[i]), bound = dpsum_bound(x, i);
        if (!(err <= bound)) {  // NaN (unwritten) fails too
          ++r.dpsum_bad;
          note(i, "D");
        }
        if (bound > 0 && std::isfinite(err)) r.worst = std::max(r.worst, err / bound);
        const double want = x.lse_log2[i];
        const bool lse_ok = std::isinf(want) ? lse[i] == INFINITY
                                             : std::abs(double(lse[i]) - want) <= kLseRel * std::abs(want);
        if (!lse_ok) {
          ++r.lse_bad;
          note(i, "lse_log2");
        }
        break;
      }
    }
  }
  return r;
}

// The faults a working check must report, on copies of what was read: D off by an eighth of the
// out-rounding term (u_dtype sum |dO out|: a fault the gradient checks' baseline absorbs twice
// over), two used rows' D exchanged (a slot order fault), a past row with a finite lse, a slot of
// no q-block written, and an lse in natural-log units.
void expect_faults_caught(const Expected& x, int64_t padded_rows, const std::vector<float>& lse,
                          const std::vector<float>& dps, DType dt) {
  const double u = dt == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
  std::vector<float> d2 = dps;
  size_t shifted = 0;
  for (size_t i = 0; i < x.kind.size(); ++i)
    if (x.kind[i] == Slot::Used && x.dpsum_abs[i] > 0) {
      d2[i] = float(double(dps[i]) + (i % 2 ? 1 : -1) * u / 8 * x.dpsum_abs[i]);
      ++shifted;
    }
  EXPECT_EQ(check_stats(x, padded_rows, lse, d2).dpsum_bad, shifted) << "a D off by u_dtype / 8 x sum|dO out| passed";
  for (size_t i = 0; i + 1 < x.kind.size(); ++i)  // the first two neighbours whose D differ beyond both bounds
    if (x.kind[i] == Slot::Used && x.kind[i + 1] == Slot::Used &&
        std::abs(x.dpsum[i] - x.dpsum[i + 1]) > 2 * (dpsum_bound(x, i) + dpsum_bound(x, i + 1))) {
      d2 = dps;
      std::swap(d2[i], d2[i + 1]);
      EXPECT_EQ(check_stats(x, padded_rows, lse, d2).dpsum_bad, 2u) << "two rows' D exchanged passed";
      break;
    }
  for (size_t i = 0; i < x.kind.size(); ++i)
    if (x.kind[i] == Slot::Past) {
      std::vector<float> l2 = lse;
      l2[i] = 0.f;
      EXPECT_EQ(check_stats(x, padded_rows, l2, dps).past_bad, 1u) << "a past row with a finite lse passed";
      break;
    }
  for (size_t i = 0; i < x.kind.size(); ++i)
    if (x.kind[i] == Slot::Unwritten) {
      d2 = dps;
      d2[i] = 0.f;
      EXPECT_EQ(check_stats(x, padded_rows, lse, d2).stray, 1u) << "a write outside the q-blocks passed";
      break;
    }
  for (size_t i = 0; i < x.kind.size(); ++i)
    if (x.kind[i] == Slot::Used && std::isfinite(x.lse_log2[i]) && std::abs(x.lse_log2[i]) > 1e-3) {
      std::vector<float> l2 = lse;
      l2[i] = float(double(lse[i]) * std::log(2.0));
      EXPECT_EQ(check_stats(x, padded_rows, l2, dps).lse_bad, 1u) << "an lse in natural-log units passed";
      break;
    }
}

// What each slot of a case's copied arrays must hold, from the stored out, dO and lse, in the
// workspace's layout as bwd_backend.cu pads it (block_m rows per q-block, padded_rows per q head).
Expected expected_stats(const FwdCase& c, const CaseIndex& idx, int bm, int64_t padded_rows,
                        const std::vector<uint16_t>& out, const std::vector<uint16_t>& dout,
                        const std::vector<float>& lse) {
  const int64_t n = int64_t(c.hq) * padded_rows, total_q = idx.total_q(c);
  const std::vector<int32_t>& cu_q = idx.cu_q;
  Expected x;
  x.d = c.d_v();
  x.kind.assign(size_t(n), Slot::Unwritten);
  x.dpsum.assign(size_t(n), 0.0);
  x.dpsum_abs.assign(size_t(n), 0.0);
  x.lse_log2.assign(size_t(n), 0.0);
  x.seq.assign(size_t(n), -1);
  x.row.assign(size_t(n), -1);
  const bool by_quad = stats_by_quad(c.d, bm);
  for (int b = 0; b < idx.batch; ++b) {
    const int rows_q = idx.varlen ? cu_q[b + 1] - cu_q[b] : c.sq;
    const int len_q = idx.used_q.empty() ? rows_q : std::min(idx.used_q[b], rows_q);
    const int64_t tok0 = idx.varlen ? cu_q[b] : int64_t(b) * c.sq;
    const int64_t padded_q =
        idx.varlen ? (cu_q[b] + int64_t(bm) * b) / bm * bm : int64_t(b) * ((c.sq + bm - 1) / bm * bm);
    for (int h = 0; h < c.hq; ++h)
      for (int i = 0; i < (rows_q + bm - 1) / bm * bm; ++i) {  // every row of the q-blocks the preprocess writes
        const int64_t s = int64_t(h) * padded_rows + padded_q + i / bm * bm + stat_slot(i % bm, by_quad);
        if (s >= n || x.kind[size_t(s)] != Slot::Unwritten) {
          ++x.misplaced;
          continue;
        }
        x.seq[size_t(s)] = b;
        x.row[size_t(s)] = i;
        if (i >= len_q) {
          x.kind[size_t(s)] = Slot::Past;
          continue;
        }
        x.kind[size_t(s)] = Slot::Used;
        const size_t e0 = size_t(((tok0 + i) * c.hq + h) * c.d_v());
        double sum = 0, sum_abs = 0;
        for (int j = 0; j < c.d_v(); ++j) {
          const double pj = double(from_bits(out[e0 + j], c.dtype)) * double(from_bits(dout[e0 + j], c.dtype));
          sum += pj;
          sum_abs += std::abs(pj);
        }
        x.dpsum[size_t(s)] = sum;
        x.dpsum_abs[size_t(s)] = sum_abs;
        const float l = lse[size_t(idx.varlen ? int64_t(h) * total_q + tok0 + i : (int64_t(b) * c.hq + h) * c.sq + i)];
        x.lse_log2[size_t(s)] = l == -INFINITY ? INFINITY : double(l) * kLog2e;
      }
  }
  return x;
}

// Clears the probe also when an assertion leaves the case early.
struct ProbeSet {
  explicit ProbeSet(cuda_backend::BwdStatsProbe* p) { cuda_backend::set_bwd_stats_probe(p); }
  ~ProbeSet() { cuda_backend::set_bwd_stats_probe(nullptr); }
};

// Runs one case; *worst: the largest |D - rowsum| / bound of its used rows, kept if larger; *ring_cases
// counts the cases that ran the ring's preprocess.
void run_stats_case(const FwdCase& c, const Variant& v, double* worst, int* ring_cases) {
  const auto seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  SCOPED_TRACE("case " + c.str() + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const CaseIndex idx(c);
  BwdTensors tensors(c, idx, rng);
  TestTensor &q = tensors.q, &k = tensors.k, &vv = tensors.v, &out = tensors.out, &dout = tensors.dout,
             &dq = tensors.dq, &dk = tensors.dk, &dv = tensors.dv;
  const int64_t total_q = idx.total_q(c);
  const size_t lse_n = size_t(std::max<int64_t>(int64_t(c.hq) * total_q, 1));
  DeviceBuffer lse_dev(lse_n * 4);
  AttnArgs a;
  a.q = q.view(q.dev->get(), c.dtype, Device::CUDA);
  a.k = k.view(k.dev->get(), c.dtype, Device::CUDA);
  a.v = vv.view(vv.dev->get(), c.dtype, Device::CUDA);
  a.out = out.view(out.dev->get(), c.dtype, Device::CUDA);
  a.lse = idx.lse(c, lse_dev.get(), Device::CUDA);
  idx.apply(a, c, true);
  a.deterministic = v.deterministic;
  out.dev->poison();
  lse_dev.poison();
  Status st = forward(a, nullptr);
  ASSERT_TRUE(st.ok()) << "forward: " << st.message;
  FA_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> out_host(out.host.size());
  std::vector<float> lse_host(lse_n);
  out.dev->download(out_host.data());
  lse_dev.download(lse_host.data());

  // The workspace's layout as bwd_backend.cu pads it (FA3's rule: bwd_seq.cuh, padded_q_offset).
  const int bm = v.block_m;
  const int64_t padded_rows = idx.varlen ? (total_q + int64_t(bm) * idx.batch + bm - 1) / bm * bm
                                         : int64_t(idx.batch) * ((c.sq + bm - 1) / bm * bm);
  const int64_t n = int64_t(c.hq) * padded_rows;
  DeviceBuffer lse_ws(size_t(std::max<int64_t>(n, 1)) * 4), dps_ws(size_t(std::max<int64_t>(n, 1)) * 4);
  lse_ws.poison();
  dps_ws.poison();
  cuda_backend::BwdStatsProbe probe;
  probe.lse_log2 = static_cast<float*>(lse_ws.get());
  probe.dpsum = static_cast<float*>(dps_ws.get());
  probe.capacity = n;
  {
    ProbeSet set(&probe);
    const Device dev = Device::CUDA;
    st = backward(a, dout.view(dout.dev->get(), c.dtype, dev), dq.view(dq.dev->get(), c.dtype, dev),
                  dk.view(dk.dev->get(), c.dtype, dev), dv.view(dv.dev->get(), c.dtype, dev), nullptr);
  }
  ASSERT_TRUE(st.ok()) << "backward: " << st.message << " (workspace rows per head " << probe.padded_rows
                       << ", expected " << padded_rows << ")";
  FA_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(probe.block_m, v.block_m) << "the host chose another q-block size: not the instance meant";
  // The ring variant's short cases take the accumulator path: a window edge that reaches past the
  // sequence is no edge (the host normalizes it), and the ring needs both edges (dq_ring.h). Its same
  // 64-row layout is checked either way; variant_cases asserts that the ring ran in some cases.
  if (!v.ring) {
    ASSERT_FALSE(probe.ring) << "dQ ring: not the preprocess instance meant";
  }
  if (!v.band) {
    ASSERT_FALSE(probe.band) << "recompute band: not the path meant";
  }
  ASSERT_FALSE(probe.ring && probe.band);
  *ring_cases += (v.band ? probe.band : probe.ring) ? 1 : 0;
  ASSERT_EQ(probe.padded_rows, padded_rows);
  ASSERT_EQ(probe.copied, n);
  std::vector<float> lse_ws_host(size_t(std::max<int64_t>(n, 1))), dps_ws_host(lse_ws_host.size());
  lse_ws.download(lse_ws_host.data());
  dps_ws.download(dps_ws_host.data());
  lse_ws_host.resize(size_t(n));
  dps_ws_host.resize(size_t(n));

  const Expected x = expected_stats(c, idx, bm, padded_rows, out_host, dout.host, lse_host);
  ASSERT_EQ(x.misplaced, 0u) << "the test's layout puts two rows in one slot, or a row outside the arrays";

  const Report r = check_stats(x, padded_rows, lse_ws_host, dps_ws_host);
  EXPECT_GT(r.used, 0u);
  EXPECT_EQ(r.dpsum_bad, 0u) << "of " << r.used << " used rows; first: " << r.first;
  EXPECT_EQ(r.lse_bad, 0u) << "of " << r.used << " used rows; first: " << r.first;
  EXPECT_EQ(r.past_bad, 0u) << "of " << r.past << " rows past the used ones; first: " << r.first;
  EXPECT_EQ(r.stray, 0u) << "of " << r.unwritten << " slots of no q-block; first: " << r.first;
  *worst = std::max(*worst, r.worst);
  expect_faults_caught(x, padded_rows, lse_ws_host, dps_ws_host, c.dtype);
}

// Each variant on: s 1 / 17 / 113 / 4097 (a q-block's tail of past rows; GQA 2), s_q > s_k (under
// a causal mask the first rows keep no key: lse -inf, out 0), and varlen with empty sequences, a
// sequence without keys, seqused (past rows inside the used q-blocks and whole past q-blocks) and
// padding between the sequences (GQA 4); both dtypes.
void variant_cases(const Variant& v) {
  double worst = 0;
  int ring_cases = 0;
  auto with_mask = [&](FwdCase c) {
    c.d = v.d;
    c.dv = v.dv;
    c.causal = v.causal;
    c.wl = v.wl;
    c.wr = v.wr;
    return c;
  };
  for (DType dt : {DType::BF16, DType::F16}) {
    for (int s : {1, 17, 113, 4097}) {
      FwdCase c;
      c.dtype = dt;
      c.batch = 2;
      c.sq = c.sk = s;
      c.hq = 4;
      c.hkv = 2;
      run_stats_case(with_mask(c), v, &worst, &ring_cases);
    }
    FwdCase w;
    w.dtype = dt;
    w.batch = 2;
    w.sq = 113;
    w.sk = 17;
    run_stats_case(with_mask(w), v, &worst, &ring_cases);
    FwdCase u;
    u.dtype = dt;
    u.sq = u.sk = 0;
    u.lens_q = {17, 0, 130, 1, 64, 200};
    u.lens_k = {40, 5, 0, 300, 64, 90};
    u.used_q = {9, 0, 130, 1, 0, 150};
    u.hq = 8;
    u.hkv = 2;
    run_stats_case(with_mask(u), v, &worst, &ring_cases);
  }
  // How close the kernel's D comes to the bound (its sum tree is ~20x shallower than d - 1: notes).
  if (v.ring) {
    EXPECT_GE(ring_cases, 6) << "the ring's preprocess ran in too few cases (s 113 / 4097 and varlen take it)";
  }
  if (v.band) {  // as the ring's: s 1 / 17 (and 113 x 17) normalise the left edge away (launch_plan.cpp)
    EXPECT_GE(ring_cases, 6) << "the band ran in too few cases (s 113 / 4097 and varlen take it)";
  }
  std::printf("[ stats ] d %d/%d, %d-row q-blocks%s: max |D - rowsum| / bound %.4f (%d cases through the %s)\n", v.d,
              v.dv > 0 ? v.dv : v.d, v.block_m, v.ring ? ", dQ ring" : v.band ? ", recompute band" : "", worst, ring_cases,
              v.band ? "band" : "ring");
}

TEST_F(Sm90BwdStats, D64) { variant_cases({64, true, -1, -1, 128, false}); }
TEST_F(Sm90BwdStats, D96) { variant_cases({96, false, -1, -1, 64, false}); }
TEST_F(Sm90BwdStats, D128Rows64) { variant_cases({128, true, -1, -1, 64, false}); }
TEST_F(Sm90BwdStats, D128Rows80) { variant_cases({128, false, -1, -1, 80, false}); }
TEST_F(Sm90BwdStats, D128Ring) {
  ScopedEnv band_off("FASTATTN_BWD_BAND", "0");  // window (64, 0) through the ring, as before the band
  ScopedEnv ring_on("FASTATTN_BWD_RING_SLOTS", "512");  // which the host takes by default only at left = 0
  variant_cases({128, false, 64, 0, 64, true});
}
// The same window takes the recompute band by default (bwd_backend.cu, band.h's rule): its preprocess's
// lse / D, and the route (probe.band).
TEST_F(Sm90BwdStats, D128Band) { variant_cases({128, false, 64, 0, 64, false, 0, true}); }
// ... in deterministic mode too (the band is deterministic as it stands).
TEST_F(Sm90BwdStats, D128BandDeterministic) { variant_cases({128, false, 64, 0, 64, false, 0, true, true}); }
// d 192 / 256 under the LargeDims* name, which a run on a build without them leaves out.
TEST_F(Sm90BwdStats, LargeDimsD192) { variant_cases({192, true, -1, -1, 64, false}); }
// d_qk 192, d_v 128: D = rowsum(dO * out) over d_v (16 lanes a row), the dQ run's clear over d_qk.
TEST_F(Sm90BwdStats, LargeDimsD192V128) { variant_cases({192, true, -1, -1, 64, false, 128}); }
TEST_F(Sm90BwdStats, LargeDimsD256Keys80) { variant_cases({256, true, -1, -1, 64, false}); }
TEST_F(Sm90BwdStats, LargeDimsD256Keys64) { variant_cases({256, false, 50, 0, 64, false}); }
// d 192 and 192 / 128 causal (above) take the 80-key tile since session 33; a left window edge keeps the 64-key one.
TEST_F(Sm90BwdStats, LargeDimsD192Keys64) { variant_cases({192, false, 50, 0, 64, false}); }
TEST_F(Sm90BwdStats, LargeDimsD192V128Keys64) { variant_cases({192, false, 50, 0, 64, false, 128}); }

}  // namespace
}  // namespace fastattn::gputest
