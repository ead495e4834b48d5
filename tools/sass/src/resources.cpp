#include "resources.h"

#include <cstdlib>

#include "text_util.h"

namespace fastattn::sass {

namespace {

int field(const std::vector<std::string>& words, std::string_view key) {
  for (const auto& w : words)
    if (starts_with(w, key) && w.size() > key.size() && w[key.size()] == ':')
      return std::atoi(w.c_str() + key.size() + 1);
  return 0;
}

}  // namespace

std::map<std::string, Resources> parse_resource_usage(std::string_view text) {
  std::map<std::string, Resources> out;
  std::string current;
  for (const auto raw : split_lines(text)) {
    const auto line = trim(raw);
    if (starts_with(line, "Function ") && line.back() == ':') {
      current = std::string(line.substr(9, line.size() - 10));
      continue;
    }
    if (current.empty() || !starts_with(line, "REG:")) continue;
    const auto words = split_words(line);
    Resources& r = out[current];
    r.registers = field(words, "REG");
    r.stack_bytes = field(words, "STACK");
    r.shared_bytes = field(words, "SHARED");
    r.local_bytes = field(words, "LOCAL");
    current.clear();
  }
  return out;
}

std::map<std::string, std::set<std::uint32_t>> parse_spill_offsets(std::string_view elf_dump) {
  static constexpr std::string_view kSection = ".nv.info.";
  static constexpr std::string_view kMark = "SpillRefill";
  std::map<std::string, std::set<std::uint32_t>> out;
  std::string current;
  for (const auto line : split_lines(elf_dump)) {
    if (!line.empty() && line.front() != '\t' && line.front() != ' ') {
      // A new section starts at column 0; only .nv.info.<kernel> sections matter.
      current = starts_with(line, kSection) ? std::string(trim(line.substr(kSection.size()))) : "";
      continue;
    }
    if (current.empty()) continue;
    for (auto p = line.find(kMark); p != std::string_view::npos; p = line.find(kMark, p + 1)) {
      const auto hex = line.find("0x", p);
      if (hex == std::string_view::npos) break;
      const std::string digits(line.substr(hex + 2, 8));
      out[current].insert(static_cast<std::uint32_t>(std::strtoul(digits.c_str(), nullptr, 16)));
    }
  }
  return out;
}

int local_access_bytes(const Instruction& ins) {
  const std::string& m = ins.mnemonic;
  auto has = [&](std::string_view mod) {
    const auto p = m.find(mod);
    return p != std::string::npos &&
           (p + mod.size() == m.size() || m[p + mod.size()] == '.');
  };
  if (has(".128")) return 16;
  if (has(".64")) return 8;
  if (has(".U8") || has(".S8")) return 1;
  if (has(".U16") || has(".S16")) return 2;
  return 4;
}

void add_spill_bytes(const std::vector<Instruction>& code, const std::set<std::uint32_t>& offsets,
                     Resources& res) {
  for (const auto& ins : code) {
    if (!offsets.count(ins.offset)) continue;
    const std::string op = ins.opcode();
    if (op == "STL") res.spill_store_bytes += local_access_bytes(ins);
    if (op == "LDL") res.spill_load_bytes += local_access_bytes(ins);
  }
}

}  // namespace fastattn::sass
