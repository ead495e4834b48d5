// What the masked forward tests (fwd_block_sparse_test.cpp, fwd_bitmask_test.cpp) share: the inputs
// of a case, their float64 copies, the float64 forward under a mask predicate, and the GPU run (two
// runs into poisoned outputs, checked bitwise equal). Each test keeps its mask and its case type.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fwd_case.h"
#include "reference/mask_oracle.h"
#include "util/parallel_for.h"

namespace fastattn::gputest {

// A tensor's elements as doubles, indexed (b, token, head, column) with b = 0 when varlen.
struct Doubles {
  std::vector<double> x;
  int64_t b_stride = 0, t_stride = 0, h_stride = 0;
  Doubles(const TestTensor& t, DType dt, bool varlen) {
    const int64_t h = t.shape[t.shape.size() - 2], d = t.shape.back();
    const int64_t tokens = varlen ? t.shape[0] : t.shape[1], batch = varlen ? 1 : t.shape[0];
    h_stride = d;
    t_stride = h * d;
    b_stride = varlen ? 0 : tokens * t_stride;
    x.resize(size_t(batch * tokens * t_stride));
    const std::vector<int64_t> off = t.offsets();  // logical order: the same as x's
    for (size_t i = 0; i < off.size(); ++i) x[i] = from_bits(t.host[size_t(off[i])], dt);
  }
  const double* row(int b, int64_t tok, int h) const { return &x[size_t(b * b_stride + tok * t_stride + h * h_stride)]; }
};

// Float64 forward under a mask, in out's logical order (and the LSE's layout), P rounded to the
// input dtype before P.V when `round_p` (the baseline of FA3's rule). One worker per (batch, head).
// Pair (i, j) of batch b, q head h is kept iff the window / causal / seqlen rule keeps it and
// keep(b, h, i, j) (the mask's own predicate: block bytes, bits).
template <class Keep>
void reference_forward_masked(const FwdCase& c, const CaseIndex& idx, const Keep& keep, const Doubles& q,
                              const Doubles& k, const Doubles& v, bool round_p, std::vector<double>* out,
                              std::vector<double>* lse) {
  const int dv = c.d_v();
  const int64_t total_q = idx.total_q(c);
  out->assign(size_t(total_q * c.hq * dv), 0.0);
  lse->assign(size_t(total_q * c.hq), -std::numeric_limits<double>::infinity());
  const double scale = float(1.0 / std::sqrt(double(c.d)));  // the resolved scale is a float
  const int64_t items = int64_t(idx.batch) * c.hq;
  util::parallel_for(items, util::worker_count(0, items), [&](int64_t item, int) {
    const int b = int(item / c.hq), h = int(item % c.hq), hk = h / (c.hq / c.hkv);
    const int rows_q = idx.varlen ? idx.cu_q[b + 1] - idx.cu_q[b] : c.sq;
    const int rows_k = idx.varlen ? idx.cu_k[b + 1] - idx.cu_k[b] : c.sk;
    const int64_t q0 = idx.varlen ? idx.cu_q[b] : 0, k0 = idx.varlen ? idx.cu_k[b] : 0;
    const int bq = idx.varlen ? 0 : b;  // Doubles' batch index
    const int len_q = idx.used_q.empty() ? rows_q : std::min(idx.used_q[b], rows_q);
    const int len_k = idx.used_k.empty() ? rows_k : std::min(idx.used_k[b], rows_k);
    const reference::MaskRule rule{len_q, len_k, c.wl, c.causal ? 0 : c.wr};
    std::vector<double> s(size_t(std::max(rows_k, 1))), o(static_cast<size_t>(dv));
    std::vector<char> kept(size_t(std::max(rows_k, 1)));
    for (int i = 0; i < rows_q; ++i) {
      const int64_t row = idx.varlen ? q0 + i : int64_t(b) * c.sq + i;  // token in out's logical order
      const double* qr = q.row(bq, q0 + i, h);
      double m = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < rows_k; ++j) {
        kept[size_t(j)] = reference::keep(rule, i, j) && keep(b, h, i, j);
        if (!kept[size_t(j)]) continue;
        const double* kr = k.row(bq, k0 + j, hk);
        double x = 0;
        for (int e = 0; e < c.d; ++e) x += qr[e] * kr[e];
        x *= scale;
        s[size_t(j)] = c.softcap > 0 ? c.softcap * std::tanh(x / c.softcap) : x;
        m = std::max(m, s[size_t(j)]);
      }
      if (m == -std::numeric_limits<double>::infinity()) continue;  // no kept key: 0 / -inf
      std::fill(o.begin(), o.end(), 0.0);
      double sum = 0;
      for (int j = 0; j < rows_k; ++j) {
        if (!kept[size_t(j)]) continue;
        const double e = std::exp(s[size_t(j)] - m);
        sum += e;
        const double pe = round_p ? round_to(e, c.dtype) : e;
        const double* vr = v.row(bq, k0 + j, hk);
        for (int x = 0; x < dv; ++x) o[size_t(x)] += pe * vr[x];
      }
      for (int x = 0; x < dv; ++x) (*out)[size_t((row * c.hq + h) * dv + x)] = o[size_t(x)] / sum;
      const int64_t li = idx.varlen ? int64_t(h) * total_q + row : (int64_t(b) * c.hq + h) * c.sq + i;
      (*lse)[size_t(li)] = m + std::log(sum);
    }
  });
}

