// Block-sparse masks on the Hopper forward (BlockSparseConfig kernels and their list builder) against
// a float64 reference of their own (the reference backend takes block masks only once validation and
// the reference support land): pair (i, j) of batch b, q head h is kept iff the window / causal /
// seqlen rule keeps it (reference/mask_oracle.h) and the mask's byte at (b or 0, h / (heads_q / mask
// heads), i / block_q, j / block_k) is nonzero. Inputs drawn fresh, out poisoned (with a padded row
// that must stay poisoned), every element and LSE checked with FA3's rule (fwd_case.h), two runs
// bitwise equal. Cases: densities 0 / 0.1 / 0.5 / 1 with blocks 128 x 128, 256 x 128, 128 x 256; d 64
// / 96 / 128 in both dtypes; mask batch 1 and mask heads 1 / heads_kv / heads_q under GQA 1 / 4 / 8
// (packed and not); causal and windows with s_q != s_k; odd lengths 1 / 17 / 113 / 4097; varlen with
// an empty sequence and seqused; mask dims past the cover with padded rows; an all-zero mask row
// (out 0, lse -inf); softcap; CUDA-graph capture and replay; the all-ones mask bitwise equal to the
// forward without a mask; and the refusals (block 64, num_splits 2, d 192, the deterministic backward).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/block_mask_rule.h"
#include "fwd_case.h"
#include "masked_fwd.h"
#include "reference/mask_oracle.h"
#include "util/parallel_for.h"

namespace fastattn::gputest {
namespace {

class Sm90FwdBlockSparse : public HopperTest {};

struct BsCase {
  FwdCase c;
  int block_q = 128, block_k = 128;
  double density = 0.5;
  bool mask_batch_shared = false;  // mask dim 0 = 1
  int mask_heads = 0;              // 0: heads_q
  int extra_q_blocks = 0, extra_k_blocks = 0;  // mask dims past the cover
  int mask_row_pad = 0;            // extra bytes after each mask row (non-dense strides)
  int zero_q_block = -1;           // this q block of every mask row keeps nothing (when >= 0)

  int heads() const { return mask_heads > 0 ? mask_heads : c.hq; }
  std::string str() const {
    return c.str() + " blocks " + std::to_string(block_q) + "x" + std::to_string(block_k) + " density " +
           std::to_string(density) + " mask b" + (mask_batch_shared ? "1" : "B") + " h" + std::to_string(heads()) +
           " extra(" + std::to_string(extra_q_blocks) + "," + std::to_string(extra_k_blocks) + ") rowpad " +
           std::to_string(mask_row_pad) + " zero_qb " + std::to_string(zero_q_block);
  }
};

// The mask bytes (host and device) and the BlockMask that points at the device copy.
struct MaskBytes {
  int mb = 1, mh = 1, qbn = 0, kbn = 0;
  int64_t stride[4] = {0, 0, 0, 0};
  std::vector<uint8_t> host;
  std::unique_ptr<DeviceBuffer> dev;

