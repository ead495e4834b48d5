// Calls with nothing to compute on the CUDA backend (FlashAttention's edge cases): no keys, no
// query rows, varlen batches whose sequences are all empty, max_seqlen = 0. out = 0 and lse = -inf
// are written by a fill kernel (no attention launch, no host sync: also under CUDA-graph capture);
// padding between out's rows stays poisoned. A max_seqlen of 0 that the checked cu_seqlens
// contradict is an error, never a silent zero. The backward of such a call writes dq = dk = dv = 0,
// with the empty tensors' data pointers null, as torch gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fastattn/fastattn.h"
#include "gpu_buffers.h"

namespace fastattn::gputest {
namespace {

constexpr int kHeadsQ = 4, kHeadsKv = 2, kDim = 128, kOutPad = 8;

struct EmptyCall {
  std::vector<int32_t> cu_q, cu_k;  // varlen when non-empty
  int batch = 2, sq = 0, sk = 0;    // fixed layout
  int max_q = 0, max_k = 0;
  bool check_index_arrays = true;
};

// Runs the call on poisoned out/lse; returns its status and (on success) the host copies.
Status run_empty(const EmptyCall& c, bool capture, std::vector<uint16_t>* out, std::vector<float>* lse) {
  const bool varlen = !c.cu_q.empty();
  const int64_t rows_q = varlen ? c.cu_q.back() : int64_t(c.batch) * c.sq;
  const int64_t rows_k = varlen ? c.cu_k.back() : int64_t(c.batch) * c.sk;
  const int64_t out_row = kDim + kOutPad;
  DeviceBuffer q(size_t(std::max<int64_t>(rows_q, 1) * kHeadsQ * kDim * 2));
  DeviceBuffer kv(size_t(std::max<int64_t>(rows_k, 1) * kHeadsKv * kDim * 2));
  DeviceBuffer o(size_t(std::max<int64_t>(rows_q, 1) * kHeadsQ * out_row * 2));
  DeviceBuffer l(size_t(std::max<int64_t>(rows_q, 1) * kHeadsQ * 4));
  DeviceBuffer cu(sizeof(int32_t) * (c.cu_q.size() + c.cu_k.size() + 2));
  o.poison();
  l.poison();
  cudaMemset(q.get(), 0, q.bytes());
  cudaMemset(kv.get(), 0, kv.bytes());
  int32_t* cu_q = static_cast<int32_t*>(cu.get());
  int32_t* cu_k = cu_q + c.cu_q.size();
  if (varlen) {
    cudaMemcpy(cu_q, c.cu_q.data(), c.cu_q.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(cu_k, c.cu_k.data(), c.cu_k.size() * 4, cudaMemcpyHostToDevice);
  }

  AttnArgs a;
  const Device dev = Device::CUDA;
  if (varlen) {
    a.q = make_tensor(q.get(), DType::BF16, {rows_q, kHeadsQ, kDim}, dev);
    a.k = make_tensor(kv.get(), DType::BF16, {rows_k, kHeadsKv, kDim}, dev);
    a.out = make_tensor(o.get(), DType::BF16, {rows_q, kHeadsQ, kDim}, dev);
    a.out.stride[1] = out_row;
    a.out.stride[0] = kHeadsQ * out_row;
    a.lse = make_tensor(l.get(), DType::F32, {kHeadsQ, rows_q}, dev);
    a.cu_seqlens_q = {cu_q, int64_t(c.cu_q.size())};
    a.cu_seqlens_k = {cu_k, int64_t(c.cu_k.size())};
    a.max_seqlen_q = c.max_q;
    a.max_seqlen_k = c.max_k;
  } else {
    a.q = make_tensor(q.get(), DType::BF16, {c.batch, c.sq, kHeadsQ, kDim}, dev);
    a.k = make_tensor(kv.get(), DType::BF16, {c.batch, c.sk, kHeadsKv, kDim}, dev);
    a.out = make_tensor(o.get(), DType::BF16, {c.batch, c.sq, kHeadsQ, kDim}, dev);
    a.out.stride[2] = out_row;
    a.out.stride[1] = kHeadsQ * out_row;
    a.out.stride[0] = int64_t(c.sq) * kHeadsQ * out_row;
    a.lse = make_tensor(l.get(), DType::F32, {c.batch, kHeadsQ, c.sq}, dev);
  }
  a.v = a.k;
  a.check_index_arrays = c.check_index_arrays;
  a.backend = Backend::CUDA;

  Status st;
  if (capture) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    st = forward(a, s);
    const cudaError_t end = cudaStreamEndCapture(s, &g);
    if (end != cudaSuccess) return {Code::CudaError, std::string("capture: ") + cudaGetErrorString(end)};
    if (st.ok()) {
      cudaGraphInstantiate(&ge, g, 0);
      cudaGraphLaunch(ge, s);
      cudaStreamSynchronize(s);
      cudaGraphExecDestroy(ge);
    }
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  } else {
    st = forward(a, nullptr);
  }
  if (!st.ok()) return st;
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return {Code::CudaError, cudaGetErrorString(e)};
  out->assign(o.bytes() / 2, 0);
  lse->assign(l.bytes() / 4, 0.f);
  o.download(out->data());
  l.download(lse->data());
  if (rows_q == 0) out->clear(), lse->clear();
  return st;
}

void expect_zero_and_minus_inf(const EmptyCall& c, bool capture) {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  const Status st = run_empty(c, capture, &out, &lse);
  ASSERT_TRUE(st.ok()) << st.message;
  for (size_t i = 0; i < out.size(); ++i) {
    const bool pad = int(i % (kDim + kOutPad)) >= kDim;
    ASSERT_EQ(out[i], pad ? 0xFFFF : 0x0000) << "out element " << i << (pad ? " (padding)" : "");
  }
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_EQ(lse[i], -INFINITY) << "lse element " << i;
}

class EmptyForward : public HopperTest {};

TEST_F(EmptyForward, FixedNoKeys) {
  EmptyCall c;
  c.sq = 17;
  expect_zero_and_minus_inf(c, false);
  expect_zero_and_minus_inf(c, true);
}

TEST_F(EmptyForward, FixedNoQueries) {
  EmptyCall c;
  c.sk = 33;
  expect_zero_and_minus_inf(c, false);
}

TEST_F(EmptyForward, VarlenAllEmptyMaxSeqlenZero) {
  EmptyCall c;
  c.cu_q = {0, 0, 0, 0};
  c.cu_k = {0, 0, 0, 0};
  expect_zero_and_minus_inf(c, false);
  c.check_index_arrays = false;
  expect_zero_and_minus_inf(c, true);
}

TEST_F(EmptyForward, VarlenNoKeys) {
  EmptyCall c;
  c.cu_q = {0, 3, 4, 9};
  c.cu_k = {0, 0, 0, 0};
  c.max_q = 5;
  expect_zero_and_minus_inf(c, false);
  c.check_index_arrays = false;
  expect_zero_and_minus_inf(c, true);
}

TEST_F(EmptyForward, ZeroBoundContradictedByLengths) {
  EmptyCall c;
  c.cu_q = {0, 3, 4, 9};
  c.cu_k = {0, 2, 2, 7};
  c.max_q = 5;
  c.max_k = 0;
  std::vector<uint16_t> out;
  std::vector<float> lse;
  const Status st = run_empty(c, false, &out, &lse);
  EXPECT_EQ(int(st.code), int(Code::InvalidArgument)) << st.message;
  EXPECT_NE(st.message.find("max_seqlen_k: 0 is less than the length 2 of sequence 0"), std::string::npos)
      << st.message;
}

// The backward of an empty call on poisoned dq / dk / dv; every tensor with no element has a null pointer.
void expect_zero_gradients(const EmptyCall& c, bool capture) {
  const bool varlen = !c.cu_q.empty();
  const int64_t rows_q = varlen ? c.cu_q.back() : int64_t(c.batch) * c.sq;
  const int64_t rows_k = varlen ? c.cu_k.back() : int64_t(c.batch) * c.sk;
  DeviceBuffer q(size_t(rows_q * kHeadsQ * kDim * 2)), dq(q.bytes()), o(q.bytes()), dout(q.bytes());
  DeviceBuffer kv(size_t(rows_k * kHeadsKv * kDim * 2)), dk(kv.bytes()), dv(kv.bytes());
  DeviceBuffer l(size_t(rows_q * kHeadsQ * 4));
  DeviceBuffer cu(sizeof(int32_t) * (c.cu_q.size() + c.cu_k.size() + 2));
  for (const DeviceBuffer* b : {&q, &o, &dout, &kv}) cudaMemset(b->get(), 0, b->bytes());
  for (const DeviceBuffer* b : {&dq, &dk, &dv, &l}) b->poison();
  int32_t* cu_q = static_cast<int32_t*>(cu.get());
  int32_t* cu_k = cu_q + c.cu_q.size();
  AttnArgs a;
  const Device dev = Device::CUDA;
  // (rows, heads, d) varlen, else (batch, seqlen, heads, d); `rows` is then the seqlen.
  auto t4 = [&](const DeviceBuffer& b, int64_t rows, int heads) {
    return varlen ? make_tensor(b.get(), DType::BF16, {rows, heads, kDim}, dev)
                  : make_tensor(b.get(), DType::BF16, {c.batch, rows, heads, kDim}, dev);
  };
  const int64_t tq = varlen ? rows_q : c.sq, tk = varlen ? rows_k : c.sk;
  if (varlen) {
    cudaMemcpy(cu_q, c.cu_q.data(), c.cu_q.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(cu_k, c.cu_k.data(), c.cu_k.size() * 4, cudaMemcpyHostToDevice);
    a.cu_seqlens_q = {cu_q, int64_t(c.cu_q.size())};
    a.cu_seqlens_k = {cu_k, int64_t(c.cu_k.size())};
    a.max_seqlen_q = c.max_q;
    a.max_seqlen_k = c.max_k;
    a.lse = make_tensor(l.get(), DType::F32, {kHeadsQ, rows_q}, dev);
  } else {
    a.lse = make_tensor(l.get(), DType::F32, {c.batch, kHeadsQ, c.sq}, dev);
  }
  a.q = t4(q, tq, kHeadsQ);
  a.out = t4(o, tq, kHeadsQ);
  a.k = a.v = t4(kv, tk, kHeadsKv);
  a.backend = Backend::CUDA;
  ASSERT_TRUE(forward(a, nullptr).ok());  // out / lse as the forward writes them (lse -inf where q has rows)
  const Tensor tdout = t4(dout, tq, kHeadsQ), tdq = t4(dq, tq, kHeadsQ);
  const Tensor tdk = t4(dk, tk, kHeadsKv), tdv = t4(dv, tk, kHeadsKv);
  if (capture) {
    CapturedCall call;
    const std::string err = call.capture([&](cudaStream_t s) { return backward(a, tdout, tdq, tdk, tdv, s); });
    ASSERT_EQ(err, "");
    ASSERT_EQ(call.replay(), cudaSuccess);
  } else {
    const Status st = backward(a, tdout, tdq, tdk, tdv, nullptr);
    ASSERT_TRUE(st.ok()) << st.message;
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (const DeviceBuffer* g : {&dq, &dk, &dv}) {
    std::vector<uint16_t> h(g->bytes() / 2, 0xFFFF);
    if (!h.empty()) g->download(h.data());
    const char* name = g == &dq ? "dq" : g == &dk ? "dk" : "dv";
    for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i], 0x0000) << name << " element " << i;
  }
}

TEST_F(EmptyForward, BackwardNoQueries) {
  EmptyCall c;
  c.sk = 33;
  expect_zero_gradients(c, false);
  c.batch = 0;
  expect_zero_gradients(c, true);
}

TEST_F(EmptyForward, BackwardNoKeys) {
  EmptyCall c;
  c.sq = 17;
  expect_zero_gradients(c, false);
  expect_zero_gradients(c, true);
}

TEST_F(EmptyForward, BackwardVarlenQueriesAllEmpty) {
  EmptyCall c;
  c.cu_q = {0, 0, 0, 0};
  c.cu_k = {0, 5, 5, 9};
  c.max_k = 5;
  expect_zero_gradients(c, false);
}

}  // namespace
}  // namespace fastattn::gputest
