// CPU backend forward vs the float64 reference on every configuration of cpu_cases.h.
#include <gtest/gtest.h>

#include "cpu_cases.h"
#include "cpu_check.h"

namespace fastattn::testing {
namespace {

class CpuForward : public ::testing::TestWithParam<NamedCase> {};

TEST_P(CpuForward, MatchesReference) { check_cpu_forward(GetParam().spec, GetParam().threads); }

INSTANTIATE_TEST_SUITE_P(Cases, CpuForward, ::testing::ValuesIn(cpu_cases(/*full=*/true)),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

}  // namespace
}  // namespace fastattn::testing
