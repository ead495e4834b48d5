// Problems with nothing to compute are valid calls, as in FlashAttention: no keys, no query rows,
// varlen batches whose sequences are all empty, max_seqlen = 0. Every query row gets out = 0 and
// lse = -inf on the CPU and reference backends (the CUDA twin is tests/gpu/empty_forward_test.cpp);
// the backward gives dq = dk = dv = 0, also where the empty tensors carry no data pointer (torch's
// empty tensors: an lse of (batch, heads, 0) is a given lse, not a missing one).
#include <gtest/gtest.h>

#include <cmath>

#include "fastattn/fastattn.h"
#include "support/attn_case.h"

namespace fastattn::testing {
namespace {

struct EmptyCase {
  const char* name;
  CaseSpec spec;
  bool zero_max_seqlen = false;  // pass max_seqlen_q/k = 0 (varlen)
};

CaseSpec base() {
  CaseSpec s;
  s.batch = 3;
  s.seqlen_q = 17;
  s.seqlen_k = 0;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = 16;
  s.head_dim_v = 24;
  s.dtype = DType::BF16;
  return s;
}

std::vector<EmptyCase> empty_cases() {
  std::vector<EmptyCase> cases;
  cases.push_back({"fixed_no_keys", base()});
  CaseSpec s = base();
  s.causal = true;
  cases.push_back({"fixed_no_keys_causal", s});
  s = base();
  s.seqlen_q = 0;
  s.seqlen_k = 9;
  cases.push_back({"fixed_no_queries", s});
  s = base();
  s.batch = 0;
  s.seqlen_k = 9;
  cases.push_back({"fixed_no_batch", s});
  s = base();
  s.lens_q = {0, 0, 0};
  s.lens_k = {0, 0, 0};
  cases.push_back({"varlen_all_empty", s});
  cases.push_back({"varlen_all_empty_max0", s, true});
  s.lens_q = {3, 1, 5};
  s.lens_k = {0, 0, 0};
  cases.push_back({"varlen_no_keys", s});
  cases.push_back({"varlen_no_keys_max0", s, true});
  s.lens_q = {};
  s.lens_k = {};
  s.dtype = DType::F32;
  s.pad = 3;
  cases.push_back({"fixed_no_keys_fp32_strided", s});
  return cases;
}

void PrintTo(const EmptyCase& c, std::ostream* os) { *os << c.name; }

class EmptyProblem : public ::testing::TestWithParam<EmptyCase> {};

TEST_P(EmptyProblem, WritesZeroAndMinusInf) {
  const EmptyCase& ec = GetParam();
  Rng rng(test_seed());
  for (Backend be : {Backend::CPU, Backend::Reference}) {
    AttnCase c = make_case(ec.spec, rng);
    AttnArgs a = c.args(be);
    if (ec.zero_max_seqlen) a.max_seqlen_q = a.max_seqlen_k = 0;
    const Status st = forward(a);
    ASSERT_TRUE(st.ok()) << ec.name << " backend " << int(be) << ": " << st.message;
    for (int64_t i = 0; i < c.out.numel(); ++i) {
      ASSERT_EQ(c.out.get(i), 0.0) << ec.name << " out[" << i << "] backend " << int(be);
    }
    for (int64_t i = 0; i < c.lse.numel(); ++i) {
      ASSERT_EQ(c.lse.get(i), -INFINITY) << ec.name << " lse[" << i << "] backend " << int(be);
    }
    EXPECT_TRUE(c.out.padding_poisoned()) << ec.name << ": out's row padding was written";
  }
}

TEST_P(EmptyProblem, BackwardWritesZeroGradients) {
  const EmptyCase& ec = GetParam();
  Rng rng(test_seed());
  for (Backend be : {Backend::CPU, Backend::Reference}) {
    for (bool null_empty : {false, true}) {
      AttnCase c = make_case(ec.spec, rng);
      AttnArgs a = c.args(be);
      if (ec.zero_max_seqlen) a.max_seqlen_q = a.max_seqlen_k = 0;
      c.poison_outputs();  // NaN into dq, dk, dv; the forward then writes out and lse
      const Status fst = forward(a);
      ASSERT_TRUE(fst.ok()) << ec.name << ": " << fst.message;
      Tensor dout = c.dout.view(), dq = c.dq.view(), dk = c.dk.view(), dv = c.dv.view();
      if (null_empty) {
        for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse, &dout, &dq, &dk, &dv}) {
          if (t->numel() == 0) t->data = nullptr;
        }
      }
      const Status st = backward(a, dout, dq, dk, dv);
      const std::string ctx = std::string(ec.name) + " backend " + std::to_string(int(be)) +
                              (null_empty ? " (empty tensors without data)" : "");
      ASSERT_TRUE(st.ok()) << ctx << ": " << st.message;
      for (const HostTensor* g : {&c.dq, &c.dk, &c.dv}) {
        for (int64_t i = 0; i < g->numel(); ++i) ASSERT_EQ(g->get(i), 0.0) << ctx << " element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, EmptyProblem, ::testing::ValuesIn(empty_cases()),
                         [](const ::testing::TestParamInfo<EmptyCase>& p) { return p.param.name; });

}  // namespace
}  // namespace fastattn::testing
