// Element bitmasks on the Hopper backward (BitmaskBwdConfig kernels and their prep, sm90/bwd/bit_lists.h)
// against the float64 reference, which applies the same bits (reference/mask_oracle.h): dq, dk, dv of random
// problems with FA3's rule (bwd_case.h), gradients poisoned before every run, dk / dv bitwise equal between
// runs, every element checked, and every element the mask zeroes (rows keeping no key: dq; keys no row
// keeps: dk, dv) exactly 0. The route is checked through the stats probe: q-blocks of 64 rows (d 64: 128),
// never the 80-row tile, the dQ ring or the recompute band. Cases: random bits at densities 0 / 0.1 / 0.5 /
// 0.9 / 1, tiles of empty / full / random 64 x 64 blocks, documents, causal spelled as bits; d 64 / 96 / 128
// in both dtypes; GQA 1 / 4 with mask heads 1 and heads_kv, a shared mask batch; causal and windows with
// s_q != s_k; odd lengths 1 / 17 / 113 / 4097; varlen with empty sequences and seqused; emptied rows and
// keys; CUDA-graph replay; causal spelled as bits under the causal window bitwise equal (dk, dv) to the
// causal backward without bits; a softcap (Softcap); the deterministic mode (Deterministic: dq too bitwise
// equal over three runs); and the refusals (q heads of one KV head on different mask heads, d 192) by Status
// and message.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bwd_case.h"  // BwdCase, BwdBits, run_bwd_case
#include "cuda/block_mask_rule.h"
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

class Sm90BwdBitmask : public HopperTest {};

BwdCase bm(DType dt, int d, int sq, int sk, int hq, int hkv, BwdBitPattern pattern, double density = 0.5) {
  BwdCase c = bcase(dt, d, sq, sk);
  c.batch = 2;
  c.hq = hq;
  c.hkv = hkv;
  c.bits = BwdBits{};
  c.bits->pattern = pattern;
  c.bits->density = density;
  c.bits->mask_heads = hkv;  // a KV head's q heads share a mask head (the CUDA backward's rule)
  c.route = BwdRoute{d == 64 ? 128 : 64, false, false};  // the accumulator path's tile
  return c;
}

void run(const BwdCase& c) {
  const BwdBits& m = *c.bits;
  static const char* names[] = {"random", "documents", "causal-bits", "tiles"};
  SCOPED_TRACE(std::string("bits ") + names[int(m.pattern)] + " density " + std::to_string(m.density) + " mask b" +
               (m.batch_shared ? "1" : "B") + " h" + std::to_string(m.mask_heads > 0 ? m.mask_heads : c.hq) +
               " zero rows from " + std::to_string(m.zero_rows_from) + " keys from " + std::to_string(m.zero_keys_from));
  run_bwd_case(c);
}

TEST_F(Sm90BwdBitmask, RandomDensities) {
  for (double density : {0.0, 0.1, 0.5, 0.9, 1.0})
    for (bool causal : {false, true}) {
      BwdCase c = bm(DType::BF16, 128, 300, 700, 4, 2, BwdBitPattern::Random, density);
      c.causal = causal;
      run(c);
    }
}

TEST_F(Sm90BwdBitmask, HeadDimsAndDtypes) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {64, 96, 128})
      for (BwdBitPattern pattern : {BwdBitPattern::Random, BwdBitPattern::Tiles, BwdBitPattern::Documents})
        for (bool causal : {false, true}) {
          BwdCase c = bm(dt, d, 500, causal ? 500 : 900, 2, 2, pattern, 0.5);
          c.causal = causal;
          run(c);
        }
}

// GQA 1 / 4 with mask heads 1 and heads_kv (a KV head's q heads share one list), mask batch 1 and B.
TEST_F(Sm90BwdBitmask, GqaAndBroadcastDims) {
  for (int d : {64, 128})
    for (int hkv : {8, 2})
      for (int mask_heads : {1, hkv}) {
        BwdCase c = bm(DType::BF16, d, 300, 600, 8, hkv, BwdBitPattern::Tiles, 0.5);
        c.bits->mask_heads = mask_heads;
        c.bits->batch_shared = mask_heads == 1;
        run(c);
      }
}

