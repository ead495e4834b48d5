// The split-KV combine kernel against a float64 host merge: random partial outputs and LSEs with
// splits that kept no key (lse -inf, their partial output NaN: it must not be read), rows no split
// kept a key for (out 0, lse -inf), strided and poisoned out, fp32 / bf16 / fp16 outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "util/half.h"
#include "cuda/split_combine.h"
#include "gpu_buffers.h"

namespace fastattn::gputest {
namespace {

struct CombineCase {
  int splits, batch, heads, seqlen_q, dv;
  DType dtype;
};

void check_combine(const CombineCase& c) {
  std::mt19937 gen(std::random_device{}());
  std::uniform_real_distribution<float> val(-2.f, 2.f), lse_val(-30.f, 30.f);
  const int64_t rows = int64_t(c.batch) * c.heads * c.seqlen_q;
  std::vector<float> o(size_t(c.splits * rows * c.dv)), lse(size_t(c.splits * rows));
  for (int64_t r = 0; r < rows; ++r) {
    const bool row_empty = r % 7 == 3;  // no split kept a key
    for (int s = 0; s < c.splits; ++s) {
      const bool split_empty = row_empty || (s + r) % 3 == 1;
      lse[size_t(s * rows + r)] = split_empty ? -INFINITY : lse_val(gen);
      for (int x = 0; x < c.dv; ++x) {
        o[size_t((s * rows + r) * c.dv + x)] = split_empty ? std::numeric_limits<float>::quiet_NaN() : val(gen);
      }
    }
  }
  // Host merge in float64.
  std::vector<double> want(size_t(rows * c.dv), 0.0), want_lse(size_t(rows), -INFINITY);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY;
    for (int s = 0; s < c.splits; ++s) m = std::max(m, double(lse[size_t(s * rows + r)]));
    if (m == -INFINITY) continue;
    double sum = 0;
    for (int s = 0; s < c.splits; ++s) {
      const double ls = lse[size_t(s * rows + r)];
      if (ls == -INFINITY) continue;
      const double w = std::exp(ls - m);
      sum += w;
      for (int x = 0; x < c.dv; ++x) want[size_t(r * c.dv + x)] += w * o[size_t((s * rows + r) * c.dv + x)];
    }
    for (int x = 0; x < c.dv; ++x) want[size_t(r * c.dv + x)] /= sum;
    want_lse[size_t(r)] = m + std::log(sum);
  }

  // out (b, s, h, dv + 8 pad) so the padding must stay poisoned; lse (b, h, s).
  const int es = dtype_size(c.dtype), row = c.dv + 8;
  const int64_t out_elems = int64_t(c.batch) * c.seqlen_q * c.heads * row;
  DeviceBuffer d_o(o.size() * 4), d_lse(lse.size() * 4), d_out(size_t(out_elems * es)), d_lse_out(size_t(rows * 4));
  d_o.upload(o.data());
  d_lse.upload(lse.data());
  d_out.poison();
  d_lse_out.poison();
  cuda_backend::SplitCombineParams p;
  p.splits = c.splits;
  p.dv = c.dv;
  p.batch = c.batch;
  p.heads = c.heads;
  p.seqlen_q = c.seqlen_q;
  p.o = static_cast<const float*>(d_o.get());
  p.lse = static_cast<const float*>(d_lse.get());
  p.out = d_out.get();
  p.out_dtype = c.dtype;
  p.out_stride_h = row;
  p.out_stride_s = int64_t(c.heads) * row;
  p.out_stride_b = int64_t(c.seqlen_q) * c.heads * row;
  p.lse_out = static_cast<float*>(d_lse_out.get());
  p.lse_stride_s = 1;
  p.lse_stride_h = c.seqlen_q;
  p.lse_stride_b = int64_t(c.heads) * c.seqlen_q;
  const Status st = cuda_backend::combine_splits(p, nullptr);
  ASSERT_TRUE(st.ok()) << st.message;
  FA_CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> out(size_t(out_elems * es));
  std::vector<float> got_lse(static_cast<size_t>(rows));
  d_out.download(out.data());
  d_lse_out.download(got_lse.data());

  const double rel = c.dtype == DType::F32 ? 1e-5 : c.dtype == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < c.heads; ++h) {
      for (int i = 0; i < c.seqlen_q; ++i) {
        const int64_t r = (int64_t(b) * c.heads + h) * c.seqlen_q + i;
        const int64_t base = ((int64_t(b) * c.seqlen_q + i) * c.heads + h) * row;
        for (int x = 0; x < row; ++x) {
          const float g = util::load_as_float(out.data() + (base + x) * es, c.dtype);
          if (x >= c.dv) {
            ASSERT_TRUE(std::isnan(g)) << "padding written at row " << r;
            continue;
          }
          const double w = want[size_t(r * c.dv + x)];
          ASSERT_NEAR(g, w, rel * std::max(1.0, std::fabs(w))) << "row " << r << " col " << x;
        }
        const double wl = want_lse[size_t(r)];
        if (std::isinf(wl)) {
          ASSERT_EQ(got_lse[size_t(r)], -INFINITY) << "lse row " << r;
        } else {
          ASSERT_NEAR(got_lse[size_t(r)], wl, 1e-5 * std::max(1.0, std::fabs(wl))) << "lse row " << r;
        }
      }
    }
  }
}

class SplitCombine : public HopperTest {};

TEST_F(SplitCombine, Fp32ManySplits) { check_combine({17, 2, 3, 5, 128, DType::F32}); }
TEST_F(SplitCombine, Bf16Decode) { check_combine({16, 4, 32, 1, 128, DType::BF16}); }
TEST_F(SplitCombine, Fp16OddSizes) { check_combine({3, 1, 7, 113, 72, DType::F16}); }
// More splits than a warp has lanes (the weights come in chunks of 32, the partial rows in groups
// of 16), d_v of two column steps, and d_v under a warp's 128 columns (lanes that store nothing).
TEST_F(SplitCombine, ChunksOfSplitsWideRows) { check_combine({45, 1, 3, 2, 256, DType::BF16}); }
TEST_F(SplitCombine, ManySplitsNarrowRows) { check_combine({100, 2, 5, 3, 64, DType::F16}); }
TEST_F(SplitCombine, OneSplit) { check_combine({1, 2, 2, 9, 64, DType::BF16}); }

}  // namespace
}  // namespace fastattn::gputest
