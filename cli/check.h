// Checks the run's outputs against the float64 reference (Backend::Reference) on a sample of
// query rows: all heads of one batch entry.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "options.h"
#include "problem.h"

namespace fastattn::cli {

// Outputs of the run, copied to the host, in the run dtype (lse float32).
struct HostOutputs {
  std::vector<std::byte> out, lse, dq, dk, dv;
};

struct ErrorStats {
  ErrorStats(std::string n, double t) : name(std::move(n)), tol(t) {}
  std::string name;
  double max_abs = 0;   // max |got - ref|
  double max_ref = 0;   // max |ref|
  int64_t bad = 0;      // non-finite where the reference is finite, or the other way round
  double tol = 0;       // on max_abs / max(1, max_ref)
  double scaled() const { return max_abs / (max_ref > 1 ? max_ref : 1); }
  bool ok() const { return bad == 0 && scaled() <= tol; }
  void add(float got, double ref);
};

struct CheckReport {
  int64_t batch = 0;
  std::vector<int64_t> rows;
  std::vector<ErrorStats> stats;
  std::string note;  // what was not checked, and why
  bool ok() const;
};

// Float64 reference of query row `row` of batch entry `batch` (all heads): out (h, d_v), lse (h)
// and, with --backward, dq (h, d). Exposed for the CLI's tests.
struct RowReference {
  std::vector<double> out, lse, dq;
};
RowReference reference_row(const RunOptions& o, HostInputs& in, int64_t batch, int64_t row);

// `in` is only read (the reference takes mutable tensor views).
CheckReport check_against_reference(const RunOptions& o, HostInputs& in, const HostOutputs& got);

}  // namespace fastattn::cli