// The GPU outputs of one case (two runs, or two replays of one captured call), checked bitwise equal.
struct GpuRun {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

// Runs case c on the GPU into poisoned outputs, set_mask(args) giving the call its mask (or none);
// returns the first of two bitwise-equal runs (or replays of one captured call when c.graph).
template <class SetMask>
void run_gpu_masked(const FwdCase& c, const CaseIndex& idx, TestTensor& q, TestTensor& k, TestTensor& v,
                    TestTensor& out, const SetMask& set_mask, GpuRun* result) {
  const size_t lse_n = size_t(std::max<int64_t>(int64_t(c.hq) * idx.total_q(c), 1));
  DeviceBuffer lse_dev(lse_n * 4);
  auto args = [&] {
    AttnArgs a;
    a.q = q.view(q.dev->get(), c.dtype, Device::CUDA);
    a.k = k.view(k.dev->get(), c.dtype, Device::CUDA);
    a.v = v.view(v.dev->get(), c.dtype, Device::CUDA);
    a.out = out.view(out.dev->get(), c.dtype, Device::CUDA);
    a.lse = idx.lse(c, lse_dev.get(), Device::CUDA);
    idx.apply(a, c, true);
    set_mask(a);
    return a;
  };
  CapturedCall graph;
  if (c.graph) {
    AttnArgs a = args();
    a.check_index_arrays = false;
    const std::string err = graph.capture([&](cudaStream_t s) { return forward(a, s); });
    ASSERT_TRUE(err.empty()) << err;
  }
  GpuRun runs[2];
  for (GpuRun& r : runs) {
    out.dev->poison();
    lse_dev.poison();
    if (c.graph) {
      FA_CUDA_OK(graph.replay());
    } else {
      const Status st = forward(args(), nullptr);
      ASSERT_TRUE(st.ok()) << st.message;
    }
    FA_CUDA_OK(cudaDeviceSynchronize());
    r.out.resize(out.host.size());
    r.lse.resize(lse_n);
    out.dev->download(r.out.data());
    lse_dev.download(r.lse.data());
  }
  ASSERT_EQ(std::memcmp(runs[0].out.data(), runs[1].out.data(), runs[0].out.size() * 2), 0) << "out differs between runs";
  ASSERT_EQ(std::memcmp(runs[0].lse.data(), runs[1].lse.data(), runs[0].lse.size() * 4), 0) << "lse differs between runs";
  *result = std::move(runs[0]);
}

// Inputs of a case: q, k, v drawn from N(0, 1) (NaN past seqused: c.nan_past), out with c.out_pad
// elements after each row.
struct CaseTensors {
  TestTensor q, k, v, out;
  CaseTensors(const FwdCase& c, const CaseIndex& idx, std::mt19937& rng)
      : q(idx.shape(c.sq, idx.cu_q.back(), c.hq, c.d), c.row_pad), k(idx.shape(c.sk, idx.cu_k.back(), c.hkv, c.d), c.row_pad),
        v(idx.shape(c.sk, idx.cu_k.back(), c.hkv, c.d_v()), c.row_pad),
        out(idx.shape(c.sq, idx.cu_q.back(), c.hq, c.d_v()), c.out_pad) {
    std::normal_distribution<float> normal(0.f, 1.f);
    for (TestTensor* t : {&q, &k, &v}) {
      for (auto& x : t->host) x = to_bits(normal(rng), c.dtype);
      t->dev->upload(t->host.data());
    }
    poison_past_used(c, idx, q, k, v);
  }
};

}  // namespace fastattn::gputest
