// Listing parser, opcode histogram and loop finder on a known cuobjdump -sass snippet.
#include <gtest/gtest.h>

#include "histogram.h"
#include "loops.h"
#include "opcode_family.h"
#include "sass_text.h"

namespace fastattn::sass {
namespace {

// A small sm_90a kernel in cuobjdump's layout: a loop from 0x30 to 0x90, an R2P masking
// sequence, EXIT, the trap branch and padding NOPs. LDC/LDG/IMAD/ISETP/NOP words are ptxas
// output; the others carry control words written for this test (stalls noted below).
constexpr const char* kListing = R"SASS(
	code for sm_90a
		Function : _Z6maskedPfi
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
                                                                               /* 0x000fe20000000800 */
        /*0010*/                   LDG.E R0, desc[UR4][R2.64] ;                /* 0x0000000402007981 */
                                                                               /* 0x000ea2000c1e1900 */
        /*0020*/                   IMAD.WIDE R68, R5.reuse, 0x4, R12 ;         /* 0x0000000405447825 */
                                                                               /* 0x040fe200078e020c */
        /*0030*/                   ISETP.GE.AND P0, PT, R7, 0x1, PT ;          /* 0x000000010700780c */
                                                                               /* 0x002fe40003f06270 */
        /*0040*/                   R2P PR, R9, 0x7f ;                          /* 0x0000007f09007804 */
                                                                               /* 0x000fe40000000000 */
        /*0050*/                   FSEL R15, R36, -INF , P6 ;                  /* 0xff800000240f7808 */
                                                                               /* 0x000fe40003000000 */
        /*0060*/                   R2P PR, R9.B1, 0x7f ;                       /* 0x0000007f09007804 */
                                                                               /* 0x000fe40000001000 */
        /*0070*/                   FFMA R8, R4, R6, R8 ;                       /* 0x0000000604087223 */
                                                                               /* 0x000fc80000000008 */
        /*0080*/                   MUFU.EX2 R8, R8 ;                           /* 0x0000000800087308 */
                                                                               /* 0x000e240000000800 */
        /*0090*/               @P0 BRA 0x30 ;                                  /* 0xfffffffc00e40947 */
                                                                               /* 0x001fea000383ffff */
        /*00a0*/                   STG.E desc[UR4][R2.64], R8 ;                /* 0x0000000802007986 */
                                                                               /* 0x000fe2000c101904 */
        /*00b0*/                   EXIT ;                                      /* 0x000000000000794d */
                                                                               /* 0x000fea0003800000 */
        /*00c0*/                   BRA 0xc0;                                   /* 0xfffffffc00fc7947 */
                                                                               /* 0x000fc0000383ffff */
        /*00d0*/                   NOP;                                        /* 0x0000000000007918 */
                                                                               /* 0x000fc00000000000 */
        /*00e0*/                   NOP;                                        /* 0x0000000000007918 */
                                                                               /* 0x000fc00000000000 */
		..........
)SASS";

TEST(Listing, ParsesKernelArchAndEveryInstruction) {
  const auto kernels = parse_sass_listing(kListing);
  ASSERT_EQ(kernels.size(), 1u);
  const auto& k = kernels[0];
  EXPECT_EQ(k.name, "_Z6maskedPfi");
  EXPECT_EQ(k.arch, "sm_90a");
  ASSERT_EQ(k.code.size(), 15u);
  EXPECT_EQ(k.code[1].mnemonic, "LDG.E");
  EXPECT_EQ(k.code[1].opcode(), "LDG");
  EXPECT_EQ(k.code[1].operands, "R0, desc[UR4][R2.64]");
  EXPECT_EQ(k.code[1].low, 0x0000000402007981ull);
  EXPECT_EQ(k.code[1].control.write_sb, 2);
  EXPECT_EQ(k.code[9].predicate, "@P0");
  EXPECT_EQ(k.code[9].branch_target(), 0x30u);
  EXPECT_EQ(k.code[9].control.wait_mask, 1u);  // waits for MUFU's W0
  EXPECT_EQ(k.code[12].branch_target(), 0xc0u);
  EXPECT_FALSE(k.code[10].branch_target().has_value());
}

TEST(Listing, RejectsInstructionsWithoutEncoding) {
  // nvdisasm without -hex prints no encodings: the control code would be unknown.
  EXPECT_THROW(parse_sass_listing("\tFunction : k\n        /*0000*/   EXIT ;\n"), std::runtime_error);
}

TEST(Histogram, CountsOpcodesAndFamiliesWithoutTrailingPadding) {
  const auto h = count_instructions(parse_sass_listing(kListing)[0].code);
  EXPECT_EQ(h.total, 13);  // the two padding NOPs are left out, the trap BRA is code
  EXPECT_EQ(h.opcode("R2P"), 2);
  EXPECT_EQ(h.opcode("BRA"), 2);
  EXPECT_EQ(h.opcode("NOP"), 0);
  EXPECT_EQ(h.opcode("HGMMA"), 0);
  EXPECT_EQ(h.family("predicate"), 3);   // ISETP + 2 R2P
  EXPECT_EQ(h.family("fp32"), 2);        // FSEL + FFMA
  EXPECT_EQ(h.family("mufu"), 1);
  EXPECT_EQ(h.family("mem.global"), 2);  // LDG + STG
  EXPECT_EQ(h.family("mem.const"), 1);
  EXPECT_EQ(h.family("branch"), 3);      // 2 BRA + EXIT
  int sum = 0;
  for (const auto& [f, n] : h.by_family) sum += n;
  EXPECT_EQ(sum, h.total);
}

TEST(OpcodeFamily, KnownAndUnknownOpcodes) {
  EXPECT_EQ(opcode_family("HGMMA"), "tensor");
  EXPECT_EQ(opcode_family("HMMA"), "tensor");
  EXPECT_EQ(opcode_family("P2R"), "predicate");
  EXPECT_EQ(opcode_family("PLOP3"), "predicate");
  EXPECT_EQ(opcode_family("LDSM"), "mem.shared");
  EXPECT_EQ(opcode_family("LDL"), "mem.local");
  EXPECT_EQ(opcode_family("UTMALDG"), "mem.tma");
  EXPECT_EQ(opcode_family("SYNCS"), "barrier");
  EXPECT_EQ(opcode_family("NOT_AN_OPCODE"), "other");
}

TEST(Loops, FindsTheBackwardBranchBodyAndIgnoresTheTrap) {
  const auto code = parse_sass_listing(kListing)[0].code;
  const auto loops = find_loops(code);
  ASSERT_EQ(loops.size(), 1u);  // BRA 0xc0 at 0xc0 is the post-EXIT trap, not a loop
  const auto hot = hottest_loop(code);
  ASSERT_TRUE(hot.has_value());
  EXPECT_EQ(hot->head, 0x30u);
  EXPECT_EQ(hot->latch, 0x90u);
  EXPECT_EQ(hot->instructions, 7);
  // Stalls of 0x30..0x90: ISETP 2, R2P 2, FSEL 2, R2P 2, FFMA 4, MUFU 2, BRA 5.
  EXPECT_EQ(hot->stall_cycles, 19);
}

TEST(Loops, InnermostOfNestedLoopsIsHottest) {
  auto ins = [](std::uint32_t off, const char* m, const char* ops, int stall) {
    Instruction i;
    i.offset = off;
    i.mnemonic = m;
    i.operands = ops;
    i.control.stall = stall;
    return i;
  };
  const std::vector<Instruction> code = {
      ins(0x00, "IMAD", "R0, R1, R2, R3", 1), ins(0x10, "FFMA", "R4, R4, R5, R6", 4),
      ins(0x20, "FFMA", "R4, R4, R5, R6", 4), ins(0x30, "BRA", "0x10", 5),
      ins(0x40, "IADD3", "R0, R0, 1, RZ", 2), ins(0x50, "BRA", "0x0", 5),
      ins(0x60, "EXIT", "", 5)};
  const auto loops = find_loops(code);
  ASSERT_EQ(loops.size(), 2u);
  const auto hot = hottest_loop(code);
  ASSERT_TRUE(hot.has_value());
  EXPECT_EQ(hot->head, 0x10u);
  EXPECT_EQ(hot->depth, 1);
  EXPECT_EQ(hot->instructions, 3);
  EXPECT_EQ(hot->stall_cycles, 13);
}

// A KV-block loop (HGMMA) with a tile-walk loop inside it (no tensor op): the block loop is hot,
// not the inner walk loop; with a second HGMMA loop nested inside, that one is.
TEST(Loops, TensorLoopWinsOverAnInnerScalarLoop) {
  auto ins = [](std::uint32_t off, const char* m, const char* ops) {
    Instruction i;
    i.offset = off;
    i.mnemonic = m;
    i.operands = ops;
    i.control.stall = 1;
    return i;
  };
  std::vector<Instruction> code = {
      ins(0x00, "HGMMA.64x128x16.F32.BF16", "R24, gdesc[UR4], R24, gsb0"), ins(0x10, "IMAD", "R0, R1, R2, R3"),
      ins(0x20, "IADD3", "R0, R0, 1, RZ"), ins(0x30, "BRA", "0x10"),  // the walk loop 0x10..0x30
      ins(0x40, "FFMA", "R4, R4, R5, R6"), ins(0x50, "BRA", "0x0"),   // the block loop 0x00..0x50
      ins(0x60, "EXIT", "")};
  auto hot = hottest_loop(code);
  ASSERT_TRUE(hot.has_value());
  EXPECT_EQ(hot->head, 0x0u);
  EXPECT_EQ(hot->latch, 0x50u);
  EXPECT_EQ(hot->tensor_ops, 1);
  code[1].mnemonic = "HGMMA.64x128x16.F32.BF16";  // now the inner loop does tensor work too
  code[1].operands = "R24, gdesc[UR4], R24, gsb0";
  hot = hottest_loop(code);
  ASSERT_TRUE(hot.has_value());
  EXPECT_EQ(hot->head, 0x10u);
  EXPECT_EQ(hot->latch, 0x30u);
}

}  // namespace
}  // namespace fastattn::sass
