#include "control_code.h"

#include <cstdio>

namespace fastattn::sass {

namespace {
constexpr int kControlShift = 41;  // bit 105 of the instruction = bit 41 of the high word
}

ControlCode decode_control(std::uint64_t high_word) {
  const std::uint64_t c = high_word >> kControlShift;
  ControlCode cc;
  cc.stall = static_cast<int>(c & 0xf);
  cc.yield = ((c >> 4) & 1) == 0;
  cc.write_sb = static_cast<int>((c >> 5) & 7);
  cc.read_sb = static_cast<int>((c >> 8) & 7);
  cc.wait_mask = static_cast<unsigned>((c >> 11) & 0x3f);
  cc.reuse = static_cast<unsigned>((c >> 17) & 0xf);
  return cc;
}

std::uint64_t encode_control(const ControlCode& cc) {
  std::uint64_t c = static_cast<std::uint64_t>(cc.stall & 0xf);
  c |= static_cast<std::uint64_t>(cc.yield ? 0 : 1) << 4;
  c |= static_cast<std::uint64_t>(cc.write_sb & 7) << 5;
  c |= static_cast<std::uint64_t>(cc.read_sb & 7) << 8;
  c |= static_cast<std::uint64_t>(cc.wait_mask & 0x3f) << 11;
  c |= static_cast<std::uint64_t>(cc.reuse & 0xf) << 17;
  return c << kControlShift;
}

std::string format_control(const ControlCode& cc) {
  std::string s = "[B";
  for (int sb = 0; sb < 6; ++sb) s += cc.waits_on(sb) ? static_cast<char>('0' + sb) : '-';
  auto board = [](int sb) { return sb == kNoScoreboard ? std::string("-") : std::to_string(sb); };
  char stall[4];
  std::snprintf(stall, sizeof stall, "%02d", cc.stall);
  s += ":R" + board(cc.read_sb) + ":W" + board(cc.write_sb) + ":" + (cc.yield ? "Y" : "-") +
       ":S" + stall + "]";
  return s;
}

std::string format_reuse(unsigned reuse) {
  std::string s;
  for (int slot = 0; slot < 4; ++slot) s += (reuse >> slot) & 1 ? static_cast<char>('A' + slot) : '-';
  return s;
}

}  // namespace fastattn::sass
