// Hopper forward vs the float64 reference: every head dim and dtype, odd lengths (1, 17, 113,
// 4097), s_q != s_k, GQA 1/4/8, varlen with empty sequences and seqused, causal, local, softcap,
// strided inputs. Each case also runs twice and must be bitwise identical.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fwd_case.h"

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
  CtaCap() { setenv("FASTATTN_MAX_CTAS", "3", 1); }
  ~CtaCap() { unsetenv("FASTATTN_MAX_CTAS"); }
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
}

// d = 128 without a causal or local mask runs the 3-stage ring at s_k >= 4096 and the 176-key tile
// at s_k >= 8192 (fwd_launch.cuh): partial last blocks (5001, 8193, 9001), GQA, fp16, varlen whose
// longest sequence picks the config while the others are short or empty, many tiles per CTA.
TEST_F(Sm90Fwd, LongUnmaskedKeyConfigs) {
  for (DType dt : {DType::BF16, DType::F16}) {
    FwdCase deep = base(dt, 128, 77, 5001);
    deep.hq = 8;
    deep.hkv = 2;
    run_fwd_case(deep);
  }
  {
    CtaCap cap;
    FwdCase deep = base(DType::BF16, 128, 400, 4096);
    deep.hq = 3;
    deep.hkv = 3;
    run_fwd_case(deep);
  }
  FwdCase a = base(DType::BF16, 128, 300, 8193);
  a.hq = 2;
  a.hkv = 1;
  run_fwd_case(a);
  FwdCase b = base(DType::F16, 128, 129, 9001);
  b.hq = 4;
  b.hkv = 1;
  run_fwd_case(b);
  FwdCase v = base(DType::BF16, 128, 0, 0);
  v.lens_q = {17, 200, 0, 64};
  v.lens_k = {8200, 30, 5, 0};
  v.hq = 2;
  v.hkv = 2;
  run_fwd_case(v);
  CtaCap cap;
  FwdCase m = base(DType::BF16, 128, 700, 8192);
  m.hq = 3;
  m.hkv = 1;
  run_fwd_case(m);
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
