// Hopper forward vs the float64 reference: every head dim (and d_qk 192 with d_v 128) and dtype, odd lengths (1, 17, 113,
// 4097), s_q != s_k, GQA 1/4/8, GQA head packing for s_q <= 64, varlen with empty sequences and
// seqused, causal, local, softcap, strided inputs, a running max that keeps rising or jumps. Each
// case also runs twice and must be bitwise identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fwd_case.h"
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

class Sm90Fwd : public HopperTest {};

FwdCase base(DType dt, int d, int sq, int sk) {
  FwdCase c;
  c.dtype = dt;
  c.d = d;
  c.sq = sq;
  c.sk = sk;
  return c;
}

// Caps the persistent grid at 3 CTAs while in scope, so every CTA walks many tiles.
struct CtaCap {
  ScopedEnv env{"FASTATTN_MAX_CTAS", "3"};
};

TEST_F(Sm90Fwd, HeadDimsAndDtypes) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int d : {64, 96, 128, 192, 256})
      for (bool causal : {false, true}) {
        FwdCase c = base(dt, d, 200, 300);
        c.batch = 2;
        c.causal = causal;
        run_fwd_case(c);
      }
}

// Scores that grow toward the first keys (visited last): the running max rises block after block,
// sometimes by more than the slack (O and the sum rescaled), sometimes by less (stale max, p up to
// 2^8; or in the deferred max's plain blocks, up to its limit). Every config: d 64 (three
// warpgroups, and 128-key short rows), 128 (block stream, causal and not), 256; both dtypes.
TEST_F(Sm90Fwd, RisingRowMax) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (int sk : {1000, 8193}) {
          FwdCase c = base(dt, d, 300, sk);  // causal is bottom-right: row i sees sk - 300 + i keys
          c.hq = c.hkv = 1;
          c.causal = causal;
          c.key_ramp = 20.f;
          run_fwd_case(c);
        }
}

// A row's max that jumps within one block of the plain loop body: two keys with k scaled by 12
// (the jump passes the deferred max's limit, 2^15 = 32768, by far while p stays finite) or by 300
// (exp2 of the jump is inf in fp32). The deferred step must fall back to the full one for the
// rows' warps. d 96 / 128 (128-key stream) and 256 (80 keys) take the deferred path; 64 is the
// control (three warpgroups, no deferred max).
TEST_F(Sm90Fwd, JumpingRowMax) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int d : {64, 96, 128, 256})
      for (bool causal : {false, true})
        for (float spike : {12.f, 300.f}) {
          FwdCase c = base(dt, d, 300, 2000);
          c.hq = c.hkv = 2;
          c.causal = causal;
          c.key_spike = spike;
          run_fwd_case(c);
        }
}

TEST_F(Sm90Fwd, OddLengths) {
  for (int sq : {1, 17, 113})
    for (int sk : {1, 17, 113, 300})
      for (bool causal : {false, true}) {
        FwdCase c = base(DType::BF16, 128, sq, sk);
        c.causal = causal;
        run_fwd_case(c);
      }
}

TEST_F(Sm90Fwd, Long4097) {
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 128, 4097, 4097);
    c.hq = c.hkv = 1;
    c.causal = causal;
    run_fwd_case(c);
  }
  FwdCase c = base(DType::F16, 64, 1000, 4097);
  c.hq = c.hkv = 1;
  run_fwd_case(c);
  // Causal d = 64 on 192-row tiles with the padding in the first m-block (rows -32..159).
  FwdCase pad = base(DType::BF16, 64, 4000, 4000);
  pad.hq = pad.hkv = 1;
  pad.causal = true;
  run_fwd_case(pad);
}

