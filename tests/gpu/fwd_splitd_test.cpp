// The Hopper split-D forward (head dims 320-1024, sm90/fwd_splitd/) vs the float64 reference with
// FA3's tolerance rule (run_fwd_case: random inputs, out poisoned, every element checked, each case
// run twice and bitwise equal): both dtypes, d 320 / 512 / 1024, d_qk != d_v, odd lengths (1, 17,
// 113, 4097), causal and local windows, GQA, varlen with empty sequences and seqused, softcap, a
// running max that keeps rising; and the call it refuses by name (the backward). Split-KV and GQA
// packing at these dims: fwd_splitd_decode_test.cpp. The float64 reference is naive (s_q s_k
// (d + d_v) per head, twice): the cases stay small. The ring's depth follows d_qk (10 + 16 - d_qk / 64 slots): the cases cover 10 to 25 slots. Every case runs
// under the pipelined schedule (parameter "pipe", FASTATTN_SPLITD_LOCKSTEP=0) and the lockstep one
// ("lockstep", =1), each forced (without the variable the host rule splitd_lockstep_schedule picks one):
// Sm90FwdSplitD.Gqa/pipe, Sm90FwdSplitD.Gqa/lockstep.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "fwd_case.h"

namespace fastattn::gputest {
namespace {

class Sm90FwdSplitD : public HopperTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    HopperTest::SetUp();
    setenv("FASTATTN_SPLITD_LOCKSTEP", GetParam(), 1);  // read by the launcher on every call
  }
  void TearDown() override { unsetenv("FASTATTN_SPLITD_LOCKSTEP"); }
};

FwdCase base(DType dt, int d, int dv, int sq, int sk) {
  FwdCase c;
  c.dtype = dt;
  c.d = d;
  c.dv = dv;
  c.sq = sq;
  c.sk = sk;
  return c;
}

// NaN in k inside the used keys: the rows that keep that key come out NaN, out and lse, the others as the
// reference's (the split-D consumers' finish is OnlineSoftmax's).
TEST_P(Sm90FwdSplitD, NanInUsedKeys) {
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 512, 512, 150, 230);
    c.batch = 2;
    c.causal = causal;
    c.nan_keys = 1;
    run_fwd_case(c);
  }
}

TEST_P(Sm90FwdSplitD, HeadDimsAndDtypes) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int d : {320, 512, 1024})
      for (bool causal : {false, true}) {
        FwdCase c = base(dt, d, d, 150, 230);
        c.batch = 2;
        c.causal = causal;
        run_fwd_case(c);
      }
}

// d_qk != d_v: MLA's 576 / 512, a narrow V (d_v <= 256: one slice pair, the second warpgroup's
// columns all past d_v), a wide V over a narrow Q, and d_v 320 (a pair whose second slice is
// mostly TMA zero fill).
TEST_P(Sm90FwdSplitD, QkAndVHeadDimsDiffer) {
  const std::pair<int, int> dims[] = {{576, 512}, {384, 128}, {256, 512}, {128, 1024}, {1024, 320}, {640, 384},
                                         {64, 512}};  // d_qk 64: the deepest ring (25 slots)
  for (auto [d, dv] : dims)
    for (bool causal : {false, true}) {
      FwdCase c = base(DType::BF16, d, dv, 113, 200);
      c.causal = causal;
      run_fwd_case(c);
    }
}

TEST_P(Sm90FwdSplitD, OddLengths) {
  for (int sq : {1, 17, 113})
    for (int sk : {1, 17, 113, 4097})
      for (bool causal : {false, true}) {
        FwdCase c = base(DType::BF16, 512, 512, sq, sk);
        c.hq = c.hkv = 1;
        c.causal = causal;
        run_fwd_case(c);
      }
  for (bool causal : {false, true}) {  // many m-blocks (65), few keys: causal rows above the keys keep none
    FwdCase c = base(DType::BF16, 320, 320, 4097, 113);
    c.hq = c.hkv = 1;
    c.causal = causal;
    run_fwd_case(c);
  }
  for (int sk : {129, 200, 257})  // 2-3 key blocks: the pipelined schedule's prologue, 1-2 steps, epilogue
    for (bool causal : {false, true}) {
      FwdCase c = base(DType::BF16, 320, 512, 113, sk);
      c.hq = c.hkv = 1;
      c.causal = causal;
      run_fwd_case(c);
    }
  FwdCase c = base(DType::F16, 1024, 1024, 17, 4097);
  c.hq = c.hkv = 1;
  run_fwd_case(c);
}

TEST_P(Sm90FwdSplitD, Windows) {
  const std::pair<int, int> windows[] = {{50, 10}, {100, 0}, {0, 0}, {-1, 30}, {7, -1}};
  for (auto [wl, wr] : windows)
    for (int d : {320, 1024}) {
      FwdCase c = base(DType::BF16, d, d, 200, 260);
      c.wl = wl;
      c.wr = wr;
      run_fwd_case(c);
    }
}

