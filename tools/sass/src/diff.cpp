#include "diff.h"

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "loops.h"

namespace fastattn::sass {

namespace {

struct Row {
  std::string metric;
  int old_value;
  int new_value;
  bool percent;
};

std::vector<Row> metric_rows(const Kernel& o, const Kernel& n) {
  const auto lo = hottest_loop(o.code), ln = hottest_loop(n.code);
  return {
      {"Total instructions", o.histogram.total, n.histogram.total, true},
      {"Registers", o.resources.registers, n.resources.registers, false},
      {"Stack frame (B)", o.resources.stack_bytes, n.resources.stack_bytes, false},
      {"Spill bytes", o.resources.spill_store_bytes + o.resources.spill_load_bytes,
       n.resources.spill_store_bytes + n.resources.spill_load_bytes, false},
      {"Hot loop instructions", lo ? lo->instructions : 0, ln ? ln->instructions : 0, true},
      {"Hot loop stall cycles", lo ? lo->stall_cycles : 0, ln ? ln->stall_cycles : 0, true},
  };
}

std::vector<Row> opcode_rows(const Kernel& o, const Kernel& n, const DiffOptions& opt) {
  std::vector<Row> rows;
  std::set<std::string> shown;
  for (const auto& op : opt.pinned) {
    rows.push_back({op, o.histogram.opcode(op), n.histogram.opcode(op), false});
    shown.insert(op);
  }
  std::set<std::string> all;
  for (const auto& [op, c] : o.histogram.by_opcode) all.insert(op);
  for (const auto& [op, c] : n.histogram.by_opcode) all.insert(op);
  for (const auto& op : all) {
    const int a = o.histogram.opcode(op), b = n.histogram.opcode(op);
    if (shown.count(op) || (a == b && !opt.all_opcodes)) continue;
    rows.push_back({op, a, b, false});
  }
  return rows;
}

bool same_sass(const Kernel& o, const Kernel& n) {
  if (o.histogram.by_opcode != n.histogram.by_opcode || o.code.size() != n.code.size()) return false;
  for (std::size_t i = 0; i < o.code.size(); ++i)
    if (o.code[i].low != n.code[i].low || o.code[i].high != n.code[i].high) return false;
  return true;
}

// Same instructions, control codes and operands except for the offsets of constant-bank operands
// (c[0x0][...]: a kernel parameter struct whose fields moved). Counts the instructions that differ.
bool same_but_cbank_offsets(const Kernel& o, const Kernel& n, int* differing) {
  if (o.code.size() != n.code.size()) return false;
  static const std::regex cbank(R"(c\[0x0\]\[0x[0-9a-f]+\])");
  *differing = 0;
  for (std::size_t i = 0; i < o.code.size(); ++i) {
    const Instruction &a = o.code[i], &b = n.code[i];
    if (a.low == b.low && a.high == b.high) continue;
    if (a.predicate != b.predicate || a.mnemonic != b.mnemonic || (a.high >> 41) != (b.high >> 41) ||
        std::regex_replace(a.operands, cbank, "c[0x0][*]") != std::regex_replace(b.operands, cbank, "c[0x0][*]"))
      return false;
    ++*differing;
  }
  return true;
}

std::string renamed(std::string name, const DiffOptions& opt) {
  for (const auto& [from, to] : opt.renames)
    for (auto at = name.find(from); !from.empty() && at != std::string::npos; at = name.find(from, at + to.size()))
      name.replace(at, from.size(), to);
  return name;
}

}  // namespace

std::string format_delta(int old_value, int new_value, bool with_percent) {
  const int d = new_value - old_value;
  std::string s = d > 0 ? "+" : "";
  s += std::to_string(d);
  if (with_percent && old_value != 0 && d != 0) {
    const long pct = std::lround(100.0 * d / old_value);
    s.append(" (").append(pct > 0 ? "+" : "").append(std::to_string(pct)).append("%)");
  }
  return s;
}

int print_diff(std::ostream& os, const std::vector<Kernel>& old_build,
               const std::vector<Kernel>& new_build, const DiffOptions& opt) {
  std::map<std::string, const Kernel*> olds, news;
  for (const auto& k : old_build) olds[k.arch + " " + renamed(k.name, opt)] = &k;
  for (const auto& k : new_build) news[k.key()] = &k;
  int changed = 0;
  for (const auto& [key, o] : olds) {
    const auto it = news.find(key);
    if (it == news.end()) {
      os << "### removed: " << o->arch << " " << o->demangled << " (" << o->histogram.total
         << " instructions)\n\n";
      ++changed;
      continue;
    }
    const Kernel& n = *it->second;
    const bool same = same_sass(*o, n);
    int moved = 0;
    const bool offsets_only = !same && same_but_cbank_offsets(*o, n, &moved);
    changed += same ? 0 : 1;
    os << "### " << o->arch << " " << n.demangled << (same ? "  (identical SASS)" : "")
       << (offsets_only ? "  (same SASS but for constant-bank offsets in " + std::to_string(moved) + " instructions)"
                        : "")
       << "\n\n"
       << "| Metric | Old | New | Delta |\n|---|---:|---:|---:|\n";
    auto rows = metric_rows(*o, n);
    const auto ops = opcode_rows(*o, n, opt);
    rows.insert(rows.end(), ops.begin(), ops.end());
    for (const auto& r : rows)
      os << "| " << r.metric << " | " << r.old_value << " | " << r.new_value << " | "
         << format_delta(r.old_value, r.new_value, r.percent) << " |\n";
    os << "\n";
  }
  for (const auto& [key, n] : news) {
    if (olds.count(key)) continue;
    os << "### added: " << n->arch << " " << n->demangled << " (" << n->histogram.total
       << " instructions)\n\n";
    ++changed;
  }
  return changed;
}

}  // namespace fastattn::sass