// d = 128 with long keys, masked or not, on the block stream (until session 20 a 176-key tile ran
// s_k >= 8192 unmasked, and up to pass 22 a 3-stage ring ran s_k >= 4096): the plain loop body with
// the deferred max across tile boundaries, long runs of full blocks, partial last blocks (5001,
// 8193, 9001), GQA, fp16, bottom-right causal with s_q != s_k, varlen with short or empty
// sequences beside a long one, many tiles per CTA.
TEST_F(Sm90Fwd, LongUnmaskedKeyConfigs) {
  struct Shape {
    DType dt;
    int sq, sk, hq, hkv;
    bool capped;  // 3-CTA grid: many tiles per CTA
    bool causal = false;
  };
  for (const Shape& sh : {Shape{DType::BF16, 77, 5001, 8, 2, false}, Shape{DType::F16, 77, 5001, 8, 2, false},
                          Shape{DType::BF16, 400, 4096, 3, 3, true}, Shape{DType::BF16, 300, 8193, 2, 1, false},
                          Shape{DType::F16, 129, 9001, 4, 1, false}, Shape{DType::BF16, 700, 8192, 3, 1, true},
                          Shape{DType::BF16, 300, 5000, 4, 2, true, true}, Shape{DType::F16, 1000, 4500, 2, 1, false, true}}) {
    std::optional<CtaCap> cap;
    if (sh.capped) cap.emplace();
    FwdCase c = base(sh.dt, 128, sh.sq, sh.sk);
    c.hq = sh.hq;
    c.hkv = sh.hkv;
    c.causal = sh.causal;
    run_fwd_case(c);
  }
  FwdCase v = base(DType::BF16, 128, 0, 0);
  v.lens_q = {17, 200, 0, 64};
  v.lens_k = {8200, 30, 5, 0};
  v.hq = 2;
  v.hkv = 2;
  run_fwd_case(v);
}

// d = 64 runs three consumer warpgroups on 192-row tiles, except GQA packing and causal/local with
// s_k <= 1024 (sm90/fwd/launch.cuh): masks on 192-row tiles (bottom-right causal with s_q != s_k, a
// two-sided window, seqused), partial m-blocks (193, 1000; causal ones pad the first m-block, whose
// Q rows then start above the sequence: TMA zero fill, or varlen, the previous sequence's rows),
// GQA, fp16, varlen with a sequence long enough to pick the config, and many tiles per CTA.
TEST_F(Sm90Fwd, ThreeConsumerWarpgroupsD64) {
  FwdCase causal = base(DType::BF16, 64, 1000, 1500);
  causal.causal = true;
  causal.hq = 4;
  causal.hkv = 1;
  run_fwd_case(causal);
  FwdCase window = base(DType::F16, 64, 1300, 1200);
  window.wl = 100;
  window.wr = 50;
  window.used_q = {1250};
  window.used_k = {1111};
  run_fwd_case(window);
  window.nan_past = NanPast::All;  // NaN in q, k, v past seqused: out 0 there, no other row touched
  run_fwd_case(window);
  {
    CtaCap cap;
    FwdCase many = base(DType::BF16, 64, 193, 1100);
    many.batch = 3;
    many.causal = true;
    run_fwd_case(many);
  }
  FwdCase v = base(DType::F16, 64, 0, 0);
  v.lens_q = {1, 400, 0, 1100};
  v.lens_k = {3, 1030, 7, 1100};
  v.causal = true;
  run_fwd_case(v);
}

TEST_F(Sm90Fwd, Gqa) {
  for (int ratio : {1, 4, 8}) {
    FwdCase c = base(DType::F16, 128, 257, 257);
    c.hkv = 2;
    c.hq = 2 * ratio;
    c.causal = ratio == 4;
    run_fwd_case(c);
  }
}

