// The additive bias (AttnArgs::bias) on the Hopper forward (BiasConfig kernels, sm90/fwd/mainloop.cuh
// add_bias) against the float64 reference (which adds the same bias, reference/score_row.h): inputs
// drawn fresh, out poisoned (row padding must stay poisoned), every element and LSE checked with FA3's
// rule (fwd_case.h), two runs bitwise equal. Bias dims broadcast or not (batch 1 / batch, heads 1 /
// heads_kv / heads_q, head stride 0), padded rows, extra rows / cols, -inf entries and whole -inf rows
// (out 0, lse -inf), odd lengths 1 / 17 / 113 / 4097, s_q != s_k, causal and windows, softcap, GQA,
// varlen with an empty sequence and seqused, d 64 / 96 / 128 in both dtypes, a CUDA graph, with a
// block-sparse mask or a bitmask; a zero bias; full blocks on the plain and the generic loop body; and the
// refusals by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fwd_case.h"
#include "random_masks.h"

namespace fastattn::gputest {
namespace {

class Sm90FwdBias : public HopperTest {};

struct BiasCase {
  FwdCase c;
  bool per_batch = true;
  int heads = 0;            // 0: heads_q
  bool head_stride0 = false;  // dim 1 broadcast by stride 0 (one stored head)
  int extra_rows = 0, extra_cols = 0;
  int row_pad = 0;          // elements after each row (odd ones: the kernel's 16-bit pair loads)
  int base_offset = 0;      // elements before the first one (odd: a base that is not 4-byte aligned)
  bool rows_reversed = false;  // row i stored at position rows - 1 - i: a negative row stride
  double neginf = 0.0;      // fraction of -inf entries
  int neginf_row = -1;      // this row -inf everywhere
  float range = 3.f;        // entries uniform in [-range, range)
  bool zero = false;        // every entry 0

  int bias_heads() const { return heads > 0 ? heads : c.hq; }
  std::string str() const {
    return c.str() + " bias b" + (per_batch ? "B" : "1") + " h" + std::to_string(bias_heads()) +
           (head_stride0 ? " hstride0" : "") + " extra(" + std::to_string(extra_rows) + "," +
           std::to_string(extra_cols) + ") pad" + std::to_string(row_pad) + " offset" + std::to_string(base_offset) +
           " -inf " + std::to_string(neginf) +
           " -inf row " + std::to_string(neginf_row) + (zero ? " zero" : "") + (rows_reversed ? " reversed" : "");
  }
};

// The bias in the input dtype on the host and the device, and its Tensor over either copy.
struct BiasTensor {
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 1};
  std::vector<uint16_t> host;
  std::unique_ptr<DeviceBuffer> dev;
  int64_t offset = 0;  // elements before the bias's first one, in both copies
  bool reversed = false;

