#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

namespace fastattn::cli {
namespace {

using Error = std::optional<std::string>;

Error parse_int(const std::string& flag, const std::string& s, int64_t lo, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE)
    return flag + ": expected an integer, got '" + s + "'";
  if (v < lo) return flag + ": must be >= " + std::to_string(lo) + ", got " + s;
  out = v;
  return {};
}

Error parse_float(const std::string& flag, const std::string& s, float& out) {
  char* end = nullptr;
  float v = std::strtof(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v))
    return flag + ": expected a finite number, got '" + s + "'";
  out = v;
  return {};
}

// "L,R" with each side an integer >= -1 (-1 = unbounded).
Error parse_window(const std::string& flag, const std::string& s, int64_t& left, int64_t& right) {
  auto comma = s.find(',');
  if (comma == std::string::npos) return flag + ": expected L,R (e.g. 256,0), got '" + s + "'";
  if (auto e = parse_int(flag + " (left)", s.substr(0, comma), -1, left)) return e;
  return parse_int(flag + " (right)", s.substr(comma + 1), -1, right);
}

}  // namespace

Error parse_run_options(const std::vector<std::string>& args, RunOptions& o) {
  using Setter = std::function<Error(const std::string& flag, const std::string& value)>;
  auto int_into = [](auto& field, int64_t lo) {
    return Setter([&field, lo](const std::string& f, const std::string& v) {
      int64_t x = 0;
      if (auto e = parse_int(f, v, lo, x)) return e;
      field = static_cast<std::remove_reference_t<decltype(field)>>(x);
      return Error{};
    });
  };
  // Flags that take a value.
  const std::map<std::string, Setter> valued = {
      {"--batch", int_into(o.batch, 1)},
      {"--seqlen", int_into(o.seqlen, 1)},
      {"--seqlen-k", int_into(o.seqlen_k, 1)},
      {"--heads", int_into(o.heads, 1)},
      {"--kv-heads", int_into(o.kv_heads, 1)},
      {"--dim", int_into(o.dim, 1)},
      {"--dim-v", int_into(o.dim_v, 1)},
      {"--iters", int_into(o.iters, 1)},
      {"--warmup", int_into(o.warmup, 0)},
      {"--check-rows", int_into(o.check_rows, 0)},
      {"--seed", int_into(o.seed, 0)},
      {"--threads", int_into(o.threads, 0)},
      {"--num-splits", int_into(o.num_splits, 0)},
      {"--window", [&](const std::string& f, const std::string& v) {
         o.window_set = true;
         return parse_window(f, v, o.window_left, o.window_right);
       }},
      {"--softcap", [&](const std::string& f, const std::string& v) {
         if (auto e = parse_float(f, v, o.softcap)) return e;
         return o.softcap < 0 ? Error(f + ": must be >= 0 (0 = off), got " + v) : Error{};
       }},
      {"--scale", [&](const std::string& f, const std::string& v) {
         float x = 0;
         if (auto e = parse_float(f, v, x)) return e;
         o.scale = x;
         return x <= 0 ? Error(f + ": must be > 0, got " + v) : Error{};
       }},
      {"--dtype", [&](const std::string& f, const std::string& v) {
         if (v == "bf16") o.dtype = DType::BF16;
         else if (v == "fp16") o.dtype = DType::F16;
         else if (v == "fp32") o.dtype = DType::F32;
         else return Error(f + ": expected bf16, fp16 or fp32, got '" + v + "'");
         return Error{};
       }},
      {"--device", [&](const std::string& f, const std::string& v) {
         if (v == "cpu") o.device = Device::CPU;
         else if (v == "cuda" || v == "gpu") o.device = Device::CUDA;
         else return Error(f + ": expected cpu or cuda, got '" + v + "'");
         return Error{};
       }},
      {"--json", [&](const std::string&, const std::string& v) {
         o.json_path = v;
         return Error{};
       }},
  };
  // Switches.
  const std::map<std::string, std::function<void()>> switches = {
      {"--causal", [&] { o.causal = true; }},
      {"--no-causal", [&] { o.causal = false; }},
      {"--backward", [&] { o.backward = true; }},
      {"--deterministic", [&] { o.deterministic = true; }},
      {"--quiet", [&] { o.quiet = true; }},
  };

  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool inline_value = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    if (auto s = switches.find(flag); s != switches.end()) {
      if (inline_value) return flag + ": takes no value";
      s->second();
    } else if (auto v = valued.find(flag); v != valued.end()) {
      if (!inline_value) {
        if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) return flag + ": missing value";
        value = args[++i];
      }
      if (auto e = v->second(flag, value)) return e;
    } else {
      return "unknown flag '" + flag + "'";
    }
  }
  return {};
}

