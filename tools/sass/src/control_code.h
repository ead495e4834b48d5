// Scheduling control bits carried by every sm_70+ SASS instruction.
//
// A 128-bit instruction is stored as two little-endian 64-bit words; the control field is the
// top 23 bits of the second word (bits 105..127 of the instruction). Within that field, from
// its low bit: stall[0:3], yield[4] (inverted: 0 means "yield"), write scoreboard[5:7],
// read scoreboard[8:10] (7 = none for both), wait mask[11:16], operand reuse[17:20].
// The layout was checked against ptxas output: the NOP padding word 0x000fc00000000000
// (no barriers, yield, S00), LDG results consumed by instructions that wait on the LDG's
// write scoreboard, and `.reuse` operands matching the reuse bits (see tests/sass).
#pragma once

#include <cstdint>
#include <string>

namespace fastattn::sass {

inline constexpr int kNoScoreboard = 7;

struct ControlCode {
  int stall = 0;             // cycles to wait before issuing the next instruction (0..15)
  bool yield = false;        // scheduler may switch warps after this instruction
  int write_sb = kNoScoreboard;  // scoreboard released when the result is written
  int read_sb = kNoScoreboard;   // scoreboard released when the sources have been read
  unsigned wait_mask = 0;    // scoreboards (bit i = SB i) to wait on before issuing
  unsigned reuse = 0;        // operand reuse cache flags, bit 0 = operand A

  bool waits_on(int sb) const { return (wait_mask >> sb) & 1u; }
  bool operator==(const ControlCode&) const = default;
};

// Decodes the control field from the high 64-bit word of an instruction.
ControlCode decode_control(std::uint64_t high_word);

// Inverse of decode_control: places the fields into an otherwise zero high word.
std::uint64_t encode_control(const ControlCode& cc);

// "[B0-----:R-:W1:Y:S04]": wait mask, read SB, write SB, yield, stall.
std::string format_control(const ControlCode& cc);

// "A-C-": which of the four operand slots are kept in the reuse cache.
std::string format_reuse(unsigned reuse);

}  // namespace fastattn::sass
