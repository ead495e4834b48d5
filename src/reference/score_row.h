// The scores of one query row, shared by the float64 forward and backward: for every key j,
// kept[j] = keep(b, h, i, j) and, where kept, s[j] = softcap(scale * q . k_j) + bias(b, h, i, j)
// - slope(b, h) |i + len_k - len_q - j| (the bias and ALiBi terms only when the call has them; both
// are added after softcap).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference/mask_oracle.h"
#include "util/half.h"
#include "util/max_keeping_nan.h"

namespace fastattn::reference {

// Bias entry (b, h, i, j) of a call's bias as float64.
inline double bias_at(const detail::BiasView& bias, int64_t b, int64_t h, int64_t i, int64_t j) {
  return util::load_as_float(bias.row(b, h, i) + j * dtype_size(bias.dtype), bias.dtype);
}

// `kmat` holds the sequence's keys row-major (nk, d). Returns the row max over kept keys, -inf
// when the row keeps none (or every kept score is -inf, which a -inf bias gives), NaN when a kept
// score is NaN (then out and lse are NaN: docs/masks.md, "NaN"). `capped`, when
// given, receives softcap(scale * q . k_j) alone (the backward's softcap derivative needs it).
inline double score_row(const MaskOracle& oracle, int64_t b, int64_t h, int64_t i, int64_t nk, int64_t d,
                        const double* q, const std::vector<double>& kmat, double scale, double cap,
                        std::vector<double>& s, std::vector<char>& kept, const detail::BiasView* bias = nullptr,
                        const detail::AlibiView* alibi = nullptr, std::vector<double>* capped = nullptr) {
  double m = -std::numeric_limits<double>::infinity();
  const HeadMask mask = oracle.head(b, h);
  const bool has_alibi = alibi != nullptr && alibi->defined();
  const double slope = has_alibi ? double(alibi->slope(b, h)) : 0.0;
  const int64_t diag = i + int64_t(mask.rule.len_k) - mask.rule.len_q;
  for (int64_t j = 0; j < nk; ++j) {
    kept[size_t(j)] = mask.keep(i, j);
    if (!kept[size_t(j)]) continue;
    double x = 0;
    for (int64_t c = 0; c < d; ++c) x += q[c] * kmat[size_t(j * d + c)];
    x *= scale;
    const double sc = cap > 0 ? cap * std::tanh(x / cap) : x;
    if (capped != nullptr) (*capped)[size_t(j)] = sc;
    s[size_t(j)] = bias != nullptr && bias->defined() ? sc + bias_at(*bias, b, h, i, j) : sc;
    if (has_alibi) s[size_t(j)] -= slope * double(diag > j ? diag - j : j - diag);
    m = util::max_keeping_nan(m, s[size_t(j)]);
  }
  return m;
}

}  // namespace fastattn::reference
