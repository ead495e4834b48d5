#include "cuda/block_mask_rule.h"

#include <cstdint>
#include <string>

namespace fastattn::cuda_backend {

namespace {

// Lists of ints: lines x blocks per line must stay below 2^31 entries.
bool lists_fit(int64_t lines, int64_t blocks_per_line) { return lines * blocks_per_line <= INT32_MAX; }

}  // namespace

namespace {

// An element bitmask (p.bits): the forward's BitmaskConfig kernels (sm90/fwd/launch_bitmask.cuh), the
// backward's BitmaskBwdConfig kernel (sm90/bwd/bit_lists.h: the block-sparse backward's twin, so its rule).
Status bit_mask_support(const detail::Problem& p, bool backward, bool deterministic) {
  const std::string pass = backward ? "backward" : "forward";
  if (p.head_dim != p.head_dim_v || p.head_dim > 128)
    return Status::Unsupported("mask: the CUDA bitmask " + pass + " runs head dims up to 128 with head_dim_v = " +
                               "head_dim (64, 96, 128); got head_dim " + std::to_string(p.head_dim) + ", head_dim_v " +
                               std::to_string(p.head_dim_v));
  const detail::BitMaskView& m = p.bits;
  const int64_t batches = m.batch_stride == 0 ? 1 : p.batch, heads = p.heads_q / m.head_div;
  if (backward) {
    // The deterministic mode runs (BitmaskBwdConfig's deterministic kernels, the dQ turns from the prep,
    // which widen each list row to 2 x q-blocks: checked below).
    // A softcap runs (BitmaskBwdConfig: Base's softcap kernel at d 64 / 128, its run-time branch at d 96).
    if (p.group > 0 && m.head_div % p.group != 0)
      return Status::Unsupported("mask: the CUDA bitmask backward needs the q heads of one KV head to share a mask "
                                 "head (mask heads 1 or a divisor of heads_kv); got " + std::to_string(heads) +
                                 " mask heads for heads_kv " + std::to_string(p.heads_kv));
    // sm90/bwd/bit_lists.h: a packed slot per (mask line of 128 keys, q-block of 64 rows at most), a list
    // entry per (key tile, q-block).
    const int64_t k_tiles = (int64_t(p.max_rows_k) + kBlockSparseTileKeys - 1) / kBlockSparseTileKeys;
    const int64_t q_blocks = (int64_t(p.max_rows_q) + 63) / 64;
    if (!lists_fit(batches * heads * k_tiles, q_blocks) ||
        !lists_fit(int64_t(p.batch) * p.heads_kv * k_tiles, (deterministic ? 2 : 1) * q_blocks))
      return Status::Unsupported("mask: the CUDA bitmask backward's lists would exceed 2^31 entries (key tiles of "
                                 "128 x q-blocks of 64)");
    return Status::Ok();
  }
  if (p.num_splits_arg > 1)
    return Status::Unsupported("num_splits: the CUDA bitmask forward does not split keys (pass 0 or 1); got " +
                               std::to_string(p.num_splits_arg));
  // sm90/fwd/bit_lists.h: a packed slot per (mask line, key block of 128), a list entry per (tile, key block).
  const int64_t k_blocks = (int64_t(p.max_rows_k) + kBlockSparseTileKeys - 1) / kBlockSparseTileKeys;
  const int64_t q_tiles = (int64_t(p.max_rows_q) + kBlockSparseTileRows - 1) / kBlockSparseTileRows;
  if (!lists_fit(batches * heads * q_tiles, k_blocks) || !lists_fit(int64_t(p.batch) * p.heads_q * q_tiles, k_blocks))
    return Status::Unsupported("mask: the CUDA bitmask forward's lists would exceed 2^31 entries (tiles of 128 rows x "
                               "key blocks of 128)");
  return Status::Ok();
}

}  // namespace

Status block_mask_support(const detail::Problem& p, bool backward, bool deterministic) {
  if (p.bits.defined()) return bit_mask_support(p, backward, deterministic);
  const detail::BlockMaskView& m = p.blocks;
  const std::string pass = backward ? "backward" : "forward";
  if (p.head_dim != p.head_dim_v || p.head_dim > 128)
    return Status::Unsupported("mask: the CUDA block-sparse " + pass + " runs head dims up to 128 with head_dim_v = " +
                               "head_dim (64, 96, 128); got head_dim " + std::to_string(p.head_dim) + ", head_dim_v " +
                               std::to_string(p.head_dim_v));
  if (m.block_q % kBlockSparseTileRows != 0 || m.block_k % kBlockSparseTileKeys != 0)
    return Status::Unsupported("mask: the CUDA block-sparse " + pass + " needs block_q and block_k multiples of 128 " +
                               "(its 128 x 128 tiles must each lie inside one mask block); got block_q " +
                               std::to_string(m.block_q) + ", block_k " + std::to_string(m.block_k));
  const int64_t batches = m.batch_stride == 0 ? 1 : p.batch, heads = m.head_div > 0 ? p.heads_q / m.head_div : 1;
  if (!backward) {
    if (p.num_splits_arg > 1)
      return Status::Unsupported("num_splits: the CUDA block-sparse forward does not split keys (pass 0 or 1); got " +
                                 std::to_string(p.num_splits_arg));
    // sm90/fwd/block_lists.h: a list per mask row (q block) with room for every key block of 128.
    if (!lists_fit(batches * heads * m.q_blocks, (int64_t(p.max_rows_k) + kBlockSparseTileKeys - 1) / kBlockSparseTileKeys))
      return Status::Unsupported("mask: the CUDA block-sparse forward's lists would exceed 2^31 entries (mask batches x "
                                 "heads x q blocks x key blocks of 128); use block_q > 128 or fewer mask heads");
    return Status::Ok();
  }
  // The backward (sm90/bwd, BlockSparseBwdConfig): the default mode's accumulator path only, and one list
  // per key tile serves all q heads of its KV head.
  if (deterministic)
    return Status::Unsupported("mask: block-sparse deterministic backward on CUDA not yet (deterministic=False runs it; "
                               "the CPU and reference backends run both)");
  if (p.softcap > 0.f)
    return Status::Unsupported("mask: the CUDA block-sparse backward takes no softcap yet (its kernel is built "
                               "without the softcap path)");
  if (p.group > 0 && m.head_div % p.group != 0)
    return Status::Unsupported("mask: the CUDA block-sparse backward needs the q heads of one KV head to share a mask "
                               "head (mask heads 1 or a divisor of heads_kv); got " + std::to_string(heads) +
                               " mask heads for heads_kv " + std::to_string(p.heads_kv));
  // sm90/bwd/block_lists.h: a list per mask column (key block) with room for every q-block (64 rows at most).
  if (!lists_fit(batches * heads * m.k_blocks, (int64_t(p.max_rows_q) + 63) / 64))
    return Status::Unsupported("mask: the CUDA block-sparse backward's lists would exceed 2^31 entries (mask batches x "
                               "heads x key blocks x q-blocks of 64); use block_k > 128 or fewer mask heads");
  return Status::Ok();
}

bool block_mask_packs(const detail::Problem& p) { return p.group > 0 && p.blocks.head_div % p.group == 0; }

}  // namespace fastattn::cuda_backend
