// Element bitmasks on the Hopper forward (BitmaskConfig kernels and their prep, sm90/fwd/bit_lists.h)
// against a float64 reference: pair (i, j) of batch b, q head h is kept iff the window / causal / seqlen
// rule keeps it (reference/mask_oracle.h) and bit j % 32 of word j / 32 of mask row (b or 0, h / (heads_q
// / mask heads), i) is set. Inputs drawn fresh, out poisoned (with a padded row that must stay poisoned),
// every element and LSE checked with FA3's rule (fwd_case.h), two runs bitwise equal. Patterns: random
// bits at densities 0 / 0.1 / 0.5 / 0.9 / 1 (every 128 x 128 block partial), tiles of empty / full /
// random blocks (the three classes side by side, 64- and 128-aligned), documents, prefix-LM; d 64 / 96 /
// 128 in both dtypes; mask batch 1 and mask heads 1 / heads_kv / heads_q under GQA; causal and windows
// with s_q != s_k; odd lengths 1 / 17 / 113 / 4097; varlen with an empty sequence and seqused; padded
// mask rows, rows and words past the cover, garbage bits past s_k; rows the mask empties (out 0, lse
// -inf); softcap; CUDA-graph capture; the all-ones mask and causal spelled as bits bitwise equal to the
// forward without a mask / with native causal; and the refusals (num_splits 2, d 192).
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
#include <vector>

#include "cuda/block_mask_rule.h"
#include "fwd_case.h"
#include "masked_fwd.h"
#include "reference/mask_oracle.h"
#include "util/parallel_for.h"

namespace fastattn::gputest {
namespace {

class Sm90FwdBitmask : public HopperTest {};

enum class Pattern { Random, Tiles, Documents, PrefixLM, CausalBits, AllOnes };

struct BmCase {
  FwdCase c;
  Pattern pattern = Pattern::Random;
  double density = 0.5;
  int tile = 128;                  // Tiles: block edge
  int docs = 6;                    // Documents
  bool mask_batch_shared = false;  // mask dim 0 = 1
  int mask_heads = 0;              // 0: heads_q
  int extra_rows = 0, extra_words = 0;
  int row_pad = 0;                 // words after each mask row
  int zero_rows_from = -1;         // rows from here on keep nothing (when >= 0)

  int heads() const { return mask_heads > 0 ? mask_heads : c.hq; }
  std::string str() const {
    static const char* names[] = {"random", "tiles", "documents", "prefix-lm", "causal-bits", "all-ones"};
    return c.str() + " bits " + names[int(pattern)] + " density " + std::to_string(density) + " tile " +
           std::to_string(tile) + " mask b" + (mask_batch_shared ? "1" : "B") + " h" + std::to_string(heads()) +
           " extra(" + std::to_string(extra_rows) + "," + std::to_string(extra_words) + ") rowpad " +
           std::to_string(row_pad) + " zero_from " + std::to_string(zero_rows_from);
  }
};

// The mask words (host and device) and the BitMask over the device copy.
struct MaskWords {
  int mb = 1, mh = 1, rows = 0, words = 0;
  int64_t stride[3] = {0, 0, 0};
  std::vector<uint32_t> host;
  std::unique_ptr<DeviceBuffer> dev;

