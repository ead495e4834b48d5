#include "support/bit_mask_case.h"

#include <algorithm>
#include <sstream>

namespace fastattn::testing {

std::string BitMaskSpec::describe() const {
  if (!on) return "";
  static const char* names[] = {"random", "tiles", "documents", "prefix-lm", "causal", "all-ones"};
  std::ostringstream os;
  os << " bits=(" << names[int(pattern)] << "," << (per_batch ? "batch" : "1") << "," << heads;
  if (pattern == BitPattern::Random || pattern == BitPattern::Tiles) os << ",density " << density;
  if (pattern == BitPattern::Tiles) os << ",tile " << tile;
  if (pattern == BitPattern::Documents) os << ",docs " << docs;
  if (pattern == BitPattern::PrefixLM) os << ",prefix " << prefix;
  if (extra_rows || extra_words) os << ",extra " << extra_rows << "/" << extra_words;
  if (layout) os << ",layout " << layout;
  if (empty_batch >= 0) os << ",empty batch " << empty_batch;
  os << ")";
  return os.str();
}

BitMask HostBitMask::view_at() const {
  BitMask m = view;
  m.data = words.data() + origin;
  return m;
}

bool HostBitMask::keeps(int64_t b, int64_t h, int64_t i, int64_t j) const {
  const uint32_t* row = words.data() + origin + b * view.stride[0] + h * view.stride[1] + i * view.stride[2];
  return (row[j / 32] >> (j % 32)) & 1u;
}

HostBitMask make_bit_mask(const BitMaskSpec& spec, int batch, int max_rows_q, int max_rows_k, Rng& rng) {
  HostBitMask h;
  const int64_t mb = spec.per_batch ? batch : 1, mh = spec.heads;
  const int64_t rows = std::max<int64_t>(1, max_rows_q + spec.extra_rows);
  const int64_t words = std::max<int64_t>(1, (max_rows_k + 31) / 32 + spec.extra_words);
  BitMask& m = h.view;
  m.shape[0] = mb;
  m.shape[1] = mh;
  m.shape[2] = rows;
  m.shape[3] = words;
  const int64_t stored_heads = spec.layout == 2 ? 1 : mh;
  const int64_t row_stride = spec.layout == 1 ? words + 3 : words;
  h.words.assign(size_t(mb * stored_heads * rows * row_stride), 0u);
  m.stride[0] = stored_heads * rows * row_stride;
  m.stride[1] = spec.layout == 2 ? 0 : rows * row_stride;
  m.stride[2] = spec.layout == 3 ? -row_stride : row_stride;
  h.origin = spec.layout == 3 ? (rows - 1) * row_stride : 0;
  // Document boundaries over max(rows, keys) positions (one set shared by all heads / batches).
  const int64_t span = std::max<int64_t>(rows, int64_t(words) * 32);
  std::vector<int64_t> doc_of(size_t(span), 0);
  if (spec.pattern == BitPattern::Documents) {
    std::vector<int64_t> cuts;
    for (int d = 1; d < spec.docs; ++d) cuts.push_back(rng.uniform_int(1, int(std::max<int64_t>(1, max_rows_k - 1))));
    std::sort(cuts.begin(), cuts.end());
    for (int64_t p = 0; p < span; ++p) doc_of[size_t(p)] = std::upper_bound(cuts.begin(), cuts.end(), p) - cuts.begin();
  }
  const int64_t tiles_k = (int64_t(words) * 32 + spec.tile - 1) / spec.tile;
  for (int64_t b = 0; b < mb; ++b) {
    for (int64_t hh = 0; hh < stored_heads; ++hh) {
      std::vector<int> tile_kind(size_t(((rows + spec.tile - 1) / spec.tile) * tiles_k));
      for (int& k : tile_kind) k = rng.uniform_int(0, 2);  // 0 empty, 1 full, 2 random
      for (int64_t i = 0; i < rows; ++i) {
        uint32_t* row = h.words.data() + h.origin + b * m.stride[0] + hh * m.stride[1] + i * m.stride[2];
        for (int64_t j = 0; j < words * 32; ++j) {
          bool keep = false;
          switch (spec.pattern) {
            case BitPattern::Random: keep = rng.uniform(0.0f, 1.0f) < spec.density; break;
            case BitPattern::Tiles: {
              const int kind = tile_kind[size_t((i / spec.tile) * tiles_k + j / spec.tile)];
              keep = kind == 1 || (kind == 2 && rng.uniform(0.0f, 1.0f) < spec.density);
              break;
            }
            case BitPattern::Documents: keep = doc_of[size_t(i)] == doc_of[size_t(j)]; break;
            case BitPattern::PrefixLM: keep = j < spec.prefix || j <= i; break;
            case BitPattern::Causal: keep = j <= i + (max_rows_k - max_rows_q); break;
            case BitPattern::AllOnes: keep = true; break;
          }
          if (j >= max_rows_k && spec.pattern != BitPattern::AllOnes) keep = rng.uniform_int(0, 1) == 1;  // ignored bits
          if (spec.per_batch && b == spec.empty_batch) keep = false;
          if (keep) row[j / 32] |= 1u << (j % 32);
        }
      }
    }
  }
  return h;
}

}  // namespace fastattn::testing
