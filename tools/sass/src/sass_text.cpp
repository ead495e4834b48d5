#include "sass_text.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "text_util.h"

namespace fastattn::sass {

namespace {

// Reads "/* 0x0123456789abcdef */" at or after `from`; returns false if absent.
bool read_encoding_word(std::string_view line, std::size_t from, std::uint64_t& word) {
  const auto open = line.find("/* 0x", from);
  if (open == std::string_view::npos) return false;
  const std::string hex(line.substr(open + 5, 16));
  if (hex.size() != 16) return false;
  char* end = nullptr;
  word = std::strtoull(hex.c_str(), &end, 16);
  return end == hex.c_str() + 16;
}

// Splits "@P0 BRA.U 0x30" into predicate, mnemonic and operands.
void split_assembly(std::string_view text, Instruction& ins) {
  text = trim(text);
  if (!text.empty() && text.front() == '@') {
    const auto sp = text.find(' ');
    ins.predicate = std::string(text.substr(0, sp));
    text = sp == std::string_view::npos ? std::string_view{} : trim(text.substr(sp));
  }
  const auto sp = text.find(' ');
  ins.mnemonic = std::string(text.substr(0, sp));
  ins.operands = sp == std::string_view::npos ? std::string() : std::string(trim(text.substr(sp)));
}

// An instruction line starts with "/*0050*/" (offset in hex) after indentation.
bool parse_offset(std::string_view line, std::uint32_t& offset, std::size_t& after) {
  const auto t = line.find_first_not_of(" \t");
  if (t == std::string_view::npos || line.substr(t, 2) != "/*") return false;
  const auto close = line.find("*/", t + 2);
  if (close == std::string_view::npos || close == t + 2) return false;
  const std::string hex(line.substr(t + 2, close - t - 2));
  if (hex.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  offset = static_cast<std::uint32_t>(std::strtoul(hex.c_str(), nullptr, 16));
  after = close + 2;
  return true;
}

}  // namespace

std::vector<KernelCode> parse_sass_listing(std::string_view text) {
  std::vector<KernelCode> kernels;
  std::string arch;
  const auto lines = split_lines(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (starts_with(trim(line), "code for ")) {
      arch = std::string(trim(trim(line).substr(9)));
      continue;
    }
    if (const auto p = line.find("Function : "); p != std::string_view::npos) {
      kernels.push_back({std::string(trim(line.substr(p + 11))), arch, {}});
      continue;
    }
    std::uint32_t offset = 0;
    std::size_t after = 0;
    if (kernels.empty() || !parse_offset(line, offset, after)) continue;
    const auto semi = line.find(';', after);
    if (semi == std::string_view::npos) continue;
    Instruction ins;
    ins.offset = offset;
    split_assembly(line.substr(after, semi - after), ins);
    if (!read_encoding_word(line, semi, ins.low) || i + 1 >= lines.size() ||
        !read_encoding_word(lines[i + 1], 0, ins.high)) {
      throw std::runtime_error("SASS listing: instruction at /*" + std::to_string(offset) +
                               "*/ lacks its 128-bit encoding (need cuobjdump -sass output)");
    }
    ++i;
    ins.control = decode_control(ins.high);
    kernels.back().code.push_back(std::move(ins));
  }
  return kernels;
}

}  // namespace fastattn::sass