// GQA head packing (fixed length, s_q <= 64, q_per_kv > 1; sched/gqa_pack.h): G q heads of one KV
// head share a tile, R rows each. Every s_q x s_k x ratio, with dtype, head dim and causal spread
// so that each s_q meets all twelve of their combinations; R <= 8 (a thread's two rows are two heads
// at one position), ratio 6 (G = 3 at R = 32), 5 and 7 (a KV head's last group holds fewer heads),
// MQA, local windows, seqused, softcap, strided inputs, d = 96 / 192, long unmasked keys, and
// s_q = 65, which stays unpacked. PersistentManyTilesPerCta has packed cases under the CTA cap.
TEST_F(Sm90Fwd, GqaPackedSmallSq) {
  const int dims[] = {64, 128, 256};
  int i = 0;
  for (int sq : {1, 3, 17, 64})
    for (int sk : {1, 100, 1000})
      for (int ratio : {2, 4, 6, 8}) {
        FwdCase c = base(i % 2 ? DType::F16 : DType::BF16, dims[i % 3], sq, sk);
        c.batch = 2;
        c.hkv = 2;
        c.hq = 2 * ratio;
        c.causal = (i / 6) % 2 == 1;
        ++i;
        run_fwd_case(c);
      }
  auto gqa = [](DType dt, int d, int sq, int sk, int hq, int hkv) {
    FwdCase c = base(dt, d, sq, sk);
    c.batch = 2;
    c.hq = hq;
    c.hkv = hkv;
    return c;
  };
  for (bool causal : {false, true}) {
    FwdCase partial = gqa(DType::BF16, 128, 20, 300, 10, 2);  // ratio 5 at R = 32: groups of 3 + 2
    partial.causal = causal;
    run_fwd_case(partial);
    FwdCase seven = gqa(DType::F16, 64, 3, 500, 14, 2);  // R = 4, G = 7
    seven.causal = causal;
    run_fwd_case(seven);
    FwdCase unpacked = gqa(DType::BF16, 128, 65, 1000, 8, 2);  // s_q = 65: one head per tile
    unpacked.causal = causal;
    run_fwd_case(unpacked);
  }
  run_fwd_case(gqa(DType::BF16, 128, 2, 500, 32, 1));  // MQA: R = 2, G = 32
  FwdCase mqa = gqa(DType::F16, 256, 1, 1000, 16, 1);  // R = 1, G = 16
  mqa.causal = true;
  run_fwd_case(mqa);
  FwdCase local = gqa(DType::BF16, 128, 17, 1000, 8, 2);
  local.wl = 64;
  local.wr = 0;
  run_fwd_case(local);
  FwdCase local2 = gqa(DType::F16, 64, 64, 100, 12, 2);
  local2.wl = 5;
  local2.wr = 3;
  run_fwd_case(local2);
  FwdCase used = gqa(DType::BF16, 128, 17, 100, 8, 2);  // seqused: rows past it get 0 and -inf
  used.used_q = {10, 17};
  used.used_k = {50, 0};
  used.causal = true;
  run_fwd_case(used);
  used.nan_past = NanPast::All;
  run_fwd_case(used);
  FwdCase cap = gqa(DType::BF16, 128, 3, 200, 8, 2);
  cap.softcap = 5.f;
  run_fwd_case(cap);
  FwdCase pad = gqa(DType::F16, 128, 17, 300, 12, 3);
  pad.row_pad = 8;
  pad.causal = true;
  run_fwd_case(pad);
  run_fwd_case(gqa(DType::BF16, 96, 9, 200, 8, 2));
  run_fwd_case(gqa(DType::F16, 192, 33, 200, 4, 2));
  run_fwd_case(gqa(DType::BF16, 128, 64, 8193, 8, 2));  // no mask, long keys: deferred max, packed
}

TEST_F(Sm90Fwd, LocalWindows) {
  for (auto [wl, wr] : {std::pair{64, 0}, std::pair{17, 33}, std::pair{-1, 5}, std::pair{100, -1}, std::pair{0, 0}})
    for (int d : {64, 128, 256}) {
      FwdCase c = base(DType::BF16, d, 333, 511);
      c.wl = wl;
      c.wr = wr;
      run_fwd_case(c);
    }
  FwdCase c = base(DType::BF16, 128, 300, 300);  // causal + local
  c.causal = true;
  c.wl = 50;
  run_fwd_case(c);
  FwdCase narrow = base(DType::F16, 128, 1000, 1100);  // the 64-key d128 config, fp16, GQA
  narrow.hq = 4;
  narrow.hkv = 2;
  narrow.wl = 40;
  narrow.wr = 24;
  run_fwd_case(narrow);
}

// Window edges past every row's reach (up to INT32_MAX) bound nothing: the same answers as the
// unbounded side, not a wrapped sum that keeps no key.
TEST_F(Sm90Fwd, HugeWindowEdges) {
  for (auto [wl, wr] : {std::pair{1 << 30, 1 << 30}, std::pair{INT32_MAX, 0}, std::pair{-1, INT32_MAX},
                        std::pair{INT32_MAX, INT32_MAX}, std::pair{64, INT32_MAX}})
    for (int d : {64, 128}) {
      FwdCase c = base(DType::BF16, d, 257, 300);
      c.wl = wl;
      c.wr = wr;
      run_fwd_case(c);
    }
}