// The deterministic mode (each q-block's dQ adds in key-tile order, a key tile waiting for its turn from the
// prep: tile.cuh dq_turn): dq, dk, dv bitwise equal over three runs and each against float64 with FA3's rule
// (bwd_case.h), d 64 / 96 / 128, random and tiled bits (empty, full and partial blocks: key tiles that skip
// q-blocks, so the turns are not the key block indices), causal AND bits, windows, odd lengths, GQA 8:2 with
// mask heads 1 and heads_kv, varlen with an empty sequence, a softcap (d 128: the deterministic softcap
// twin; d 64 / 96: the run-time branch), and the causal triangle as bits without the causal flag.
TEST_F(Sm90BwdBitmask, Deterministic) {
  for (int d : {64, 96, 128})
    for (BwdBitPattern pattern : {BwdBitPattern::Random, BwdBitPattern::Tiles, BwdBitPattern::Documents})
      for (bool causal : {false, true}) {
        BwdCase c = bm(d == 96 ? DType::F16 : DType::BF16, d, 500, causal ? 500 : 900, 4, 2, pattern, 0.3);
        c.causal = causal;
        c.deterministic = true;
        run(c);
      }
  for (int d : {64, 128})
    for (auto [sq, sk] : {std::pair{1, 113}, std::pair{113, 17}, std::pair{4097, 113}, std::pair{113, 4097}}) {
      BwdCase c = bm(DType::BF16, d, sq, sk, 8, 2, BwdBitPattern::Tiles, 0.5);
      c.batch = 1;
      c.causal = sq != 1;
      c.bits->mask_heads = sq == 113 ? 1 : 2;
      c.deterministic = true;
      run(c);
    }
  for (int d : {64, 96, 128}) {  // a window with both edges, and a softcap
    BwdCase c = bm(DType::BF16, d, 700, 300, 2, 1, BwdBitPattern::Random, 0.6);
    c.wl = 200;
    c.wr = 50;
    c.softcap = 30.f;
    c.deterministic = true;
    run(c);
  }
  // The causal triangle spelled as bits with no causal flag (the bench's deterministic causal-bits row): the
  // diagonal blocks bit-partial inside the window's full range, listed first in deterministic mode
  // (bit_list_det_edges), so that each key tile's walk rises from its diagonal; s_q = s_k and s_q < s_k.
  // (2049: 17 key tiles past a chunk of 16, one head, so that the host's float64 reference stays short.)
  for (int d : {64, 128})
    for (auto [sq, sk] : {std::pair{1100, 1100}, std::pair{2049, 2049}, std::pair{700, 1300}}) {
      if (d == 64 && sq == 2049) continue;
      BwdCase c = bm(DType::BF16, d, sq, sk, 2, 1, BwdBitPattern::CausalBits);
      c.batch = sq == 2049 ? 1 : 2;
      c.deterministic = true;
      run(c);
    }
  BwdCase c = bm(DType::BF16, 128, 0, 0, 4, 2, BwdBitPattern::Random, 0.5);  // varlen, an empty sequence
  c.lens_q = {300, 0, 17, 513};
  c.lens_k = {200, 64, 0, 700};
  c.deterministic = true;
  run(c);
}

// A softcap (FA3's rule against float64, which caps before the mask): d 64 and 128 through the bitmask
// twin of Base's softcap kernel, d 96 through its run-time branch; softcap 5 (the derivative's steep
// regime) and 30; causal AND bits, odd lengths, GQA with mask heads 1 and heads_kv, every block class.
TEST_F(Sm90BwdBitmask, Softcap) {
  for (int d : {64, 96, 128})
    for (float cap : {5.f, 30.f}) {
      BwdCase c = bm(d == 96 ? DType::F16 : DType::BF16, d, 333, 517, 4, 2, BwdBitPattern::Random, 0.5);
      c.softcap = cap;
      c.causal = cap == 30.f;
      run(c);
    }
  for (int d : {64, 128})
    for (auto [sq, sk] : {std::pair{1, 113}, std::pair{113, 17}, std::pair{4097, 113}}) {
      BwdCase c = bm(DType::BF16, d, sq, sk, 8, 2, BwdBitPattern::Tiles, 0.5);
      c.batch = 1;
      c.softcap = 30.f;
      c.causal = sq != 1;
      c.bits->mask_heads = sq == 1 ? 1 : 2;
      run(c);
    }
}