  BiasTensor(const BiasCase& bc, const CaseIndex& idx, std::mt19937& rng) {
    const FwdCase& c = bc.c;
    const int max_q = idx.varlen ? idx.max_q : c.sq, max_k = idx.varlen ? idx.max_k : c.sk;
    shape[0] = bc.per_batch ? idx.batch : 1;
    shape[1] = bc.bias_heads();
    shape[2] = std::max(1, max_q + bc.extra_rows);
    shape[3] = std::max(1, max_k + bc.extra_cols);
    const int64_t stored_heads = bc.head_stride0 ? 1 : shape[1];
    stride[2] = shape[3] + bc.row_pad;
    stride[1] = bc.head_stride0 ? 0 : shape[2] * stride[2];
    stride[0] = stored_heads * shape[2] * stride[2];
    offset = bc.base_offset;
    reversed = bc.rows_reversed;
    host.assign(size_t(offset + shape[0] * stride[0]), 0xFFFF);  // padding: NaN, never read
    std::uniform_real_distribution<float> u(-bc.range, bc.range);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    for (int64_t b = 0; b < shape[0]; ++b)
      for (int64_t h = 0; h < stored_heads; ++h)
        for (int64_t i = 0; i < shape[2]; ++i)
          for (int64_t j = 0; j < shape[3]; ++j) {
            float x = bc.zero ? 0.f : u(rng);
            if (i == bc.neginf_row || (bc.neginf > 0 && coin(rng) < bc.neginf)) x = -INFINITY;
            const int64_t at = reversed ? shape[2] - 1 - i : i;
            host[size_t(offset + b * stride[0] + h * shape[2] * stride[2] + at * stride[2] + j)] = to_bits(x, c.dtype);
          }
    dev = std::make_unique<DeviceBuffer>(host.size() * 2);
    dev->upload(host.data());
  }
  Tensor view(DType dt, bool on_gpu) {
    Tensor t;
    t.data = static_cast<uint16_t*>(on_gpu ? dev->get() : static_cast<void*>(host.data())) + offset;
    t.ndim = 4;
    t.dtype = dt;
    t.device = on_gpu ? Device::CUDA : Device::CPU;
    for (int i = 0; i < 4; ++i) {
      t.shape[i] = shape[i];
      t.stride[i] = stride[i];
    }
    if (reversed) {  // row 0 is the last stored row of each (batch, head)
      t.data = static_cast<uint16_t*>(t.data) + (shape[2] - 1) * stride[2];
      t.stride[2] = -stride[2];
    }
    return t;
  }
};

void run_bias_case(const BiasCase& bc) {
  SCOPED_TRACE(bc.str());
  std::mt19937 rng(uint32_t(std::random_device{}()));
  const CaseIndex idx(bc.c);
  BiasTensor bias(bc, idx, rng);
  run_fwd_case(bc.c, [&](AttnArgs& a, bool on_gpu) { a.bias = bias.view(bc.c.dtype, on_gpu); });
}

BiasCase bias_case(DType dt, int d, int sq, int sk, int hq, int hkv, int batch = 2) {
  BiasCase b;
  b.c.dtype = dt;
  b.c.d = d;
  b.c.sq = sq;
  b.c.sk = sk;
  b.c.hq = hq;
  b.c.hkv = hkv;
  b.c.batch = batch;
  return b;
}

TEST_F(Sm90FwdBias, HeadDimsAndDtypes) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int d : {128, 64, 96}) {
      BiasCase b = bias_case(dt, d, 500, 900, 4, 4);
      run_bias_case(b);
      b.c.causal = true;
      b.c.sk = 500;
      run_bias_case(b);
    }
}

TEST_F(Sm90FwdBias, OddLengths) {
  for (int sq : {1, 17, 113})
    for (int sk : {1, 17, 113, 4097}) {
      BiasCase b = bias_case(DType::BF16, 128, sq, sk, 2, 1);
      b.c.causal = sq <= sk && sk != 4097;
      run_bias_case(b);
    }
  run_bias_case(bias_case(DType::BF16, 128, 4097, 300, 2, 2, 1));
}

// The staged bias (FwdBias::staged: base 16-byte aligned, strides multiples of 8 elements; each warp
// copies its rows of whole key blocks into smem one block ahead) and the per-thread loads beside it:
// odd lengths with row strides padded to 8 (staged; the sequence's last partial block and rows past
// s_q take the loads), broadcast dims, a base 8 bytes off (paired loads), odd strides (16-bit loads),
// d 64's 192-key blocks, and FASTATTN_BIAS_STAGED=0 forcing the loads on a stageable layout.
TEST_F(Sm90FwdBias, StagedAndLoadedPaths) {
  auto padded = [](BiasCase b) {  // row stride up to a multiple of 8
    b.row_pad = (8 - (b.c.sk + b.extra_cols) % 8) % 8;
    return b;
  };
  for (int sq : {1, 17, 113, 300})
    for (int sk : {1, 17, 113, 4097}) {
      BiasCase b = padded(bias_case(DType::BF16, 128, sq, sk, 2, 1));
      b.c.causal = sq <= sk && sk != 4097;
      run_bias_case(b);
    }
  for (int d : {64, 128})
    for (DType dt : {DType::BF16, DType::F16}) {
      BiasCase b = padded(bias_case(dt, d, 700, 1000, 4, 2));
      run_bias_case(b);                  // staged
      b.c.causal = true;
      run_bias_case(b);
      b.base_offset = 4;                 // 8-byte aligned: paired loads
      run_bias_case(b);
      b.base_offset = 0;
      b.row_pad += 1;                    // odd stride: 16-bit loads
      run_bias_case(b);
    }
  for (int heads : {1, 2, 8}) {          // broadcast batch / heads, staged
    BiasCase b = padded(bias_case(DType::BF16, 128, 300, 640, 8, 2));
    b.heads = heads;
    b.per_batch = heads == 8;
    b.head_stride0 = heads == 2;
    run_bias_case(b);
  }
  ::setenv("FASTATTN_BIAS_STAGED", "0", 1);
  BiasCase b = padded(bias_case(DType::BF16, 128, 300, 640, 4, 4));
  run_bias_case(b);
  b.c.d = 64;
  b.c.causal = true;
  b.c.sk = 300;
  run_bias_case(padded(b));
  ::unsetenv("FASTATTN_BIAS_STAGED");
}