TEST_F(Sm90Fwd, Softcap) {
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 128, 190, 260);
    c.softcap = 5.f;
    c.causal = causal;
    run_fwd_case(c);
  }
}

TEST_F(Sm90Fwd, SqLongerThanSkCausal) {  // bottom-right: the first rows see nothing
  FwdCase c = base(DType::BF16, 64, 300, 100);
  c.causal = true;
  run_fwd_case(c);
}

// Padded output rows: 2 extra elements leave out only 4-byte aligned (4-byte register stores; d128
// then cannot use its TMA store either), 8 keep 16-byte strides (16-byte register stores at
// d = 64 and 256, TMA at 128). The padding must keep its poison.
TEST_F(Sm90Fwd, PaddedOutput) {
  for (int d : {64, 128, 256})
    for (int pad : {2, 8}) {
      FwdCase c = base(DType::BF16, d, 113, 300);
      c.out_pad = pad;
      c.hq = 4;
      c.hkv = 2;
      c.causal = d == 64;
      run_fwd_case(c);
    }
}

TEST_F(Sm90Fwd, StridedInputs) {
  FwdCase c = base(DType::F16, 128, 150, 170);
  c.row_pad = 8;
  c.hq = 4;
  c.hkv = 2;
  run_fwd_case(c);
}

TEST_F(Sm90Fwd, Varlen) {
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 128, 0, 0);
    c.lens_q = {17, 0, 300, 1, 128};
    c.lens_k = {40, 5, 300, 0, 129};
    c.hq = 4;
    c.hkv = 1;
    c.causal = causal;
    run_fwd_case(c);
  }
  FwdCase c = base(DType::F16, 64, 0, 0);
  c.lens_q = {100, 250, 7};
  c.lens_k = {100, 300, 9};
  c.used_q = {90, 250, 3};
  c.used_k = {50, 299, 9};
  c.wl = 20;
  c.wr = 10;
  run_fwd_case(c);
  c.nan_past = NanPast::All;  // NaN in q, k, v past seqused: out 0 there, no other row touched
  run_fwd_case(c);
}

// Fixed-length seqused with NaN in q, k and v past it, each of out's store paths: d 64's register
// pairs, d 128's TMA store (fixed length, unpacked), d 256's quad-transposed 16-byte stores (one Q
// buffer); past seqused_q out is exactly 0 (check_out_zero_past_used), lse -inf. Sequences that end
// inside a tile and at its edge (129, 0), every key used and none.
TEST_F(Sm90Fwd, FixedSequsedNanPast) {
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      FwdCase c = base(DType::BF16, d, 300, 400);
      c.batch = 3;
      c.used_q = {129, 0, 300};
      c.used_k = {1, 400, 200};
      c.causal = causal;
      c.nan_past = NanPast::All;
      run_fwd_case(c);
    }
}

// NaN in k inside the used keys (docs/masks.md, "NaN"): the rows that keep that key come out NaN, out and
// lse, as the reference's (finish's lse from a NaN sum), every other row as usual; each store path (d 64's
// register pairs, d 128's TMA store, d 256's quad stores), GQA, causal (the last row keeps every key, the
// other sequence none of the NaN ones), fixed length with seqused_q (nan_key_case) and varlen with seqused_k.
TEST_F(Sm90Fwd, NanInUsedKeys) {
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) run_fwd_case(nan_key_case(DType::BF16, d, causal));
  FwdCase c = base(DType::F16, 128, 0, 0);
  c.lens_q = {100, 250, 7};
  c.lens_k = {100, 300, 9};
  c.used_k = {50, 299, 9};
  c.nan_keys = 1;
  run_fwd_case(c);
}

