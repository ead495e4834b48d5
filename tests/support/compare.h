// Accuracy checks for attention outputs and gradients.
//
// FA3's rule: an implementation is as accurate as it can be in its precision when
//   max|out - ref| <= 2 * max|baseline - ref| + eps,
// where ref is float64 and baseline is "the same math in the input precision" (for the CPU
// backend: the float64 result rounded to the output dtype; for GPU kernels: the reference with
// P and dS rounded to the input dtype and the backward's D from the rounded out,
// reference::Options::round_p_to_input_dtype).
// Alongside it, the relative Frobenius error ||out - ref|| / ||ref|| (fp32 inputs: < 1e-5).
// -inf entries (lse of rows that keep no key) must match exactly; NaN never passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fastattn/types.h"

namespace fastattn::testing {

struct Comparison {
  double max_abs_err = 0;       // max |out - ref| over finite entries
  double baseline_err = 0;      // max |baseline - ref|
  double tolerance = 0;         // 2 * baseline_err + eps
  double rel_fro = 0;           // ||out - ref||_F / ||ref||_F over finite entries
  int64_t mismatched_inf = 0;   // entries where exactly one of out/ref is infinite, or NaN
  int64_t worst_index = -1;     // where max_abs_err occurs
  bool ok = false;              // FA3 rule holds and no mismatched infinities
  std::string describe(const std::string& name) const;
};

// eps of the rule: one rounding step of `dt` at the largest magnitude of ref (at least 1).
double rounding_step(DType dt, const std::vector<double>& ref);

Comparison compare(const std::vector<double>& out, const std::vector<double>& ref,
                   const std::vector<double>& baseline, double eps);

// Every value rounded to `dt` (through float): the "same math in the input precision" of a result.
std::vector<double> rounded(const std::vector<double>& v, DType dt);

// One unit in the last place of `dt` at |x| (fp16's smallest normal exponent as the floor).
double ulp(DType dt, double x);

// ||out - ref||_F / max(||ref||_F, floor * sqrt(n)) over the n entries finite in both.
double rel_frobenius(const std::vector<double>& out, const std::vector<double>& ref, double floor = 0);

}  // namespace fastattn::testing