  MaskWords(const BmCase& bc, const CaseIndex& idx, std::mt19937& rng) {
    const FwdCase& c = bc.c;
    const int max_q = idx.varlen ? idx.max_q : c.sq, max_k = idx.varlen ? idx.max_k : c.sk;
    mb = bc.mask_batch_shared ? 1 : idx.batch;
    mh = bc.heads();
    rows = std::max(1, max_q + bc.extra_rows);
    words = std::max(1, (max_k + 31) / 32 + bc.extra_words);
    stride[2] = words + bc.row_pad;
    stride[1] = rows * stride[2];
    stride[0] = mh * stride[1];
    host.assign(size_t(mb * stride[0]), 0xA5A5A5A5u);  // padding words: never read
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<int> cuts;  // Documents: boundaries over the keys
    for (int d = 1; d < bc.docs; ++d) cuts.push_back(int(u(rng) * max_k));
    std::sort(cuts.begin(), cuts.end());
    auto doc = [&](int p) { return int(std::upper_bound(cuts.begin(), cuts.end(), p) - cuts.begin()); };
    const int tiles_k = (words * 32 + bc.tile - 1) / bc.tile;
    for (int b = 0; b < mb; ++b)
      for (int h = 0; h < mh; ++h) {
        std::vector<int> kind(size_t((rows + bc.tile - 1) / bc.tile * tiles_k));
        for (int& k : kind) k = int(u(rng) * 3);  // 0 empty, 1 full, 2 random
        for (int i = 0; i < rows; ++i) {
          uint32_t* row = &host[size_t(b * stride[0] + h * stride[1] + i * stride[2])];
          for (int w = 0; w < words; ++w) row[w] = 0;
          for (int j = 0; j < words * 32; ++j) {
            bool keep = false;
            switch (bc.pattern) {
              case Pattern::Random: keep = bc.density >= 1.0 || u(rng) < bc.density; break;
              case Pattern::Tiles: {
                const int k = kind[size_t(i / bc.tile * tiles_k + j / bc.tile)];
                keep = k == 1 || (k == 2 && u(rng) < bc.density);
                break;
              }
              case Pattern::Documents: keep = doc(i) == doc(j); break;
              case Pattern::PrefixLM: keep = j < 200 || j <= i; break;
              case Pattern::CausalBits: keep = j <= i + max_k - max_q; break;
              case Pattern::AllOnes: keep = true; break;
            }
            if (j >= max_k && bc.pattern != Pattern::AllOnes) keep = u(rng) < 0.5;  // ignored bits
            if (bc.zero_rows_from >= 0 && i >= bc.zero_rows_from) keep = false;
            if (keep) row[j / 32] |= 1u << (j % 32);
          }
        }
      }
    dev = std::make_unique<DeviceBuffer>(host.size() * 4);
    dev->upload(host.data());
  }
  BitMask view() const {
    BitMask m;
    m.data = static_cast<const uint32_t*>(dev->get());
    m.shape[0] = mb;
    m.shape[1] = mh;
    m.shape[2] = rows;
    m.shape[3] = words;
    for (int i = 0; i < 3; ++i) m.stride[i] = stride[i];
    m.device = Device::CUDA;
    return m;
  }
  bool keeps(const BmCase& bc, int b, int h, int i, int j) const {
    const int hm = h / (bc.c.hq / mh);
    return (host[size_t((mb == 1 ? 0 : b) * stride[0] + hm * stride[1] + i * stride[2] + j / 32)] >> (j % 32)) & 1u;
  }
};

// The float64 forward under the bits (masked_fwd.h).
void reference_forward(const BmCase& bc, const CaseIndex& idx, const MaskWords& mask, const Doubles& q,
                       const Doubles& k, const Doubles& v, bool round_p, std::vector<double>* out,
                       std::vector<double>* lse) {
  const auto keep = [&](int b, int h, int i, int j) { return mask.keeps(bc, b, h, i, j); };
  reference_forward_masked(bc.c, idx, keep, q, k, v, round_p, out, lse);
}

enum class Masking { Bits, None, NativeCausal };

// Runs bc on the GPU (with its bits, without a mask, or without bits but causal): masked_fwd.h.
void run_gpu(const BmCase& bc, const CaseIndex& idx, const MaskWords& mask, TestTensor& q, TestTensor& k,
             TestTensor& v, TestTensor& out, Masking masking, GpuRun* result) {
  run_gpu_masked(bc.c, idx, q, k, v, out, [&](AttnArgs& a) {
    if (masking == Masking::Bits) {
      a.mask.kind = MaskKind::DenseBitmask;
      a.mask.bits = mask.view();
    }
    if (masking == Masking::NativeCausal) a.causal = true;
  }, result);
}

void run_bm_case(const BmCase& bc) {
  const auto seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  SCOPED_TRACE("case " + bc.str() + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const FwdCase& c = bc.c;
  const CaseIndex idx(c);
  CaseTensors t(c, idx, rng);
  const MaskWords mask(bc, idx, rng);
  GpuRun got;
  run_gpu(bc, idx, mask, t.q, t.k, t.v, t.out, Masking::Bits, &got);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<double> ref_out, ref_lse, base_out, base_lse;
  const Doubles q(t.q, c.dtype, idx.varlen), k(t.k, c.dtype, idx.varlen), v(t.v, c.dtype, idx.varlen);
  reference_forward(bc, idx, mask, q, k, v, false, &ref_out, &ref_lse);
  reference_forward(bc, idx, mask, q, k, v, true, &base_out, &base_lse);
  check_out(got.out, ref_out, base_out, c);
  check_out_zero_past_used(got.out, t.out, c, idx);
  const size_t masked_rows = check_lse(got.lse, ref_lse);
  if ((bc.pattern == Pattern::Random && bc.density == 0.0) || bc.zero_rows_from >= 0) {
    EXPECT_GT(masked_rows, 0u) << "the case meant rows that keep no key";
  }
}

BmCase bm(DType dt, int d, int sq, int sk, int hq, int hkv, Pattern pattern, double density = 0.5) {
  BmCase b;
  b.c.dtype = dt;
  b.c.d = d;
  b.c.sq = sq;
  b.c.sk = sk;
  b.c.hq = hq;
  b.c.hkv = hkv;
  b.c.batch = 2;
  b.c.out_pad = 8;
  b.pattern = pattern;
  b.density = density;
  return b;
}

TEST_F(Sm90FwdBitmask, RandomDensities) {
  for (double density : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    BmCase b = bm(DType::BF16, 128, 300, 700, 4, 2, Pattern::Random, density);
    run_bm_case(b);
    b.c.causal = true;
    run_bm_case(b);
  }
}

// Empty, full and random blocks side by side: 128-aligned (each kernel block one class), 64-aligned
// (classes mixed inside a kernel block), and 256-aligned.
TEST_F(Sm90FwdBitmask, TilesOfEveryClass) {
  for (int tile : {128, 64, 256})
    for (bool causal : {false, true}) {
      BmCase b = bm(DType::BF16, 128, 700, 900, 4, 4, Pattern::Tiles, 0.5);
      b.tile = tile;
      b.c.causal = causal;
      run_bm_case(b);
    }
}

TEST_F(Sm90FwdBitmask, DocumentsAndPrefixLm) {
  for (Pattern pattern : {Pattern::Documents, Pattern::PrefixLM})
    for (bool causal : {false, true}) {
      BmCase b = bm(DType::BF16, 128, 1000, 1000, 4, 2, pattern);
      b.c.causal = causal;
      b.mask_batch_shared = true;
      b.mask_heads = 1;
      run_bm_case(b);
    }
}

TEST_F(Sm90FwdBitmask, HeadDimsAndDtypes) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {64, 96, 128}) {
      BmCase b = bm(dt, d, 500, 900, 4, 4, Pattern::Tiles, 0.5);
      b.tile = 64;
      run_bm_case(b);
      b.c.causal = true;
      b.c.sk = 500;
      b.pattern = Pattern::Random;
      run_bm_case(b);
    }
}

// Mask batch 1 and mask heads 1 / heads_kv / heads_q under GQA 1 / 4 / 8 (the bitmask kernel packs
// no q heads: a tile is one head's rows).
TEST_F(Sm90FwdBitmask, BroadcastDimsAndGqa) {
  for (int hkv : {8, 2, 1})
    for (int mask_heads : {1, hkv, 8})
      for (int sq : {17, 300}) {
        BmCase b = bm(DType::BF16, 128, sq, 600, 8, hkv, Pattern::Tiles, 0.5);
        b.tile = 64;
        b.mask_heads = mask_heads;
        b.mask_batch_shared = mask_heads == hkv;
        run_bm_case(b);
      }
}

TEST_F(Sm90FwdBitmask, CausalAndWindows) {
  for (auto [sq, sk] : {std::pair{700, 300}, std::pair{300, 700}, std::pair{640, 640}})
    for (auto [wl, wr] : {std::pair{-1, 0}, std::pair{200, 50}, std::pair{64, 0}, std::pair{0, 300}}) {
      BmCase b = bm(DType::F16, 128, sq, sk, 2, 1, Pattern::Tiles, 0.5);
      b.tile = 64;
      b.c.wl = wl;
      b.c.wr = wr;
      run_bm_case(b);
    }
}

TEST_F(Sm90FwdBitmask, OddLengths) {
  for (auto [sq, sk] : {std::pair{1, 1}, std::pair{1, 4097}, std::pair{17, 113}, std::pair{113, 17},
                        std::pair{113, 4097}, std::pair{4097, 17}})
    for (bool causal : {false, true}) {
      BmCase b = bm(DType::BF16, 128, sq, sk, 2, 1, Pattern::Random, 0.5);
      b.c.batch = 1;
      b.c.causal = causal;
      run_bm_case(b);
    }
}

TEST_F(Sm90FwdBitmask, VarlenEmptySequenceAndSeqused) {
  BmCase b = bm(DType::BF16, 128, 0, 0, 4, 2, Pattern::Tiles, 0.5);
  b.tile = 64;
  b.c.lens_q = {300, 0, 17, 513};
  b.c.lens_k = {450, 200, 0, 1000};
  run_bm_case(b);
  b.c.causal = true;
  b.mask_batch_shared = true;
  run_bm_case(b);
  b.c.used_q = {250, 0, 17, 400};
  b.c.used_k = {450, 100, 0, 777};
  b.c.causal = false;
  b.c.wl = 300;
  b.c.wr = 20;
  b.pattern = Pattern::Documents;
  run_bm_case(b);
  b.c.nan_past = NanPast::All;  // NaN in q, k, v past seqused: out 0 there, no other row touched
  run_bm_case(b);
}

// Rows and words past the cover, padded mask rows, and rows that keep nothing (out 0, lse -inf).
TEST_F(Sm90FwdBitmask, MaskLayoutAndEmptyRows) {
  BmCase b = bm(DType::BF16, 96, 600, 800, 4, 4, Pattern::Random, 0.9);
  b.extra_rows = 70;
  b.extra_words = 3;
  b.row_pad = 5;
  b.zero_rows_from = 200;
  run_bm_case(b);
  b.pattern = Pattern::Tiles;
  b.c.causal = true;
  b.zero_rows_from = 300;
  run_bm_case(b);
}

TEST_F(Sm90FwdBitmask, Softcap) {
  BmCase b = bm(DType::F16, 128, 400, 900, 4, 2, Pattern::Tiles, 0.5);
  b.c.softcap = 30.f;
  run_bm_case(b);
  b.c.causal = true;
  run_bm_case(b);
}

TEST_F(Sm90FwdBitmask, PersistentManyTilesPerCta) {
  BmCase b = bm(DType::BF16, 64, 2048, 2048, 8, 2, Pattern::Tiles, 0.3);
  run_bm_case(b);
  b.c.causal = true;
  b.c.d = 128;
  b.c.hq = 4;
  b.pattern = Pattern::Documents;
  run_bm_case(b);
}

TEST_F(Sm90FwdBitmask, GraphCaptureAndReplay) {
  BmCase b = bm(DType::BF16, 128, 300, 700, 4, 2, Pattern::Tiles, 0.5);
  b.c.graph = true;
  run_bm_case(b);
  b.c.lens_q = {300, 0, 129};
  b.c.lens_k = {700, 100, 257};
  b.c.causal = true;
  run_bm_case(b);
}

// The all-ones mask lists exactly the window's blocks in the unmasked kernel's order (partial below
// the full range, full, partial above) with no bits applied, and causal spelled as bits lists the
// diagonal block above the full ones as native causal does, its keep bits the same: out and lse are
// bitwise the forward's without bits (d 96 / 128: the same base config; heads_q = heads_kv: no GQA
// packing in either).
TEST_F(Sm90FwdBitmask, AllOnesAndCausalBitsBitwiseEqualNative) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {96, 128})
      for (auto [sq, sk] : {std::pair{1000, 1000}, std::pair{17, 1000}, std::pair{4097, 4097}}) {
        for (Pattern pattern : {Pattern::AllOnes, Pattern::CausalBits}) {
          for (bool causal : {false, true}) {
            if (pattern == Pattern::CausalBits && causal) continue;
            BmCase b = bm(dt, d, sq, sk, 2, 2, pattern);
            b.c.causal = causal;
            b.mask_heads = 1;
            SCOPED_TRACE(b.str());
            std::mt19937 rng(uint32_t(sq * 131 + d + causal));
            const CaseIndex idx(b.c);
            CaseTensors t(b.c, idx, rng);
            const MaskWords mask(b, idx, rng);
            GpuRun with_bits, native;
            run_gpu(b, idx, mask, t.q, t.k, t.v, t.out, Masking::Bits, &with_bits);
            run_gpu(b, idx, mask, t.q, t.k, t.v, t.out,
                    pattern == Pattern::CausalBits ? Masking::NativeCausal : Masking::None, &native);
            if (HasFatalFailure()) return;
            EXPECT_EQ(std::memcmp(with_bits.out.data(), native.out.data(), native.out.size() * 2), 0) << "out";
            EXPECT_EQ(std::memcmp(with_bits.lse.data(), native.lse.data(), native.lse.size() * 4), 0) << "lse";
          }
        }
      }
}

