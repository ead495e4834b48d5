// Block-sparse masks on the Hopper backward (BlockSparseBwdConfig kernels and the q-block list builder,
// sm90/bwd/block_lists.h) against the float64 reference, which applies the same mask
// (reference/mask_oracle.h): dq, dk, dv of random problems with FA3's rule (bwd_case.h), gradients
// poisoned before every run, dk / dv bitwise equal between runs, every element checked, and every element
// the mask zeroes exactly 0. The route is checked through the stats probe: q-blocks of 64 rows (d 64:
// 128), never the 80-row tile, the dQ ring or the recompute band. Cases: densities 0 / 0.3 / 1 with
// blocks 128 x 128 and 256 x 128; d 64 / 96 / 128 in both dtypes; GQA 1 / 4 with mask heads 1 and
// heads_kv (and a shared mask batch); causal and windows; odd lengths 17 / 113 / 300; varlen with an
// empty sequence and seqused; a q block of every mask head keeping nothing (dq = 0 on its rows) and a
// key block no row keeps (dk = dv = 0); CUDA-graph replay; the all-ones mask (dk, dv bitwise the unmasked
// accumulator path's where it takes the same tile); and the refusals (deterministic, softcap, q
// heads of one KV head on different mask heads) by Status and message.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>

#include "bwd_case.h"  // BwdCase, BwdBlocks, run_bwd_case
#include "cuda/block_mask_rule.h"
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

class Sm90BwdBlockSparse : public HopperTest {};

BwdCase bs(DType dt, int d, int sq, int sk, int hq, int hkv, double density) {
  BwdCase c = bcase(dt, d, sq, sk);
  c.batch = 2;
  c.hq = hq;
  c.hkv = hkv;
  c.blocks = BwdBlocks{};
  c.blocks->density = density;
  c.blocks->mask_heads = hkv;  // a KV head's q heads share a mask head (the CUDA backward's rule)
  c.route = BwdRoute{d == 64 ? 128 : 64, false, false};  // the accumulator path's tile
  return c;
}

std::string mask_str(const BwdCase& c) {
  const BwdBlocks& m = *c.blocks;
  std::ostringstream o;
  o << "blocks " << m.block_q << "x" << m.block_k << " density " << m.density << " mask b" << (m.batch_shared ? "1" : "B")
    << " h" << (m.mask_heads > 0 ? m.mask_heads : c.hq) << " zero qb " << m.zero_q_block << " kb " << m.zero_k_block;
  return o.str();
}

void run(const BwdCase& c) {
  SCOPED_TRACE(mask_str(c));
  run_bwd_case(c);
}

TEST_F(Sm90BwdBlockSparse, DensitiesAndBlockShapes) {
  for (auto [bq, bk] : {std::pair{128, 128}, std::pair{256, 128}})
    for (double density : {0.0, 0.3, 1.0})
      for (bool causal : {false, true}) {
        BwdCase c = bs(DType::BF16, 128, 300, 700, 4, 2, density);
        c.blocks->block_q = bq;
        c.blocks->block_k = bk;
        c.causal = causal;
        run(c);
      }
}

TEST_F(Sm90BwdBlockSparse, HeadDimsAndDtypes) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {64, 96, 128})
      for (bool causal : {false, true}) {
        BwdCase c = bs(dt, d, 500, causal ? 500 : 900, 2, 2, 0.3);
        c.causal = causal;
        run(c);
      }
}

// GQA 1 / 4 with mask heads 1 and heads_kv (a KV head's q heads share one list), mask batch 1 and B.
TEST_F(Sm90BwdBlockSparse, GqaAndBroadcastDims) {
  for (int d : {64, 128})
    for (int hkv : {8, 2})
      for (int mask_heads : {1, hkv}) {
        BwdCase c = bs(DType::BF16, d, 300, 600, 8, hkv, 0.3);
        c.blocks->mask_heads = mask_heads;
        c.blocks->batch_shared = mask_heads == 1;
        run(c);
      }
}