  MaskBytes(const BsCase& bc, const CaseIndex& idx, std::mt19937& rng) {
    const FwdCase& c = bc.c;
    const int max_q = idx.varlen ? idx.max_q : c.sq, max_k = idx.varlen ? idx.max_k : c.sk;
    mb = bc.mask_batch_shared ? 1 : idx.batch;
    mh = bc.heads();
    qbn = std::max(1, (max_q + bc.block_q - 1) / bc.block_q) + bc.extra_q_blocks;
    kbn = std::max(1, (max_k + bc.block_k - 1) / bc.block_k) + bc.extra_k_blocks;
    stride[3] = 1;
    stride[2] = kbn + bc.mask_row_pad;
    stride[1] = qbn * stride[2];
    stride[0] = mh * stride[1];
    host.assign(size_t(mb * stride[0]), 0xA5);  // padding bytes: nonzero, never read as kept
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int b = 0; b < mb; ++b)
      for (int h = 0; h < mh; ++h)
        for (int i = 0; i < qbn; ++i)
          for (int j = 0; j < kbn; ++j) {
            const bool keep = i != bc.zero_q_block && (bc.density >= 1.0 || u(rng) < bc.density);
            host[size_t(b * stride[0] + h * stride[1] + i * stride[2] + j)] = keep ? uint8_t(1 + j % 200) : 0;
          }
    dev = std::make_unique<DeviceBuffer>(host.size());
    dev->upload(host.data());
  }
  BlockMask view(const BsCase& bc) const {
    BlockMask m;
    m.data = static_cast<const uint8_t*>(dev->get());
    m.shape[0] = mb;
    m.shape[1] = mh;
    m.shape[2] = qbn;
    m.shape[3] = kbn;
    for (int i = 0; i < 4; ++i) m.stride[i] = stride[i];
    m.device = Device::CUDA;
    m.block_q = bc.block_q;
    m.block_k = bc.block_k;
    return m;
  }
  bool keeps(const BsCase& bc, int b, int h, int i, int j) const {
    const int hm = h / (bc.c.hq / mh);
    return host[size_t((mb == 1 ? 0 : b) * stride[0] + hm * stride[1] + (i / bc.block_q) * stride[2] +
                       (j / bc.block_k))] != 0;
  }
};

// The float64 forward under the block mask (masked_fwd.h).
void reference_forward(const BsCase& bc, const CaseIndex& idx, const MaskBytes& mask, const Doubles& q,
                       const Doubles& k, const Doubles& v, bool round_p, std::vector<double>* out,
                       std::vector<double>* lse) {
  const auto keep = [&](int b, int h, int i, int j) { return mask.keeps(bc, b, h, i, j); };
  reference_forward_masked(bc.c, idx, keep, q, k, v, round_p, out, lse);
}

// Runs bc on the GPU with its block mask (`with_mask` false: the same call without one): masked_fwd.h.
void run_gpu(const BsCase& bc, const CaseIndex& idx, const MaskBytes& mask, TestTensor& q, TestTensor& k,
             TestTensor& v, TestTensor& out, bool with_mask, GpuRun* result) {
  run_gpu_masked(bc.c, idx, q, k, v, out, [&](AttnArgs& a) {
    if (!with_mask) return;
    a.mask.kind = MaskKind::BlockSparse;
    a.mask.blocks = mask.view(bc);
  }, result);
}

void run_bs_case(const BsCase& bc) {
  const auto seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  SCOPED_TRACE("case " + bc.str() + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const FwdCase& c = bc.c;
  const CaseIndex idx(c);
  CaseTensors t(c, idx, rng);
  const MaskBytes mask(bc, idx, rng);
  GpuRun got;
  run_gpu(bc, idx, mask, t.q, t.k, t.v, t.out, true, &got);
  if (::testing::Test::HasFatalFailure()) return;

  std::vector<double> ref_out, ref_lse, base_out, base_lse;
  const Doubles q(t.q, c.dtype, idx.varlen), k(t.k, c.dtype, idx.varlen), v(t.v, c.dtype, idx.varlen);
  reference_forward(bc, idx, mask, q, k, v, false, &ref_out, &ref_lse);
  reference_forward(bc, idx, mask, q, k, v, true, &base_out, &base_lse);

  check_out(got.out, ref_out, base_out, c);
  check_out_zero_past_used(got.out, t.out, c, idx);
  const size_t masked_rows = check_lse(got.lse, ref_lse);
  if (bc.density == 0.0 || bc.zero_q_block >= 0) {
    EXPECT_GT(masked_rows, 0u) << "the case meant rows that keep no key";
  }
}

BsCase bs(DType dt, int d, int sq, int sk, int hq, int hkv, double density) {
  BsCase b;
  b.c.dtype = dt;
  b.c.d = d;
  b.c.sq = sq;
  b.c.sk = sk;
  b.c.hq = hq;
  b.c.hkv = hkv;
  b.c.batch = 2;
  b.c.out_pad = 8;
  b.density = density;
  return b;
}

TEST_F(Sm90FwdBlockSparse, DensitiesAndBlockShapes) {
  for (auto [bq, bk] : {std::pair{128, 128}, std::pair{256, 128}, std::pair{128, 256}}) {
    for (double density : {0.0, 0.1, 0.5, 1.0}) {
      BsCase b = bs(DType::BF16, 128, 300, 700, 4, 2, density);
      b.block_q = bq;
      b.block_k = bk;
      run_bs_case(b);
      b.c.causal = true;
      run_bs_case(b);
    }
  }
}

TEST_F(Sm90FwdBlockSparse, HeadDimsAndDtypes) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {64, 96, 128}) {
      BsCase b = bs(dt, d, 500, 900, 4, 4, 0.5);
      run_bs_case(b);
      b.c.causal = true;
      b.c.sk = 500;
      run_bs_case(b);
    }
}

// Mask batch 1 and mask heads 1 / heads_kv / heads_q under GQA 1 / 4 / 8: short queries pack
// several q heads in a tile (where they share a mask head), longer ones do not.
TEST_F(Sm90FwdBlockSparse, BroadcastDimsAndGqa) {
  for (int hkv : {8, 2, 1})
    for (int mask_heads : {1, hkv, 8})
      for (int sq : {17, 300}) {
        BsCase b = bs(DType::BF16, 128, sq, 600, 8, hkv, 0.5);
        b.mask_heads = mask_heads;
        b.mask_batch_shared = mask_heads == hkv;
        run_bs_case(b);
      }
}

