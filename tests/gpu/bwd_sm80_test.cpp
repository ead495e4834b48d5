// The Ampere (sm_80) backward vs the float64 reference, forced on any GPU of major >= 8 (on an H100 it
// runs from the compute_80 PTX, as the Sm80Fwd tests do): dq, dk, dv with FA3's rule (run_bwd_case:
// random inputs, the CUDA forward's out / lse, gradients poisoned before each of two runs, dk / dv
// bitwise equal between them, every element checked), both dtypes, d 64 and 128, odd lengths (1, 17,
// 113, 4097), s_q != s_k both ways, causal, local windows, GQA 1 / 4, varlen with empty sequences and
// seqused. The host must pick 64-row q-blocks without the ring or the band (the route probe).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bwd_case.h"
#include "cuda/built_kernels.h"
#include "cuda/device_info.h"
#include "sm80_fixture.h"

namespace fastattn::gputest {
namespace {

bool built(DType dt, int d) { return sm80_built(cuda_backend::KernelFamily::Backward, dt, d); }

class Sm80Bwd : public Sm80PathTest<cuda_backend::KernelFamily::Backward> {};

// A case at every built (dtype, d) of the lists, with the sm80 route checked; fails when none is built.
template <class F>
void for_built(std::vector<DType> dts, std::vector<int> dims, F&& f) {
  int n = 0;
  for (DType dt : dts)
    for (int d : dims)
      if (built(dt, d)) {
        ++n;
        f(dt, d);
      }
  ASSERT_GT(n, 0) << "no sm80 backward of these dtypes and head dims is built";
}

void run(BwdCase c) {
  c.route = BwdRoute{64, false, false};  // 64-row q-blocks, the accumulator path
  run_bwd_case(c);
}

TEST_F(Sm80Bwd, HeadDimsAndDtypes) {
  for_built({DType::BF16, DType::F16}, {64, 128}, [](DType dt, int d) {
    for (bool causal : {false, true}) {
      BwdCase c = bcase(dt, d, 200, 300);
      c.batch = 2;
      c.causal = causal;
      run(c);
    }
  });
}

TEST_F(Sm80Bwd, OddLengths) {
  for_built({DType::BF16}, {64, 128}, [](DType dt, int d) {
    for (int n : {1, 17, 113})
      for (bool causal : {false, true}) {
        BwdCase c = bcase(dt, d, n, n);
        c.causal = causal;
        run(c);
      }
    BwdCase c = bcase(dt, d, 17, 113);  // s_q < s_k and s_q > s_k, causal (bottom-right)
    c.causal = true;
    run(c);
    c = bcase(dt, d, 113, 17);
    c.causal = true;
    run(c);
  });
}

TEST_F(Sm80Bwd, Long) {
  for_built({DType::BF16}, {64, 128}, [](DType dt, int d) {
    BwdCase c = bcase(dt, d, 4097, 4097);
    c.hq = c.hkv = 1;
    c.causal = true;
    run(c);
    BwdCase u = bcase(dt, d, 1000, 4097);
    u.hq = u.hkv = 1;
    run(u);
  });
}

TEST_F(Sm80Bwd, Gqa) {
  for_built({DType::BF16, DType::F16}, {64, 128}, [](DType dt, int d) {
    for (int hkv : {1, 2}) {  // 4 q heads: GQA 4:1 and 2:1
      BwdCase c = bcase(dt, d, 300, 257);
      c.hq = 4;
      c.hkv = hkv;
      c.causal = hkv == 1;
      run(c);
    }
  });
}

TEST_F(Sm80Bwd, LocalWindows) {
  for_built({DType::BF16}, {64, 128}, [](DType dt, int d) {
    for (auto [wl, wr] : std::vector<std::pair<int, int>>{{100, 0}, {50, 70}, {-1, 30}, {200, -1}, {0, 0}}) {
      BwdCase c = bcase(dt, d, 333, 400);
      c.wl = wl;
      c.wr = wr;
      run(c);
    }
  });
}

// Varlen with empty sequences (GQA 2:1), seqused, both: bwd_case.h's cases, the Hopper tests' too
// (they take fp16 for the seqused case).
TEST_F(Sm80Bwd, VarlenSeqused) {
  for_built({DType::BF16}, {64, 128}, [](DType, int d) {
    if (built(DType::F16, d)) bwd_varlen_cases(d, d, d, 0, BwdRoute{64, false, false});
  });
}

// Review s39: a bias is refused by name on sm80 (its kernels read none). Before, check_backward asked only the
// sm90 bias rule (d 96 / 128, no device check): at d 128 the call ran and returned the unbiased gradients.
TEST_F(Sm80Bwd, BiasRefusedByName) {
  for (int d : {64, 128}) {
    DeviceBuffer buf(size_t(64) * 2 * d * 2), bias(size_t(64) * 64 * 4), dbias(size_t(64) * 64 * 4), lse(2 * 64 * 4);
    const AttnArgs a = bias_refusal_args(buf.get(), lse.get(), bias.get(), d, dbias.get());
    DeviceBuffer grads(size_t(4) * 64 * 2 * d * 2);
    Tensor g[4];
    for (int i = 0; i < 4; ++i)
      g[i] = make_tensor(static_cast<char*>(grads.get()) + size_t(i) * 64 * 2 * d * 2, DType::BF16, {1, 64, 2, d},
                         Device::CUDA);
    for (const Status& st : {validate_backward(a, g[0], g[1], g[2], g[3]), backward(a, g[0], g[1], g[2], g[3])}) {
      EXPECT_EQ(st.code, Code::NotSupported) << "d " << d << ": " << st.message;
      EXPECT_EQ(st.message.rfind("bias:", 0), 0u) << st.message;
      EXPECT_NE(st.message.find("sm80"), std::string::npos) << st.message;
    }
  }
}

}  // namespace
}  // namespace fastattn::gputest
