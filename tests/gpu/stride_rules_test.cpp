// Strides the public rules leave open (types.h: the last dim has unit stride, "other strides are free"):
// zero (a broadcast dim: torch's expand, which the Python layer passes through for q, k, v) and negative
// (numpy / CuPy reversed views). The CUDA backend loads q, k, v, dout (and may store out) with TMA,
// whose descriptors take positive 16-byte multiples only, so it must either refuse such a layout (a
// status, outputs untouched) or compute with it correctly: checked here for each, against the float64
// reference reading the same views (FA3's rule for out and the gradients, as run_fwd_case and
// run_bwd_case). Which of the two each layout got is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bwd_case.h"

namespace fastattn::gputest {
namespace {

class Sm90StrideRules : public HopperTest {};

// How one (b, s, h, d) tensor is laid over its storage.
enum class Form { Dense, BroadcastHeads, BroadcastBatch, ReversedTokens, ReversedHeads };

const char* form_name(Form f) {
  switch (f) {
    case Form::Dense: return "dense";
    case Form::BroadcastHeads: return "heads broadcast (stride 0)";
    case Form::BroadcastBatch: return "batch broadcast (stride 0)";
    case Form::ReversedTokens: return "tokens reversed (negative stride)";
    default: return "heads reversed (negative stride)";
  }
}

// A (b, s, h, d) view of `form` over storage in host memory and on the device; the view's first element
// is storage element `first`. Inputs hold N(0, 1) values, outputs the poison.
struct FormTensor {
  int64_t shape[4], stride[4], first = 0;
  std::vector<uint16_t> host;
  std::unique_ptr<DeviceBuffer> dev;