TEST_F(Sm90FwdBlockSparse, CausalAndWindows) {
  for (auto [sq, sk] : {std::pair{700, 300}, std::pair{300, 700}, std::pair{640, 640}})
    for (auto [wl, wr] : {std::pair{-1, 0}, std::pair{200, 50}, std::pair{64, 0}, std::pair{0, 300}}) {
      BsCase b = bs(DType::F16, 128, sq, sk, 2, 1, 0.5);
      b.c.wl = wl;
      b.c.wr = wr;
      run_bs_case(b);
    }
  BsCase b = bs(DType::BF16, 64, 700, 300, 2, 2, 0.5);  // causal rows above the diagonal keep nothing
  b.c.causal = true;
  run_bs_case(b);
}

TEST_F(Sm90FwdBlockSparse, OddLengths) {
  for (auto [sq, sk] : {std::pair{1, 1}, std::pair{1, 4097}, std::pair{17, 113}, std::pair{113, 17},
                        std::pair{113, 4097}, std::pair{4097, 17}})
    for (bool causal : {false, true}) {
      BsCase b = bs(DType::BF16, 128, sq, sk, 2, 1, 0.5);
      b.c.batch = 1;
      b.c.causal = causal;
      b.block_k = 256;
      run_bs_case(b);
    }
}

TEST_F(Sm90FwdBlockSparse, VarlenEmptySequenceAndSeqused) {
  BsCase b = bs(DType::BF16, 128, 0, 0, 4, 2, 0.5);
  b.c.lens_q = {300, 0, 17, 513};
  b.c.lens_k = {450, 200, 0, 1000};
  run_bs_case(b);
  b.c.causal = true;
  b.mask_batch_shared = true;
  run_bs_case(b);
  b.c.used_q = {250, 0, 17, 400};
  b.c.used_k = {450, 100, 0, 777};
  b.c.causal = false;
  b.c.wl = 300;
  b.c.wr = 20;
  run_bs_case(b);
  b.c.nan_past = NanPast::All;  // NaN in q, k, v past seqused: out 0 there, no other row touched
  run_bs_case(b);
}

// Mask dims past the cover, padded mask rows, and one q block whose mask row keeps nothing (its
// tiles see no key: out 0, lse -inf), among kept ones; with 16-byte aligned out rows and without.
TEST_F(Sm90FwdBlockSparse, MaskLayoutAndEmptyRows) {
  BsCase b = bs(DType::BF16, 96, 600, 800, 4, 4, 1.0);
  b.extra_q_blocks = 2;
  b.extra_k_blocks = 3;
  b.mask_row_pad = 5;
  b.zero_q_block = 1;
  run_bs_case(b);
  b.density = 0.5;
  b.c.causal = true;
  b.block_q = 256;
  b.zero_q_block = 0;
  b.c.out_pad = 2;  // out rows 4-byte aligned only: the empty tiles' zeros take 4-byte stores
  run_bs_case(b);
}

TEST_F(Sm90FwdBlockSparse, Softcap) {
  BsCase b = bs(DType::F16, 128, 400, 900, 4, 2, 0.5);
  b.c.softcap = 30.f;
  run_bs_case(b);
  b.c.causal = true;
  run_bs_case(b);
}

// More tiles than SMs: each CTA walks several tiles' lists.
TEST_F(Sm90FwdBlockSparse, PersistentManyTilesPerCta) {
  BsCase b = bs(DType::BF16, 64, 2048, 2048, 8, 2, 0.1);
  run_bs_case(b);
  b.c.causal = true;
  b.density = 0.5;
  b.c.d = 128;
  b.c.hq = 4;
  run_bs_case(b);
}

TEST_F(Sm90FwdBlockSparse, GraphCaptureAndReplay) {
  BsCase b = bs(DType::BF16, 128, 300, 700, 4, 2, 0.5);
  b.c.graph = true;
  run_bs_case(b);
  b.c.lens_q = {300, 0, 129};
  b.c.lens_k = {700, 100, 257};
  b.c.causal = true;
  run_bs_case(b);
}

// An all-ones mask walks exactly the blocks the unmasked kernel walks, in the same order, on the
// same tiles (d 96 / 128 fixed-length: the same base config, no first-block padding, the same
// packing): out and lse are bitwise the forward's without a mask.
TEST_F(Sm90FwdBlockSparse, DenseMaskBitwiseEqualsNoMask) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {96, 128})
      for (bool causal : {false, true})
        for (auto [sq, hq, hkv] : {std::tuple{1000, 8, 2}, std::tuple{17, 8, 1}, std::tuple{4097, 2, 2}}) {
          BsCase b = bs(dt, d, sq, sq == 17 ? 1000 : sq, hq, hkv, 1.0);
          b.c.causal = causal;
          b.mask_heads = 1;
          SCOPED_TRACE(b.str());
          std::mt19937 rng(uint32_t(sq * 131 + d + causal));
          const CaseIndex idx(b.c);
          CaseTensors t(b.c, idx, rng);
          const MaskBytes mask(b, idx, rng);
          GpuRun masked, plain;
          run_gpu(b, idx, mask, t.q, t.k, t.v, t.out, true, &masked);
          run_gpu(b, idx, mask, t.q, t.k, t.v, t.out, false, &plain);
          if (HasFatalFailure()) return;
          EXPECT_EQ(std::memcmp(masked.out.data(), plain.out.data(), plain.out.size() * 2), 0) << "out";
          EXPECT_EQ(std::memcmp(masked.lse.data(), plain.lse.data(), plain.lse.size() * 4), 0) << "lse";
        }
}

