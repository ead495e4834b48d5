// CPU backend backward (dq, dk, dv) vs the float64 reference on the configurations of
// cpu_cases.h (the largest forward-only shapes swapped for smaller long-sequence ones).
#include <gtest/gtest.h>

#include "cpu_cases.h"
#include "cpu_check.h"

namespace fastattn::testing {
namespace {

class CpuBackward : public ::testing::TestWithParam<NamedCase> {};

TEST_P(CpuBackward, MatchesReference) { check_cpu_backward(GetParam().spec, GetParam().threads); }

INSTANTIATE_TEST_SUITE_P(Cases, CpuBackward, ::testing::ValuesIn(cpu_cases(/*full=*/false)),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

}  // namespace
}  // namespace fastattn::testing