// Bias batch 1 / batch, heads 1 / heads_kv / heads_q, head stride 0, under GQA 1 / 4 / 8.
TEST_F(Sm90FwdBias, BroadcastDimsAndGqa) {
  for (int hkv : {8, 2, 1})
    for (int heads : {1, hkv, 8}) {
      BiasCase b = bias_case(DType::BF16, 128, 300, 400, 8, hkv);
      b.heads = heads;
      b.per_batch = heads != 1;
      run_bias_case(b);
    }
  BiasCase b = bias_case(DType::F16, 128, 300, 400, 4, 2);
  b.head_stride0 = true;
  run_bias_case(b);
}

TEST_F(Sm90FwdBias, LayoutsAndCover) {
  BiasCase b = bias_case(DType::BF16, 128, 200, 333, 2, 2);
  b.row_pad = 6;
  b.extra_rows = 9;
  b.extra_cols = 31;
  run_bias_case(b);
  b.c.out_pad = 8;
  b.c.row_pad = 8;
  run_bias_case(b);
  // Odd row strides and a base off 4-byte alignment: the kernel's 16-bit pair loads.
  b.row_pad = 3;
  b.base_offset = 1;
  run_bias_case(b);
  b.c.causal = true;
  b.c.sq = b.c.sk;
  run_bias_case(b);
}

// Rows stored in reverse (a negative row stride, a multiple of 8: the staged copy's 32-bit row offsets are
// negative), full and causal, d 128 (sources set once a tile) and d 64 (once a block), odd lengths.
TEST_F(Sm90FwdBias, ReversedRowsStaged) {
  for (int d : {128, 64}) {
    BiasCase b = bias_case(DType::BF16, d, 300, 640, 2, 2);
    b.rows_reversed = true;
    run_bias_case(b);
    b.c.causal = true;
    b.c.sq = 640;
    run_bias_case(b);
    b.c.causal = false;
    b.c.sq = 113;
    b.extra_cols = 11;  // 651 columns in rows of 656 elements (a multiple of 8)
    b.row_pad = 5;
    run_bias_case(b);
  }
}

TEST_F(Sm90FwdBias, NegInfEntriesAndRows) {
  BiasCase b = bias_case(DType::BF16, 128, 300, 300, 2, 2);
  b.neginf = 0.3;
  run_bias_case(b);
  b.neginf = 0.999;  // most rows keep nothing: out 0, lse -inf
  run_bias_case(b);
  b.neginf = 0;
  b.neginf_row = 130;
  b.c.causal = true;
  run_bias_case(b);
}

// Full blocks on the plain loop body (FwdBias::plain; the deferred max at 128-key blocks) and, with
// FASTATTN_BIAS_PLAIN=0, every block on the generic body: rows of 7 blocks of 128 keys (5 of d 64's 192),
// -inf entries, a row -inf everywhere, and rows that keep nothing in the first (generic) blocks but do in
// later plain ones (the deferred max's fresh-row fallback), full and causal, staged and loaded (odd stride).
TEST_F(Sm90FwdBias, PlainAndGenericBodies) {
  for (const char* plain : {"1", "0"}) {
    ::setenv("FASTATTN_BIAS_PLAIN", plain, 1);
    const bool all = plain[0] == '1';
    for (int d : {64, 128}) {
      BiasCase b = bias_case(DType::BF16, d, 800, 800, 2, 2);
      b.neginf = 0.3;
      if (all) run_bias_case(b);
      b.neginf = 0.995;  // most rows keep a few keys, in any block
      run_bias_case(b);
      b.c.causal = true;
      if (all) run_bias_case(b);
      b.neginf = 0;
      b.neginf_row = 700;
      b.c.causal = false;
      run_bias_case(b);
      b.row_pad = 1;  // odd stride: the loads, not the stage
      b.c.causal = true;
      if (all) run_bias_case(b);
    }
  }
  ::unsetenv("FASTATTN_BIAS_PLAIN");
}

TEST_F(Sm90FwdBias, MasksAndSoftcap) {
  BiasCase b = bias_case(DType::BF16, 128, 700, 1100, 4, 2);
  b.c.wl = 200;
  b.c.wr = 50;
  run_bias_case(b);
  b.c.wl = b.c.wr = -1;
  b.c.causal = true;
  b.c.sq = 1100;
  run_bias_case(b);
  b.c.softcap = 15.f;
  run_bias_case(b);
  b.c.causal = false;
  b.c.sq = 1;  // decode-shaped
  run_bias_case(b);
}

