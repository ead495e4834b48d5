#include "support/test_rng.h"

#include <atomic>
#include <chrono>
#include <cstdlib>

namespace fastattn::testing {

uint64_t test_seed() {
  static std::atomic<uint64_t> counter{0};
  if (const char* env = std::getenv("FASTATTN_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  const uint64_t now = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                       uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  return (now ^ (++counter * 0x9e3779b97f4a7c15ull)) % 1000000007ull;
}

std::string seed_note(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay: FASTATTN_TEST_SEED=" + std::to_string(seed) + ")";
}

}  // namespace fastattn::testing