TEST_F(Sm90FwdBitmask, Refusals) {
  BmCase b = bm(DType::BF16, 128, 300, 700, 2, 2, Pattern::Random, 0.5);
  b.c.out_pad = 0;
  std::mt19937 rng(7);
  const CaseIndex idx(b.c);
  CaseTensors t(b.c, idx, rng), g(b.c, idx, rng);
  const MaskWords mask(b, idx, rng);
  DeviceBuffer lse_dev(size_t(b.c.hq) * idx.total_q(b.c) * 4);
  AttnArgs a;
  a.q = t.q.view(t.q.dev->get(), b.c.dtype, Device::CUDA);
  a.k = t.k.view(t.k.dev->get(), b.c.dtype, Device::CUDA);
  a.v = t.v.view(t.v.dev->get(), b.c.dtype, Device::CUDA);
  a.out = t.out.view(t.out.dev->get(), b.c.dtype, Device::CUDA);
  a.lse = idx.lse(b.c, lse_dev.get(), Device::CUDA);
  idx.apply(a, b.c, true);
  a.mask.kind = MaskKind::DenseBitmask;
  a.mask.bits = mask.view();
  a.num_splits = 2;
  Status st = forward(a, nullptr);
  EXPECT_EQ(st.code, Code::NotSupported) << st.message;
  EXPECT_NE(st.message.find("num_splits"), std::string::npos) << st.message;
  a.num_splits = 1;
  ASSERT_TRUE(forward(a, nullptr).ok());
  // The backward (bwd_bitmask_test.cpp): both modes run.
  a.deterministic = true;
  st = backward(a, g.out.view(g.out.dev->get(), b.c.dtype, Device::CUDA), g.q.view(g.q.dev->get(), b.c.dtype, Device::CUDA),
                g.k.view(g.k.dev->get(), b.c.dtype, Device::CUDA), g.v.view(g.v.dev->get(), b.c.dtype, Device::CUDA));
  EXPECT_TRUE(st.ok()) << st.message;
  a.deterministic = false;
  st = backward(a, g.out.view(g.out.dev->get(), b.c.dtype, Device::CUDA), g.q.view(g.q.dev->get(), b.c.dtype, Device::CUDA),
                g.k.view(g.k.dev->get(), b.c.dtype, Device::CUDA), g.v.view(g.v.dev->get(), b.c.dtype, Device::CUDA));
  EXPECT_TRUE(st.ok()) << st.message;
  FA_CUDA_OK(cudaDeviceSynchronize());
  // d 192: the rule names it (a build without d 192 refuses it earlier as not built).
  detail::Problem p;
  p.head_dim = p.head_dim_v = 192;
  p.batch = 1;
  p.heads_q = p.heads_kv = p.group = 1;
  p.max_rows_q = p.max_rows_k = 1000;
  p.bits.data = reinterpret_cast<const uint32_t*>(&p);
  p.bits.rows = 1000;
  p.bits.words = 32;
  st = cuda_backend::block_mask_support(p, false);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("head dims up to 128"), std::string::npos) << st.message;
  p.head_dim = p.head_dim_v = 128;
  EXPECT_TRUE(cuda_backend::block_mask_support(p, false).ok());
}

}  // namespace
}  // namespace fastattn::gputest
