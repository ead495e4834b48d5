// One backward test case on the GPU (bwd_sm90_test.cpp, bwd_strided_sm90_test.cpp): random inputs, the
// CUDA forward (out, lse), gradients poisoned before every run, each case run twice (dk and dv bitwise
// equal always, dq too in deterministic mode: three runs there), and every element of dq, dk, dv checked
// against the float64 reference with FA3's rule
//   max|g - ref| <= 2 * max|baseline - ref| + rounding step of the dtype at 0.3 + max|ref|,
// where the baseline is the reference with P and dS rounded to the input dtype and D = rowsum(dO * out)
// from its forward's out in the input dtype (the kernels read the stored out).
// Strided cases (BwdCase::pads): the tensors' gaps are poisoned (the inputs' before upload, out and the
// gradients before each run) and must hold the poison afterwards; the inputs must come back unchanged.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/bwd_stats_probe.h"
#include "fwd_case.h"
#include "scoped_env.h"
#include "support/bias_case.h"

namespace fastattn::gputest {

// The kernels the host must choose for a case (read back through the stats probe, cuda/bwd_stats_probe.h):
// the q-block rows (128: d 64; 80: d 128 unmasked; else 64), and whether dQ goes through the ring or the
// recompute band (both only where dq's strides are even: bwd_backend.cu's pairs_aligned).
struct BwdRoute {
  int block_m = 64;
  bool ring = false, band = false;
  int tail_pieces = 0;  // the wave tail's pieces a split tile (sm90/bwd/wave_tail.h; 0: none)
};

// A block-sparse mask for a case (BwdCase::blocks; bwd_block_sparse_test.cpp): bytes drawn kept with
// probability `density` (1: all kept), contiguous [mask batches][mask heads][q blocks][k blocks] covering the
// longest sequence, on the GPU for the CUDA call and on the host for the float64 reference (which applies
// it through reference/mask_oracle.h). zero_q_block / zero_k_block: that q block (k block) of every mask
// head keeps nothing (dq = 0 on its rows; dk = dv = 0 on its keys).
struct BwdBlocks {
  int block_q = 128, block_k = 128;
  double density = 0.5;
  bool batch_shared = false;  // mask dim 0 = 1
  int mask_heads = 0;         // 0: heads_q
  int zero_q_block = -1, zero_k_block = -1;
};

// An element bitmask for a case (BwdCase::bits; bwd_bitmask_test.cpp): uint32 keep words
// [mask batches][mask heads][rows][words] covering the longest sequence (bit j % 32 of word j / 32 of row
// i keeps pair (i, j)), on the GPU for the CUDA call and on the host for the float64 reference. Patterns:
// random bits with probability `density`, documents (`docs` segments over the keys: row i keeps key j iff
// both lie in one), causal spelled as bits (j <= i + s_k - s_q), tiles of 64 x 64 blocks each empty, full
// or random; bits past s_k random (they must be ignored). zero_rows_from / zero_keys_from (>= 0): rows /
// keys from there on keep nothing (dq = 0 / dk = dv = 0 there).
enum class BwdBitPattern { Random, Documents, CausalBits, Tiles };
struct BwdBits {
  BwdBitPattern pattern = BwdBitPattern::Random;
  double density = 0.5;
  int docs = 6;
  bool batch_shared = false;  // mask dim 0 = 1
  int mask_heads = 0;         // 0: heads_q
  int zero_rows_from = -1, zero_keys_from = -1;
};

struct BwdCase : FwdCase {
  std::optional<BwdBlocks> blocks;  // a block-sparse mask (MaskKind::BlockSparse)
  std::optional<BwdBits> bits;      // an element bitmask (MaskKind::DenseBitmask)
  // An additive bias (AttnArgs::bias; bias.grad: dbias too, checked as dq / dk / dv are, and exactly 0 where
  // the bias is -inf or past the longest sequence). The forward's out / lse come from the CPU backend where
  // the CUDA forward refuses the bias.
  testing::BiasSpec bias;
  // ALiBi slopes (AttnArgs::alibi_slopes), uniform in [0.01, 1): 0 none, 1 one a q head, 2 one a (batch entry, q head).
  int alibi = 0;
  // dbias's layout (bias.grad): 0 dense; 1 rows padded by 3 floats (the gaps must stay poisoned); 2 rows
  // reversed (negative row stride, the base at row 0 = the buffer's last row). 1 and 2 take clear_dbias's
  // 2-D memset path.
  int dbias_layout = 0;
  bool deterministic = false;
  // dq bitwise equal over three runs in the default mode too (the band: one order by construction).
  bool dq_bitwise = false;
  BwdPads pads;                    // gaps of the eight tensors (none: contiguous)
  std::optional<BwdRoute> route;   // checked when set
  // An environment switch that run 1 takes set to "0" (two CTA orders on the same inputs, e.g.
  // FASTATTN_BIAS_BWD_BATCH_INNER): dk and dv stay bitwise run 0's (one CTA writes a key block whatever
  // the order), dq and dbias (adds in another order) meet the float64 reference by the rule run 0's do.
  const char* run1_off = nullptr;
  // FwdCase::nan_past here: NaN past seqused must not reach a gradient (0 x NaN through P = dS = 0);
  // Queries and All poison dO past used_q too.
};

// A bf16 (1, 64, 2, d) call whose q, k, v and out share one buffer, with an F32 (1, 1, 64, 64) bias (and its
// dbias when given): the arguments of the bias refusal tests, which never reach a kernel.
inline AttnArgs bias_refusal_args(void* qkv, void* lse, void* bias, int d, void* dbias = nullptr) {
  AttnArgs a;
  a.q = make_tensor(qkv, DType::BF16, {1, 64, 2, d}, Device::CUDA);
  a.k = a.q;
  a.v = a.q;
  a.out = a.q;
  a.lse = make_tensor(lse, DType::F32, {1, 2, 64}, Device::CUDA);
  a.bias = make_tensor(bias, DType::F32, {1, 1, 64, 64}, Device::CUDA);
  if (dbias != nullptr) a.dbias = make_tensor(dbias, DType::F32, {1, 1, 64, 64}, Device::CUDA);
  return a;
}

// The backward's validation refuses `a` as NotSupported, `what` in its message (no kernel runs).
inline void expect_bwd_refused(const AttnArgs& a, const char* what) {
  const Tensor g = a.q;
  const Status st = validate_backward(a, g, g, g, g);
  EXPECT_EQ(st.code, Code::NotSupported) << what;
  EXPECT_NE(st.message.find(what), std::string::npos) << st.message;
}

inline BwdCase bcase(DType dt, int d, int sq, int sk, int dv = 0) {
  BwdCase c;
  c.dtype = dt;
  c.d = d;
  c.dv = dv;
  c.sq = sq;
  c.sk = sk;
  return c;
}

// FA3's rule over values already widened (`got_at(i)`: element i as float64); `base_rounded`: the
// baseline's own error counts after rounding to dt (gradients stored in dt; dbias is fp32).
template <class GotAt>
inline void check_values(const char* name, size_t n, GotAt got_at, const std::vector<double>& ref,
                         const std::vector<double>& base, DType dt, bool base_rounded) {
  ASSERT_EQ(n, ref.size()) << name;
  double err = 0, base_err = 0, ref_max = 0;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got_at(i);
    if (!std::isfinite(g)) {
      ++bad;
      continue;
    }
    err = std::max(err, std::abs(g - ref[i]));
    base_err = std::max(base_err, std::abs((base_rounded ? round_to(base[i], dt) : base[i]) - ref[i]));
    ref_max = std::max(ref_max, std::abs(ref[i]));
  }
  EXPECT_EQ(bad, 0u) << name << ": elements not written or not finite";
  // FA3's atol for gradients: the dtype's rounding at 0.3 + max|ref| (test_flash_attn.py's
  // `(dq_ref + 0.3 - 0.3 - dq_ref)`): the kernel's D = rowsum(dO * O) reads the rounded O, so where
  // the reference's dS is exactly 0 (one kept key per row: P = 1, dP = D) ours is a rounding residue.
  const double step = (ref_max + 0.3) * (dt == DType::BF16 ? 1.0 / 256 : 1.0 / 2048);
  EXPECT_LE(err, 2 * base_err + step) << name << " error " << err << " baseline error " << base_err << " max|ref| "
                                      << ref_max;
}
inline void check_grad(const char* name, const std::vector<uint16_t>& got, const std::vector<double>& ref,
                       const std::vector<double>& base, DType dt) {
  check_values(name, got.size(), [&](size_t i) { return from_bits(got[i], dt); }, ref, base, dt, true);
}