// d_qk 192 with d_v 128 (VHeadDim: V, O and PV on 128 columns, QK on 192): both dtypes, odd
// lengths, s_q != s_k both ways, GQA (unpacked and packed), causal, local windows, softcap, padded
// out (register stores, and the 16-byte ones of the one-Q-buffer tile), strided inputs, varlen with
// empty sequences and seqused, many tiles per CTA, long keys.
TEST_F(Sm90Fwd, NarrowV192x128) {
  auto narrow = [](DType dt, int sq, int sk) {
    FwdCase c = base(dt, 192, sq, sk);
    c.dv = 128;
    return c;
  };
  for (DType dt : {DType::BF16, DType::F16})
    for (bool causal : {false, true}) {
      FwdCase c = narrow(dt, 200, 300);
      c.batch = 2;
      c.causal = causal;
      run_fwd_case(c);
    }
  for (int sq : {1, 17, 113})
    for (int sk : {1, 17, 113, 300}) {
      FwdCase c = narrow(DType::BF16, sq, sk);
      c.causal = sq == 113;
      run_fwd_case(c);
    }
  for (bool causal : {false, true}) {
    FwdCase c = narrow(DType::BF16, 4097, 4097);
    c.hq = c.hkv = 1;
    c.causal = causal;
    c.key_ramp = causal ? 20.f : 0.f;
    run_fwd_case(c);
  }
  FwdCase spike = narrow(DType::F16, 300, 2000);
  spike.key_spike = 300.f;
  run_fwd_case(spike);
  for (int ratio : {1, 4, 8}) {
    FwdCase c = narrow(DType::F16, 257, 1000);
    c.hkv = 2;
    c.hq = 2 * ratio;
    c.causal = ratio == 4;
    run_fwd_case(c);
  }
  for (int sq : {1, 17, 64}) {  // GQA head packing (s_q <= 64)
    FwdCase c = narrow(DType::BF16, sq, 700);
    c.hkv = 2;
    c.hq = 12;
    c.causal = sq == 17;
    run_fwd_case(c);
  }
  for (auto [wl, wr] : {std::pair{64, 0}, std::pair{17, 33}, std::pair{-1, 5}, std::pair{0, 0}}) {
    FwdCase c = narrow(DType::BF16, 333, 511);
    c.wl = wl;
    c.wr = wr;
    run_fwd_case(c);
  }
  FwdCase cap = narrow(DType::BF16, 190, 260);
  cap.softcap = 5.f;
  cap.causal = true;
  run_fwd_case(cap);
  FwdCase longer_q = narrow(DType::BF16, 300, 100);  // bottom-right: the first rows see nothing
  longer_q.causal = true;
  run_fwd_case(longer_q);
  for (int pad : {2, 8}) {
    FwdCase c = narrow(DType::BF16, 113, 300);
    c.out_pad = pad;
    c.hq = 4;
    c.hkv = 2;
    run_fwd_case(c);
  }
  FwdCase strided = narrow(DType::F16, 150, 170);
  strided.row_pad = 8;
  run_fwd_case(strided);
  FwdCase var = narrow(DType::BF16, 0, 0);
  var.lens_q = {17, 0, 300, 1, 128};
  var.lens_k = {40, 5, 300, 0, 129};
  var.used_q = {17, 0, 250, 1, 100};
  var.used_k = {40, 5, 299, 0, 129};
  var.hq = 4;
  var.hkv = 1;
  var.causal = true;
  run_fwd_case(var);
  var.nan_past = NanPast::All;
  run_fwd_case(var);
  CtaCap cta_cap;
  FwdCase many = narrow(DType::BF16, 700, 650);
  many.batch = 2;
  many.hq = 4;
  many.hkv = 2;
  many.causal = true;
  run_fwd_case(many);
}

