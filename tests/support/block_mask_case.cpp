#include "support/block_mask_case.h"

#include <algorithm>
#include <sstream>

namespace fastattn::testing {

std::string BlockMaskSpec::describe() const {
  if (!on) return "";
  std::ostringstream os;
  os << " blocks=(" << (per_batch ? "batch" : "1") << "," << heads << "," << block_q << "x" << block_k
     << ",density " << density;
  if (extra) os << ",extra " << extra;
  if (layout) os << ",layout " << layout;
  if (empty_batch >= 0) os << ",empty batch " << empty_batch;
  os << ")";
  return os.str();
}

BlockMask HostBlockMask::view_at() const {
  BlockMask m = view;
  m.data = bytes.data() + origin;
  return m;
}

HostBlockMask make_block_mask(const BlockMaskSpec& spec, int batch, int max_rows_q, int max_rows_k, Rng& rng) {
  HostBlockMask h;
  const int64_t mb = spec.per_batch ? batch : 1, mh = spec.heads;
  const int64_t qb = std::max<int64_t>(1, (max_rows_q + spec.block_q - 1) / spec.block_q + spec.extra);
  const int64_t kb = std::max<int64_t>(1, (max_rows_k + spec.block_k - 1) / spec.block_k + spec.extra);
  BlockMask& m = h.view;
  m.shape[0] = mb;
  m.shape[1] = mh;
  m.shape[2] = qb;
  m.shape[3] = kb;
  m.block_q = spec.block_q;
  m.block_k = spec.block_k;
  const int64_t stored_heads = spec.layout == 3 ? 1 : mh;
  h.bytes.assign(size_t(mb * stored_heads * qb * kb), 0);
  m.stride[0] = stored_heads * qb * kb;
  m.stride[1] = spec.layout == 3 ? 0 : qb * kb;
  m.stride[2] = spec.layout == 1 ? 1 : kb;
  m.stride[3] = spec.layout == 1 ? qb : (spec.layout == 2 ? -1 : 1);
  h.origin = spec.layout == 2 ? kb - 1 : 0;
  for (int64_t b = 0; b < mb; ++b) {
    for (int64_t hh = 0; hh < stored_heads; ++hh) {
      for (int64_t i = 0; i < qb; ++i) {
        for (int64_t j = 0; j < kb; ++j) {
          const bool keep = rng.uniform(0.0f, 1.0f) < spec.density && !(spec.per_batch && b == spec.empty_batch);
          const int64_t at = h.origin + b * m.stride[0] + hh * m.stride[1] + i * m.stride[2] + j * m.stride[3];
          h.bytes[size_t(at)] = keep ? uint8_t(rng.uniform_int(1, 255)) : 0;
        }
      }
    }
  }
  return h;
}

}  // namespace fastattn::testing