TEST_F(Sm90BwdBlockSparse, CausalAndWindows) {
  for (int d : {64, 96, 128})
    for (auto [sq, sk] : {std::pair{700, 300}, std::pair{300, 700}})
      for (auto [wl, wr] : {std::pair{-1, 0}, std::pair{200, 50}, std::pair{0, 300}}) {
        BwdCase c = bs(DType::F16, d, sq, sk, 2, 1, 0.3);
        c.wl = wl;
        c.wr = wr;
        run(c);
      }
}

TEST_F(Sm90BwdBlockSparse, OddLengths) {
  for (int d : {64, 128})
    for (auto [sq, sk] : {std::pair{17, 113}, std::pair{113, 17}, std::pair{300, 17}, std::pair{17, 300},
                          std::pair{113, 300}})
      for (bool causal : {false, true}) {
        BwdCase c = bs(DType::BF16, d, sq, sk, 2, 1, 0.3);
        c.batch = 1;
        c.causal = causal;
        c.blocks->block_k = 256;
        run(c);
      }
}

TEST_F(Sm90BwdBlockSparse, VarlenEmptySequenceAndSeqused) {
  for (int d : {64, 96, 128}) {
    BwdCase c = bs(DType::BF16, d, 0, 0, 4, 2, 0.3);
    c.lens_q = {300, 0, 17, 513};
    c.lens_k = {450, 200, 0, 1000};
    run(c);
    c.causal = true;
    c.blocks->batch_shared = true;
    run(c);
  }
  BwdCase u = bs(DType::F16, 128, 400, 500, 4, 2, 0.3);
  u.batch = 3;
  u.used_q = {300, 0, 129};
  u.used_k = {1, 500, 200};
  u.causal = true;
  run(u);
}

// A q block of every mask head that keeps nothing (dq = 0 on its rows: no key tile lists it), and a key
// block that no row keeps (its key tiles' lists are empty: dk = dv = 0, written by the kernel's empty tiles).
TEST_F(Sm90BwdBlockSparse, EmptyRowsAndEmptyKeyBlocks) {
  for (int d : {64, 96, 128})
    for (bool causal : {false, true}) {
      BwdCase c = bs(DType::BF16, d, 600, 800, 4, 2, 1.0);
      c.causal = causal;
      c.blocks->zero_q_block = 1;
      c.blocks->zero_k_block = 2;
      run(c);
      c.blocks->density = 0.3;
      c.blocks->block_q = 256;
      c.blocks->zero_q_block = 0;
      c.blocks->zero_k_block = 0;
      run(c);
    }
}

// Long enough for longest-first CTA order under a causal mask (d 128: from any length; d 64: 16 key
// blocks), and more key tiles than SMs.
TEST_F(Sm90BwdBlockSparse, LongCausal) {
  for (int d : {64, 128}) {
    BwdCase c = bs(DType::BF16, d, 2304, 2304, 4, 2, 0.3);
    c.batch = 1;
    c.causal = true;
    run(c);
  }
}

TEST_F(Sm90BwdBlockSparse, GraphReplay) {
  BwdCase c = bs(DType::BF16, 128, 300, 700, 4, 2, 0.3);
  c.graph = true;
  run(c);
  c.lens_q = {300, 0, 129};
  c.lens_k = {700, 100, 257};
  c.causal = true;
  run(c);
}

// The all-ones mask runs the dense problem through the list kernels: against float64 (the no-mask call
// takes other tiles at d 128: the 80-row one, the band).
TEST_F(Sm90BwdBlockSparse, AllOnesMask) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int d : {64, 96, 128})
      for (bool causal : {false, true}) {
        BwdCase c = bs(dt, d, 1000, 1000, 8, 2, 1.0);
        c.causal = causal;
        c.blocks->mask_heads = 1;
        run(c);
      }
}

