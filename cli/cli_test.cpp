// Tests of the CLI's own logic: the FLOP count, the one-row reference sub-problem and the
// check's sensitivity. The library itself is tested under tests/.
#include <gtest/gtest.h>

#include <cmath>

#include "check.h"
#include "fastattn/fastattn.h"
#include "flops.h"
#include "options.h"
#include "problem.h"
#include "profile.h"
#include "profile_report.h"
#include "reference/reference.h"

namespace fastattn::cli {
namespace {

struct MaskCase {
  int64_t s_q, s_k;
  bool causal;
  int64_t left, right;
};
const MaskCase kMasks[] = {
    {17, 17, false, -1, -1}, {17, 17, true, -1, -1},  {13, 40, true, -1, -1},
    {40, 13, true, -1, -1},  {33, 20, false, 5, 3},   {20, 33, false, 0, 0},
    {29, 29, true, 4, -1},   {29, 50, true, 7, 9},    {50, 29, false, -1, 2},
    {31, 31, false, 3, -1},  {1, 1, true, -1, -1},    {64, 8, false, 2, 2},
};

RunOptions options_for(const MaskCase& m, bool backward) {
  RunOptions o;
  EXPECT_FALSE(parse_run_options({"--device", "cpu", "--dtype", "fp32"}, o));
  o.batch = 2, o.seqlen = m.s_q, o.seqlen_k = m.s_k, o.heads = 4, o.kv_heads = 2, o.dim = 16;
  o.dim_v = 8;
  o.causal = m.causal;
  o.window_left = m.left, o.window_right = m.right, o.window_set = m.left >= 0 || m.right >= 0;
  o.softcap = 5.0f;
  o.backward = backward;
  EXPECT_FALSE(resolve_defaults(o, Device::CPU));
  return o;
}

TEST(Flops, KeptPairsMatchTheOracle) {
  for (const MaskCase& m : kMasks) {
    const reference::MaskRule rule = mask_rule(m.s_q, m.s_k, m.causal, m.left, m.right);
    int64_t brute = 0;
    for (int64_t i = 0; i < m.s_q; ++i)
      for (int64_t j = 0; j < m.s_k; ++j) brute += reference::keep(rule, i, j);
    EXPECT_EQ(kept_pairs(rule), brute) << m.s_q << "x" << m.s_k;
  }
  EXPECT_EQ(forward_flops(2, 3, 64, 64, mask_rule(100, 100, false, -1, -1)), 4.0 * 2 * 3 * 100 * 100 * 64);
}

// The one-row sub-problem must give exactly what the full problem gives for that row.
TEST(Check, RowReferenceEqualsFullReference) {
  for (const MaskCase& m : kMasks) {
    const RunOptions o = options_for(m, true);
    HostInputs in = random_inputs(o);
    std::vector<std::byte> out(in.q.size() / o.dim * o.dim_v), lse(size_t(o.batch * o.heads * o.seqlen * 4));
    AttnArgs a = make_args(o, Device::CPU, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
    reference::ForwardF64 full;
    reference::BackwardF64 grads;
    ASSERT_TRUE(reference::forward_f64(a, &full).ok());
    ASSERT_TRUE(reference::backward_f64(a, q_like(o, in.dout.data(), o.dtype, o.batch, o.seqlen, o.dim_v), &grads).ok());
    const int64_t b = 1;
    for (int64_t i = 0; i < o.seqlen; ++i) {
      const RowReference r = reference_row(o, in, b, i);
      for (int64_t h = 0; h < o.heads; ++h) {
        const double want_lse = full.lse[(b * o.heads + h) * o.seqlen + i];
        if (std::isinf(want_lse)) EXPECT_EQ(r.lse[h], want_lse);
        else EXPECT_NEAR(r.lse[h], want_lse, 1e-12) << "row " << i;
        for (int64_t x = 0; x < o.dim_v; ++x)
          EXPECT_NEAR(r.out[h * o.dim_v + x], full.out[((b * o.seqlen + i) * o.heads + h) * o.dim_v + x], 1e-12);
        for (int64_t x = 0; x < o.dim; ++x)
          EXPECT_NEAR(r.dq[h * o.dim + x], grads.dq[((b * o.seqlen + i) * o.heads + h) * o.dim + x], 1e-12);
      }
    }
  }
}

TEST(Check, PassesTheCpuBackendAndCatchesACorruptedElement) {
  RunOptions o = options_for({64, 64, true, -1, -1}, false);
  o.check_rows = 64;  // every row, so the corrupted one is sampled
  HostInputs in = random_inputs(o);
  DeviceProblem p = upload(o, Device::CPU, in);
  ASSERT_TRUE(forward(p.args).ok());
  HostOutputs got{p.out.download(), p.lse.download(), {}, {}, {}};
  EXPECT_TRUE(check_against_reference(o, in, got).ok());

  const CheckReport rep = check_against_reference(o, in, got);
  float* out = reinterpret_cast<float*>(got.out.data());
  const int64_t row_elems = o.heads * o.dim_v;
  out[(rep.batch * o.seqlen + 5) * row_elems + 3] += 0.01f;
  EXPECT_FALSE(check_against_reference(o, in, got).ok());
  out[(rep.batch * o.seqlen + 5) * row_elems + 3] = NAN;
  const CheckReport nan = check_against_reference(o, in, got);
  EXPECT_EQ(nan.stats[0].bad, 1);
}

TEST(Options, BadFlagsNameTheFlag) {
  auto error = [](std::vector<std::string> args) {
    RunOptions o;
    auto e = parse_run_options(args, o);
    return e ? *e : std::string();
  };
  EXPECT_EQ(error({"--bogus"}), "unknown flag '--bogus'");
  EXPECT_EQ(error({"--seqlen"}), "--seqlen: missing value");
  EXPECT_EQ(error({"--seqlen", "x1"}), "--seqlen: expected an integer, got 'x1'");
  EXPECT_EQ(error({"--batch=0"}), "--batch: must be >= 1, got 0");
  EXPECT_EQ(error({"--window", "3"}), "--window: expected L,R (e.g. 256,0), got '3'");
  EXPECT_EQ(error({"--dtype", "fp8"}), "--dtype: expected bf16, fp16 or fp32, got 'fp8'");
  EXPECT_EQ(error({"--backward=1"}), "--backward: takes no value");
  EXPECT_EQ(error({"--num-splits", "-1"}), "--num-splits: must be >= 0, got -1");
  EXPECT_EQ(error({"--seqlen=5", "--window=-1,0", "--backward"}), "");

  RunOptions o;
  ASSERT_FALSE(parse_run_options({"--heads", "6", "--kv-heads", "4"}, o));
  EXPECT_EQ(resolve_defaults(o, Device::CPU).value_or(""), "--heads (6) must be a multiple of --kv-heads (4)");
}

TEST(Options, DefaultProblemIsCausalUnlessAWindowIsGiven) {
  RunOptions o;
  ASSERT_FALSE(resolve_defaults(o, Device::CPU));
  EXPECT_TRUE(*o.causal);
  EXPECT_EQ(o.seqlen, 1024);
  EXPECT_EQ(o.kv_heads, 2);
  RunOptions w;
  ASSERT_FALSE(parse_run_options({"--window", "8,8"}, w));
  ASSERT_FALSE(resolve_defaults(w, Device::CPU));
  EXPECT_FALSE(*w.causal);
}

TEST(Profile, TakesItsFlagsAndLeavesTheProblemFlags) {
  std::vector<std::string> args = {"--seqlen", "512", "--out=d", "--trace-block", "3,1,2", "--no-pv-sync",
                                   "--trace-skip", "1", "--dtype", "fp16", "--no-plot"};
  ProfileOptions p;
  ASSERT_FALSE(take_profile_flags(args, p));
  EXPECT_EQ(args, (std::vector<std::string>{"--seqlen", "512", "--dtype", "fp16"}));
  EXPECT_EQ(p.out_dir, "d");
  EXPECT_EQ(p.request.trace_block[0], 3);
  EXPECT_EQ(p.request.trace_block[2], 2);
  EXPECT_EQ(p.request.trace_skip, 1);
  EXPECT_FALSE(p.request.pv_sync);
  EXPECT_FALSE(p.plot);
  std::vector<std::string> bad = {"--trace-block", "1,x,2"};
  EXPECT_EQ(take_profile_flags(bad, p).value_or(""), "--trace-block: expected X,Y,Z (e.g. 0,0,0), got '1,x,2'");
  std::vector<std::string> missing = {"--out"};
  EXPECT_EQ(take_profile_flags(missing, p).value_or(""), "--out: missing value");
}

// Totals of 10 iterations over 2 tiles: every loop slot's share, the per-tile slots apart.
TEST(Profile, RegionAveragesAndTable) {
  prof::ProbeRun run;
  run.ran = true;
  run.output_identical = true;
  for (int wg = 0; wg < 2; ++wg) {
    run.buffer.totals.iterations[wg] = 10;
    run.buffer.totals.tiles[wg] = 2;
    for (int s = prof::kTilesReady; s <= prof::kIterEnd; ++s) run.buffer.totals.cycles[wg][s] = 1000 * (wg + 1);
    run.buffer.totals.cycles[wg][prof::kSoftmaxDone] = 12000;  // softmax: 1200 per iteration
    run.buffer.totals.cycles[wg][prof::kSlotPrologue] = 5000;  // 2500 per tile
  }
  const WarpgroupRegions w = warpgroup_regions(run.buffer.totals, 0);
  EXPECT_DOUBLE_EQ(w.per_slot[prof::kSoftmaxDone], 1200);
  EXPECT_DOUBLE_EQ(w.per_slot[prof::kSlotPrologue], 2500);
  EXPECT_DOUBLE_EQ(w.iteration, 7 * 100 + 1200);
  const std::string t = region_table(run, "pipeline");
  EXPECT_NE(t.find("online softmax"), std::string::npos) << t;
  EXPECT_NE(t.find("63.2%"), std::string::npos) << t;  // 1200 / 1900
  EXPECT_NE(t.find("iteration total"), std::string::npos);
  EXPECT_EQ(t.find("moved up"), std::string::npos);  // no PV-sync row without PV-sync cycles
  EXPECT_NE(t.find("bitwise identical"), std::string::npos);
  const std::string md = region_table_markdown(run, "pipeline");
  EXPECT_NE(md.find("| online softmax | 1200 | 63.2% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| **iteration total** | **1900** | 100% |"), std::string::npos) << md;
}

// Without a GPU (or without probed kernels) profile must stop with exit 3 and say why.
TEST(Profile, SaysWhyItCannotRun) {
#ifdef FASTATTN_WITH_PROFILE
  if (cuda_available() && prof::probed_kernel_built(DType::BF16, 128)) GTEST_SKIP() << "this machine can profile";
#endif
  testing::internal::CaptureStderr();
  EXPECT_EQ(profile_command({"--seqlen", "256", "--no-plot", "--out", testing::TempDir() + "/fa-profile"}), 3);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(err.find("no usable CUDA device") != std::string::npos ||
              err.find("this build has no probed kernels") != std::string::npos)
      << err;
  testing::internal::CaptureStderr();
  EXPECT_EQ(profile_command({"--device", "cpu"}), 2);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("profile runs the CUDA kernels only"), std::string::npos);
}

}  // namespace
}  // namespace fastattn::cli
