// The sm90 backward with ALiBi (AttnArgs::alibi_slopes): the bias kernel's F32 seed computes -slope |dist| / scale
// (sm90/bwd/bias.cuh, kBiasAlibi); dq, dk, dv against the float64 reference (bwd_case.h: FA3's rule, outputs
// poisoned, every element checked). Odd sizes and s_q != s_k both ways, one slope a head or a (batch, head), GQA,
// causal / window, varlen with empty sequences, seqused, causal s_q > s_k, d 96 and 128, both dtypes; and the
// refusals by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bwd_case.h"  // BwdCase, run_bwd_case

namespace fastattn::gputest {
namespace {

class Sm90BwdAlibi : public HopperTest {};

BwdCase with_alibi(DType dt, int d, int sq, int sk, int hq, int hkv, int slopes = 1) {
  BwdCase c = bcase(dt, d, sq, sk);
  c.batch = 2;
  c.hq = hq;
  c.hkv = hkv;
  c.alibi = slopes;
  return c;
}

TEST_F(Sm90BwdAlibi, D128OddSizes) {
  for (auto [sq, sk] : {std::pair{1, 17}, std::pair{17, 1}, std::pair{113, 113}, std::pair{113, 300}})
    run_bwd_case(with_alibi(DType::BF16, 128, sq, sk, 4, 4, sq == 113 ? 2 : 1));
  run_bwd_case(with_alibi(DType::F16, 128, 113, 257, 2, 2, 2));
  BwdCase l = with_alibi(DType::BF16, 128, 4097, 113, 1, 1);
  l.batch = 1;
  run_bwd_case(l);
  BwdCase k = with_alibi(DType::BF16, 128, 113, 4097, 2, 1);
  k.batch = 1;
  run_bwd_case(k);
}

TEST_F(Sm90BwdAlibi, GqaCausalWindowD96) {
  BwdCase g = with_alibi(DType::BF16, 128, 300, 400, 8, 2, 2);
  run_bwd_case(g);
  g.causal = true;
  g.sq = 400;
  run_bwd_case(g);
  BwdCase w = with_alibi(DType::F16, 128, 500, 500, 4, 4);
  w.wl = 64;
  w.wr = 16;
  run_bwd_case(w);
  for (bool causal : {false, true}) {
    BwdCase d96 = with_alibi(DType::BF16, 96, 257, 257, 4, 2, 1);
    d96.causal = causal;
    run_bwd_case(d96);
  }
}

TEST_F(Sm90BwdAlibi, VarlenEmptySequences) {
  BwdCase v = with_alibi(DType::BF16, 128, 0, 0, 4, 2, 2);
  v.lens_q = {17, 0, 300, 129, 1};
  v.lens_k = {40, 5, 300, 600, 1};
  run_bwd_case(v);
  v.causal = true;
  run_bwd_case(v);
}

// seqused on fixed-length and varlen batches (the term's distance uses each sequence's used lengths: rows past
// seqused_q and keys past seqused_k get no gradient), and causal with s_q > s_k (rows above the diagonal offset
// keep no key: dq 0).
TEST_F(Sm90BwdAlibi, SequsedAndCausalLongQueries) {
  BwdCase u = with_alibi(DType::F16, 128, 300, 400, 4, 2, 2);
  u.batch = 3;
  u.used_q = {300, 0, 129};
  u.used_k = {1, 400, 200};
  u.causal = true;
  run_bwd_case(u);
  BwdCase v = with_alibi(DType::BF16, 96, 0, 0, 4, 2, 1);
  v.lens_q = {130, 1, 70};
  v.lens_k = {0, 250, 70};
  v.used_q = {100, 1, 70};
  v.used_k = {0, 200, 3};
  run_bwd_case(v);
  for (int d : {128, 96}) {
    BwdCase l = with_alibi(DType::BF16, d, 700, 300, 4, 1, 2);
    l.causal = true;
    run_bwd_case(l);
  }
}

// What the bias kernel lacks is refused with ALiBi's name, before any output is touched.
TEST_F(Sm90BwdAlibi, RefusalsByName) {
  std::vector<uint16_t> host(2 * 64 * 2 * 128);
  DeviceBuffer buf(host.size() * 2), bias(size_t(64) * 64 * 4), lse(2 * 64 * 4), slopes(64);
  auto args = [&](int d) {
    AttnArgs a = bias_refusal_args(buf.get(), lse.get(), bias.get(), d);
    a.bias = Tensor{};
    a.alibi_slopes = make_tensor(slopes.get(), DType::F32, {2}, Device::CUDA);
    return a;
  };
  AttnArgs det = args(128);
  det.deterministic = true;
  expect_bwd_refused(det, "alibi_slopes: the CUDA backward with ALiBi has no deterministic mode");
  AttnArgs cap = args(128);
  cap.softcap = 20.f;
  expect_bwd_refused(cap, "alibi_slopes: the CUDA backward with ALiBi takes no softcap");
  expect_bwd_refused(args(64), "alibi_slopes: the CUDA backward with ALiBi runs head dims 96 and 128");
  AttnArgs both = args(128);
  both.bias = make_tensor(bias.get(), DType::F32, {1, 1, 64, 64}, Device::CUDA);
  expect_bwd_refused(both, "alibi_slopes: the CUDA backward takes ALiBi or a bias, not both");
}

}  // namespace
}  // namespace fastattn::gputest