// The all-ones mask walks, for each key tile, the q-blocks the unmasked accumulator path walks, in the same
// order on the same tile (d 64 / 96 full and causal, d 128 causal: the unmasked call's tile when the band
// and the ring are off; d 128 full takes the 80-row tile unmasked): dk and dv are bitwise the unmasked
// call's, from the same out and lse. dq (atomics / reduce-adds in any order) against float64 above.
TEST_F(Sm90BwdBlockSparse, AllOnesMaskDkDvBitwiseEqualNoMask) {
  const ScopedEnv no_band("FASTATTN_BWD_BAND", "0"), no_ring("FASTATTN_BWD_RING_SLOTS", "0");
  for (DType dt : {DType::F16, DType::BF16})
    for (auto [d, causal] : {std::pair{64, false}, std::pair{64, true}, std::pair{96, false}, std::pair{96, true},
                             std::pair{128, true}}) {
      BwdCase c = bs(dt, d, 1000, 1000, 8, 2, 1.0);
      c.causal = causal;
      SCOPED_TRACE(c.str());
      std::mt19937 rng(uint32_t(d * 7 + causal));
      const CaseIndex idx(c);
      BwdTensors t(c, idx, rng);
      DeviceBuffer lse_dev(size_t(c.hq) * idx.total_q(c) * 4);
      const int64_t nq = (c.sq + 127) / 128, nk = (c.sk + 127) / 128;
      std::vector<uint8_t> ones(size_t(nq * nk), 1);
      DeviceBuffer mask_dev(ones.size());
      mask_dev.upload(ones.data());
      AttnArgs a;
      a.q = t.q.view(t.q.dev->get(), c.dtype, Device::CUDA);
      a.k = t.k.view(t.k.dev->get(), c.dtype, Device::CUDA);
      a.v = t.v.view(t.v.dev->get(), c.dtype, Device::CUDA);
      a.out = t.out.view(t.out.dev->get(), c.dtype, Device::CUDA);
      a.lse = idx.lse(c, lse_dev.get(), Device::CUDA);
      idx.apply(a, c, true);
      ASSERT_TRUE(forward(a, nullptr).ok());  // unmasked: the out and lse both backward calls read
      std::vector<uint16_t> grads[2][2];  // (masked, unmasked) x (dk, dv)
      for (int masked = 0; masked < 2; ++masked) {
        AttnArgs b = a;
        if (masked == 0) {
          b.mask.kind = MaskKind::BlockSparse;
          BlockMask& m = b.mask.blocks;
          m.data = static_cast<const uint8_t*>(mask_dev.get());
          m.device = Device::CUDA;
          const int64_t shape[4] = {1, 1, nq, nk}, stride[4] = {nq * nk, nq * nk, nk, 1};
          for (int i = 0; i < 4; ++i) {
            m.shape[i] = shape[i];
            m.stride[i] = stride[i];
          }
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
          grads[masked][g].resize(x.host.size());
          x.dev->download(grads[masked][g].data());
        }
      }
      EXPECT_EQ(std::memcmp(grads[0][0].data(), grads[1][0].data(), grads[0][0].size() * 2), 0) << "dk";
      EXPECT_EQ(std::memcmp(grads[0][1].data(), grads[1][1].data(), grads[0][1].size() * 2), 0) << "dv";
    }
}