TEST_F(Sm90BwdBitmask, CausalAndWindows) {
  for (int d : {64, 96, 128})
    for (auto [sq, sk] : {std::pair{700, 300}, std::pair{300, 700}})
      for (auto [wl, wr] : {std::pair{-1, 0}, std::pair{200, 50}, std::pair{0, 300}}) {
        BwdCase c = bm(DType::F16, d, sq, sk, 2, 1, BwdBitPattern::Random, 0.6);
        c.wl = wl;
        c.wr = wr;
        run(c);
      }
}

TEST_F(Sm90BwdBitmask, OddLengths) {
  for (int d : {64, 128})
    for (auto [sq, sk] : {std::pair{1, 1}, std::pair{1, 113}, std::pair{17, 113}, std::pair{113, 17},
                          std::pair{113, 113}, std::pair{4097, 113}, std::pair{113, 4097}})
      for (bool causal : {false, true}) {
        BwdCase c = bm(DType::BF16, d, sq, sk, 2, 1, BwdBitPattern::Random, 0.5);
        c.batch = 1;
        c.causal = causal;
        run(c);
      }
}

TEST_F(Sm90BwdBitmask, VarlenEmptySequenceAndSeqused) {
  for (int d : {64, 96, 128}) {
    BwdCase c = bm(DType::BF16, d, 0, 0, 4, 2, BwdBitPattern::Random, 0.5);
    c.lens_q = {300, 0, 17, 513};
    c.lens_k = {450, 200, 0, 1000};
    run(c);
    c.causal = true;
    c.bits->batch_shared = true;
    c.bits->pattern = BwdBitPattern::Documents;
    run(c);
  }
  BwdCase u = bm(DType::F16, 128, 400, 500, 4, 2, BwdBitPattern::Tiles, 0.5);
  u.batch = 3;
  u.used_q = {300, 0, 129};
  u.used_k = {1, 500, 200};
  u.causal = true;
  run(u);
}

// Rows the bits empty (dq = 0 there: no key tile lists their q-blocks, or their P is 0 on partial ones) and
// keys no row keeps (their key tiles' lists are empty: dk = dv = 0, written by the kernel's empty tiles; or
// their S^T rows are masked on partial blocks), at block-aligned and unaligned edges.
TEST_F(Sm90BwdBitmask, EmptyRowsAndKeys) {
  for (int d : {64, 96, 128})
    for (bool causal : {false, true})
      for (auto [rows_from, keys_from] : {std::pair{384, 512}, std::pair{301, 555}}) {
        BwdCase c = bm(DType::BF16, d, 600, 800, 4, 2, BwdBitPattern::Random, 0.7);
        c.causal = causal;
        c.bits->zero_rows_from = rows_from;
        c.bits->zero_keys_from = keys_from;
        run(c);
      }
}

// Longest-first CTA order under a causal mask, and more key tiles than SMs.
TEST_F(Sm90BwdBitmask, LongCausal) {
  for (int d : {64, 128}) {
    BwdCase c = bm(DType::BF16, d, 2304, 2304, 4, 2, BwdBitPattern::Documents);
    c.batch = 1;
    c.causal = true;
    run(c);
  }
}

TEST_F(Sm90BwdBitmask, GraphReplay) {
  BwdCase c = bm(DType::BF16, 128, 300, 700, 4, 2, BwdBitPattern::Tiles, 0.5);
  c.graph = true;
  run(c);
  c.lens_q = {300, 0, 129};
  c.lens_k = {700, 100, 257};
  c.causal = true;
  run(c);
}