// What the GPU cannot run is refused with NotSupported and a message that names it.
TEST_F(Sm90FwdBlockSparse, Refusals) {
  auto refused = [](const BsCase& b, const std::string& needle) {
    SCOPED_TRACE(b.str() + " expecting '" + needle + "'");
    std::mt19937 rng(7);
    const CaseIndex idx(b.c);
    CaseTensors t(b.c, idx, rng);
    const MaskBytes mask(b, idx, rng);
    AttnArgs a;
    a.q = t.q.view(t.q.dev->get(), b.c.dtype, Device::CUDA);
    a.k = t.k.view(t.k.dev->get(), b.c.dtype, Device::CUDA);
    a.v = t.v.view(t.v.dev->get(), b.c.dtype, Device::CUDA);
    a.out = t.out.view(t.out.dev->get(), b.c.dtype, Device::CUDA);
    idx.apply(a, b.c, true);
    a.mask.kind = MaskKind::BlockSparse;
    a.mask.blocks = mask.view(b);
    const Status st = forward(a, nullptr);
    EXPECT_EQ(st.code, Code::NotSupported) << st.message;
    EXPECT_NE(st.message.find(needle), std::string::npos) << st.message;
  };
  BsCase b = bs(DType::BF16, 128, 300, 700, 2, 2, 0.5);
  b.c.out_pad = 0;
  b.block_q = 64;
  refused(b, "multiples of 128");
  b.block_q = 128;
  b.block_k = 192;
  refused(b, "multiples of 128");
  b.block_k = 128;
  b.c.num_splits = 2;
  refused(b, "num_splits");
  b.c.num_splits = 1;
  // d 192: the rule names it (a build without d 192 refuses it earlier as not built).
  detail::Problem p;
  p.head_dim = p.head_dim_v = 192;
  p.batch = 1;
  p.heads_q = p.heads_kv = p.group = 1;
  p.max_rows_k = 1000;
  p.blocks.data = reinterpret_cast<const uint8_t*>(&p);
  p.blocks.block_q = p.blocks.block_k = 128;
  p.blocks.q_blocks = p.blocks.k_blocks = 8;
  Status st = cuda_backend::block_mask_support(p, false);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("head dims up to 128"), std::string::npos) << st.message;
  p.head_dim = p.head_dim_v = 128;
  EXPECT_TRUE(cuda_backend::block_mask_support(p, false).ok());
  // The backward runs the default mode (bwd_block_sparse_test.cpp); the deterministic one is refused.
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true).ok());
  st = cuda_backend::block_mask_support(p, true, true);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("block-sparse deterministic backward on CUDA not yet"), std::string::npos) << st.message;
  // The deterministic backward through the API.
  std::mt19937 rng(9);
  const CaseIndex idx(b.c);
  CaseTensors t(b.c, idx, rng), g(b.c, idx, rng);
  const MaskBytes mask(b, idx, rng);
  DeviceBuffer lse_dev(size_t(b.c.hq) * idx.total_q(b.c) * 4);
  AttnArgs a;
  a.q = t.q.view(t.q.dev->get(), b.c.dtype, Device::CUDA);
  a.k = t.k.view(t.k.dev->get(), b.c.dtype, Device::CUDA);
  a.v = t.v.view(t.v.dev->get(), b.c.dtype, Device::CUDA);
  a.out = t.out.view(t.out.dev->get(), b.c.dtype, Device::CUDA);
  a.lse = idx.lse(b.c, lse_dev.get(), Device::CUDA);
  idx.apply(a, b.c, true);
  a.mask.kind = MaskKind::BlockSparse;
  a.mask.blocks = mask.view(b);
  a.deterministic = true;
  st = backward(a, g.out.view(g.out.dev->get(), b.c.dtype, Device::CUDA), g.q.view(g.q.dev->get(), b.c.dtype, Device::CUDA),
                g.k.view(g.k.dev->get(), b.c.dtype, Device::CUDA), g.v.view(g.v.dev->get(), b.c.dtype, Device::CUDA));
  EXPECT_EQ(st.code, Code::NotSupported) << st.message;
  EXPECT_NE(st.message.find("block-sparse deterministic backward on CUDA not yet"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace fastattn::gputest
