// A block mask's rules, in the order a user most likely needs to hear about them. Strides are free
// (any sign, 0 broadcasts): the mask is a byte array read entry by entry, never loaded in bulk.
#include "api/block_mask_checks.h"

#include <algorithm>
#include <cstdint>

#include "api/message.h"

namespace fastattn::detail {

int64_t longest(bool varlen, int64_t fixed, int32_t max_seqlen, const std::vector<int32_t>& cu) {
  if (!varlen) return fixed;
  if (max_seqlen > 0) return max_seqlen;
  int64_t m = 0;
  for (size_t b = 0; b + 1 < cu.size(); ++b) m = std::max<int64_t>(m, int64_t(cu[b + 1]) - cu[b]);
  return m;
}

namespace {

constexpr const char* kName = "mask.blocks";
constexpr const char* kDims = "(mask_batch, mask_heads, q_blocks, k_blocks)";

std::string device_text(Device d, int32_t index) {
  return d == Device::CPU ? std::string("cpu") : msg("cuda:", index);
}


Status check_covers(int dim, int64_t size, int64_t rows, const char* rows_name, const char* block_name,
                    int32_t block) {
  const int64_t need = (rows + block - 1) / block;
  if (size >= need) return Status::Ok();
  return Status::Invalid(msg(kName, ": dim ", dim, " is ", size, " but must be >= ceil(", rows_name, " ",
                             rows, " / ", block_name, " ", block, ") = ", need,
                             " (the blocks cover the longest sequence)"));
}

}  // namespace

Status check_block_mask(const AttnArgs& a, bool varlen, const HostIndexArrays& idx) {
  const BlockMask& m = a.mask.blocks;
  if (a.mask.kind != MaskKind::BlockSparse) {
    if (!m.defined()) return Status::Ok();
    return Status::Invalid(msg(kName, ": given but mask.kind is ", int32_t(a.mask.kind),
                               " (set mask.kind = BlockSparse to apply it)"));
  }
  if (!m.defined()) {
    return Status::Invalid(msg(kName, ": data is null (MaskKind::BlockSparse needs a byte array ", kDims, ")"));
  }
  const int32_t dev = int32_t(m.device);
  if (dev < 0 || dev > 1) {
    return Status::Invalid(msg(kName, ": unknown device code ", dev, " (expected cpu or cuda)"));
  }
  if (m.device != a.q.device || (m.device == Device::CUDA && m.device_index != a.q.device_index)) {
    return Status::Invalid(msg(kName, ": on ", device_text(m.device, m.device_index), " but q is on ",
                               device_string(a.q), " (the mask lives where the attention tensors live)"));
  }
  for (int i = 0; i < 4; ++i) {
    if (m.shape[i] < 1 || m.shape[i] > INT32_MAX) {
      return Status::Invalid(msg(kName, ": dim ", i, " has size ", m.shape[i], " but every dim of ", kDims,
                                 " needs 1..2^31-1"));
    }
  }
  if (m.block_q < 1 || m.block_k < 1) {
    return Status::Invalid(msg(kName, ": ", m.block_q < 1 ? "block_q" : "block_k", " must be >= 1 but got ",
                               std::min(m.block_q, m.block_k)));
  }
  const int hd = varlen ? 1 : 2;  // heads axis of q / k
  const int64_t batch = varlen ? a.cu_seqlens_q.size - 1 : a.q.shape[0];
  const int64_t hq = a.q.shape[hd], hkv = a.k.shape[hd];
  if (m.shape[0] != 1 && m.shape[0] != batch) {
    return Status::Invalid(msg(kName, ": dim 0 (mask_batch) is ", m.shape[0], " but must be 1 (shared) or batch ",
                               batch));
  }
  if (hq % m.shape[1] != 0) {
    return Status::Invalid(msg(kName, ": dim 1 (mask_heads) is ", m.shape[1], " but must divide heads_q ", hq,
                               " (1, heads_kv ", hkv, " or heads_q are the usual choices)"));
  }
  const int64_t rows_q = longest(varlen, varlen ? 0 : a.q.shape[1], a.max_seqlen_q, idx.cu_q);
  const int64_t rows_k = longest(varlen, varlen ? 0 : a.k.shape[1], a.max_seqlen_k, idx.cu_k);
  Status st = check_covers(2, m.shape[2], rows_q, varlen ? "max_seqlen_q" : "seqlen_q", "block_q", m.block_q);
  if (st.ok()) st = check_covers(3, m.shape[3], rows_k, varlen ? "max_seqlen_k" : "seqlen_k", "block_k", m.block_k);
  return st;
}

Status check_bit_mask(const AttnArgs& a, bool varlen, const HostIndexArrays& idx) {
  constexpr const char* kBits = "mask.bits";
  const BitMask& m = a.mask.bits;
  if (a.mask.kind != MaskKind::DenseBitmask) {
    if (!m.defined()) return Status::Ok();
    if (a.mask.kind == MaskKind::BlockSparse)  // the C ABI and Python pass both as given: say which pair
      return Status::Invalid(msg(kBits, ": given together with a block-sparse mask (mask.blocks); a call takes one "
                                 "mask kind (AND the kept blocks into the bits and pass the bits alone)"));
    return Status::Invalid(msg(kBits, ": given but mask.kind is ", int32_t(a.mask.kind),
                               " (set mask.kind = DenseBitmask to apply it)"));
  }
  if (!m.defined()) {
    return Status::Invalid(
        msg(kBits, ": data is null (MaskKind::DenseBitmask needs uint32 words (mask_batch, mask_heads, rows, words))"));
  }
  const int32_t dev = int32_t(m.device);
  if (dev < 0 || dev > 1) return Status::Invalid(msg(kBits, ": unknown device code ", dev, " (expected cpu or cuda)"));
  if (reinterpret_cast<uintptr_t>(m.data) % alignof(uint32_t) != 0)  // a C caller's byte buffer: words load whole
    return Status::Invalid(msg(kBits, ": data is not 4-byte aligned (uint32 words)"));
  if (m.device != a.q.device || (m.device == Device::CUDA && m.device_index != a.q.device_index)) {
    return Status::Invalid(msg(kBits, ": on ", device_text(m.device, m.device_index), " but q is on ", device_string(a.q),
                               " (the mask lives where the attention tensors live)"));
  }
  for (int i = 0; i < 4; ++i) {
    if (m.shape[i] < 1 || m.shape[i] > INT32_MAX) {
      return Status::Invalid(msg(kBits, ": dim ", i, " has size ", m.shape[i],
                                 " but every dim of (mask_batch, mask_heads, rows, words) needs 1..2^31-1"));
    }
  }
  const int hd = varlen ? 1 : 2;
  const int64_t batch = varlen ? a.cu_seqlens_q.size - 1 : a.q.shape[0];
  const int64_t hq = a.q.shape[hd], hkv = a.k.shape[hd];
  if (m.shape[0] != 1 && m.shape[0] != batch) {
    return Status::Invalid(msg(kBits, ": dim 0 (mask_batch) is ", m.shape[0], " but must be 1 (shared) or batch ", batch));
  }
  if (hq % m.shape[1] != 0) {
    return Status::Invalid(msg(kBits, ": dim 1 (mask_heads) is ", m.shape[1], " but must divide heads_q ", hq,
                               " (1, heads_kv ", hkv, " or heads_q are the usual choices)"));
  }
  const int64_t rows_q = longest(varlen, varlen ? 0 : a.q.shape[1], a.max_seqlen_q, idx.cu_q);
  const int64_t rows_k = longest(varlen, varlen ? 0 : a.k.shape[1], a.max_seqlen_k, idx.cu_k);
  if (m.shape[2] < rows_q) {
    return Status::Invalid(msg(kBits, ": dim 2 (rows) is ", m.shape[2], " but must be >= ",
                               varlen ? "max_seqlen_q " : "seqlen_q ", rows_q, " (the rows cover the longest sequence)"));
  }
  const int64_t words = (rows_k + 31) / 32;
  if (m.shape[3] < words) {
    return Status::Invalid(msg(kBits, ": dim 3 (words) is ", m.shape[3], " but must be >= ceil(",
                               varlen ? "max_seqlen_k " : "seqlen_k ", rows_k, " / 32) = ", words,
                               " (the words cover the longest sequence)"));
  }
  return Status::Ok();
}

}  // namespace fastattn::detail
