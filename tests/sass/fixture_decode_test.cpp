// Decoder and resource numbers checked on real ptxas output: the fixture kernels compiled by
// tests/sass/CMakeLists.txt (ptxas -v reports saved beside them) and the library's kernels.
#include <gtest/gtest.h>

#include <bit>
#include <fstream>
#include <map>
#include <sstream>

#include "dataflow_check.h"
#include "loader.h"
#include "loops.h"

namespace fastattn::sass {
namespace {

const std::string kDir = FASTATTN_SASS_FIXTURE_DIR;
const std::vector<std::string> kFixtures = {"spill_fixture.o", "attn_no_hgmma_sm90.cubin",
                                            "attn_hgmma_sm90.cubin", "mask_r2p_fixture.o",
                                            "mask_isetp_fixture.o"};

std::vector<Kernel> load(const std::string& file) { return load_kernels(kDir + "/" + file); }

// Loaded once per process: disassembling the library takes seconds.
const std::vector<Kernel>& all_kernels() {
  static const std::vector<Kernel> all = [] {
    std::vector<Kernel> ks;
    for (const auto& f : kFixtures)
      for (auto& k : load(f)) ks.push_back(std::move(k));
    for (auto& k : load_kernels(FASTATTN_SASS_LIBRARY)) ks.push_back(std::move(k));
    return ks;
  }();
  return all;
}

// What ptxas -v printed per (arch, mangled name).
struct PtxasInfo {
  int registers = -1, stack = -1, spill_stores = -1, spill_loads = -1;
};

std::map<std::string, PtxasInfo> read_ptxas(const std::string& file) {
  std::ifstream in(kDir + "/" + file + ".ptxas.txt");
  std::map<std::string, PtxasInfo> out;
  std::string line, key;
  while (std::getline(in, line)) {
    if (const auto p = line.find("Compiling entry function '"); p != std::string::npos) {
      const auto name_end = line.find('\'', p + 26);
      const auto arch_begin = line.find("for '", name_end) + 5;
      key = line.substr(arch_begin, line.find('\'', arch_begin) - arch_begin) + " " +
            line.substr(p + 26, name_end - p - 26);
    } else if (!key.empty() && line.find("bytes spill stores") != std::string::npos) {
      std::sscanf(line.c_str(), " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
                  &out[key].stack, &out[key].spill_stores, &out[key].spill_loads);
    } else if (!key.empty() && line.find("ptxas info    : Used ") != std::string::npos) {
      std::sscanf(line.c_str() + line.find("Used ") + 5, "%d", &out[key].registers);
    }
  }
  return out;
}

TEST(Fixtures, ResourcesMatchWhatPtxasReported) {
  int compared = 0;
  for (const auto& f : kFixtures) {
    const auto ptxas = read_ptxas(f);
    ASSERT_FALSE(ptxas.empty()) << "no ptxas -v report for " << f;
    for (const auto& k : load(f)) {
      const auto it = ptxas.find(k.key());
      ASSERT_NE(it, ptxas.end()) << k.key();
      EXPECT_EQ(k.resources.registers, it->second.registers) << k.key();
      EXPECT_EQ(k.resources.stack_bytes, it->second.stack) << k.key();
      EXPECT_EQ(k.resources.spill_store_bytes, it->second.spill_stores) << k.key();
      EXPECT_EQ(k.resources.spill_load_bytes, it->second.spill_loads) << k.key();
      ++compared;
    }
  }
  EXPECT_EQ(compared, 8);  // spill x2 archs, two sm_90a cubins, two mask objects x2 archs
}

TEST(Fixtures, SpillFixtureReallySpills) {
  for (const auto& k : load("spill_fixture.o")) {
    EXPECT_GT(k.histogram.opcode("STL"), 0) << k.arch;
    EXPECT_GT(k.histogram.opcode("LDL"), 0) << k.arch;
    EXPECT_GT(k.resources.spill_store_bytes, 0) << k.arch;
    EXPECT_LE(k.resources.registers, 24) << k.arch;
  }
}

TEST(Fixtures, R2pMaskingMatchesSeedPattern) {
  // 32 keep-bits = 4 bytes = 4 R2P, as in seed 000.
  const auto ks = load("mask_r2p_fixture.o");
  ASSERT_EQ(ks.size(), 2u);
  for (const auto& k : ks) EXPECT_EQ(k.histogram.opcode("R2P"), 4) << k.arch;
  for (const auto& k : load("mask_isetp_fixture.o")) EXPECT_EQ(k.histogram.opcode("R2P"), 0) << k.arch;
}

TEST(Fixtures, HgmmaIsInTheHotLoopAndWaitedByWarpgroupDepbar) {
  const auto ks = load("attn_hgmma_sm90.cubin");
  ASSERT_EQ(ks.size(), 1u);
  const auto& k = ks[0];
  EXPECT_EQ(k.arch, "sm_90a");
  EXPECT_GE(k.histogram.opcode("HGMMA"), 1);
  const auto loop = hottest_loop(k.code);
  ASSERT_TRUE(loop.has_value());
  bool hgmma_in_loop = false, pending = false;
  for (const auto& ins : k.code) {
    const auto op = ins.opcode();
    if (op == "HGMMA") {
      hgmma_in_loop = hgmma_in_loop || (ins.offset >= loop->head && ins.offset <= loop->latch);
      pending = true;
    }
    if (op == "WARPGROUP" && ins.mnemonic.find("DEPBAR") != std::string::npos) pending = false;
    if (op == "STG") {
      EXPECT_FALSE(pending) << "accumulator stored before the wgmma wait";
    }
  }
  EXPECT_TRUE(hgmma_in_loop);
  EXPECT_EQ(load("attn_no_hgmma_sm90.cubin")[0].histogram.opcode("HGMMA"), 0);
}

TEST(Decoder, LoadsAreWaitedOnBeforeTheirRegistersAreTouched) {
  DataflowReport total;
  for (const auto& k : all_kernels()) {
    const auto r = check_load_waits(k.code, decode_control);
    total.checked += r.checked;
    for (const auto& v : r.violations) total.violations.push_back(k.key() + ": " + v);
  }
  EXPECT_GE(total.checked, 50);
  EXPECT_TRUE(total.violations.empty()) << total.violations.size() << " violations, first: "
                                        << total.violations.front();
}

// A load and a move guarded by complementary predicates (a select between a load and a constant)
// never both run: the move is no use of the load. The real use after them still needs the wait,
// and a predicate rewritten in between voids the rule.
TEST(Decoder, ComplementaryGuardsAreNoUse) {
  auto ins = [](std::uint32_t at, const char* pred, const char* op, const char* operands, int write_sb, unsigned wait) {
    ControlCode cc;
    cc.write_sb = write_sb;
    cc.wait_mask = wait;
    Instruction i;
    i.offset = at;
    i.predicate = pred;
    i.mnemonic = op;
    i.operands = operands;
    i.high = encode_control(cc);
    return i;
  };
  const Instruction load = ins(0x00, "@P0", "LDG.E", "R24, [R2.64]", 2, 0);
  const Instruction select = ins(0x10, "@!P0", "IMAD.MOV.U32", "R24, RZ, RZ, c[0x0][0x180]", kNoScoreboard, 0);
  const Instruction use_waited = ins(0x20, "", "IADD3", "R5, R24, R1, RZ", kNoScoreboard, 1u << 2);
  const Instruction use_unwaited = ins(0x20, "", "IADD3", "R5, R24, R1, RZ", kNoScoreboard, 0);
  const Instruction rewrite = ins(0x08, "", "ISETP.NE.AND", "P0, PT, R1, RZ, PT", kNoScoreboard, 0);
  EXPECT_TRUE(check_load_waits({load, select, use_waited}, decode_control).violations.empty());
  EXPECT_EQ(check_load_waits({load, select, use_unwaited}, decode_control).violations.size(), 1u);
  EXPECT_EQ(check_load_waits({load, rewrite, select, use_waited}, decode_control).violations.size(), 1u);
}

TEST(Decoder, DataflowCheckCatchesAMisplacedField) {
  // The same check with the control field read one bit too low must find hazards: it shows the
  // previous test can fail.
  auto shifted = [](std::uint64_t hi) { return decode_control(hi << 1); };
  int violations = 0;
  for (const auto& k : all_kernels()) violations += check_load_waits(k.code, shifted).violations.size();
  EXPECT_GT(violations, 0);
}

TEST(Decoder, ReuseBitsMatchReuseOperands) {
  int with_reuse = 0;
  for (const auto& k : all_kernels()) {
    for (const auto& ins : k.code) {
      int marks = 0;
      for (auto p = ins.operands.find(".reuse"); p != std::string::npos; p = ins.operands.find(".reuse", p + 1))
        ++marks;
      EXPECT_EQ(std::popcount(ins.control.reuse), marks) << k.key() << " " << ins.mnemonic << " "
                                                         << ins.operands;
      with_reuse += marks > 0;
    }
  }
  EXPECT_GT(with_reuse, 0);
}

TEST(Decoder, PaddingNopsAreTheDocumentedWord) {
  int nops = 0;
  for (const auto& k : all_kernels()) {
    for (auto it = k.code.rbegin(); it != k.code.rend() && it->opcode() == "NOP"; ++it, ++nops)
      EXPECT_EQ(format_control(it->control), "[B------:R-:W-:Y:S00]") << k.key();
  }
  EXPECT_GT(nops, 0);
}

TEST(Library, EveryKernelHasCodeForABuiltArch) {
  for (const auto& k : all_kernels()) {
    EXPECT_FALSE(k.code.empty()) << k.key();
    EXPECT_TRUE(k.arch == "sm_80" || k.arch == "sm_90a") << k.key();
  }
}

}  // namespace
}  // namespace fastattn::sass