  FormTensor(int64_t b, int64_t s, int64_t h, int64_t d, Form f, DType dt, std::mt19937* rng) : shape{b, s, h, d} {
    const int64_t sb = f == Form::BroadcastBatch ? 1 : b, sh = f == Form::BroadcastHeads ? 1 : h;
    host.assign(size_t(sb * s * sh * d), 0xFFFF);
    int64_t dense[4] = {s * sh * d, sh * d, d, 1};
    std::copy(dense, dense + 4, stride);
    if (f == Form::BroadcastBatch) stride[0] = 0;
    if (f == Form::BroadcastHeads) stride[2] = 0;
    if (f == Form::ReversedTokens) {
      first = (s - 1) * stride[1];
      stride[1] = -stride[1];
    }
    if (f == Form::ReversedHeads) {
      first = (h - 1) * stride[2];
      stride[2] = -stride[2];
    }
    if (rng) {
      std::normal_distribution<float> normal(0.f, 1.f);
      for (auto& x : host) x = to_bits(normal(*rng), dt);
    }
    dev = std::make_unique<DeviceBuffer>(host.size() * 2);
    dev->upload(host.data());
  }
  Tensor view(bool gpu, DType dt, std::vector<uint16_t>* storage = nullptr) {
    Tensor t;
    uint16_t* base = gpu ? static_cast<uint16_t*>(dev->get()) : (storage ? storage : &host)->data();
    t.data = base + first;
    t.ndim = 4;
    t.dtype = dt;
    t.device = gpu ? Device::CUDA : Device::CPU;
    for (int i = 0; i < 4; ++i) {
      t.shape[i] = shape[i];
      t.stride[i] = stride[i];
    }
    return t;
  }
  // `bits` (a copy of the storage) in the logical order.
  std::vector<uint16_t> logical(const std::vector<uint16_t>& bits) const {
    std::vector<uint16_t> out;
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j)
        for (int64_t k = 0; k < shape[2]; ++k)
          for (int64_t e = 0; e < shape[3]; ++e)
            out.push_back(bits[size_t(first + i * stride[0] + j * stride[1] + k * stride[2] + e)]);
    return out;
  }
  std::vector<uint16_t> download() const {
    std::vector<uint16_t> bits(host.size());
    dev->download(bits.data());
    return bits;
  }
};

bool all_poison(const std::vector<uint16_t>& bits) {
  for (uint16_t b : bits)
    if (b != 0xFFFF) return false;
  return true;
}

struct FormCase {
  Form q = Form::Dense, k = Form::Dense, v = Form::Dense, out = Form::Dense, dout = Form::Dense;
  bool backward = false;
  Form dq = Form::Dense, dk = Form::Dense, dv = Form::Dense;  // the gradients (reversed forms only: outputs)
  int wl = -1, wr = -1;                                      // a window (the backward's dQ ring and band)
  bool must_accept = false;                                  // a refusal fails the case (the rule allows it)
  int num_splits = 0;                                        // the forward's (0: the heuristic's)
  bool combine_kernel = false;                               // split merge by the combine kernel, not clusters
  int sk = 80;                                               // keys
  std::string str() const {
    return std::string("q ") + form_name(q) + ", k " + form_name(k) + ", v " + form_name(v) + ", out " +
           form_name(out) + ", dout " + form_name(dout) + ", dq " + form_name(dq) + ", dk " + form_name(dk) +
           ", dv " + form_name(dv) + ", window (" + std::to_string(wl) + ", " + std::to_string(wr) + ")";
  }
};

// d 128, bf16, batch 2, s_q 65, s_k 80 (fc.sk), GQA 2 (the forms need batch and heads > 1 to mean anything).
void run_form_case(const FormCase& fc) {
  const auto seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  SCOPED_TRACE(fc.str() + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const DType dt = DType::BF16;
  const int b = 2, sq = 65, sk = fc.sk, hq = 4, hkv = 2, d = 128;
  FormTensor q(b, sq, hq, d, fc.q, dt, &rng), k(b, sk, hkv, d, fc.k, dt, &rng), v(b, sk, hkv, d, fc.v, dt, &rng);
  FormTensor out(b, sq, hq, d, fc.out, dt, nullptr), dout(b, sq, hq, d, fc.dout, dt, &rng);
  FormTensor dq(b, sq, hq, d, fc.dq, dt, nullptr), dk(b, sk, hkv, d, fc.dk, dt, nullptr),
      dv(b, sk, hkv, d, fc.dv, dt, nullptr);
  DeviceBuffer lse_dev(size_t(b) * hq * sq * 4);
  std::vector<float> lse_host(size_t(b) * hq * sq);
  std::vector<uint16_t> out_host(out.host.size(), 0xFFFF);
  auto args = [&](bool gpu) {
    AttnArgs a;
    a.q = q.view(gpu, dt);
    a.k = k.view(gpu, dt);
    a.v = v.view(gpu, dt);
    a.out = out.view(gpu, dt, &out_host);
    a.lse = make_tensor(gpu ? lse_dev.get() : static_cast<void*>(lse_host.data()), DType::F32, {b, hq, sq},
                        gpu ? Device::CUDA : Device::CPU);
    a.backend = gpu ? Backend::CUDA : Backend::Reference;
    a.window_left = fc.wl;
    a.window_right = fc.wr;
    a.num_splits = gpu ? fc.num_splits : 0;
    return a;
  };
  const AttnArgs ga = args(true);
  if (fc.combine_kernel) cuda_backend::set_cluster_merge_allowed(false);
  Status st = forward(ga, nullptr);
  cuda_backend::set_cluster_merge_allowed(true);
  FA_CUDA_OK(cudaDeviceSynchronize());
  out_host = out.download();
  if (!st.ok()) {
    std::printf("[ strides ] %s: forward refused: %s\n", fc.str().c_str(), st.message.c_str());
    EXPECT_FALSE(fc.must_accept) << "forward refused a layout the rule allows: " << st.message;
    EXPECT_TRUE(all_poison(out_host)) << "a refused forward wrote out";
    return;
  }
  lse_dev.download(lse_host.data());
  AttnArgs ha = args(false);
  reference::ForwardF64 ref, base;
  ASSERT_TRUE(reference::forward_f64(ha, &ref).ok());
  reference::Options low;
  low.round_p_to_input_dtype = true;
  ASSERT_TRUE(reference::forward_f64(ha, &base, low).ok());
  const std::vector<uint16_t> got = out.logical(out_host);
  ASSERT_EQ(got.size(), ref.out.size());
  double err = 0, base_err = 0, ref_max = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = from_bits(got[i], dt);
    err = std::isfinite(g) ? std::max(err, std::abs(g - ref.out[i])) : INFINITY;
    base_err = std::max(base_err, std::abs(round_to(base.out[i], dt) - ref.out[i]));
    ref_max = std::max(ref_max, std::abs(ref.out[i]));
  }
  EXPECT_LE(err, 2 * base_err + ref_max / 256) << "forward accepted the layout but out is wrong: error " << err
                                                << " baseline error " << base_err;
  if (!fc.backward) {
    std::printf("[ strides ] %s: forward accepted, out error %.3g (baseline %.3g)\n", fc.str().c_str(), err, base_err);
    return;
  }
  st = backward(ga, dout.view(true, dt), dq.view(true, dt), dk.view(true, dt), dv.view(true, dt), nullptr);
  FA_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint16_t> gq = dq.download(), gk = dk.download(), gv = dv.download();
  if (!st.ok()) {
    std::printf("[ strides ] %s: backward refused: %s\n", fc.str().c_str(), st.message.c_str());
    EXPECT_FALSE(fc.must_accept) << "backward refused a layout the rule allows: " << st.message;
    EXPECT_TRUE(all_poison(gq) && all_poison(gk) && all_poison(gv)) << "a refused backward wrote gradients";
    return;
  }
  std::printf("[ strides ] %s: backward accepted\n", fc.str().c_str());
  const Tensor dout_h = dout.view(false, dt);
  reference::BackwardF64 gref, gbase;
  ASSERT_TRUE(reference::backward_f64(ha, dout_h, &gref).ok());
  ASSERT_TRUE(reference::backward_f64(ha, dout_h, &gbase, low).ok());
  check_grad("dq", dq.logical(gq), gref.dq, gbase.dq, dt);
  check_grad("dk", dk.logical(gk), gref.dk, gbase.dk, dt);
  check_grad("dv", dv.logical(gv), gref.dv, gbase.dv, dt);
}

TEST_F(Sm90StrideRules, BroadcastInputsRefusedOrRight) {
  run_form_case({Form::Dense, Form::BroadcastHeads, Form::Dense, Form::Dense, Form::Dense, true});
  run_form_case({Form::Dense, Form::Dense, Form::BroadcastBatch, Form::Dense, Form::Dense, true});
  run_form_case({Form::BroadcastHeads, Form::Dense, Form::Dense, Form::Dense, Form::Dense, false});
}

TEST_F(Sm90StrideRules, NegativeStridesRefusedOrRight) {
  run_form_case({Form::ReversedTokens, Form::Dense, Form::Dense, Form::Dense, Form::Dense, true});
  run_form_case({Form::Dense, Form::ReversedHeads, Form::Dense, Form::Dense, Form::Dense, true});
  run_form_case({Form::Dense, Form::Dense, Form::Dense, Form::ReversedHeads, Form::Dense, false});
  run_form_case({Form::Dense, Form::Dense, Form::Dense, Form::Dense, Form::ReversedTokens, true});
  run_form_case({Form::Dense, Form::Dense, Form::Dense, Form::Dense, Form::ReversedHeads, true});
}

// Outputs and the backward's other inputs with negative strides: nothing loads them by TMA (out is read by
// the preprocess and stored by registers or the split merge; dq, dk, dv are stored by registers, 16-byte
// rows where aligned, or the ring's / band's pairs), so the rule accepts them and they must come out right:
// out reversed under the backward, each gradient reversed on the accumulator path, out reversed from the
// split forward (3 splits: merged in clusters where the plan allows, then by the combine kernel), dq
// reversed through the recompute band (64, 0) and the dQ ring (0, 17; both by default since session 35).
TEST_F(Sm90StrideRules, NegativeOutputStridesRight) {
  FormCase out_rev;
  out_rev.out = Form::ReversedTokens;
  out_rev.backward = out_rev.must_accept = true;
  run_form_case(out_rev);
  for (Form f : {Form::ReversedTokens, Form::ReversedHeads}) {
    for (int g = 0; g < 3; ++g) {
      FormCase c;
      c.backward = c.must_accept = true;
      (g == 0 ? c.dq : g == 1 ? c.dk : c.dv) = f;
      run_form_case(c);
    }
  }
  for (Form f : {Form::ReversedTokens, Form::ReversedHeads}) {  // the split forward: cluster merge, combine kernel
    for (bool combine : {false, true}) {
      FormCase c;
      c.out = f;
      c.combine_kernel = combine;
      c.must_accept = true;
      c.num_splits = 3;
      c.sk = 700;  // 6 key blocks: every split sees keys
      run_form_case(c);
    }
  }
  for (auto [wl, wr] : {std::pair{64, 0}, std::pair{0, 17}}) {
    FormCase c;
    c.backward = c.must_accept = true;
    c.dq = Form::ReversedTokens;
    c.dk = Form::ReversedHeads;
    c.wl = wl;
    c.wr = wr;
    run_form_case(c);
  }
}

}  // namespace
}  // namespace fastattn::gputest
