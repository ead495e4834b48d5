#include "report.h"

#include <algorithm>
#include <cstdio>

#include "loops.h"
#include "opcode_family.h"

namespace fastattn::sass {

namespace {

std::string hex_offset(std::uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%04x", v);
  return b;
}

}  // namespace

void print_report(std::ostream& os, const Kernel& k, const ReportOptions& opt) {
  const Resources& r = k.resources;
  const Histogram& h = k.histogram;
  os << "== " << k.arch << "  " << k.demangled << "\n";
  if (k.demangled != k.name) os << "   symbol        " << k.name << "\n";
  os << "   registers     " << r.registers << "\n"
     << "   shared        " << r.shared_bytes << " B static\n"
     << "   stack frame   " << r.stack_bytes << " B\n"
     << "   spill         " << r.spill_store_bytes << " B stores, " << r.spill_load_bytes
     << " B loads\n"
     << "   instructions  " << h.total << "\n   families     ";
  for (const auto f : family_names())
    if (const int n = h.family(std::string(f))) os << " " << f << "=" << n;
  os << "\n";

  std::vector<std::pair<std::string, int>> ops(h.by_opcode.begin(), h.by_opcode.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second > b.second; });
  if (!opt.all_opcodes && ops.size() > 12) ops.resize(12);
  os << "   opcodes      ";
  for (const auto& [op, n] : ops) os << " " << op << "=" << n;
  os << "\n";

  if (const auto loop = hottest_loop(k.code)) {
    os << "   hot loop      /*" << hex_offset(loop->head) << "*/../*" << hex_offset(loop->latch)
       << "*/ " << loop->instructions << " instructions, " << loop->stall_cycles
       << " stall cycles, " << loop->tensor_ops << " tensor ops\n";
  } else {
    os << "   hot loop      none\n";
  }
  if (opt.annotate) print_annotated(os, k);
  os << "\n";
}

void print_annotated(std::ostream& os, const Kernel& k) {
  const auto loop = hottest_loop(k.code);
  for (const auto& ins : k.code) {
    const bool hot = loop && ins.offset >= loop->head && ins.offset <= loop->latch;
    os << (hot ? " > " : "   ") << "/*" << hex_offset(ins.offset) << "*/ "
       << format_control(ins.control) << " " << format_reuse(ins.control.reuse) << "  ";
    if (!ins.predicate.empty()) os << ins.predicate << " ";
    os << ins.mnemonic;
    if (!ins.operands.empty()) os << " " << ins.operands;
    os << " ;\n";
  }
}

}  // namespace fastattn::sass
