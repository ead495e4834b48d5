// The sm90 backward with an additive bias (sm90/bwd/bias.cuh, BiasBwdConfig): dq, dk, dv and dbias against the
// float64 reference (bwd_case.h: FA3's rule, outputs poisoned, every element checked; dbias exactly 0 where
// no score exists). Odd sizes, the three bias dtypes and layouts, broadcast batch / heads (dbias summed by
// atomics), GQA, -inf entries and rows, causal / window, varlen with empty sequences, d 96 and 128; and the
// refusals (d 64 among them).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bwd_case.h"  // BwdCase, run_bwd_case
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

class Sm90BwdBias : public HopperTest {};

// A case with a bias of `bias_dt` over (batch or 1, bias_heads, ...), dbias asked for.
BwdCase biased(DType dt, int d, int sq, int sk, int hq, int hkv, DType bias_dt, bool per_batch, int bias_heads) {
  BwdCase c = bcase(dt, d, sq, sk);
  c.batch = 2;
  c.hq = hq;
  c.hkv = hkv;
  c.bias.on = true;
  c.bias.dtype = bias_dt;
  c.bias.per_batch = per_batch;
  c.bias.heads = bias_heads;
  c.bias.grad = true;
  return c;
}

// d 128 first: exclusive bias (plain adds, dbias bitwise run to run), odd sizes, every bias dtype.
TEST_F(Sm90BwdBias, D128ExclusiveBiasOddSizes) {
  for (DType bias_dt : {DType::F32, DType::BF16, DType::F16})
    for (auto [sq, sk] : {std::pair{1, 17}, std::pair{17, 1}, std::pair{113, 113}, std::pair{113, 300}}) {
      run_bwd_case(biased(DType::BF16, 128, sq, sk, 4, 4, bias_dt, true, 4));
    }
  run_bwd_case(biased(DType::F16, 128, 113, 257, 2, 2, DType::F16, true, 2));
}

TEST_F(Sm90BwdBias, D128LongSide4097) {
  BwdCase c = biased(DType::BF16, 128, 4097, 113, 1, 1, DType::BF16, true, 1);
  c.batch = 1;
  run_bwd_case(c);
  BwdCase k = biased(DType::BF16, 128, 113, 4097, 2, 1, DType::F32, false, 1);
  k.batch = 1;
  run_bwd_case(k);
}

// Broadcast dims: bias shared by the batch, by the q heads (1, heads_kv), GQA 4; dbias sums them.
TEST_F(Sm90BwdBias, BroadcastBiasSumsDbias) {
  run_bwd_case(biased(DType::BF16, 128, 113, 200, 4, 1, DType::BF16, false, 1));
  run_bwd_case(biased(DType::BF16, 128, 130, 77, 8, 2, DType::F32, true, 2));   // bias heads = heads_kv
  run_bwd_case(biased(DType::F16, 128, 65, 129, 4, 4, DType::F16, false, 4));   // batch shared only
  BwdCase s = biased(DType::BF16, 128, 100, 140, 4, 2, DType::BF16, true, 4);
  s.bias.layout = 2;  // dim 1 broadcast by a stride 0
  run_bwd_case(s);
  BwdCase p = biased(DType::BF16, 128, 100, 140, 2, 2, DType::BF16, true, 2);
  p.bias.layout = 1;  // rows padded: a row stride of its own
  p.bias.extra_rows = 5;
  p.bias.extra_cols = 3;
  run_bwd_case(p);
}

// -inf entries act as masks; a row of -inf everywhere has out 0, lse -inf, and zero gradients.
TEST_F(Sm90BwdBias, NegativeInfinityEntriesAndRows) {
  BwdCase c = biased(DType::BF16, 128, 113, 150, 4, 2, DType::F32, true, 4);
  c.bias.neginf = 0.3f;
  c.bias.neginf_row = 7;
  run_bwd_case(c);
  BwdCase g = biased(DType::BF16, 128, 90, 90, 4, 1, DType::BF16, false, 1);
  g.bias.neginf = 0.5f;
  g.bias.neginf_row = 0;
  run_bwd_case(g);
}