// (d, d_v) pairs that no menu row holds (sources.cmake: d_v = d, and 192 / 128) are refused by the
// forward and the backward with NotSupported naming both head dims, whatever this build's head dims,
// and no output is written: a kernel built for another pair (d alone, say) must never run on them.
TEST_F(Sm90Fwd, HeadDimPairsWithoutKernelRefused) {
  for (auto [d, dv] : {std::pair{128, 64}, std::pair{64, 128}, std::pair{128, 192}, std::pair{256, 128},
                       std::pair{192, 64}, std::pair{192, 256}, std::pair{96, 64}}) {
    SCOPED_TRACE("d " + std::to_string(d) + " d_v " + std::to_string(dv));
    const int64_t b = 1, sq = 17, sk = 33, h = 2;
    DeviceBuffer q(size_t(b * sq * h * d) * 2), k(size_t(b * sk * h * d) * 2), v(size_t(b * sk * h * dv) * 2),
        out(size_t(b * sq * h * dv) * 2), lse(size_t(b * h * sq) * 4), dout(out.bytes()), dq(q.bytes()),
        dk(k.bytes()), dvb(v.bytes());
    for (const DeviceBuffer* x : {&q, &k, &v, &dout}) FA_CUDA_OK(cudaMemset(x->get(), 0, x->bytes()));
    for (const DeviceBuffer* x : {&out, &lse, &dq, &dk, &dvb}) x->poison();
    const DType dt = DType::BF16;
    AttnArgs a;
    a.q = make_tensor(q.get(), dt, {b, sq, h, d}, Device::CUDA);
    a.k = make_tensor(k.get(), dt, {b, sk, h, d}, Device::CUDA);
    a.v = make_tensor(v.get(), dt, {b, sk, h, dv}, Device::CUDA);
    a.out = make_tensor(out.get(), dt, {b, sq, h, dv}, Device::CUDA);
    a.lse = make_tensor(lse.get(), DType::F32, {b, h, sq}, Device::CUDA);
    const std::string pair = "head_dim_v " + std::to_string(dv);
    Status st = forward(a, nullptr);
    EXPECT_EQ(st.code, Code::NotSupported) << "forward: " << st.message;
    EXPECT_NE(st.message.find(pair), std::string::npos) << "forward: " << st.message;
    st = backward(a, make_tensor(dout.get(), dt, {b, sq, h, dv}, Device::CUDA),
                  make_tensor(dq.get(), dt, {b, sq, h, d}, Device::CUDA),
                  make_tensor(dk.get(), dt, {b, sk, h, d}, Device::CUDA),
                  make_tensor(dvb.get(), dt, {b, sk, h, dv}, Device::CUDA), nullptr);
    EXPECT_EQ(st.code, Code::NotSupported) << "backward: " << st.message;
    EXPECT_NE(st.message.find(pair), std::string::npos) << "backward: " << st.message;
    FA_CUDA_OK(cudaDeviceSynchronize());
    const char* names[] = {"out", "lse", "dq", "dk", "dv"};
    int n = 0;
    for (const DeviceBuffer* x : {&out, &lse, &dq, &dk, &dvb}) {
      std::vector<uint8_t> got(x->bytes());
      x->download(got.data());
      EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t c) { return c == 0xFF; })) << names[n] << " written";
      ++n;
    }
  }
}

// The grid is persistent; on a 132-SM H100 the cases above mostly give each CTA one tile. Capping
// the grid at 3 CTAs makes every CTA walk many tiles of different lengths (causal, windows, empty
// and short sequences), which checks the Q-buffer and K/V-ring hand-over between tiles.
TEST_F(Sm90Fwd, PersistentManyTilesPerCta) {
  CtaCap cap;
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      FwdCase c = base(d == 64 ? DType::F16 : DType::BF16, d, 700, 650);
      c.batch = 2;
      c.hq = 4;
      c.hkv = 2;
      c.causal = causal;
      run_fwd_case(c);
    }
  FwdCase local = base(DType::BF16, 128, 600, 600);
  local.wl = 64;
  local.wr = 0;
  local.hq = 3;
  local.hkv = 1;
  run_fwd_case(local);
  // GQA head packing: many packed tiles per CTA (the Q-buffer hand-over with one-tile runs).
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      FwdCase c = base(d == 128 ? DType::F16 : DType::BF16, d, causal ? 17 : 1, 700);
      c.batch = 3;
      c.hq = 18;
      c.hkv = 3;
      c.causal = causal;
      run_fwd_case(c);
    }
  for (bool causal : {false, true}) {
    FwdCase c = base(DType::BF16, 128, 0, 0);
    c.lens_q = {17, 0, 300, 1, 128, 0, 513};
    c.lens_k = {40, 5, 300, 0, 129, 0, 500};
    c.hq = 4;
    c.hkv = 2;
    c.causal = causal;
    run_fwd_case(c);
  }
}

}  // namespace
}  // namespace fastattn::gputest