// Causal spelled as bits under the causal window (s_q = s_k: the bits' partial blocks are the window's
// diagonal ones, and the window's full blocks are full in the bits): each key tile walks the q-blocks the
// causal accumulator path walks, in the same order, and ANDs the same keep bits, so dk and dv are bitwise
// the causal backward's without bits (band and ring off: the tile both take). dq (atomics in any order)
// against float64 above.
TEST_F(Sm90BwdBitmask, CausalBitsDkDvBitwiseEqualCausal) {
  const ScopedEnv no_band("FASTATTN_BWD_BAND", "0"), no_ring("FASTATTN_BWD_RING_SLOTS", "0");
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {64, 96, 128}) {
      BwdCase c = bm(dt, d, 1000, 1000, 8, 2, BwdBitPattern::CausalBits);
      c.causal = true;
      SCOPED_TRACE(c.str());
      std::mt19937 rng(uint32_t(d * 7 + int(dt)));
      const CaseIndex idx(c);
      BwdTensors t(c, idx, rng);
      DeviceBuffer lse_dev(size_t(c.hq) * idx.total_q(c) * 4);
      const int64_t words = (c.sk + 31) / 32;
      std::vector<uint32_t> bits(size_t(c.sq * words), 0u);
      for (int i = 0; i < c.sq; ++i)
        for (int j = 0; j <= i && j < c.sk; ++j) bits[size_t(i * words + j / 32)] |= 1u << (j % 32);
      DeviceBuffer bits_dev(bits.size() * 4);
      bits_dev.upload(bits.data());
      AttnArgs a;
      a.q = t.q.view(t.q.dev->get(), c.dtype, Device::CUDA);
      a.k = t.k.view(t.k.dev->get(), c.dtype, Device::CUDA);
      a.v = t.v.view(t.v.dev->get(), c.dtype, Device::CUDA);
      a.out = t.out.view(t.out.dev->get(), c.dtype, Device::CUDA);
      a.lse = idx.lse(c, lse_dev.get(), Device::CUDA);
      idx.apply(a, c, true);
      ASSERT_TRUE(forward(a, nullptr).ok());  // native causal: the out and lse both backward calls read
      std::vector<uint16_t> grads[2][2];  // (bits, native) x (dk, dv)
      for (int native = 0; native < 2; ++native) {
        AttnArgs b = a;
        if (native == 0) {
          b.mask.kind = MaskKind::DenseBitmask;
          BitMask& m = b.mask.bits;
          m.data = static_cast<const uint32_t*>(bits_dev.get());
          m.device = Device::CUDA;
          const int64_t shape[4] = {1, 1, c.sq, words}, stride[3] = {c.sq * words, c.sq * words, words};
          for (int i = 0; i < 4; ++i) m.shape[i] = shape[i];
          for (int i = 0; i < 3; ++i) m.stride[i] = stride[i];
        }
        for (TestTensor* g : {&t.dq, &t.dk, &t.dv}) g->dev->poison();
        const Status st = backward(b, t.dout.view(t.dout.dev->get(), c.dtype, Device::CUDA),
                                   t.dq.view(t.dq.dev->get(), c.dtype, Device::CUDA),
                                   t.dk.view(t.dk.dev->get(), c.dtype, Device::CUDA),
                                   t.dv.view(t.dv.dev->get(), c.dtype, Device::CUDA));
        ASSERT_TRUE(st.ok()) << st.message;
        FA_CUDA_OK(cudaDeviceSynchronize());
        for (int g = 0; g < 2; ++g) {
          TestTensor& x = g == 0 ? t.dk : t.dv;
          grads[native][g].resize(x.host.size());
          x.dev->download(grads[native][g].data());
        }
      }
      EXPECT_EQ(std::memcmp(grads[0][0].data(), grads[1][0].data(), grads[0][0].size() * 2), 0) << "dk";
      EXPECT_EQ(std::memcmp(grads[0][1].data(), grads[1][1].data(), grads[0][1].size() * 2), 0) << "dv";
    }
}

