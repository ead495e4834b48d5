// The Ampere (sm_80) forward vs the float64 reference, forced on any GPU of major >= 8 (on an H100 it
// runs from the compute_80 PTX: cuda_backend::set_forced_arch_major, FASTATTN_FORCE_ARCH): both
// dtypes, d 64 and 128, odd lengths (1, 17, 113, 4097), s_q != s_k both ways, GQA / MQA (never
// packed on sm80), varlen with empty sequences and seqused, causal, local windows, softcap, a
// running max that keeps rising, strided inputs and padded out; each case runs twice and must be
// bitwise identical (run_fwd_case). And the sm80 path's refusals (the backward's deterministic mode and
// softcap, block-sparse masks, element bitmasks), each naming the argument and the arch. Split-KV and KV
// caches on sm80: kvcache_sm80_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/built_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#include "cuda/sm80/fwd/api.h"
#include "fwd_case.h"
#include "sm80_fixture.h"

namespace fastattn::gputest {
namespace {

bool built(DType dt, int d) { return sm80_built(cuda_backend::KernelFamily::Forward, dt, d); }

class Sm80Fwd : public Sm80PathTest<cuda_backend::KernelFamily::Forward> {
 protected:
  void TearDown() override {
    Sm80PathTest::TearDown();
    sm80::set_kv_order(sm80::KvOrder::Auto);
  }
};

FwdCase base(DType dt, int d, int sq, int sk) {
  FwdCase c;
  c.dtype = dt;
  c.d = d;
  c.sq = sq;
  c.sk = sk;
  return c;
}

// The cases of a test at every built (dtype, d) of the list, d 128 in both K/V orders (FA2's and
// the 2-stage ring: the device picks one, sm80/fwd/api.h); fails when none of the list is built.
template <class F>
void for_built(std::vector<DType> dts, std::vector<int> dims, F&& f) {
  int n = 0;
  for (DType dt : dts)
    for (int d : dims)
      if (built(dt, d)) {
        ++n;
        if (d != 128) {
          f(dt, d);
          continue;
        }
        for (sm80::KvOrder o : {sm80::KvOrder::Fa2, sm80::KvOrder::Ring}) {
          SCOPED_TRACE(o == sm80::KvOrder::Fa2 ? "d128 K/V order: FA2's" : "d128 K/V order: ring");
          sm80::set_kv_order(o);
          f(dt, d);
        }
        sm80::set_kv_order(sm80::KvOrder::Auto);
      }
  ASSERT_GT(n, 0) << "no sm80 forward of these dtypes and head dims is built";
}

TEST_F(Sm80Fwd, HeadDimsAndDtypes) {
  for_built({DType::BF16, DType::F16}, {64, 128}, [](DType dt, int d) {
    for (bool causal : {false, true}) {
      FwdCase c = base(dt, d, 200, 300);
      c.batch = 2;
      c.causal = causal;
      run_fwd_case(c);
    }
  });
}

TEST_F(Sm80Fwd, OddLengths) {
  for_built({DType::BF16, DType::F16}, {64, 128}, [](DType dt, int d) {
    for (int sq : {1, 17, 113})
      for (int sk : {1, 17, 113})
        for (bool causal : {false, true}) {
          FwdCase c = base(dt, d, sq, sk);
          c.causal = causal;
          run_fwd_case(c);
        }
  });
}

TEST_F(Sm80Fwd, Long4097) {
  for_built({DType::BF16}, {128}, [](DType dt, int d) {
    for (bool causal : {false, true}) {
      FwdCase c = base(dt, d, 4097, 4097);
      c.hq = c.hkv = 1;
      c.causal = causal;
      run_fwd_case(c);
    }
  });
}

// s_q != s_k: bottom-right causal, so with s_q > s_k the first rows see nothing (out 0, lse -inf).
TEST_F(Sm80Fwd, SqNotSk) {
  for_built({DType::BF16}, {64, 128}, [](DType dt, int d) {
    for (auto [sq, sk] : {std::pair{300, 100}, std::pair{100, 1000}, std::pair{129, 64}})
      for (bool causal : {false, true}) {
        FwdCase c = base(dt, d, sq, sk);
        c.causal = causal;
        run_fwd_case(c);
      }
  });
}

TEST_F(Sm80Fwd, GqaAndMqa) {
  for_built({DType::BF16, DType::F16}, {64, 128}, [](DType dt, int d) {
    for (auto [hq, hkv] : {std::pair{8, 2}, std::pair{6, 1}})
      for (int sq : {1, 17, 200}) {  // short s_q: the Hopper path would pack heads; sm80 does not
        FwdCase c = base(dt, d, sq, 300);
        c.hq = hq;
        c.hkv = hkv;
        c.causal = sq == 200;
        run_fwd_case(c);
      }
  });
}

TEST_F(Sm80Fwd, Varlen) {
  for_built({DType::BF16}, {64, 128}, [](DType dt, int d) {
    for (bool causal : {false, true}) {
      FwdCase c = base(dt, d, 0, 0);
      c.lens_q = {17, 0, 300, 1, 128};
      c.lens_k = {40, 5, 300, 0, 129};
      c.hq = 4;
      c.hkv = 1;
      c.causal = causal;
      run_fwd_case(c);
    }
    FwdCase c = base(dt, d, 0, 0);
    c.lens_q = {100, 250, 7};
    c.lens_k = {100, 300, 9};
    c.used_q = {90, 250, 3};
    c.used_k = {50, 299, 9};
    c.wl = 20;
    c.wr = 10;
    for (int splits : {1, 0, 4}) {  // a hint outside forward_kvcache on sm80: the unsplit kernel, same answer
      c.num_splits = splits;
      run_fwd_case(c);
    }
    c.nan_past = NanPast::All;  // NaN in q, k, v past seqused: out 0 there, no other row touched
    run_fwd_case(c);
  });
}

// NaN in k inside the used keys: the rows that keep that key come out NaN, out and lse (the sm80 kernel's
// finish is the sm90's), the others as the reference's.
TEST_F(Sm80Fwd, NanInUsedKeys) {
  for_built({DType::BF16}, {64, 128}, [](DType dt, int d) {
    for (bool causal : {false, true}) run_fwd_case(nan_key_case(dt, d, causal));
  });
}

TEST_F(Sm80Fwd, LocalWindows) {
  for_built({DType::BF16}, {64, 128}, [](DType dt, int d) {
    for (auto [wl, wr] : {std::pair{0, 0}, std::pair{64, 0}, std::pair{100, 37}, std::pair{-1, 50}, std::pair{200, -1}}) {
      FwdCase c = base(dt, d, 333, 400);
      c.wl = wl;
      c.wr = wr;
      run_fwd_case(c);
    }
  });
}

TEST_F(Sm80Fwd, Softcap) {
  for_built({DType::BF16, DType::F16}, {64, 128}, [](DType dt, int d) {
    for (bool causal : {false, true}) {
      FwdCase c = base(dt, d, 190, 260);
      c.softcap = 5.f;
      c.causal = causal;
      run_fwd_case(c);
    }
  });
}

// Scores that grow toward the first keys (visited last): the running max rises block after block.
TEST_F(Sm80Fwd, RisingRowMax) {
  for_built({DType::BF16, DType::F16}, {64, 128}, [](DType dt, int d) {
    for (bool causal : {false, true}) {
      FwdCase c = base(dt, d, 300, 1000);
      c.hq = c.hkv = 1;
      c.causal = causal;
      c.key_ramp = 20.f;
      run_fwd_case(c);
    }
  });
}

// Strided q / k / v rows (16-byte multiples) and out rows padded by 2 elements (4-byte stores; the
// padding must keep its poison).
TEST_F(Sm80Fwd, StridedInputsPaddedOutput) {
  for_built({DType::F16}, {64, 128}, [](DType dt, int d) {
    FwdCase c = base(dt, d, 150, 170);
    c.row_pad = 8;
    c.out_pad = 2;
    c.hq = 4;
    c.hkv = 2;
    c.causal = true;
    run_fwd_case(c);
  });
}

// What the sm80 path does not hold is refused by name (the argument, and "sm80"), never run.
TEST_F(Sm80Fwd, Refusals) {
  auto expect_refused = [](const Status& st, const std::string& arg) {
    EXPECT_EQ(st.code, Code::NotSupported) << st.message;
    EXPECT_NE(st.message.find(arg), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("sm80"), std::string::npos) << st.message;
  };
  const DType dt = built(DType::BF16, 128) || built(DType::BF16, 64) ? DType::BF16 : DType::F16;
  const int d = built(dt, 128) ? 128 : 64;
  FwdCase c = base(dt, d, 100, 200);
  const CaseIndex idx(c);
  TestTensor q(idx.shape(c.sq, 0, c.hq, d), 0), k(idx.shape(c.sk, 0, c.hkv, d), 0), v(idx.shape(c.sk, 0, c.hkv, d), 0),
      out(idx.shape(c.sq, 0, c.hq, d), 0);
  AttnArgs a;
  a.q = q.view(q.dev->get(), dt, Device::CUDA);
  a.k = k.view(k.dev->get(), dt, Device::CUDA);
  a.v = v.view(v.dev->get(), dt, Device::CUDA);
  a.out = out.view(out.dev->get(), dt, Device::CUDA);
  DeviceBuffer lse(size_t(c.hq) * c.sq * 4);
  a.lse = idx.lse(c, lse.get(), Device::CUDA);
  idx.apply(a, c, true);
  a.num_splits = 1;
  // The backward's sm80 limits (same operands as gradients: the refusals come first; the backward
  // itself: bwd_sm80_test.cpp).
  AttnArgs det = a;
  det.deterministic = true;
  expect_refused(backward(det, a.out, a.q, a.k, a.v, nullptr), "deterministic");
  AttnArgs cap = a;
  cap.softcap = 5.f;
  expect_refused(backward(cap, a.out, a.q, a.k, a.v, nullptr), "softcap");
  // Block-sparse masks: the rule that validation asks.
  AttnArgs bs = a;
  bs.mask.kind = MaskKind::BlockSparse;
  expect_refused(cuda_backend::sm80_limits(bs), "mask");
  // Element bitmasks: through the whole forward (validation asks sm80_limits before any prep runs).
  const int words = (c.sk + 31) / 32;
  DeviceBuffer bits(size_t(c.sq) * words * 4);
  AttnArgs bm = a;
  bm.mask.kind = MaskKind::DenseBitmask;
  bm.mask.bits.data = static_cast<const uint32_t*>(bits.get());
  bm.mask.bits.shape[0] = bm.mask.bits.shape[1] = 1;
  bm.mask.bits.shape[2] = c.sq;
  bm.mask.bits.shape[3] = words;
  bm.mask.bits.stride[2] = words;
  bm.mask.bits.device = Device::CUDA;
  expect_refused(forward(bm, nullptr), "mask: element bitmasks");
  // A head dim without an sm80 kernel (96: not in the sm80 menu) is refused as not built.
  FwdCase c96 = base(dt, 96, 100, 200);
  TestTensor q96(idx.shape(c.sq, 0, c.hq, 96), 0), k96(idx.shape(c.sk, 0, c.hkv, 96), 0),
      v96(idx.shape(c.sk, 0, c.hkv, 96), 0), o96(idx.shape(c.sq, 0, c.hq, 96), 0);
  AttnArgs a96 = a;
  a96.q = q96.view(q96.dev->get(), dt, Device::CUDA);
  a96.k = k96.view(k96.dev->get(), dt, Device::CUDA);
  a96.v = v96.view(v96.dev->get(), dt, Device::CUDA);
  a96.out = o96.view(o96.dev->get(), dt, Device::CUDA);
  const Status st = forward(a96, nullptr);
  EXPECT_EQ(st.code, Code::NotSupported) << st.message;
  EXPECT_NE(st.message.find("is not built for"), std::string::npos) << st.message;
  // Released: the device's own arch again (an sm_90 device takes its sm90 kernels).
  cuda_backend::set_forced_arch_major(0);
  int major = 0;
  ASSERT_TRUE(cuda_backend::compute_major(&major).ok());
  int real = 0;
  cudaDeviceGetAttribute(&real, cudaDevAttrComputeCapabilityMajor, 0);
  EXPECT_EQ(major, real);
}

}  // namespace
}  // namespace fastattn::gputest