// The stats probe in force for a scope (a global of the library: set, then always cleared), with device
// buffers for `rows` floats of each array.
class RouteProbe {
 public:
  explicit RouteProbe(int64_t rows) : lse_(size_t(rows) * 4), dpsum_(size_t(rows) * 4) {
    probe_.lse_log2 = static_cast<float*>(lse_.get());
    probe_.dpsum = static_cast<float*>(dpsum_.get());
    probe_.capacity = rows;
    cuda_backend::set_bwd_stats_probe(&probe_);
  }
  ~RouteProbe() { cuda_backend::set_bwd_stats_probe(nullptr); }
  RouteProbe(const RouteProbe&) = delete;
  RouteProbe& operator=(const RouteProbe&) = delete;
  const cuda_backend::BwdStatsProbe& seen() const { return probe_; }

 private:
  DeviceBuffer lse_, dpsum_;
  cuda_backend::BwdStatsProbe probe_;
};

inline void run_bwd_case(const BwdCase& c) {
  if (!case_in_menu(cuda_backend::KernelFamily::Backward, c.dtype, c.d, c.d_v())) return;
  const auto seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  const bool strided = c.pads.any();
  SCOPED_TRACE("case " + c.str() + c.bias.describe() + (c.alibi ? " alibi" + std::to_string(c.alibi) : "") +
               (c.deterministic ? " deterministic" : "") +
               (strided ? c.pads.str() : "") +
               " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const CaseIndex idx(c);
  BwdTensors tensors(c, idx, rng, c.pads);
  TestTensor &q = tensors.q, &k = tensors.k, &v = tensors.v, &out = tensors.out, &dout = tensors.dout,
             &dq = tensors.dq, &dk = tensors.dk, &dv = tensors.dv;
  poison_past_used(c, idx, q, k, v);
  if (c.nan_past == NanPast::All) poison_rows_past_used(dout, idx, idx.cu_q, idx.used_q, c.sq, c.dtype);
  const size_t lse_n = size_t(std::max<int64_t>(int64_t(c.hq) * idx.total_q(c), 1));
  DeviceBuffer lse_dev(lse_n * 4);
  std::vector<uint16_t> out_host(out.host.size());
  // The block mask's bytes (c.blocks), and its view on either side.
  BlockMask mask;
  std::vector<uint8_t> mask_host;
  std::optional<DeviceBuffer> mask_dev;
  if (c.blocks) {
    const BwdBlocks& m = *c.blocks;
    const int max_q = idx.varlen ? idx.max_q : c.sq, max_k = idx.varlen ? idx.max_k : c.sk;
    mask.shape[0] = m.batch_shared ? 1 : idx.batch;
    mask.shape[1] = m.mask_heads > 0 ? m.mask_heads : c.hq;
    mask.shape[2] = std::max(1, (max_q + m.block_q - 1) / m.block_q);
    mask.shape[3] = std::max(1, (max_k + m.block_k - 1) / m.block_k);
    mask.stride[3] = 1;
    for (int i = 2; i >= 0; --i) mask.stride[i] = mask.stride[i + 1] * mask.shape[i + 1];
    mask.block_q = m.block_q;
    mask.block_k = m.block_k;
    mask_host.resize(size_t(mask.shape[0] * mask.stride[0]));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (size_t i = 0; i < mask_host.size(); ++i) {
      const int64_t qb = int64_t(i) / mask.stride[2] % mask.shape[2], kb = int64_t(i) % mask.shape[3];
      const bool keep = qb != m.zero_q_block && kb != m.zero_k_block && (m.density >= 1.0 || u(rng) < m.density);
      mask_host[i] = keep ? uint8_t(1 + i % 251) : 0;
    }
    mask_dev.emplace(mask_host.size());
    mask_dev->upload(mask_host.data());
  }
  // The element bitmask's words (c.bits), and its view on either side.
  BitMask bit_mask;
  std::vector<uint32_t> bits_host;
  std::optional<DeviceBuffer> bits_dev;
  if (c.bits) {
    const BwdBits& m = *c.bits;
    const int max_q = idx.varlen ? idx.max_q : c.sq, max_k = idx.varlen ? idx.max_k : c.sk;
    bit_mask.shape[0] = m.batch_shared ? 1 : idx.batch;
    bit_mask.shape[1] = m.mask_heads > 0 ? m.mask_heads : c.hq;
    bit_mask.shape[2] = std::max(1, max_q);
    bit_mask.shape[3] = std::max(1, (max_k + 31) / 32);
    bit_mask.stride[2] = bit_mask.shape[3];
    bit_mask.stride[1] = bit_mask.shape[2] * bit_mask.stride[2];
    bit_mask.stride[0] = bit_mask.shape[1] * bit_mask.stride[1];
    bits_host.assign(size_t(bit_mask.shape[0] * bit_mask.stride[0]), 0u);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<int> cuts;  // Documents: boundaries over the keys (and the rows, the same positions)
    for (int d = 1; d < m.docs; ++d) cuts.push_back(int(u(rng) * max_k));
    std::sort(cuts.begin(), cuts.end());
    auto doc = [&](int x) { return int(std::upper_bound(cuts.begin(), cuts.end(), x) - cuts.begin()); };
    const int64_t rows = bit_mask.shape[2], words = bit_mask.shape[3], tiles_k = (words * 32 + 63) / 64;
    for (int64_t bh = 0; bh < bit_mask.shape[0] * bit_mask.shape[1]; ++bh) {
      std::vector<int> kind(size_t((rows + 63) / 64 * tiles_k));
      for (int& kd : kind) kd = int(u(rng) * 3);  // Tiles: 0 empty, 1 full, 2 random
      for (int64_t i = 0; i < rows; ++i) {
        uint32_t* row = &bits_host[size_t(bh * bit_mask.stride[1] + i * bit_mask.stride[2])];
        for (int64_t j = 0; j < words * 32; ++j) {
          bool keep = false;
          switch (m.pattern) {
            case BwdBitPattern::Random: keep = m.density >= 1.0 || u(rng) < m.density; break;
            case BwdBitPattern::Documents: keep = doc(int(i)) == doc(int(j)); break;
            case BwdBitPattern::CausalBits: keep = j <= i + max_k - max_q; break;
            case BwdBitPattern::Tiles: {
              const int kd = kind[size_t(i / 64 * tiles_k + j / 64)];
              keep = kd == 1 || (kd == 2 && u(rng) < m.density);
              break;
            }
          }
          if (j >= max_k) keep = u(rng) < 0.5;  // bits past the keys: ignored
          if ((m.zero_rows_from >= 0 && i >= m.zero_rows_from) || (m.zero_keys_from >= 0 && j >= m.zero_keys_from))
            keep = false;
          if (keep) row[j / 32] |= 1u << (j % 32);
        }
      }
    }
    bits_dev.emplace(bits_host.size() * 4);
    bits_dev->upload(bits_host.data());
  }
  std::vector<float> lse_host(lse_n);
  // The bias (c.bias) on either side, and dbias's device buffer (logical shape, contiguous fp32).
  testing::HostBias bias_host;
  std::optional<DeviceBuffer> bias_dev, dbias_dev;
  int64_t bias_dims[4] = {0, 0, 0, 0};
  int64_t dbias_pitch = 0;  // floats a dbias row takes in its buffer (c.dbias_layout)
  if (c.bias.on) {
    testing::Rng brng(seed ^ 0x9e3779b9u);
    bias_host = testing::make_bias(c.bias, idx.batch, idx.varlen ? idx.max_q : c.sq, idx.varlen ? idx.max_k : c.sk, brng);
    const Tensor& stored = bias_host.storage.view();
    bias_dev.emplace(size_t(stored.shape[0] * stored.stride[0]) * size_t(dtype_size(stored.dtype)));
    bias_dev->upload(stored.data);
    const Tensor logical = bias_host.view();
    for (int i = 0; i < 4; ++i) bias_dims[i] = logical.shape[i];
    dbias_pitch = bias_dims[3] + (c.dbias_layout == 1 ? 3 : 0);
    if (c.bias.grad) dbias_dev.emplace(size_t(bias_dims[0] * bias_dims[1] * bias_dims[2] * dbias_pitch) * 4);
  }

  // The ALiBi slopes (c.alibi) on either side.
  std::vector<float> alibi_host;
  std::optional<DeviceBuffer> alibi_dev;
  if (c.alibi != 0) {
    alibi_host.resize(size_t(c.alibi == 2 ? idx.batch * c.hq : c.hq));
    std::uniform_real_distribution<float> u(0.01f, 1.f);
    for (float& x : alibi_host) x = u(rng);
    alibi_dev.emplace(alibi_host.size() * 4);
    alibi_dev->upload(alibi_host.data());
  }

  auto make_args = [&](bool on_gpu) {
    const Device dv_ = on_gpu ? Device::CUDA : Device::CPU;
    AttnArgs a;
    a.q = q.view(on_gpu ? q.dev->get() : q.host.data(), c.dtype, dv_);
    a.k = k.view(on_gpu ? k.dev->get() : k.host.data(), c.dtype, dv_);
    a.v = v.view(on_gpu ? v.dev->get() : v.host.data(), c.dtype, dv_);
    a.out = out.view(on_gpu ? out.dev->get() : out_host.data(), c.dtype, dv_);
    a.lse = idx.lse(c, on_gpu ? lse_dev.get() : static_cast<void*>(lse_host.data()), dv_);
    idx.apply(a, c, on_gpu);
    a.deterministic = c.deterministic;
    if (c.blocks) {
      a.mask.kind = MaskKind::BlockSparse;
      a.mask.blocks = mask;
      a.mask.blocks.data = on_gpu ? static_cast<const uint8_t*>(mask_dev->get()) : mask_host.data();
      a.mask.blocks.device = dv_;
    }
    if (c.bits) {
      a.mask.kind = MaskKind::DenseBitmask;
      a.mask.bits = bit_mask;
      a.mask.bits.data = on_gpu ? static_cast<const uint32_t*>(bits_dev->get()) : bits_host.data();
      a.mask.bits.device = dv_;
    }
    if (c.bias.on) {
      a.bias = bias_host.view();
      if (on_gpu) {
        a.bias.data = bias_dev->get();
        a.bias.device = Device::CUDA;
        if (c.bias.grad) {
          a.dbias = make_tensor(dbias_dev->get(), DType::F32, {bias_dims[0], bias_dims[1], bias_dims[2], bias_dims[3]},
                                Device::CUDA);
          a.dbias.stride[2] = c.dbias_layout == 2 ? -dbias_pitch : dbias_pitch;
          a.dbias.stride[1] = bias_dims[2] * dbias_pitch;
          a.dbias.stride[0] = bias_dims[1] * a.dbias.stride[1];
          if (c.dbias_layout == 2) a.dbias.data = static_cast<float*>(dbias_dev->get()) + (bias_dims[2] - 1) * dbias_pitch;
        }
      }
    }
    if (c.alibi != 0) {
      a.alibi_slopes = c.alibi == 2 ? make_tensor(nullptr, DType::F32, {int64_t(idx.batch), int64_t(c.hq)}, dv_)
                                    : make_tensor(nullptr, DType::F32, {int64_t(c.hq)}, dv_);
      a.alibi_slopes.data = on_gpu ? alibi_dev->get() : static_cast<void*>(alibi_host.data());
    }
    return a;
  };

  AttnArgs ga = make_args(true);
  out.dev->poison();  // every element is the forward's to write; out's gaps must stay poisoned
  Status st = forward(ga, nullptr);
  if (c.bias.on && !st.ok() && st.message.rfind("bias:", 0) == 0) {
    // No CUDA forward with this bias: the CPU backend's out / lse (same dtype and layouts), uploaded.
    AttnArgs ca = make_args(false);
    ca.backend = Backend::CPU;
    st = forward(ca, nullptr);
    ASSERT_TRUE(st.ok()) << "CPU forward: " << st.message;
    out.dev->upload(out_host.data());
    lse_dev.upload(lse_host.data());
  }
  ASSERT_TRUE(st.ok()) << "forward: " << st.message;
  FA_CUDA_OK(cudaDeviceSynchronize());
  out.dev->download(out_host.data());
  lse_dev.download(lse_host.data());
  if (strided) {
    EXPECT_EQ(out.gaps_written(out_host), 0u) << "out: the forward wrote into its gaps";
  }

  // The route: the probe's buffers hold every q head's padded workspace rows (q-blocks of up to 128 rows,
  // one block of padding per sequence and one for the rounding).
  std::optional<RouteProbe> probe;
  if (c.route) probe.emplace(int64_t(c.hq) * (idx.total_q(c) + 128 * (int64_t(idx.batch) + 2)));

  const Device dev = Device::CUDA;
  auto run_backward = [&](cudaStream_t s) {
    return backward(ga, dout.view(dout.dev->get(), c.dtype, dev), dq.view(dq.dev->get(), c.dtype, dev),
                    dk.view(dk.dev->get(), c.dtype, dev), dv.view(dv.dev->get(), c.dtype, dev), s);
  };
  // c.graph: run 0 is a plain call, runs 1 and 2 replay one CUDA-graph capture of the same call (its
  // workspace, clears and early-launched kernels), so they must match run 0 as plain runs do, and
  // each replay is checked against the reference too (dq by default differs in its adds' order).
  CapturedCall graph;
  if (c.graph) {
    ga.check_index_arrays = false;  // no host reads of the index arrays inside the capture
    const std::string err = graph.capture(run_backward);
    ASSERT_TRUE(err.empty()) << "backward: " << err;
  }
  const int runs = c.deterministic || c.graph || c.dq_bitwise ? 3 : 2;
  std::vector<uint16_t> got[3][3];  // run x (dq, dk, dv)
  std::vector<float> got_dbias[3];
  TestTensor* ts[3] = {&dq, &dk, &dv};
  const char* names[3] = {"dq", "dk", "dv"};
  for (int r = 0; r < runs; ++r) {
    for (TestTensor* t : ts) t->dev->poison();
    if (dbias_dev) dbias_dev->poison();  // every entry is the backward's to write (0 where nothing adds)
    std::optional<ScopedEnv> other_order;
    if (c.run1_off != nullptr && r == 1) other_order.emplace(c.run1_off, "0");
    if (c.graph && r > 0) {
      FA_CUDA_OK(graph.replay());
    } else {
      st = run_backward(nullptr);
      ASSERT_TRUE(st.ok()) << "backward: " << st.message;
    }
    FA_CUDA_OK(cudaDeviceSynchronize());
    if (probe && r == 0) {
      const cuda_backend::BwdStatsProbe& seen = probe->seen();
      EXPECT_EQ(seen.block_m, c.route->block_m) << "the host chose other q-blocks than the case is for";
      EXPECT_EQ(seen.ring, c.route->ring) << "dQ ring taken or not, against the case's route";
      EXPECT_EQ(seen.band, c.route->band) << "recompute band taken or not, against the case's route";
      EXPECT_EQ(seen.tail_pieces, c.route->tail_pieces) << "wave tail split or not, against the case's route";
    }
    if (dbias_dev) {  // to the logical (contiguous) order; a padded layout's gaps must stay poisoned
      std::vector<float> stored(dbias_dev->bytes() / 4);
      dbias_dev->download(stored.data());
      const int64_t rows = bias_dims[2], cols = bias_dims[3];
      got_dbias[r].resize(size_t(bias_dims[0] * bias_dims[1] * rows * cols));
      size_t gaps_written = 0;
      for (int64_t plane = 0; plane < bias_dims[0] * bias_dims[1]; ++plane)
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t row = plane * rows + (c.dbias_layout == 2 ? rows - 1 - i : i);
          for (int64_t j = 0; j < dbias_pitch; ++j) {
            const float x = stored[size_t(row * dbias_pitch + j)];
            if (j < cols) got_dbias[r][size_t((plane * rows + i) * cols + j)] = x;
            else gaps_written += !std::isnan(x);
          }
        }
      EXPECT_EQ(gaps_written, 0u) << "dbias: run " << r << " wrote into its row padding";
    }
    for (int g = 0; g < 3; ++g) {
      got[r][g].resize(ts[g]->host.size());
      ts[g]->dev->download(got[r][g].data());
      if (strided) {
        EXPECT_EQ(ts[g]->gaps_written(got[r][g]), 0u) << names[g] << ": run " << r << " wrote into its gaps";
      }
    }
  }
  for (int r = 1; r < runs; ++r)
    for (int g = 0; g < 3; ++g) {
      if (g == 0 && !c.deterministic && !c.dq_bitwise) continue;  // dQ's adds come in any order by default
      EXPECT_EQ(std::memcmp(got[0][g].data(), got[r][g].data(), got[0][g].size() * 2), 0)
          << names[g] << " differs between runs " << 0 << " and " << r;
    }
  // dbias without broadcast dims: one add an entry onto zeros, so bitwise run to run; shared entries sum in
  // any order.
  const bool dbias_exclusive = c.bias.per_batch && c.bias.heads == c.hq;
  if (dbias_dev && dbias_exclusive) {
    for (int r = 1; r < runs; ++r) {
      EXPECT_EQ(std::memcmp(got_dbias[0].data(), got_dbias[r].data(), got_dbias[0].size() * 4), 0)
          << "dbias differs between runs 0 and " << r;
    }
  }
  if (strided) {  // the inputs (and their poisoned gaps) as uploaded
    for (auto [t, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}, std::pair{&dout, "dout"}}) {
      std::vector<uint16_t> now(t->host.size());
      t->dev->download(now.data());
      EXPECT_EQ(std::memcmp(now.data(), t->host.data(), now.size() * 2), 0) << name << " changed on the device";
    }
  }

  AttnArgs ha = make_args(false);
  const Tensor dout_h = dout.view(dout.host.data(), c.dtype, Device::CPU);
  reference::BackwardF64 ref, base;
  st = reference::backward_f64(ha, dout_h, &ref);
  ASSERT_TRUE(st.ok()) << st.message;
  reference::Options low;
  low.round_p_to_input_dtype = true;
  ASSERT_TRUE(reference::backward_f64(ha, dout_h, &base, low).ok());
  // The reference's gradients are contiguous in the logical shape; ours in the tensors' layouts.
  auto logical = [&](int g, int r) { return strided ? ts[g]->logical(got[r][g]) : got[r][g]; };
  check_grad("dq", logical(0, 0), ref.dq, base.dq, c.dtype);
  check_grad("dk", logical(1, 0), ref.dk, base.dk, c.dtype);
  check_grad("dv", logical(2, 0), ref.dv, base.dv, c.dtype);
  if (dbias_dev) {
    const std::vector<float>& db = got_dbias[0];
    // dS reaches dbias in the input dtype (the MMAs' operand), so the baseline is rounded so too.
    check_values("dbias", db.size(), [&](size_t i) { return double(db[i]); }, ref.dbias, base.dbias, c.dtype, true);
    // Exactly 0 where no score exists: past the longest sequence, and where the bias is -inf.
    const int max_q = idx.varlen ? idx.max_q : c.sq, max_k = idx.varlen ? idx.max_k : c.sk;
    const int64_t rows = bias_dims[2], cols = bias_dims[3], heads = bias_dims[1];
    const int64_t stored_heads = bias_host.storage.view().shape[1];
    size_t nonzero = 0;
    for (size_t e = 0; e < db.size(); ++e) {
      const int64_t j = int64_t(e) % cols, i = int64_t(e) / cols % rows, h = int64_t(e) / (cols * rows) % heads,
                    b = int64_t(e) / (cols * rows * heads);
      const int64_t at = ((b * stored_heads + (stored_heads == 1 ? 0 : h)) * rows + i) * cols + j;
      const bool none = i >= max_q || j >= max_k || std::isinf(bias_host.storage.get(at));
      nonzero += none && db[e] != 0.f;
    }
    EXPECT_EQ(nonzero, 0u) << "dbias: entries with no score (past the sequences, -inf bias) are not 0";
  }
  if (c.run1_off != nullptr) {  // the other order's dq and dbias (its dk, dv: bitwise run 0's, above)
    SCOPED_TRACE(std::string("run 1 under ") + c.run1_off + "=0");
    check_grad("dq", logical(0, 1), ref.dq, base.dq, c.dtype);
    if (dbias_dev) {
      const std::vector<float>& db = got_dbias[1];
      check_values("dbias", db.size(), [&](size_t i) { return double(db[i]); }, ref.dbias, base.dbias, c.dtype, true);
    }
  }
  if (c.blocks || c.bits) {  // what the mask drops (rows or keys with nothing kept) is exactly 0, not merely small
    // Which rows and keys the mask leaves with nothing, from float64 results: a query row keeps no
    // key iff its lse is -inf; a key is kept by no row iff its dv row is exactly 0 (a sum of P > 0
    // times random dO otherwise). Exact zeros of the reference's dq / dk are no guide: a row that
    // keeps one key has dS = P (dP - D) = 0 exactly in float64, but not in the kernel's rounding.
    reference::ForwardF64 fwd64;
    ASSERT_TRUE(reference::forward_f64(ha, &fwd64).ok());
    const int64_t total_q = idx.total_q(c), d = c.d, dvd = c.dv > 0 ? c.dv : c.d;
    auto row_empty = [&](int64_t t, int64_t h) {  // token t of the logical (tokens, hq) rows
      const int64_t li = idx.varlen ? h * total_q + t : (t / c.sq * c.hq + h) * c.sq + t % c.sq;
      return std::isinf(fwd64.lse[size_t(li)]) && fwd64.lse[size_t(li)] < 0;
    };
    std::vector<char> key_empty(ref.dv.size() / size_t(dvd), 1);
    for (size_t i = 0; i < ref.dv.size(); ++i)
      if (ref.dv[i] != 0.0) key_empty[i / size_t(dvd)] = 0;
    const int64_t widths[3] = {d, d, dvd};
    for (int g = 0; g < 3; ++g) {
      const std::vector<uint16_t> gl = logical(g, 0);
      size_t zeros = 0, nonzero = 0;
      for (size_t i = 0; i < gl.size(); ++i) {
        const int64_t row = int64_t(i) / widths[g];
        const bool dropped = g == 0 ? row_empty(row / c.hq, row % c.hq) : key_empty[size_t(row)] != 0;
        if (!dropped) continue;
        ++zeros;
        nonzero += from_bits(gl[i], c.dtype) != 0.0;
      }
      EXPECT_EQ(nonzero, 0u) << names[g] << ": elements the mask zeroes (" << zeros << ") are not 0";
      const bool meant = c.blocks ? c.blocks->density == 0.0 || c.blocks->zero_q_block >= 0 || c.blocks->zero_k_block >= 0
                                  : (c.bits->pattern == BwdBitPattern::Random && c.bits->density == 0.0) ||
                                        (g == 0 ? c.bits->zero_rows_from >= 0 : c.bits->zero_keys_from >= 0);
      if (meant) {
        EXPECT_GT(zeros, 0u) << names[g] << ": the case meant gradients the mask zeroes";
      }
    }
  }
  if (c.graph && !c.deterministic)  // the replays' dq (dk, dv: bitwise run 0's, above)
    for (int r = 1; r < runs; ++r) check_grad("dq (graph replay)", logical(0, r), ref.dq, base.dq, c.dtype);
}

