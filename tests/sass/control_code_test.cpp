// Control-code decoder against encodings ptxas emitted (nvcc 13.0, sm_90a; second 64-bit word
// of each instruction, as cuobjdump -sass prints it).
#include <gtest/gtest.h>

#include "control_code.h"

namespace fastattn::sass {
namespace {

TEST(ControlCode, NopPaddingIsNoBarrierYieldStallZero) {
  // The NOP that pads every kernel's .text: CuAssembler documents it as [B------:R-:W-:Y:S00].
  const auto cc = decode_control(0x000fc00000000000ull);
  EXPECT_EQ(cc.stall, 0);
  EXPECT_TRUE(cc.yield);
  EXPECT_EQ(cc.write_sb, kNoScoreboard);
  EXPECT_EQ(cc.read_sb, kNoScoreboard);
  EXPECT_EQ(cc.wait_mask, 0u);
  EXPECT_EQ(cc.reuse, 0u);
  EXPECT_EQ(format_control(cc), "[B------:R-:W-:Y:S00]");
}

TEST(ControlCode, GlobalLoadSetsWriteScoreboard) {
  // /*0050*/ LDG.E R0, desc[UR4][R2.64]: variable latency, so its result is tracked by SB2.
  const auto cc = decode_control(0x000ea2000c1e1900ull);
  EXPECT_EQ(cc.write_sb, 2);
  EXPECT_EQ(cc.read_sb, kNoScoreboard);
  EXPECT_FALSE(cc.yield);
  EXPECT_EQ(cc.stall, 1);
  EXPECT_EQ(format_control(cc), "[B------:R-:W2:-:S01]");
}

TEST(ControlCode, GlobalLoadAlsoReleasesAddressThroughReadScoreboard) {
  // /*0080*/ LDG.E R3, desc[UR4][R12.64]: R12 is rewritten soon after, so it takes SB0 as read SB.
  EXPECT_EQ(format_control(decode_control(0x0000e6000c1e1900ull)), "[B------:R0:W3:-:S03]");
}

TEST(ControlCode, ConsumerWaitsOnProducersScoreboard) {
  // /*0030*/ LDC.64 R32, c[0x0][0x210] sets W0; /*0040*/ IMAD.WIDE R2, R5, 0x4, R32 reads R32.
  const auto producer = decode_control(0x000e240000000a00ull);
  const auto consumer = decode_control(0x001fca00078e0220ull);
  EXPECT_EQ(producer.write_sb, 0);
  EXPECT_TRUE(consumer.waits_on(0));
  EXPECT_EQ(consumer.wait_mask, 1u);
  EXPECT_EQ(format_control(consumer), "[B0-----:R-:W-:Y:S05]");
}

TEST(ControlCode, SharedStoreReadScoreboardGuardsSourceRewrite) {
  // /*00d0*/ STS.U16 [R2], R3 sets R2; /*00e0*/ IMAD.IADD R3, R6, 0x1, R3 overwrites R3 and so
  // must wait until the store has read it.
  const auto store = decode_control(0x0005e40000000400ull);
  const auto rewrite = decode_control(0x004fca00078e0203ull);
  EXPECT_EQ(store.read_sb, 2);
  EXPECT_EQ(store.write_sb, kNoScoreboard);
  EXPECT_EQ(format_control(rewrite), "[B--2---:R-:W-:Y:S05]");
}

TEST(ControlCode, BarrierAndTheLoadItsSuccessorWaitsFor) {
  // /*0200*/ BAR.SYNC.DEFER_BLOCKING 0x0, then /*0210*/ ISETP on R7 loaded by LDC (W1) at 0x20.
  EXPECT_EQ(format_control(decode_control(0x000fe20000010000ull)), "[B------:R-:W-:-:S01]");
  EXPECT_EQ(decode_control(0x000e620000000800ull).write_sb, 1);
  EXPECT_EQ(format_control(decode_control(0x002fe40003f06270ull)), "[B-1----:R-:W-:-:S02]");
}

TEST(ControlCode, HgmmaTracksThroughWarpgroupBarrierNotScoreboards) {
  // HGMMA ... gsb0 then WARPGROUP.DEPBAR.LE gsb0: the wait is an instruction, not control bits.
  EXPECT_EQ(format_control(decode_control(0x000fe2000b800818ull)), "[B------:R-:W-:-:S01]");
  EXPECT_EQ(format_control(decode_control(0x000fe40000010000ull)), "[B------:R-:W-:-:S02]");
}

TEST(ControlCode, ReuseFlagOfOperandA) {
  // /*0070*/ IMAD.WIDE R68, R5.reuse, 0x4, R12
  const auto cc = decode_control(0x040fe200078e020cull);
  EXPECT_EQ(cc.reuse, 1u);
  EXPECT_EQ(format_reuse(cc.reuse), "A---");
}

TEST(ControlCode, EncodeIsInverseOfDecodeOnEveryField) {
  ControlCode cc;
  cc.stall = 13;
  cc.yield = true;
  cc.write_sb = 4;
  cc.read_sb = 5;
  cc.wait_mask = 0x29;
  cc.reuse = 0xa;
  const auto hi = encode_control(cc);
  EXPECT_EQ(hi & ((1ull << 41) - 1), 0u) << "control bits must stay above bit 41";
  EXPECT_EQ(decode_control(hi), cc);
  EXPECT_EQ(format_control(cc), "[B0--3-5:R5:W4:Y:S13]");
  EXPECT_EQ(format_reuse(cc.reuse), "-B-D");
}

TEST(ControlCode, FieldsDoNotBleedIntoEachOther) {
  for (int bit = 41; bit < 62; ++bit) {
    const auto cc = decode_control(1ull << bit);
    int fields_set = (cc.stall != 0) + (!cc.yield) + (cc.write_sb != 0) + (cc.read_sb != 0) +
                     (cc.wait_mask != 0) + (cc.reuse != 0);
    // A single set bit changes exactly one field away from its all-zero value (where yield is
    // set and both scoreboards read 0).
    EXPECT_EQ(fields_set, 1) << "bit " << bit;
  }
}

}  // namespace
}  // namespace fastattn::sass
