// Runs one case through the CPU backend and checks it against the float64 reference:
// outputs poisoned first, every element must be written (and row padding left alone), then
// FA3's tolerance rule and, for fp32 inputs, relative Frobenius error < 1e-5.
#pragma once

#include <gtest/gtest.h>

#include "support/attn_case.h"

namespace fastattn::testing {

// Forward: out and lse.
void check_cpu_forward(const CaseSpec& spec, int num_threads = 0);

// Forward (to get out and lse), then backward: dq, dk, dv.
void check_cpu_backward(const CaseSpec& spec, int num_threads = 0);

}  // namespace fastattn::testing