// What the GPU backward cannot run is refused with NotSupported and a message that names it, before any
// gradient is written.
TEST_F(Sm90BwdBlockSparse, Refusals) {
  detail::Problem p;
  p.head_dim = p.head_dim_v = 128;
  p.batch = 1;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.group = 4;
  p.max_rows_k = 1000;
  p.blocks.data = reinterpret_cast<const uint8_t*>(&p);
  p.blocks.block_q = p.blocks.block_k = 128;
  p.blocks.q_blocks = p.blocks.k_blocks = 8;
  p.blocks.head_div = 4;  // mask heads = heads_kv
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true).ok());
  Status st = cuda_backend::block_mask_support(p, true, true);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("block-sparse deterministic backward on CUDA not yet"), std::string::npos) << st.message;
  p.blocks.head_div = 1;  // mask heads = heads_q: a KV head's q heads on 4 mask heads
  EXPECT_TRUE(cuda_backend::block_mask_support(p, false).ok());
  st = cuda_backend::block_mask_support(p, true);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("share a mask"), std::string::npos) << st.message;
  p.blocks.head_div = 8;
  p.softcap = 30.f;
  st = cuda_backend::block_mask_support(p, true);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("softcap"), std::string::npos) << st.message;

  // Through the API: the deterministic backward of a block-sparse forward.
  BwdCase c = bs(DType::BF16, 128, 300, 700, 2, 2, 0.3);
  std::mt19937 rng(11);
  const CaseIndex idx(c);
  BwdTensors t(c, idx, rng);
  DeviceBuffer mask_dev(size_t(2 * 2 * 3 * 6));
  std::vector<uint8_t> ones(mask_dev.bytes(), 1);
  mask_dev.upload(ones.data());
  DeviceBuffer lse_dev(size_t(c.hq) * idx.total_q(c) * 4);
  AttnArgs a;
  a.q = t.q.view(t.q.dev->get(), c.dtype, Device::CUDA);
  a.k = t.k.view(t.k.dev->get(), c.dtype, Device::CUDA);
  a.v = t.v.view(t.v.dev->get(), c.dtype, Device::CUDA);
  a.out = t.out.view(t.out.dev->get(), c.dtype, Device::CUDA);
  a.lse = idx.lse(c, lse_dev.get(), Device::CUDA);
  idx.apply(a, c, true);
  a.mask.kind = MaskKind::BlockSparse;
  a.mask.blocks.data = static_cast<const uint8_t*>(mask_dev.get());
  a.mask.blocks.device = Device::CUDA;
  const int64_t shape[4] = {2, 2, 3, 6};
  for (int i = 0; i < 4; ++i) a.mask.blocks.shape[i] = shape[i];
  a.mask.blocks.stride[3] = 1;
  for (int i = 2; i >= 0; --i) a.mask.blocks.stride[i] = a.mask.blocks.stride[i + 1] * shape[i + 1];
  ASSERT_TRUE(forward(a, nullptr).ok());
  a.deterministic = true;
  t.dq.dev->poison();
  st = backward(a, t.dout.view(t.dout.dev->get(), c.dtype, Device::CUDA), t.dq.view(t.dq.dev->get(), c.dtype, Device::CUDA),
                t.dk.view(t.dk.dev->get(), c.dtype, Device::CUDA), t.dv.view(t.dv.dev->get(), c.dtype, Device::CUDA));
  EXPECT_EQ(st.code, Code::NotSupported) << st.message;
  EXPECT_NE(st.message.find("block-sparse deterministic backward on CUDA not yet"), std::string::npos) << st.message;
  std::vector<uint16_t> dq(t.dq.host.size());
  FA_CUDA_OK(cudaDeviceSynchronize());
  t.dq.dev->download(dq.data());
  size_t written = 0;
  for (uint16_t x : dq) written += x != 0xFFFF;
  EXPECT_EQ(written, 0u) << "a refused backward wrote dq";
  a.deterministic = false;  // the same call in the default mode runs
  st = backward(a, t.dout.view(t.dout.dev->get(), c.dtype, Device::CUDA), t.dq.view(t.dq.dev->get(), c.dtype, Device::CUDA),
                t.dk.view(t.dk.dev->get(), c.dtype, Device::CUDA), t.dv.view(t.dv.dev->get(), c.dtype, Device::CUDA));
  EXPECT_TRUE(st.ok()) << st.message;
  FA_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace fastattn::gputest
