#include "support/compare.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "util/half.h"

namespace fastattn::testing {

double rounding_step(DType dt, const std::vector<double>& ref) {
  double mx = 1.0;
  for (double r : ref) {
    if (std::isfinite(r)) mx = std::max(mx, std::abs(r));
  }
  const double unit = dt == DType::F16 ? 0x1p-10 : dt == DType::BF16 ? 0x1p-7 : 0x1p-23;
  return unit * mx;
}

double rel_frobenius(const std::vector<double>& out, const std::vector<double>& ref, double floor) {
  double num = 0, den = 0, n = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(out[i])) continue;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
    n += 1;
  }
  den = std::max(den, n * floor * floor);
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

Comparison compare(const std::vector<double>& out, const std::vector<double>& ref,
                   const std::vector<double>& baseline, double eps) {
  Comparison c;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool ref_fin = std::isfinite(ref[i]), out_fin = std::isfinite(out[i]);
    if (std::isnan(out[i]) || ref_fin != out_fin || (!ref_fin && out[i] != ref[i])) {
      ++c.mismatched_inf;
      continue;
    }
    if (!ref_fin) continue;
    const double e = std::abs(out[i] - ref[i]);
    if (e > c.max_abs_err) {
      c.max_abs_err = e;
      c.worst_index = int64_t(i);
    }
    if (std::isfinite(baseline[i])) c.baseline_err = std::max(c.baseline_err, std::abs(baseline[i] - ref[i]));
  }
  c.tolerance = 2 * c.baseline_err + eps;
  c.rel_fro = rel_frobenius(out, ref);
  c.ok = c.mismatched_inf == 0 && c.max_abs_err <= c.tolerance && out.size() == ref.size();
  return c;
}

std::string Comparison::describe(const std::string& name) const {
  std::ostringstream os;
  os << name << ": max|err| " << max_abs_err << " (at " << worst_index << ") vs tolerance "
     << tolerance << " (2 * baseline " << baseline_err << " + eps), rel Frobenius " << rel_fro
     << ", NaN/inf mismatches " << mismatched_inf;
  return os.str();
}

std::vector<double> rounded(const std::vector<double>& v, DType dt) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = util::round_to(dt, float(v[i]));
  return r;
}

double ulp(DType dt, double x) {
  const int mantissa = dt == DType::BF16 ? 7 : dt == DType::F16 ? 10 : 23;
  return std::ldexp(1.0, std::max(std::ilogb(std::max(std::fabs(x), 1e-30)), -14) - mantissa);
}

}  // namespace fastattn::testing
