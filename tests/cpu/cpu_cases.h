// The configurations the CPU backend is checked on, forward and backward: odd lengths
// (1, 17, 113, 1000), s_q != s_k both ways, GQA 1/4/8, varlen with empty sequences and seqused,
// causal, local, causal+local, softcap, fp32/fp16/bf16, head dims 1..256 (+ wide), d_v != d,
// padded (non-contiguous) strides, several thread counts.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "support/attn_case.h"

namespace fastattn::testing {

struct NamedCase {
  std::string name;
  CaseSpec spec;
  int threads = 0;
};

// gtest prints parameters with this (instead of raw bytes).
inline void PrintTo(const NamedCase& c, std::ostream* os) { *os << c.name << ": " << c.spec.describe(); }

inline CaseSpec shape(int b, int sq, int sk, int hq, int hkv, int d, int dv, DType dt) {
  CaseSpec s;
  s.batch = b;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.head_dim = d;
  s.head_dim_v = dv;
  s.dtype = dt;
  return s;
}

inline CaseSpec causal(CaseSpec s) { s.causal = true; return s; }
inline CaseSpec local(CaseSpec s, int left, int right) { s.window_left = left; s.window_right = right; return s; }
inline CaseSpec softcap(CaseSpec s, float cap) { s.softcap = cap; return s; }
inline CaseSpec padded(CaseSpec s, int pad) { s.pad = pad; return s; }
inline CaseSpec scaled(CaseSpec s, float scale) { s.scale = scale; return s; }
inline CaseSpec ranged(CaseSpec s, float range) { s.input_range = range; return s; }
inline CaseSpec varlen(CaseSpec s, std::vector<int> lq, std::vector<int> lk) {
  s.lens_q = std::move(lq);
  s.lens_k = std::move(lk);
  return s;
}
inline CaseSpec nan_past_used(CaseSpec s) { s.nan_past_used = true; return s; }
inline CaseSpec used(CaseSpec s, std::vector<int> uq, std::vector<int> uk) {
  s.used_q = std::move(uq);
  s.used_k = std::move(uk);
  return s;
}

// `full`: include the largest shapes (forward); backward uses the rest.
inline std::vector<NamedCase> cpu_cases(bool full) {
  constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  std::vector<NamedCase> c = {
      {"s1", shape(2, 1, 1, 2, 2, 32, 32, F32)},
      {"s1_causal", causal(shape(1, 1, 1, 1, 1, 64, 64, F32))},
      {"s17_d64", shape(2, 17, 17, 2, 2, 64, 64, F32), 1},
      {"s113_d80", shape(1, 113, 113, 2, 1, 80, 80, F32), 3},
      {"s113_d128_causal", causal(shape(1, 113, 113, 2, 2, 128, 128, F32))},
      {"sq17_sk113", shape(1, 17, 113, 2, 2, 64, 64, F32)},
      {"sq113_sk17", shape(1, 113, 17, 2, 2, 64, 64, F32)},
      {"sq17_sk113_causal", causal(shape(1, 17, 113, 2, 2, 32, 32, F32))},
      {"sq113_sk17_causal", causal(shape(1, 113, 17, 2, 2, 32, 32, F32))},
      {"gqa4", shape(2, 65, 70, 4, 1, 64, 64, F32)},
      {"gqa8_causal", causal(shape(1, 70, 70, 8, 1, 32, 32, F32))},
      {"gqa4_kv2", shape(1, 40, 40, 8, 2, 32, 32, F32), 2},
      {"d1", shape(1, 33, 33, 1, 1, 1, 1, F32)},
      {"d32_dv128", shape(1, 50, 60, 2, 2, 32, 128, F32)},
      {"d64_dv32_causal", causal(shape(1, 70, 50, 2, 1, 64, 32, F32))},
      {"d256", shape(1, 70, 70, 1, 1, 256, 256, F32)},
      {"d512_dv320", shape(1, 40, 40, 1, 1, 512, 320, F32)},
      {"local_8_4", local(shape(1, 113, 113, 2, 2, 64, 64, F32), 8, 4)},
      {"local_0_0", local(shape(1, 70, 90, 1, 1, 32, 32, F32), 0, 0)},
      {"local_left_only", local(shape(1, 100, 80, 1, 1, 32, 32, F32), 20, -1)},
      {"local_right_only", local(shape(1, 80, 100, 1, 1, 32, 32, F32), -1, 3)},
      {"local_huge_edges", local(shape(1, 70, 90, 2, 1, 32, 32, F32), 1 << 30, 2147483647)},
      {"local_huge_left", local(shape(1, 90, 70, 1, 1, 32, 32, F32), 2147483647, 0)},
      {"causal_local", causal(local(shape(1, 113, 113, 2, 1, 64, 64, F32), 16, -1))},
      {"softcap", ranged(softcap(shape(1, 70, 70, 2, 2, 64, 64, F32), 1.5f), 1.5f)},
      {"softcap_causal_gqa", ranged(softcap(causal(shape(1, 65, 65, 4, 1, 32, 32, F32)), 2.0f), 1.5f)},
      {"scale_2", scaled(shape(1, 40, 40, 1, 1, 32, 32, F32), 2.0f)},
      {"scale_0", scaled(shape(1, 20, 30, 1, 1, 16, 16, F32), 0.0f)},
      {"padded", padded(causal(shape(2, 33, 47, 4, 2, 32, 48, F32)), 5)},
      {"varlen", varlen(shape(1, 0, 0, 2, 1, 64, 64, F32), {0, 17, 1, 70, 5}, {3, 17, 0, 100, 5})},
      {"varlen_causal", causal(varlen(shape(1, 0, 0, 4, 2, 32, 32, F32), {17, 0, 65, 2}, {17, 9, 40, 70}))},
      {"varlen_local_padded", padded(local(varlen(shape(1, 0, 0, 2, 2, 32, 32, F32), {30, 64, 1}, {30, 80, 7}), 5, 2), 3)},
      {"varlen_seqused", causal(used(varlen(shape(1, 0, 0, 2, 1, 32, 32, F32), {20, 33, 8, 0}, {25, 40, 8, 5}), {15, 33, 0, 0}, {25, 17, 3, 0}))},
      {"fixed_seqused", used(shape(3, 40, 50, 2, 2, 32, 32, F32), {40, 7, 0}, {1, 50, 20})},
      {"fixed_seqused_nan_past", nan_past_used(causal(used(shape(3, 40, 50, 2, 1, 32, 32, F32), {40, 7, 0}, {1, 50, 20})))},
      {"varlen_seqused_nan_past", nan_past_used(used(varlen(shape(1, 0, 0, 2, 2, 64, 64, BF16), {20, 33, 8}, {25, 40, 9}),
                                                     {15, 33, 0}, {25, 17, 3}))},
      {"fp16", shape(2, 70, 70, 2, 1, 64, 64, F16)},
      {"fp16_causal_gqa4_d128", causal(shape(1, 113, 113, 4, 1, 128, 128, F16))},
      {"fp16_varlen_local", local(varlen(shape(1, 0, 0, 2, 2, 80, 80, F16), {17, 0, 50}, {30, 4, 50}), 10, 10)},
      {"fp16_softcap", softcap(shape(1, 50, 60, 2, 2, 32, 32, F16), 3.0f)},
      {"bf16", shape(2, 70, 70, 2, 1, 64, 64, BF16)},
      {"bf16_causal_sq113_sk17", causal(shape(1, 113, 17, 2, 2, 64, 32, BF16))},
      {"bf16_varlen_seqused_d256", used(varlen(shape(1, 0, 0, 2, 1, 256, 256, BF16), {9, 40}, {40, 9}), {9, 30}, {35, 9})},
  };
  if (full) {
    c.push_back({"s1000", shape(1, 1000, 1000, 2, 1, 64, 64, F32)});
    c.push_back({"s1000_causal_fp16", causal(shape(1, 1000, 1000, 1, 1, 128, 128, F16))});
    c.push_back({"s1000_local_bf16", local(shape(1, 1000, 1000, 1, 1, 64, 64, BF16), 100, 0)});
    c.push_back({"d1024", shape(1, 33, 33, 1, 1, 1024, 1024, F32)});
  } else {
    c.push_back({"s1000_causal", causal(shape(1, 1000, 1000, 1, 1, 32, 32, F32))});
    c.push_back({"s1000_bf16_gqa", shape(1, 1000, 300, 2, 1, 32, 32, BF16)});
  }
  return c;
}

}  // namespace fastattn::testing
