// Runs one case through the CPU backend and checks it against the float64 reference:
// outputs poisoned first, every element must be written (and row padding left alone), then
// FA3's tolerance rule and, for fp32 inputs, relative Frobenius error < 1e-5.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "reference/mask_oracle.h"
#include "support/attn_case.h"

namespace fastattn::testing {

// Forward: out and lse.
void check_cpu_forward(const CaseSpec& spec, int num_threads = 0);

// Forward (to get out and lse), then backward: dq, dk, dv.
void check_cpu_backward(const CaseSpec& spec, int num_threads = 0);

// Forward then backward of args `a` over case c's tensors on the CPU backend (both must succeed).
void run_cpu(AttnCase& c, const AttnArgs& a);

// Two runs' outputs (out, lse, dq, dk, dv) bit for bit; `what` names the pair in a failure.
void expect_same_bits(const AttnCase& x, const AttnCase& y, const char* what);

// Tile [i0, i0 + rows) x [j0, j0 + cols) of head mask m: cpu::classify_tile against the oracle's count
// of kept pairs, and (inside rule.len_k) cpu::mask_partial_tile element by element against m.keep.
void check_tile_against_oracle(const reference::HeadMask& m, const reference::MaskRule& rule, int i0, int rows, int j0,
                               int cols, const std::string& note);

}  // namespace fastattn::testing