TEST_F(Sm90BwdBias, CausalAndWindow) {
  BwdCase c = biased(DType::BF16, 128, 200, 333, 4, 1, DType::BF16, true, 4);
  c.causal = true;
  run_bwd_case(c);
  BwdCase w = biased(DType::F16, 128, 257, 257, 2, 2, DType::F32, false, 1);
  w.wl = 40;
  w.wr = 7;
  run_bwd_case(w);
  BwdCase lpt = biased(DType::BF16, 128, 1100, 1100, 2, 1, DType::BF16, false, 2);  // longest-first, paired blocks
  lpt.batch = 1;
  lpt.causal = true;
  run_bwd_case(lpt);
}

TEST_F(Sm90BwdBias, VarlenWithEmptySequences) {
  BwdCase c = biased(DType::BF16, 128, 0, 0, 4, 2, DType::BF16, true, 2);
  c.lens_q = {17, 200, 0, 64, 113};
  c.lens_k = {300, 30, 5, 0, 129};
  run_bwd_case(c);
  BwdCase s = biased(DType::BF16, 128, 0, 0, 4, 4, DType::F32, false, 4);
  s.lens_q = {130, 1, 70};
  s.lens_k = {0, 250, 70};
  s.causal = true;
  run_bwd_case(s);
  BwdCase u = biased(DType::F16, 128, 300, 400, 4, 2, DType::F16, false, 2);  // seqused: rows / keys past them
  u.batch = 3;
  u.used_q = {300, 0, 129};
  u.used_k = {1, 400, 200};
  u.causal = true;
  run_bwd_case(u);
}

TEST_F(Sm90BwdBias, HeadDim96) {
  for (int d : {96}) {
    run_bwd_case(biased(DType::BF16, d, 113, 200, 4, 1, DType::BF16, false, 1));
    run_bwd_case(biased(DType::F16, d, 257, 129, 2, 2, DType::F32, true, 2));
    BwdCase c = biased(DType::BF16, d, 300, 300, 2, 2, DType::F16, true, 2);
    c.causal = true;
    c.bias.neginf = 0.2f;
    run_bwd_case(c);
    BwdCase v = biased(DType::BF16, d, 0, 0, 2, 1, DType::BF16, true, 1);
    v.lens_q = {0, 129, 33};
    v.lens_k = {40, 0, 200};
    run_bwd_case(v);
  }
}

// Review s39: dbias of its own layouts (clear_dbias's 2-D memset path): rows padded (the gaps stay poisoned),
// rows reversed (a negative row stride; before, the memset took the negative stride as its pitch and the call
// failed with "backward dbias clear"), and a single reversed row (s_q 1), exclusive and shared bias.
TEST_F(Sm90BwdBias, DbiasLayouts) {
  for (int layout : {1, 2}) {
    BwdCase c = biased(DType::BF16, 128, 113, 200, 4, 4, DType::BF16, true, 4);
    c.dbias_layout = layout;
    run_bwd_case(c);
    BwdCase shared = biased(DType::BF16, 128, 77, 130, 4, 2, DType::F32, false, 2);
    shared.dbias_layout = layout;
    run_bwd_case(shared);
    BwdCase one_row = biased(DType::BF16, 128, 1, 17, 2, 2, DType::BF16, true, 2);
    one_row.dbias_layout = layout;
    run_bwd_case(one_row);
  }
}

// Without dbias: the same kernel, no adds.
TEST_F(Sm90BwdBias, WithoutDbias) {
  BwdCase c = biased(DType::BF16, 128, 113, 200, 4, 2, DType::BF16, false, 2);
  c.bias.grad = false;
  run_bwd_case(c);
}

