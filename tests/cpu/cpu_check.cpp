#include "cpu_check.h"

#include <cmath>
#include <vector>

#include "cpu/tile_class.h"
#include "cpu/tiling.h"

#include "util/half.h"
#include "fastattn/fastattn.h"
#include "reference/reference.h"
#include "support/compare.h"

namespace fastattn::testing {
namespace {


// FA3 rule against `baseline`, written-everywhere checks, fp32 Frobenius bound. `fro_floor`: the
// Frobenius bound is taken relative to ||ref|| but at least fro_floor per element (RMS), for
// values whose rounding is that of larger terms they are a difference of (the LSE, below).
void expect_close(const char* name, const HostTensor& got, const std::vector<double>& ref,
                  const std::vector<double>& baseline, DType input_dtype, const std::string& ctx,
                  double fro_floor = 0) {
  EXPECT_EQ(got.count_nan(), 0) << name << ": elements not written; " << ctx;
  EXPECT_TRUE(got.padding_poisoned()) << name << ": wrote outside its elements; " << ctx;
  // fp16/bf16: one rounding step of the input dtype. fp32: the output's own rounding is far
  // below fp32 accumulation over ~1000 terms (random walk ~ sqrt(n) ulp), so the bound is the
  // issue's "within fp32 rounding": 1e-5 of the largest magnitude, plus rel. Frobenius < 1e-5.
  const double eps = input_dtype == DType::F32 ? 1e-5 * rounding_step(DType::F32, ref) / 0x1p-23
                                               : rounding_step(input_dtype, ref);
  const Comparison c = compare(got.to_f64(), ref, baseline, eps);
  EXPECT_TRUE(c.ok) << c.describe(name) << "; " << ctx;
  if (input_dtype == DType::F32) {
    EXPECT_LT(rel_frobenius(got.to_f64(), ref, fro_floor), 1e-5) << c.describe(name) << "; " << ctx;
  }
}

// CaseSpec::nan_keys: where the reference is NaN `got` must be NaN (written: the caller filled the outputs with a
// finite value first), elsewhere expect_close's rule. With `want_nan`, both kinds of element must be there.
void expect_nan_where_reference(const char* name, const HostTensor& got, const std::vector<double>& ref,
                                const std::vector<double>& baseline, DType input_dtype, const std::string& ctx,
                                bool want_nan, double fro_floor = 0) {
  std::vector<double> g = got.to_f64(), r = ref, b = baseline;
  int64_t nan_ref = 0, not_nan = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (!std::isnan(r[i])) continue;
    ++nan_ref;
    not_nan += !std::isnan(g[i]);
    g[i] = r[i] = b[i] = 0;
  }
  if (want_nan) {
    EXPECT_GT(nan_ref, 0) << name << ": no element of the reference is NaN; " << ctx;
    EXPECT_LT(size_t(nan_ref), r.size()) << name << ": every element of the reference is NaN; " << ctx;
  }
  EXPECT_EQ(not_nan, 0) << name << ": elements not NaN where the reference's are; " << ctx;
  const double eps = input_dtype == DType::F32 ? 1e-5 * rounding_step(DType::F32, r) / 0x1p-23
                                               : rounding_step(input_dtype, r);
  const Comparison c = compare(g, r, b, eps);
  EXPECT_TRUE(c.ok) << c.describe(name) << "; " << ctx;
  if (input_dtype == DType::F32) {
    EXPECT_LT(rel_frobenius(g, r, fro_floor), 1e-5) << c.describe(name) << "; " << ctx;
  }
}

// Whether an input holds NaN (CaseSpec::nan_past_used: the poison is there to be ignored).
bool holds_nan(const AttnCase& c) {
  for (const HostTensor* t : {&c.q, &c.k, &c.v, &c.dout})
    for (double x : t->to_f64())
      if (std::isnan(x)) return true;
  return false;
}

}  // namespace

void check_cpu_forward(const CaseSpec& spec, int num_threads) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  AttnCase c = make_case(spec, rng);
  const std::string ctx = spec.describe() + ", threads " + std::to_string(num_threads) + ", " + seed_note(seed);
  if (spec.nan_past_used) {
    ASSERT_TRUE(holds_nan(c)) << "no NaN past seqused; " << ctx;
  }

  reference::ForwardF64 ref;
  ASSERT_TRUE(reference::forward_f64(c.args(Backend::Reference), &ref).ok()) << ctx;

  AttnArgs a = c.args(Backend::CPU);
  a.num_threads = num_threads;
  const bool nan_inputs = spec.nan_keys > 0;
  if (nan_inputs) {  // a finite fill, so that a NaN row is one the backend wrote
    c.out.fill(777.0f);
    c.lse.fill(777.0f);
  }
  const Status st = forward(a);
  ASSERT_TRUE(st.ok()) << st.message << "; " << ctx;
  if (nan_inputs) {
    expect_nan_where_reference("out", c.out, ref.out, rounded(ref.out, spec.dtype), spec.dtype, ctx, true);
    expect_nan_where_reference("lse", c.lse, ref.lse, rounded(ref.lse, DType::F32), spec.dtype, ctx, true, 1.0);
    return;
  }
  expect_close("out", c.out, ref.out, rounded(ref.out, spec.dtype), spec.dtype, ctx);
  // An LSE is the score's dot product, the max and the log-sum added up, terms of order 1: their
  // rounding, not its own value's, bounds its error. At s_k = 1 it is q.k * scale alone, which
  // cancellation can bring near 0 (1.25e-3 with an fp32 dot product's 1.8e-8 error: relative
  // 1.4e-5; seed 739021225 on the H100 machine, 2026-11-25), so it is judged against 1 there.
  expect_close("lse", c.lse, ref.lse, rounded(ref.lse, DType::F32), spec.dtype, ctx, /*fro_floor=*/1.0);
}