// Varlen with empty sequences on both sides (d_lens, causal and not), seqused (d_used), both (d_both),
// and the seqused cases again with NaN past seqused (`nan`: what the kernels keep out); the route checked
// on every case when given (bwd_sm90_test.cpp, bwd_sm80_test.cpp).
inline void bwd_varlen_cases(int d_lens, int d_used, int d_both, int dv = 0,
                             const std::optional<BwdRoute>& route = std::nullopt, NanPast nan = NanPast::All) {
  for (bool causal : {false, true}) {
    BwdCase c = bcase(DType::BF16, d_lens, 0, 0, dv);
    c.lens_q = {17, 200, 0, 64, 300};
    c.lens_k = {300, 30, 5, 0, 290};
    c.hq = 4;
    c.hkv = 2;
    c.causal = causal;
    c.route = route;
    run_bwd_case(c);
  }
  BwdCase u = bcase(DType::F16, d_used, 300, 400, dv);
  u.batch = 3;
  u.used_q = {300, 0, 129};
  u.used_k = {1, 400, 200};
  u.causal = true;
  u.route = route;
  run_bwd_case(u);
  BwdCase v = bcase(DType::BF16, d_both, 0, 0, dv);
  v.lens_q = {130, 1, 70};
  v.lens_k = {0, 250, 70};
  v.used_q = {100, 1, 70};
  v.used_k = {0, 200, 3};
  v.route = route;
  run_bwd_case(v);
  // The same with NaN in every row past seqused (bwd/zero_rows.cuh): no gradient may see them.
  u.nan_past = nan;
  run_bwd_case(u);
  v.nan_past = nan;
  run_bwd_case(v);
}

}  // namespace fastattn::gputest