TEST_F(Sm90FwdBias, VarlenAndSeqused) {
  BiasCase b = bias_case(DType::BF16, 128, 0, 0, 4, 1);
  b.c.lens_q = {17, 0, 300, 128, 1};
  b.c.lens_k = {40, 5, 300, 700, 4097};
  run_bias_case(b);
  b.c.causal = true;
  b.c.used_q = {10, 0, 250, 128, 1};
  b.c.used_k = {40, 3, 260, 650, 4000};
  b.per_batch = false;
  b.heads = 1;
  run_bias_case(b);
  b.c.nan_past = NanPast::All;  // NaN in q, k, v past seqused: out 0 there, no other row touched
  run_bias_case(b);
}

TEST_F(Sm90FwdBias, LargeRandomAndGraph) {
  BiasCase b = bias_case(DType::BF16, 128, 2048, 2048, 4, 4, 2);
  b.range = 8.f;
  run_bias_case(b);
  b.c.graph = true;
  b.c.causal = true;
  run_bias_case(b);
}

TEST_F(Sm90FwdBias, ZeroBias) {
  BiasCase b = bias_case(DType::BF16, 128, 513, 700, 4, 2);
  b.zero = true;
  run_bias_case(b);
}

// What the CUDA forward refuses, by name (cuda/bias_rule.h).
TEST_F(Sm90FwdBias, Refusals) {
  const FwdCase c = bias_case(DType::BF16, 128, 64, 64, 2, 2).c;
  const CaseIndex idx(c);
  TestTensor q(idx.shape(c.sq, 0, c.hq, c.d), 0), k(idx.shape(c.sk, 0, c.hkv, c.d), 0),
      v(idx.shape(c.sk, 0, c.hkv, c.d), 0), out(idx.shape(c.sq, 0, c.hq, c.d), 0);
  DeviceBuffer bias_dev(size_t(2 * 2 * 64 * 64 * 4 + 64));
  auto args = [&]() {
    AttnArgs a;
    a.q = q.view(q.dev->get(), c.dtype, Device::CUDA);
    a.k = k.view(k.dev->get(), c.dtype, Device::CUDA);
    a.v = v.view(v.dev->get(), c.dtype, Device::CUDA);
    a.out = out.view(out.dev->get(), c.dtype, Device::CUDA);
    a.bias = make_tensor(bias_dev.get(), DType::BF16, {1, 2, 64, 64}, Device::CUDA);
    return a;
  };
  auto refused = [&](const AttnArgs& a, const char* part) {
    const Status st = forward(a, nullptr);
    EXPECT_FALSE(st.ok()) << part;
    EXPECT_NE(st.message.find(part), std::string::npos) << st.message;
  };
  AttnArgs a = args();
  a.bias.dtype = DType::F32;
  refused(a, "bias: dtype fp32 but the CUDA forward reads a bias of q's dtype bf16");
  a = args();
  a.num_splits = 2;
  refused(a, "the CUDA forward with bias has no split-KV");
}

// A bias with a block-sparse mask or a bitmask: their kernels' bias twins (the mask's empty blocks
// skipped, partial blocks masked after the bias). Random kept 128 x 128 blocks (one mask for every
// batch entry and head) or random bits (per batch entry, one per KV head), with causal too.
TEST_F(Sm90FwdBias, WithBlockSparseAndBitmask) {
  for (int d : {128, 64})  // d 64: the three-warpgroup twins, partial diagonal blocks in the plain body
  for (int kind = 0; kind < 2; ++kind)
    for (bool causal : {false, true}) {
      BiasCase bc = bias_case(DType::BF16, d, 700, 900, 4, 2);
      bc.c.causal = causal;
      bc.c.sq = causal ? 900 : 700;
      SCOPED_TRACE(bc.str() + (kind == 0 ? " block-sparse" : " bitmask"));
      std::mt19937 rng(uint32_t(std::random_device{}()));
      const CaseIndex idx(bc.c);
      BiasTensor bias(bc, idx, rng);
      const RandomMasks masks(rng, idx.batch, 2, bc.c.sq, bc.c.sk);
      run_fwd_case(bc.c, [&](AttnArgs& a, bool on_gpu) {
        a.bias = bias.view(bc.c.dtype, on_gpu);
        masks.apply(a, on_gpu, kind);
      });
    }
}

}  // namespace
}  // namespace fastattn::gputest
