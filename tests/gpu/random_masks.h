// Random masks for the score-term tests (fwd_bias_test.cpp, fwd_alibi_test.cpp): a block-sparse mask of kept
// 128 x 128 blocks (one for every batch entry and head, each kept with probability 0.6) or an element bitmask
// of random bits (per batch entry and KV head), on the host and the device, set into a call's AttnArgs.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "fwd_case.h"

namespace fastattn::gputest {

struct RandomMasks {
  int qb = 0, kb = 0, words = 0, batch = 0, heads = 0, sq = 0;
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> bits;
  DeviceBuffer bytes_dev, bits_dev;

  RandomMasks(std::mt19937& rng, int batch_, int heads_kv, int sq_, int sk)
      : qb((sq_ + 127) / 128), kb((sk + 127) / 128), words((sk + 31) / 32), batch(batch_), heads(heads_kv), sq(sq_),
        bytes(size_t(qb * kb)), bits(size_t(batch_) * heads_kv * sq_ * words),
        bytes_dev(bytes.size()), bits_dev(bits.size() * 4) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (auto& x : bytes) x = u(rng) < 0.6 ? 1 : 0;
    for (auto& w : bits) w = uint32_t(rng());
    bytes_dev.upload(bytes.data());
    bits_dev.upload(bits.data());
  }

  // kind 0: the block-sparse mask; 1: the bitmask.
  void apply(AttnArgs& a, bool on_gpu, int kind) const {
    const Device dv = on_gpu ? Device::CUDA : Device::CPU;
    if (kind == 0) {
      a.mask.kind = MaskKind::BlockSparse;
      BlockMask& m = a.mask.blocks;
      m.data = on_gpu ? static_cast<const uint8_t*>(bytes_dev.get()) : bytes.data();
      m.shape[0] = m.shape[1] = 1;
      m.shape[2] = qb;
      m.shape[3] = kb;
      m.stride[3] = 1;
      m.stride[2] = kb;
      m.stride[1] = m.stride[0] = int64_t(qb) * kb;
      m.device = dv;
    } else {
      a.mask.kind = MaskKind::DenseBitmask;
      BitMask& m = a.mask.bits;
      m.data = on_gpu ? static_cast<const uint32_t*>(bits_dev.get()) : bits.data();
      m.shape[0] = batch;
      m.shape[1] = heads;
      m.shape[2] = sq;
      m.shape[3] = words;
      m.stride[2] = words;
      m.stride[1] = int64_t(sq) * words;
      m.stride[0] = heads * m.stride[1];
      m.device = dv;
    }
  }
};

}  // namespace fastattn::gputest