// Session 40's lean paths (BwdBias::lean, bias.cuh): the staged seed where a warp's rows and keys all exist,
// dbias by key pairs where its base is 8-byte aligned and its strides even, else element by element.
// Shapes with whole tiles only (192 x 384), whole tiles and an edge of one row / one key pair (129 x 258) or one
// key (129 x 257: odd dbias stride, the scalar adds), the three bias dtypes, shared batch / heads (the pairs sum
// with other adds), padded dbias rows (pitch 113 + 3 even: pairs over a padded stride; 200 + 3 odd: scalar) and
// reversed ones (a negative stride). Then the same under FASTATTN_BIAS_BWD_LEAN=0: the session-38 paths stay
// right.
void lean_cases() {
  for (DType bias_dt : {DType::BF16, DType::F32, DType::F16}) {
    run_bwd_case(biased(DType::BF16, 128, 192, 384, 2, 2, bias_dt, true, 2));
    run_bwd_case(biased(DType::BF16, 128, 129, 258, 4, 2, bias_dt, false, 2));
  }
  run_bwd_case(biased(DType::F16, 128, 129, 257, 2, 2, DType::BF16, true, 2));
  run_bwd_case(biased(DType::BF16, 96, 130, 256, 4, 4, DType::BF16, false, 1));
  for (int layout : {1, 2})
    for (int sk : {113, 200}) {
      BwdCase c = biased(DType::BF16, 128, 150, sk, 2, 2, DType::BF16, true, 2);
      c.dbias_layout = layout;
      run_bwd_case(c);
    }
  BwdCase inf = biased(DType::BF16, 128, 128, 256, 2, 2, DType::BF16, true, 2);
  inf.bias.neginf = 0.3f;
  inf.bias.neginf_row = 5;
  run_bwd_case(inf);
  BwdCase causal = biased(DType::BF16, 128, 320, 320, 2, 1, DType::F32, false, 1);
  causal.causal = true;
  run_bwd_case(causal);
}

TEST_F(Sm90BwdBias, LeanWholeAndEdgeTiles) {
  ScopedEnv on("FASTATTN_BIAS_BWD_LEAN", nullptr);
  lean_cases();
}

TEST_F(Sm90BwdBias, LeanOffSession38Paths) {
  ScopedEnv off("FASTATTN_BIAS_BWD_LEAN", "0");
  lean_cases();
}

// A batch-shared bias under a causal mask: the longest-first sections walk the batch innermost
// (lpt_order.h, bwd_lpt_batch_inner_item). Batch 3 over 1, 2 and 4 KV heads (sections of 2, 4 and 8 units,
// none a multiple of 3: KV heads' batch entries straddle two sections), odd sizes, bf16 / fp16 and an F32
// bias, GQA 2, d 96; run 1 of each case under FASTATTN_BIAS_BWD_BATCH_INNER=0 (the batch outermost): both
// orders meet the float64 reference, dk / dv bitwise equal between them.
TEST_F(Sm90BwdBias, CausalBatchSharedBatchInnerSections) {
  ScopedEnv inner("FASTATTN_BIAS_BWD_BATCH_INNER", nullptr);
  auto causal_shared = [](DType dt, int d, int sq, int sk, int hq, int hkv, DType bias_dt) {
    BwdCase c = biased(dt, d, sq, sk, hq, hkv, bias_dt, false, hq);
    c.batch = 3;
    c.causal = true;
    c.run1_off = "FASTATTN_BIAS_BWD_BATCH_INNER";
    return c;
  };
  run_bwd_case(causal_shared(DType::BF16, 128, 129, 257, 2, 2, DType::BF16));
  run_bwd_case(causal_shared(DType::BF16, 128, 320, 320, 4, 4, DType::BF16));
  run_bwd_case(causal_shared(DType::F16, 128, 257, 129, 1, 1, DType::F16));
  run_bwd_case(causal_shared(DType::BF16, 128, 113, 300, 4, 2, DType::F32));
  run_bwd_case(causal_shared(DType::BF16, 96, 320, 320, 2, 2, DType::BF16));
}

// What the bias kernel lacks is refused by name, before any output is touched.
TEST_F(Sm90BwdBias, RefusalsByName) {
  std::vector<uint16_t> host(2 * 64 * 2 * 128);
  DeviceBuffer buf(host.size() * 2), bias(size_t(64) * 64 * 4), lse(2 * 64 * 4);
  auto args = [&](int d) { return bias_refusal_args(buf.get(), lse.get(), bias.get(), d); };
  AttnArgs det = args(128);
  det.deterministic = true;
  expect_bwd_refused(det, "no deterministic mode");
  AttnArgs cap = args(128);
  cap.softcap = 20.f;
  expect_bwd_refused(cap, "no softcap");
  expect_bwd_refused(args(64), "head dims 96 and 128");
}

}  // namespace
}  // namespace fastattn::gputest
