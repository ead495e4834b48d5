// The CPU backend: FlashAttention-style tiled forward and backward on host memory.
// Inputs fp16/bf16/fp32, fp32 accumulation, threads over independent tiles.
#pragma once

#include "api/problem.h"
#include "fastattn/types.h"

namespace fastattn::cpu {

// Writes p.out (and p.lse when defined). p is validated and resolved.
Status forward(const detail::Problem& p);

// Reads p.q/k/v/out/lse and g.dout; writes g.dq, g.dk, g.dv.
Status backward(const detail::Problem& p, const detail::GradOperands& g);

}  // namespace fastattn::cpu
