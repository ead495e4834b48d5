// Rules parsing, gate evaluation and the diff table on synthetic kernels.
#include <gtest/gtest.h>

#include <sstream>

#include "diff.h"
#include "gates.h"
#include "rules.h"

namespace fastattn::sass {
namespace {

Kernel make(const std::string& demangled, const std::string& arch,
            std::map<std::string, int> opcodes, int regs = 64) {
  Kernel k;
  k.name = "_Z_" + demangled;
  k.demangled = demangled;
  k.arch = arch;
  k.resources.registers = regs;
  for (const auto& [op, n] : opcodes) {
    k.histogram.by_opcode[op] = n;
    k.histogram.total += n;
  }
  return k;
}

const GateResult* find(const std::vector<GateResult>& rs, const std::string& kernel, int line) {
  for (const auto& r : rs)
    if (r.kernel->demangled == kernel && r.rule->line == line) return &r;
  return nullptr;
}

constexpr const char* kRules =
    "# comment\n"
    "*       .                 no-local\n"
    "sm_90a  (^|[^A-Za-z])attn require HGMMA except=combine\n"
    "*       \\b(Causal|Local) max ISETP 10   # trailing comment\n"
    "sm_80,sm_86 .             max-regs 128\n";

TEST(Rules, ParsesEveryForm) {
  const auto rules = parse_rules(kRules);
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].kind, CheckKind::NoLocal);
  EXPECT_TRUE(rules[0].archs.empty());
  EXPECT_EQ(rules[1].kind, CheckKind::Require);
  EXPECT_EQ(rules[1].opcode, "HGMMA");
  EXPECT_EQ(rules[1].except_pattern, "combine");
  EXPECT_EQ(rules[2].kind, CheckKind::MaxCount);
  EXPECT_EQ(rules[2].limit, 10);
  EXPECT_EQ(rules[2].line, 4);
  EXPECT_EQ(rules[3].archs, (std::vector<std::string>{"sm_80", "sm_86"}));
}