// What the GPU backward cannot run is refused with NotSupported and a message that names it, before any
// gradient is written.
TEST_F(Sm90BwdBitmask, Refusals) {
  detail::Problem p;
  p.head_dim = p.head_dim_v = 128;
  p.batch = 1;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.group = 4;
  p.max_rows_q = p.max_rows_k = 1000;
  p.bits.data = reinterpret_cast<const uint32_t*>(&p);
  p.bits.rows = 1000;
  p.bits.words = 32;
  p.bits.head_div = 4;  // mask heads = heads_kv
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true).ok());
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true, true).ok());  // the deterministic mode runs
  p.bits.head_div = 1;  // mask heads = heads_q: a KV head's q heads on 4 mask heads
  EXPECT_TRUE(cuda_backend::block_mask_support(p, false).ok());
  Status st = cuda_backend::block_mask_support(p, true);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("share a mask"), std::string::npos) << st.message;
  p.bits.head_div = 8;
  p.softcap = 30.f;  // runs (the Softcap and Deterministic tests), in both modes
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true).ok());
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true, true).ok());
  p.softcap = 0.f;
  p.head_dim = p.head_dim_v = 192;
  st = cuda_backend::block_mask_support(p, true);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("bitmask backward runs head dims up to 128"), std::string::npos) << st.message;

  // Through the API: the deterministic backward of a bitmask forward runs (bitwise equal dq over two calls),
  // and so does the default mode.
  BwdCase c = bm(DType::BF16, 128, 300, 700, 2, 2, BwdBitPattern::Random);
  std::mt19937 rng(11);
  const CaseIndex idx(c);
  BwdTensors t(c, idx, rng);
  const int64_t words = (c.sk + 31) / 32;
  std::vector<uint32_t> ones(size_t(2 * 2 * c.sq * words), 0xffffffffu);
  DeviceBuffer bits_dev(ones.size() * 4);
  bits_dev.upload(ones.data());
  DeviceBuffer lse_dev(size_t(c.hq) * idx.total_q(c) * 4);
  AttnArgs a;
  a.q = t.q.view(t.q.dev->get(), c.dtype, Device::CUDA);
  a.k = t.k.view(t.k.dev->get(), c.dtype, Device::CUDA);
  a.v = t.v.view(t.v.dev->get(), c.dtype, Device::CUDA);
  a.out = t.out.view(t.out.dev->get(), c.dtype, Device::CUDA);
  a.lse = idx.lse(c, lse_dev.get(), Device::CUDA);
  idx.apply(a, c, true);
  a.mask.kind = MaskKind::DenseBitmask;
  a.mask.bits.data = static_cast<const uint32_t*>(bits_dev.get());
  a.mask.bits.device = Device::CUDA;
  const int64_t shape[4] = {2, 2, c.sq, words};
  for (int i = 0; i < 4; ++i) a.mask.bits.shape[i] = shape[i];
  a.mask.bits.stride[2] = words;
  a.mask.bits.stride[1] = c.sq * words;
  a.mask.bits.stride[0] = 2 * c.sq * words;
  ASSERT_TRUE(forward(a, nullptr).ok());
  // The deterministic mode through the API: two calls, dq bitwise equal (the Deterministic test checks
  // the values and three runs through bwd_case.h).
  a.deterministic = true;
  std::vector<uint16_t> dq[2];
  for (auto& run_dq : dq) {
    t.dq.dev->poison();
    st = backward(a, t.dout.view(t.dout.dev->get(), c.dtype, Device::CUDA), t.dq.view(t.dq.dev->get(), c.dtype, Device::CUDA),
                  t.dk.view(t.dk.dev->get(), c.dtype, Device::CUDA), t.dv.view(t.dv.dev->get(), c.dtype, Device::CUDA));
    EXPECT_TRUE(st.ok()) << st.message;
    FA_CUDA_OK(cudaDeviceSynchronize());
    run_dq.resize(t.dq.host.size());
    t.dq.dev->download(run_dq.data());
  }
  EXPECT_EQ(std::memcmp(dq[0].data(), dq[1].data(), dq[0].size() * 2), 0) << "deterministic dq differs between calls";
  a.deterministic = false;
  st = backward(a, t.dout.view(t.dout.dev->get(), c.dtype, Device::CUDA), t.dq.view(t.dq.dev->get(), c.dtype, Device::CUDA),
                t.dk.view(t.dk.dev->get(), c.dtype, Device::CUDA), t.dv.view(t.dv.dev->get(), c.dtype, Device::CUDA));
  EXPECT_TRUE(st.ok()) << st.message;
  FA_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace fastattn::gputest
