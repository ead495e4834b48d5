// Random numbers for tests: a fresh time-based seed per run (override with the environment
// variable FASTATTN_TEST_SEED=<n> to replay), and the seed printed with every failure.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace fastattn::testing {

// FASTATTN_TEST_SEED when set, else a new clock-derived seed on every call (one per test).
uint64_t test_seed();

class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed), gen_(seed) {}
  uint64_t seed() const { return seed_; }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }  // [lo, hi]
  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(gen_); }

 private:
  uint64_t seed_;
  std::mt19937_64 gen_;
};

// "seed 1234 (replay: FASTATTN_TEST_SEED=1234)" for failure messages.
std::string seed_note(uint64_t seed);

}  // namespace fastattn::testing