Error resolve_defaults(RunOptions& o, Device device) {
  // The embedded default problem: seconds on a CPU, a meaningful size on a GPU.
  const bool gpu = device == Device::CUDA;
  if (o.batch < 0) o.batch = gpu ? 4 : 1;
  if (o.seqlen < 0) o.seqlen = gpu ? 4096 : 1024;
  if (o.seqlen_k < 0) o.seqlen_k = o.seqlen;
  if (o.heads < 0) o.heads = gpu ? 32 : 8;
  if (o.kv_heads < 0) o.kv_heads = o.heads % 4 == 0 ? o.heads / 4 : o.heads;
  if (o.dim < 0) o.dim = gpu ? 128 : 64;
  if (o.dim_v < 0) o.dim_v = o.dim;
  if (!o.causal) o.causal = !o.window_set;
  if (o.iters < 0) o.iters = gpu ? 20 : 3;
  if (o.warmup < 0) o.warmup = gpu ? 3 : 1;
  if (o.heads % o.kv_heads != 0)
    return "--heads (" + std::to_string(o.heads) + ") must be a multiple of --kv-heads (" +
           std::to_string(o.kv_heads) + ")";
  return {};
}

const char* run_help() {
  return R"(usage: fastattn run [flags]

Builds random inputs (normal, fixed seed), runs the forward (and backward) pass, times it and
checks a sample of rows against the float64 reference. Exit status: 0 ok, 1 error over tolerance,
2 bad flags, 3 the library refused or failed the call.

problem (unset values take the default problem of the device: CPU b=1 s=1024 h=8 kv=2 d=64,
         GPU b=4 s=4096 h=32 kv=8 d=128; causal, bf16)
  --batch N          batch size
  --seqlen N         query length (s_q)
  --seqlen-k N       key/value length (s_k; default s_q)
  --heads N          query heads
  --kv-heads N       key/value heads; --heads must be a multiple (default heads/4, or heads)
  --dim N            head dim of q and k
  --dim-v N          head dim of v and out (default --dim)
  --causal           causal mask, bottom-right aligned when s_q != s_k (the default mask)
  --no-causal        no causal mask
  --window L,R       local window: row i keeps keys i+s_k-s_q-L .. i+s_k-s_q+R (-1 = unbounded);
                     given alone it replaces the default causal mask, with --causal both apply
  --softcap X        scores become X*tanh(scores/X) (0 = off)
  --scale X          softmax scale (default 1/sqrt(dim))
  --dtype T          bf16 | fp16 | fp32 (default bf16)

run
  --device D         cpu | cuda (default cuda when a GPU and kernels are present, else cpu)
  --backward         also run and time the backward pass
  --deterministic    backward: bitwise reproducible dq (ordered accumulation on CUDA)
  --num-splits N     forward: split each sequence's keys into N parts merged by a combine (split-KV;
                     0 = the library's choice: on CUDA where the grid leaves SMs idle, decode above
                     all; 1 = never; default 0)
  --iters N          timed iterations, the median is reported (default GPU 20, CPU 3)
  --warmup N         untimed iterations before (default GPU 3, CPU 1)
  --threads N        CPU backend threads (default all)
  --check-rows N     query rows checked, all heads of one random batch (default 16, 0 = skip)
  --seed S           seed of the inputs and the sampled rows (default 0)
  --json FILE        also write the results as one JSON object
  --quiet            no progress on stderr

FLOPs are counted from the mask: every kept (query, key) pair costs 2*dim + 2*dim_v (QK^T and PV)
per head, so dense forward is 4*b*h*s_q*s_k*d and causal about half of it, counted exactly;
backward counts 2.5x the forward. Tolerance, on max|x - ref| / max(1, max|ref|): out bf16 2e-2,
fp16 4e-3, fp32 1e-4; lse 1e-3; gradients 4x those. Backward checks dq on the sampled rows,
and dk/dv over the sampled batch when the float64 reference can do it in a few seconds.
)";
}

}  // namespace fastattn::cli
