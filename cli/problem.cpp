#include "problem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "util/half.h"

namespace fastattn::cli {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser: a good 64-bit hash of a counter
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Box-Muller on two 32-bit halves of the hash of element i.
float normal_at(uint64_t key, uint64_t i) {
  const uint64_t h = mix64(key ^ mix64(i));
  const double u1 = (double(h >> 32) + 1.0) * 0x1p-32;  // (0, 1]: log stays finite
  const double u2 = double(h & 0xffffffffu) * 0x1p-32;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

std::vector<std::byte> random_tensor(uint64_t seed, uint64_t tensor_id, int64_t n, DType dt) {
  std::vector<std::byte> buf(size_t(n) * size_t(dtype_size(dt)));
  const uint64_t key = mix64(seed * 8 + tensor_id);
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
  const int64_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      const int64_t end = std::min(n, (w + 1) * chunk);
      for (int64_t i = w * chunk; i < end; ++i)
        util::store_from_float(buf.data() + i * dtype_size(dt), dt, normal_at(key, uint64_t(i)));
    });
  }
  for (auto& t : pool) t.join();
  return buf;
}

int64_t q_elems(const RunOptions& o) { return o.batch * o.seqlen * o.heads * o.dim; }
int64_t k_elems(const RunOptions& o) { return o.batch * o.seqlen_k * o.kv_heads * o.dim; }
int64_t v_elems(const RunOptions& o) { return o.batch * o.seqlen_k * o.kv_heads * o.dim_v; }
int64_t out_elems(const RunOptions& o) { return o.batch * o.seqlen * o.heads * o.dim_v; }

}  // namespace

HostInputs random_inputs(const RunOptions& o) {
  HostInputs in;
  in.q = random_tensor(o.seed, 0, q_elems(o), o.dtype);
  in.k = random_tensor(o.seed, 1, k_elems(o), o.dtype);
  in.v = random_tensor(o.seed, 2, v_elems(o), o.dtype);
  if (o.backward) in.dout = random_tensor(o.seed, 3, out_elems(o), o.dtype);
  return in;
}

Tensor q_like(const RunOptions& o, void* data, DType dt, int64_t batch, int64_t rows, int64_t dim,
              Device device) {
  return make_tensor(data, dt, {batch, rows, o.heads, dim}, device);
}

Tensor kv_like(const RunOptions& o, void* data, DType dt, int64_t batch, int64_t rows, int64_t dim,
               Device device) {
  return make_tensor(data, dt, {batch, rows, o.kv_heads, dim}, device);
}

AttnArgs make_args(const RunOptions& o, Device device, void* q, void* k, void* v, void* out,
                   void* lse) {
  const DType dt = o.dtype;
  AttnArgs a;
  a.q = q_like(o, q, dt, o.batch, o.seqlen, o.dim, device);
  a.k = kv_like(o, k, dt, o.batch, o.seqlen_k, o.dim, device);
  a.v = kv_like(o, v, dt, o.batch, o.seqlen_k, o.dim_v, device);
  a.out = q_like(o, out, dt, o.batch, o.seqlen, o.dim_v, device);
  a.lse = make_tensor(lse, DType::F32, {o.batch, o.heads, o.seqlen}, device);
  a.causal = *o.causal;
  a.window_left = int32_t(o.window_left);
  a.window_right = int32_t(o.window_right);
  a.softcap = o.softcap;
  a.deterministic = o.deterministic;
  a.num_splits = o.num_splits;
  if (o.scale) a.softmax_scale = *o.scale;
  a.num_threads = o.threads;
  return a;
}

std::string describe_problem(const RunOptions& o) {
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "b=%lld s_q=%lld s_k=%lld h=%lld h_kv=%lld d=%lld d_v=%lld %s%s",
                        (long long)o.batch, (long long)o.seqlen, (long long)o.seqlen_k, (long long)o.heads,
                        (long long)o.kv_heads, (long long)o.dim, (long long)o.dim_v, dtype_name(o.dtype),
                        o.causal.value_or(false) ? " causal" : "");
  if (o.window_set && n > 0 && size_t(n) < sizeof buf)
    n += std::snprintf(buf + n, sizeof buf - size_t(n), " window=%lld,%lld", (long long)o.window_left,
                       (long long)o.window_right);
  if (o.softcap > 0 && n > 0 && size_t(n) < sizeof buf)
    n += std::snprintf(buf + n, sizeof buf - size_t(n), " softcap=%g", o.softcap);
  if (o.num_splits != 0 && n > 0 && size_t(n) < sizeof buf) std::snprintf(buf + n, sizeof buf - size_t(n), " splits=%d", o.num_splits);
  return buf;
}

DeviceProblem upload(const RunOptions& o, Device device, const HostInputs& in) {
  const DType dt = o.dtype;
  DeviceProblem p;
  auto input = [&](DeviceBuffer& buf, const std::vector<std::byte>& host) {
    buf = DeviceBuffer(device, host.size());
    buf.upload(host);
  };
  auto output = [&](DeviceBuffer& buf, int64_t n, DType t) {
    buf = DeviceBuffer(device, size_t(n) * size_t(dtype_size(t)));
    buf.fill_nan(t);
  };
  input(p.q, in.q);
  input(p.k, in.k);
  input(p.v, in.v);
  output(p.out, out_elems(o), dt);
  output(p.lse, o.batch * o.heads * o.seqlen, DType::F32);

  p.args = make_args(o, device, p.q.data(), p.k.data(), p.v.data(), p.out.data(), p.lse.data());
  const AttnArgs& a = p.args;

  if (o.backward) {
    input(p.dout, in.dout);
    output(p.dq, q_elems(o), dt);
    output(p.dk, k_elems(o), dt);
    output(p.dv, v_elems(o), dt);
    p.dout_t = a.out;
    p.dout_t.data = p.dout.data();
    p.dq_t = a.q;
    p.dq_t.data = p.dq.data();
    p.dk_t = a.k;
    p.dk_t.data = p.dk.data();
    p.dv_t = a.v;
    p.dv_t.data = p.dv.data();
  }
  return p;
}

}  // namespace fastattn::cli