TEST(Rules, MalformedLinesNameTheLine) {
  EXPECT_THROW(parse_rules("* . require\n"), RuleError);
  EXPECT_THROW(parse_rules("* . max ISETP lots\n"), RuleError);
  EXPECT_THROW(parse_rules("* ( no-local\n"), RuleError);
  try {
    parse_rules("\n\n* . frobnicate\n");
    FAIL() << "expected RuleError";
  } catch (const RuleError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

TEST(Rules, ArchKernelAndExceptMatching) {
  const auto rules = parse_rules(kRules);
  EXPECT_TRUE(rules[1].applies_to("sm_90a", "attn_fwd<Causal>"));
  EXPECT_FALSE(rules[1].applies_to("sm_80", "attn_fwd<Causal>"));
  EXPECT_FALSE(rules[1].applies_to("sm_90a", "fastattn::helper()"));  // 'attn' inside a word
  EXPECT_FALSE(rules[1].applies_to("sm_90a", "attn_combine()"));
  EXPECT_TRUE(rules[2].applies_to("sm_80", "fwd<fastattn::mask::Local>"));
  EXPECT_FALSE(rules[2].applies_to("sm_80", "fwd<fastattn::mask::None>"));
}

TEST(Gates, PassAndFailWithNumbers) {
  const auto rules = parse_rules(kRules);
  std::vector<Kernel> ks = {
      make("attn_fwd<Causal>", "sm_90a", {{"HGMMA", 64}, {"ISETP", 12}, {"R2P", 4}}),
      make("attn_fwd_nomma", "sm_90a", {{"FFMA", 100}, {"LDL", 3}, {"STL", 2}}),
      make("attn_fwd<None>", "sm_80", {{"HMMA", 32}}, 200),
  };
  ks[1].resources.spill_store_bytes = 8;
  const auto rs = evaluate_gates(rules, ks);

  const auto* isetp = find(rs, "attn_fwd<Causal>", 4);
  ASSERT_NE(isetp, nullptr);
  EXPECT_FALSE(isetp->passed);
  EXPECT_EQ(isetp->detail, "ISETP=12 (allowed: <= 10)");

  EXPECT_TRUE(find(rs, "attn_fwd<Causal>", 3)->passed);
  EXPECT_TRUE(find(rs, "attn_fwd<Causal>", 2)->passed);
  EXPECT_FALSE(find(rs, "attn_fwd_nomma", 3)->passed);
  const auto* local = find(rs, "attn_fwd_nomma", 2);
  EXPECT_FALSE(local->passed);
  EXPECT_NE(local->detail.find("LDL=3 STL=2 spill stores=8 B"), std::string::npos) << local->detail;
  EXPECT_EQ(find(rs, "attn_fwd<None>", 3), nullptr);  // HGMMA rule is sm_90a only
  EXPECT_FALSE(find(rs, "attn_fwd<None>", 5)->passed);
  EXPECT_EQ(find(rs, "attn_fwd<None>", 5)->detail, "registers=200 (budget: 128)");

  std::ostringstream os;
  EXPECT_EQ(print_gate_results(os, rs, ks.size(), false), 4);
  EXPECT_NE(os.str().find("FAIL sm_90a attn_fwd_nomma"), std::string::npos);
  EXPECT_EQ(os.str().find("PASS"), std::string::npos);
  EXPECT_NE(os.str().find("3 kernels, 7 checks, 4 failed"), std::string::npos) << os.str();
}

// A pipelined wgmma chain closes its group (gsb0) on its last HGMMA only; ptxas's serialized
// fallback closes one on every HGMMA.
TEST(Gates, PipelinedHgmma) {
  const auto rules = parse_rules("sm_90a fwd pipelined-hgmma\n");
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].kind, CheckKind::PipelinedHgmma);
  EXPECT_THROW(parse_rules("sm_90a fwd pipelined-hgmma 3\n"), RuleError);

  auto chain = [](const std::string& name, int hgmmas, bool serialized) {
    Kernel k = make(name, "sm_90a", {});
    for (int i = 0; i < hgmmas; ++i) {
      Instruction ins;
      ins.offset = uint32_t(32 * i);
      ins.mnemonic = "HGMMA.64x128x16.F32.BF16";
      ins.operands = std::string("R24, gdesc[UR20], R24") + (serialized || i == hgmmas - 1 ? ", gsb0" : "");
      k.code.push_back(ins);
      Instruction other;
      other.offset = ins.offset + 16;
      other.mnemonic = "UIADD3";
      other.operands = "UR22, UR18, 0x2, URZ";
      k.code.push_back(other);
    }
    return k;
  };
  const std::vector<Kernel> ks = {chain("fwd_pipelined", 8, false), chain("fwd_serialized", 8, true)};
  const auto rs = evaluate_gates(rules, ks);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_TRUE(find(rs, "fwd_pipelined", 1)->passed);
  const auto* bad = find(rs, "fwd_serialized", 1);
  EXPECT_FALSE(bad->passed);
  EXPECT_EQ(bad->detail.rfind("HGMMA=8, closing a group (gsb0)=8", 0), 0u) << bad->detail;
}