TEST_P(Sm90FwdSplitD, Gqa) {
  for (auto [hq, hkv] : {std::pair{8, 2}, std::pair{4, 1}})
    for (bool causal : {false, true}) {
      FwdCase c = base(DType::BF16, 512, 512, 100, 180);
      c.hq = hq;
      c.hkv = hkv;
      c.causal = causal;
      run_fwd_case(c);
    }
}

TEST_P(Sm90FwdSplitD, VarlenWithEmptySequences) {
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 512, 512, 0, 0);
    c.lens_q = {17, 0, 130, 1, 64};
    c.lens_k = {40, 5, 129, 0, 64};
    c.hq = 4;
    c.hkv = 2;
    c.causal = causal;
    run_fwd_case(c);
  }
  FwdCase c = base(DType::F16, 576, 512, 0, 0);  // seqused: fewer tokens used than stored
  c.lens_q = {70, 33, 0};
  c.lens_k = {90, 33, 12};
  c.used_q = {65, 33, 0};
  c.used_k = {80, 1, 12};
  c.causal = true;
  run_fwd_case(c);
  c.nan_past = NanPast::All;
  run_fwd_case(c);
}

TEST_P(Sm90FwdSplitD, Softcap) {
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 320, 320, 120, 190);
    c.softcap = 30.f;
    c.causal = causal;
    run_fwd_case(c);
  }
}

// Scores that grow toward the first keys (visited last): the running max rises block after block,
// by more and by less than OnlineSoftmax::kMaxSlack (O rescaled or not).
TEST_P(Sm90FwdSplitD, RisingRowMax) {
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 512, 512, 100, 1000);
    c.hq = c.hkv = 1;
    c.causal = causal;
    c.key_ramp = 20.f;
    run_fwd_case(c);
  }
}

// The pipelined schedule against the lockstep one (FASTATTN_SPLITD_LOCKSTEP=1): O sees the same
// operations in the same order and the exps the same inputs, so out and lse are the same bits. Full
// and partial blocks, a running max that keeps rising (O rescaled or not), d 320 / 512 / 1024, d_qk
// != d_v, GQA. (Under the "lockstep" parameter the extra call runs the same kernel.)
TEST_P(Sm90FwdSplitD, SchedulesAgreeBitwise) {
  const std::pair<int, int> dims[] = {{320, 320}, {512, 512}, {1024, 1024}, {576, 512}};
  for (auto [d, dv] : dims)
    for (bool causal : {false, true}) {
      FwdCase c = base(DType::BF16, d, dv, 113, 700);
      c.hq = 4;
      c.hkv = 2;
      c.causal = causal;
      c.key_ramp = 20.f;
      c.same_bits_with_env = "FASTATTN_SPLITD_LOCKSTEP=1";
      run_fwd_case(c);
    }
}

// The backward at these head dims: refused by name (split-KV is not: it validates).
TEST_P(Sm90FwdSplitD, RefusedByName) {
  const int64_t b = 1, s = 64, h = 2, d = 512;
  DeviceBuffer q(b * s * h * d * 2), k(b * s * h * d * 2), v(b * s * h * d * 2), o(b * s * h * d * 2);
  auto view = [&](DeviceBuffer& buf) {
    Tensor t;
    t.data = buf.get();
    t.ndim = 4;
    t.dtype = DType::BF16;
    t.device = Device::CUDA;
    const int64_t shape[4] = {b, s, h, d}, stride[4] = {s * h * d, h * d, d, 1};
    for (int i = 0; i < 4; ++i) {
      t.shape[i] = shape[i];
      t.stride[i] = stride[i];
    }
    return t;
  };
  AttnArgs a;
  a.q = view(q);
  a.k = view(k);
  a.v = view(v);
  a.out = view(o);
  ASSERT_TRUE(validate_forward(a).ok()) << validate_forward(a).message;
  a.num_splits = 2;
  Status st = validate_forward(a);
  EXPECT_TRUE(st.ok()) << st.message;
  a.num_splits = 0;
  DeviceBuffer lse(b * h * s * 4);  // (batch, heads, seqlen_q) fp32: the backward needs it
  a.lse.data = lse.get();
  a.lse.ndim = 3;
  a.lse.dtype = DType::F32;
  a.lse.device = Device::CUDA;
  const int64_t lse_shape[3] = {b, h, s}, lse_stride[3] = {h * s, s, 1};
  for (int i = 0; i < 3; ++i) {
    a.lse.shape[i] = lse_shape[i];
    a.lse.stride[i] = lse_stride[i];
  }
  DeviceBuffer dout(b * s * h * d * 2), dq(b * s * h * d * 2), dk(b * s * h * d * 2), dv(b * s * h * d * 2);
  st = validate_backward(a, view(dout), view(dq), view(dk), view(dv));
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("split-D"), std::string::npos) << st.message;
}

INSTANTIATE_TEST_SUITE_P(, Sm90FwdSplitD, ::testing::Values("0", "1"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           return std::string(param_info.param[0] == '1' ? "lockstep" : "pipe");
                         });

}  // namespace
}  // namespace fastattn::gputest