void check_cpu_backward(const CaseSpec& spec, int num_threads) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  AttnCase c = make_case(spec, rng);
  const std::string ctx = spec.describe() + ", threads " + std::to_string(num_threads) + ", " + seed_note(seed);
  if (spec.nan_past_used) {
    ASSERT_TRUE(holds_nan(c)) << "no NaN past seqused; " << ctx;
  }

  AttnArgs a = c.args(Backend::CPU);
  a.num_threads = num_threads;
  Status st = forward(a);
  ASSERT_TRUE(st.ok()) << st.message << "; " << ctx;
  st = backward(a, c.dout.view(), c.dq.view(), c.dk.view(), c.dv.view());
  ASSERT_TRUE(st.ok()) << st.message << "; " << ctx;

  reference::BackwardF64 ref, low;
  ASSERT_TRUE(reference::backward_f64(c.args(Backend::Reference), c.dout.view(), &ref).ok()) << ctx;
  // Baseline: fp32 -> the float64 result rounded to fp32; fp16/bf16 -> the same math with P and
  // dS in the input precision and D from the rounded out (what a kernel feeding tensor cores
  // computes), as FA3 tests do.
  // dbias is written in fp32 whatever the inputs: its baseline is the low-precision math rounded to fp32.
  if (spec.dtype == DType::F32) {
    low = {rounded(ref.dq, DType::F32), rounded(ref.dk, DType::F32), rounded(ref.dv, DType::F32),
           rounded(ref.dbias, DType::F32)};
  } else {
    reference::Options opt;
    opt.round_p_to_input_dtype = true;
    ASSERT_TRUE(reference::backward_f64(c.args(Backend::Reference), c.dout.view(), &low, opt).ok());
    low = {rounded(low.dq, spec.dtype), rounded(low.dk, spec.dtype), rounded(low.dv, spec.dtype),
           rounded(low.dbias, DType::F32)};
  }
  expect_close("dq", c.dq, ref.dq, low.dq, spec.dtype, ctx);
  expect_close("dk", c.dk, ref.dk, low.dk, spec.dtype, ctx);
  expect_close("dv", c.dv, ref.dv, low.dv, spec.dtype, ctx);
  if (spec.bias.grad) expect_close("dbias", c.dbias, ref.dbias, low.dbias, spec.dtype, ctx);
}

void run_cpu(AttnCase& c, const AttnArgs& a) {
  ASSERT_TRUE(forward(a).ok());
  ASSERT_TRUE(backward(a, c.dout.view(), c.dq.view(), c.dk.view(), c.dv.view()).ok());
}

void expect_same_bits(const AttnCase& x, const AttnCase& y, const char* what) {
  const HostTensor* xs[] = {&x.out, &x.lse, &x.dq, &x.dk, &x.dv};
  const HostTensor* ys[] = {&y.out, &y.lse, &y.dq, &y.dk, &y.dv};
  const char* names[] = {"out", "lse", "dq", "dk", "dv"};
  for (int t = 0; t < 5; ++t) {
    const std::vector<double> a = xs[t]->to_f64(), b = ys[t]->to_f64();
    ASSERT_EQ(a.size(), b.size());
    for (size_t e = 0; e < a.size(); ++e) ASSERT_EQ(a[e], b[e]) << what << ": " << names[t] << " element " << e;
  }
}

void check_tile_against_oracle(const reference::HeadMask& m, const reference::MaskRule& rule, int i0, int rows, int j0,
                               int cols, const std::string& note) {
  int kept = 0;
  for (int i = i0; i < i0 + rows; ++i) {
    for (int j = j0; j < j0 + cols; ++j) kept += m.keep(i, j) ? 1 : 0;
  }
  const cpu::TileClass expect = kept == 0 ? cpu::TileClass::Empty
                                : kept == rows * cols ? cpu::TileClass::Full
                                                      : cpu::TileClass::Partial;
  const std::string where = "rule (" + std::to_string(rule.len_q) + "," + std::to_string(rule.len_k) + "," +
                            std::to_string(rule.window_left) + "," + std::to_string(rule.window_right) +
                            ") tile at (" + std::to_string(i0) + "," + std::to_string(j0) + ") " + note;
  ASSERT_EQ(int(cpu::classify_tile(m, i0, i0 + rows, j0, j0 + cols)), int(expect)) << where;
  if (j0 + cols > rule.len_k) return;  // the backends never mask keys past len_k
  std::vector<float> s(size_t(rows * cols), 1.0f);
  cpu::mask_partial_tile(m, i0, rows, j0, cols, s.data(), cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      ASSERT_EQ(s[size_t(r * cols + c)] == 1.0f, m.keep(i0 + r, j0 + c)) << where << " element " << r << "," << c;
    }
  }
}

}  // namespace fastattn::testing