// The clock-read rules of the profiling build (issue #6): operands, not opcodes, tell a clock read
// (CS2R R8, SR_CLOCKLO) from a register zeroing (CS2R R4, SRZ).
TEST(Gates, OperandRules) {
  const auto rules = parse_rules(
      "* . forbid-operand SR_CLOCK\n"
      "* probed require-operand SR_CLOCK\n");
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].kind, CheckKind::ForbidOperand);
  EXPECT_EQ(rules[1].kind, CheckKind::RequireOperand);
  EXPECT_EQ(rules[1].operand_pattern, "SR_CLOCK");
  EXPECT_THROW(parse_rules("* . forbid-operand\n"), RuleError);
  EXPECT_THROW(parse_rules("* . require-operand (\n"), RuleError);

  auto with_code = [](const std::string& name, std::vector<std::pair<std::string, std::string>> code) {
    Kernel k = make(name, "sm_90a", {});
    for (size_t i = 0; i < code.size(); ++i) {
      Instruction ins;
      ins.offset = uint32_t(16 * i);
      ins.mnemonic = code[i].first;
      ins.operands = code[i].second;
      k.code.push_back(ins);
    }
    return k;
  };
  const std::vector<Kernel> ks = {
      with_code("fwd_default", {{"CS2R", "R4, SRZ"}, {"FFMA", "R1, R2, R3, R4"}}),
      with_code("fwd_probed", {{"CS2R", "R4, SRZ"}, {"CS2R", "R8, SR_CLOCKLO"}, {"S2UR", "UR4, SR_CLOCKLO"}}),
  };
  const auto rs = evaluate_gates(rules, ks);
  EXPECT_TRUE(find(rs, "fwd_default", 1)->passed);
  EXPECT_EQ(find(rs, "fwd_default", 2), nullptr);
  const auto* forbid = find(rs, "fwd_probed", 1);
  EXPECT_FALSE(forbid->passed);
  EXPECT_EQ(forbid->detail,
            "instructions with operands matching /SR_CLOCK/: 2 (allowed: 0), first at /*0010*/ CS2R R8, SR_CLOCKLO");
  EXPECT_TRUE(find(rs, "fwd_probed", 2)->passed);
}

TEST(Gates, NoKernelsPassesVacuously) {
  std::ostringstream os;
  EXPECT_EQ(print_gate_results(os, evaluate_gates(parse_rules(kRules), {}), 0, false), 0);
}

TEST(Diff, DeltaFormatsLikeSeed000) {
  EXPECT_EQ(format_delta(3104, 3072, true), "-32 (-1%)");
  EXPECT_EQ(format_delta(7296, 6217, true), "-1079 (-15%)");
  EXPECT_EQ(format_delta(0, 24, false), "+24");
  EXPECT_EQ(format_delta(70, 70, false), "0");
  EXPECT_EQ(format_delta(0, 5, true), "+5");
}

TEST(Diff, TablePerKernelWithPinnedAndChangedOpcodes) {
  const std::vector<Kernel> old_b = {
      make("fwd<Causal>", "sm_90a", {{"R2P", 0}, {"FSEL", 200}, {"ISETP", 225}, {"SHF", 104}}),
      make("gone", "sm_80", {{"FFMA", 1}})};
  const std::vector<Kernel> new_b = {
      make("fwd<Causal>", "sm_90a", {{"R2P", 24}, {"FSEL", 200}, {"ISETP", 22}, {"SHF", 105}}),
      make("fresh", "sm_80", {{"FFMA", 1}})};
  std::ostringstream os;
  const int changed = print_diff(os, old_b, new_b, {{"R2P", "FSEL", "ISETP"}, false});
  const std::string s = os.str();
  EXPECT_EQ(changed, 3);
  EXPECT_NE(s.find("| Metric | Old | New | Delta |"), std::string::npos);
  EXPECT_NE(s.find("| Total instructions | 529 | 351 | -178 (-34%) |"), std::string::npos) << s;
  EXPECT_NE(s.find("| R2P | 0 | 24 | +24 |"), std::string::npos);
  EXPECT_NE(s.find("| FSEL | 200 | 200 | 0 |"), std::string::npos);  // pinned, unchanged
  EXPECT_NE(s.find("| ISETP | 225 | 22 | -203 |"), std::string::npos);
  EXPECT_NE(s.find("| SHF | 104 | 105 | +1 |"), std::string::npos);
  EXPECT_LT(s.find("| R2P |"), s.find("| SHF |"));
  EXPECT_NE(s.find("### removed: sm_80 gone"), std::string::npos);
  EXPECT_NE(s.find("### added: sm_80 fresh"), std::string::npos);
}

}  // namespace
}  // namespace fastattn::sass
