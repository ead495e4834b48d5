// Decode at split-D head dims (MLA-style: h_q 128 over one KV head, d_qk 576 / d_v 512): the split-D
// forward's GQA packing (64-row tiles of several q heads, sched/splitd_plan.h) and split-KV (fp32
// partials merged by split_combine.cu) vs the float64 reference with FA3's rule (run_fwd_case:
// random inputs, out poisoned, every element checked, two runs bitwise equal). s_q 1 / 4, s_k 1 /
// 17 / 4097 / 20000, forced counts, the heuristic's, more splits than key blocks (splits that see
// no key), causal, varlen, GQA 16 / 1 at d 512, batch > 1, and proof that the split path ran.
#include <gtest/gtest.h>

#include <cstdint>

#include "fwd_case.h"
#include "workspace_high_water.h"

namespace fastattn::gputest {
namespace {

class Sm90FwdSplitDDecode : public HopperTest {};

FwdCase mla(int sq, int sk, int splits) {
  FwdCase c;
  c.d = 576;
  c.dv = 512;
  c.hq = 128;
  c.hkv = 1;
  c.sq = sq;
  c.sk = sk;
  c.num_splits = splits;
  return c;
}

// Packing alone (num_splits 1): 128 heads in two 64-row tiles at s_q 1, eight 16-row-of-4 tiles at s_q 4.
TEST_F(Sm90FwdSplitDDecode, PackedDecodeUnsplit) {
  for (int sq : {1, 4})
    for (int sk : {1, 17, 4097}) run_fwd_case(mla(sq, sk, 1));
}

TEST_F(Sm90FwdSplitDDecode, MlaForcedAndHeuristicSplits) {
  for (int sq : {1, 4})
    for (int sk : {1, 17, 4097})
      for (int splits : {0, 3, 7}) run_fwd_case(mla(sq, sk, splits));
  run_fwd_case(mla(1, 4097, 300));  // 33 key blocks: most splits see no key
  run_fwd_case(mla(1, 17, 2));      // one block: the second split sees none
}

TEST_F(Sm90FwdSplitDDecode, MlaLongKeys) {
  for (int sq : {1, 4}) run_fwd_case(mla(sq, 20000, 0));
  FwdCase c = mla(1, 20000, 13);
  c.dtype = DType::F16;
  c.batch = 2;
  run_fwd_case(c);
}

// Causal (bottom-right: the 4 query rows see s_k - 3 ... s_k keys), the splits' edges inside the
// last block.
TEST_F(Sm90FwdSplitDDecode, MlaCausal) {
  for (int sk : {1, 17, 4097})
    for (int splits : {1, 0, 5}) {
      FwdCase c = mla(4, sk, splits);
      c.causal = true;
      run_fwd_case(c);
    }
}

TEST_F(Sm90FwdSplitDDecode, BatchesOfDecode) {
  FwdCase c = mla(1, 4097, 0);
  c.batch = 3;
  run_fwd_case(c);
  c.sq = 4;
  c.causal = true;
  c.num_splits = 4;
  run_fwd_case(c);
}

// GQA 16 / 1 at d 512 (packed 16 heads x R rows), s_q 1 / 17 (R 32: two heads a tile), causal.
TEST_F(Sm90FwdSplitDDecode, Gqa16At512) {
  for (int sq : {1, 17})
    for (int splits : {1, 0, 5})
      for (bool causal : {false, true}) {
        FwdCase c;
        c.d = c.dv = 512;
        c.hq = 16;
        c.hkv = 1;
        c.sq = sq;
        c.sk = 4097;
        c.num_splits = splits;
        c.causal = causal;
        run_fwd_case(c);
      }
}

// Varlen is never packed (64-row tiles of one head), split or not; empty sequences included.
TEST_F(Sm90FwdSplitDDecode, VarlenSplit) {
  for (int splits : {0, 3})
    for (bool causal : {false, true}) {
      FwdCase c = mla(0, 0, splits);
      c.hq = 8;
      c.lens_q = {1, 0, 4, 70};
      c.lens_k = {4097, 5, 0, 300};
      c.causal = causal;
      run_fwd_case(c);
    }
  FwdCase c = mla(0, 0, 4);  // seqused
  c.hq = 4;
  c.lens_q = {3, 5};
  c.lens_k = {900, 40};
  c.used_q = {2, 5};
  c.used_k = {700, 0};
  run_fwd_case(c);
  c.nan_past = NanPast::All;
  run_fwd_case(c);
}

// NaN in k inside the used keys (MLA decode, one KV head): the batch entry holding it comes out NaN, unsplit
// and split (the combine kernel), the other as the reference's.
TEST_F(Sm90FwdSplitDDecode, NanInUsedKeys) {
  for (int splits : {1, 4}) {
    FwdCase c = mla(1, 1000, splits);
    c.batch = 2;
    c.nan_keys = 1;
    run_fwd_case(c);
  }
}

// The split path really runs: a split call takes its partials (splits x rows x (d_v + 1) floats)
// from fastattn's workspace pool; an unsplit one allocates nothing.
TEST_F(Sm90FwdSplitDDecode, SplitCallUsesTheWorkspace) {
  const int64_t b = 1, sq = 1, hq = 128, sk = 1000, d = 576, dv = 512;
  DeviceBuffer q(size_t(b * sq * hq * d * 2)), k(size_t(b * sk * d * 2)), v(size_t(b * sk * dv * 2)),
      o(size_t(b * sq * hq * dv * 2));
  for (const DeviceBuffer* x : {&q, &k, &v}) FA_CUDA_OK(cudaMemset(x->get(), 0, x->bytes()));
  auto high_after = [&](int splits) {
    AttnArgs a;
    a.q = make_tensor(q.get(), DType::BF16, {b, sq, hq, d}, Device::CUDA);
    a.k = make_tensor(k.get(), DType::BF16, {b, sk, 1, d}, Device::CUDA);
    a.v = make_tensor(v.get(), DType::BF16, {b, sk, 1, dv}, Device::CUDA);
    a.out = make_tensor(o.get(), DType::BF16, {b, sq, hq, dv}, Device::CUDA);
    a.num_splits = splits;
    return workspace_high_water([&] { return forward(a, nullptr); });
  };
  EXPECT_EQ(high_after(1), 0u);
  EXPECT_GE(high_after(5), 5 * uint64_t(b * sq * hq) * (dv + 1) * 4);
}

}  // namespace
}  // namespace fastattn::gputest
