#include "opcode_family.h"

#include <unordered_map>

namespace fastattn::sass {

namespace {

struct Group {
  std::string_view family;
  std::vector<std::string_view> opcodes;
};

// Ordered as reports print them. Uniform-datapath (U*) ALU forms stay with their vector
// counterparts where they do the same job; UTMA*/UBLK* are TMA and bulk copies.
const std::vector<Group>& groups() {
  static const std::vector<Group> g = {
      {"tensor", {"HMMA", "HGMMA", "IMMA", "IGMMA", "BMMA", "BGMMA", "DMMA", "QGMMA", "OMMA",
                  "QMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA"}},
      {"predicate", {"ISETP", "FSETP", "DSETP", "HSETP2", "PSETP", "PLOP3", "R2P", "P2R",
                     "UISETP", "UPLOP3", "UR2UP", "UP2UR", "VOTE", "VOTEU"}},
      {"fp32", {"FADD", "FMUL", "FFMA", "FMNMX", "FSEL", "FSET", "FCHK", "FSWZADD", "FADD32I",
                "FMUL32I", "FFMA32I", "FMNMX3"}},
      {"fp16", {"HADD2", "HMUL2", "HFMA2", "HMNMX2", "HSET2"}},
      {"fp64", {"DADD", "DMUL", "DFMA", "DMNMX", "DSET"}},
      {"mufu", {"MUFU"}},
      {"convert", {"F2F", "F2I", "I2F", "F2FP", "I2FP", "FRND", "I2I", "I2IP", "F2IP"}},
      {"integer", {"IMAD", "IADD3", "IADD", "LOP3", "SHF", "LEA", "IABS", "IMNMX", "POPC", "FLO",
                   "BREV", "PRMT", "SEL", "IMUL", "ISCADD", "BMSK", "SGXT", "LOP", "IDP", "IMAD32I",
                   "IADD32I", "LOP32I", "VIADD", "VIMNMX", "VIADDMNMX", "VIMNMX3", "UIMAD",
                   "UIADD3", "ULOP3", "USHF", "ULEA", "USEL", "UPRMT", "UFLO", "UPOPC", "UBREV",
                   "UIABS", "UIMNMX", "USGXT", "UBMSK", "ULOP", "ULOP32I", "UVIADD"}},
      {"move", {"MOV", "MOV32I", "UMOV", "SHFL", "S2R", "S2UR", "CS2R", "R2UR", "MOVM", "R2B",
                "B2R", "REDUX", "CREDUX", "MATCH", "ELECT"}},
      {"mem.global", {"LDG", "STG", "RED", "REDG", "ATOMG", "LDGDEPBAR", "CCTL", "CCTLL"}},
      {"mem.shared", {"LDS", "STS", "LDSM", "STSM", "ATOMS", "LDGSTS", "STAS", "REDAS"}},
      {"mem.local", {"LDL", "STL"}},
      {"mem.const", {"LDC", "ULDC"}},
      {"mem.generic", {"LD", "ST", "ATOM"}},
      {"mem.tma", {"UTMALDG", "UTMASTG", "UTMAPF", "UTMAREDG", "UTMACCTL", "UTMACMDFLUSH", "UBLKCP",
                   "UBLKRED", "UBLKPF"}},
      {"mem.texture", {"TEX", "TLD", "TLD4", "TXQ", "TMML", "TXD", "SULD", "SUST", "SUATOM",
                       "SURED"}},
      {"barrier", {"BAR", "BARRIER", "SYNCS", "MEMBAR", "FENCE", "DEPBAR", "WARPSYNC", "BSSY",
                   "BSYNC", "ERRBAR", "WARPGROUP", "ARRIVES", "NANOSLEEP", "ACQBULK", "USETMAXREG",
                   "UCGABAR_ARV", "UCGABAR_WAIT", "CGAERRBAR"}},
      {"branch", {"BRA", "BRX", "BRXU", "JMP", "JMX", "JMXU", "CALL", "RET", "EXIT", "BREAK",
                  "BPT", "KILL", "RTT", "YIELD"}},
      {"other", {"NOP"}},
  };
  return g;
}

const std::unordered_map<std::string_view, std::string_view>& lookup() {
  static const auto table = [] {
    std::unordered_map<std::string_view, std::string_view> t;
    for (const auto& g : groups())
      for (const auto op : g.opcodes) t.emplace(op, g.family);
    return t;
  }();
  return table;
}

}  // namespace

std::string_view opcode_family(std::string_view opcode) {
  const auto& t = lookup();
  if (const auto it = t.find(opcode); it != t.end()) return it->second;
  return "other";
}

const std::vector<std::string_view>& family_names() {
  static const auto names = [] {
    std::vector<std::string_view> n;
    for (const auto& g : groups()) n.push_back(g.family);
    return n;
  }();
  return names;
}

}  // namespace fastattn::sass
