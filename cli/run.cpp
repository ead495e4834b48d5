#include "run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "check.h"
#include "device.h"
#include "fastattn/fastattn.h"
#include "flops.h"
#include "options.h"
#include "problem.h"

namespace fastattn::cli {
namespace {

enum Exit { kOk = 0, kOverTolerance = 1, kBadFlags = 2, kFailed = 3 };

// Iteration counter on stderr: rewritten in place on a terminal; in a log, one line at most
// every few seconds so long runs show they are alive.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(isatty(2) != 0) {}
  void step(const char* what, int i, int n) {
    if (quiet_) return;
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
      std::fprintf(stderr, "\r  %s %d/%d ", what, i, n);
      shown_ = true;
    } else if (now - last_ > std::chrono::seconds(5)) {
      std::fprintf(stderr, "  %s %d/%d\n", what, i, n);
    } else {
      return;
    }
    last_ = now;
  }
  void clear() {
    if (shown_) std::fputs("\r\033[K", stderr);
    shown_ = false;
  }
  void say(const char* msg) {
    if (!quiet_) std::fprintf(stderr, "  %s\n", msg);
    last_ = std::chrono::steady_clock::now();
  }

 private:
  bool quiet_, tty_, shown_ = false;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

struct Timing {
  double median = 0, min = 0, max = 0;
  int iters = 0;
};

Timing time_iterations(const char* what, const RunOptions& o, Device device, Progress& progress,
                       const std::function<Status()>& fn) {
  std::vector<double> ms;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    progress.step(i < o.warmup ? "warm-up" : what, i < o.warmup ? i + 1 : i + 1 - o.warmup,
                  i < o.warmup ? o.warmup : o.iters);
    const double t = time_ms(device, fn);
    if (i >= o.warmup) ms.push_back(t);
  }
  progress.clear();
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return {n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms.front(), ms.back(), int(n)};
}

std::string rate(double flops, double ms) {
  const double tflops = flops / (ms * 1e-3) / 1e12;
  char buf[64];
  if (tflops >= 1) std::snprintf(buf, sizeof buf, "%.1f TFLOPS", tflops);
  else std::snprintf(buf, sizeof buf, "%.4f TFLOPS (%.1f GFLOPS)", tflops, tflops * 1e3);
  return buf;
}

const char* dtype_flag(DType dt) { return dt == DType::BF16 ? "bf16" : dt == DType::F16 ? "fp16" : "fp32"; }

// Can the CUDA backend run this problem? Asks validation only, which never touches memory, over
// one dummy allocation standing in for every operand.
Status cuda_can_run(RunOptions o) {
  if (!cuda_available()) return Status::Unsupported("no usable CUDA device or no kernels built");
  if (auto err = resolve_defaults(o, Device::CUDA)) return Status::Invalid(*err);
  DeviceBuffer dummy(Device::CUDA, 256);
  void* p = dummy.data();
  AttnArgs a = make_args(o, Device::CUDA, p, p, p, p, p);
  Status st = validate_forward(a);
  if (st.ok() && o.backward) st = validate_backward(a, a.out, a.q, a.k, a.v);
  return st;
}

// The run device: --device, else CUDA when it can run the problem, else the CPU.
std::optional<std::string> choose_device(const RunOptions& o, Device& device) {
  if (o.device) {
    device = *o.device;
    if (device == Device::CUDA && !cuda_available())
      return std::string("--device cuda: ") + (cuda_compiled_in()
                                                   ? "no usable CUDA device, or no kernels built for it"
                                                   : "this build has no CUDA support");
    return {};
  }
  device = Device::CPU;
  if (!cuda_available()) return {};
  if (Status st = cuda_can_run(o); !st.ok()) {
    std::fprintf(stderr, "note: cuda cannot run this problem (%s); using the CPU\n",
                 st.message.c_str());
    return {};
  }
  device = Device::CUDA;
  return {};
}

void write_json(const std::string& path, const RunOptions& o, Device device, double fwd_flops,
                const Timing& fwd, const Timing* bwd, const CheckReport* check, bool pass) {
  std::ofstream f(path);
  f << "{\"device\": \"" << device_name(device) << "\", \"version\": \"" << version() << "\",\n"
    << " \"problem\": {\"batch\": " << o.batch << ", \"seqlen_q\": " << o.seqlen
    << ", \"seqlen_k\": " << o.seqlen_k << ", \"heads\": " << o.heads
    << ", \"kv_heads\": " << o.kv_heads << ", \"dim\": " << o.dim << ", \"dim_v\": " << o.dim_v
    << ", \"dtype\": \"" << dtype_flag(o.dtype) << "\", \"causal\": " << (*o.causal ? "true" : "false")
    << ", \"window\": [" << o.window_left << ", " << o.window_right << "], \"softcap\": " << o.softcap
    << "},\n \"forward\": {\"ms\": " << fwd.median << ", \"min_ms\": " << fwd.min
    << ", \"iters\": " << fwd.iters << ", \"tflops\": " << fwd_flops / (fwd.median * 1e9) << "}";
  if (bwd)
    f << ",\n \"backward\": {\"ms\": " << bwd->median << ", \"min_ms\": " << bwd->min
      << ", \"iters\": " << bwd->iters
      << ", \"tflops\": " << backward_flops(fwd_flops) / (bwd->median * 1e9) << "}";
  if (check) {
    f << ",\n \"check\": {\"batch\": " << check->batch << ", \"rows\": " << check->rows.size();
    for (const ErrorStats& s : check->stats)
      f << ", \"" << s.name << "\": {\"max_abs\": " << s.max_abs << ", \"scaled\": " << s.scaled()
        << ", \"tol\": " << s.tol << ", \"bad\": " << s.bad << "}";
    f << "}";
  }
  f << ",\n \"pass\": " << (pass ? "true" : "false") << "}\n";
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
  RunOptions o;
  Device device = Device::CPU;
  std::optional<std::string> err = parse_run_options(args, o);
  if (!err) err = choose_device(o, device);
  if (!err) err = resolve_defaults(o, device);
  if (err) {
    std::fprintf(stderr, "fastattn run: %s (see fastattn run --help)\n", err->c_str());
    return kBadFlags;
  }

  const reference::MaskRule rule =
      mask_rule(o.seqlen, o.seqlen_k, *o.causal, o.window_left, o.window_right);
  const double fwd_flops = forward_flops(o.batch, o.heads, o.dim, o.dim_v, rule);
  const double kept = double(kept_pairs(rule)) / (double(o.seqlen) * double(o.seqlen_k));
  std::printf("fastattn %s | %s\n", version(), device_name(device).c_str());
  std::printf("problem   %s (%.1f%% of pairs kept)\n", describe_problem(o).c_str(), 100 * kept);
  std::fflush(stdout);

  Progress progress(o.quiet);
  try {
    progress.say("generating inputs");
    HostInputs in = random_inputs(o);
    DeviceProblem p = upload(o, device, in);
    Status st = validate_forward(p.args);
    if (st.ok() && o.backward) st = validate_backward(p.args, p.dout_t, p.dq_t, p.dk_t, p.dv_t);
    if (!st.ok()) {
      std::fprintf(stderr, "fastattn run: %s\n", st.message.c_str());
      return kFailed;
    }

    const Timing fwd = time_iterations("forward", o, device, progress, [&] { return forward(p.args); });
    std::printf("forward   %.3f ms median of %d (min %.3f, max %.3f)  %s\n", fwd.median, fwd.iters,
                fwd.min, fwd.max, rate(fwd_flops, fwd.median).c_str());
    std::optional<Timing> bwd;
    if (o.backward) {
      bwd = time_iterations("backward", o, device, progress, [&] {
        return backward(p.args, p.dout_t, p.dq_t, p.dk_t, p.dv_t);
      });
      std::printf("backward  %.3f ms median of %d (min %.3f, max %.3f)  %s\n", bwd->median,
                  bwd->iters, bwd->min, bwd->max, rate(backward_flops(fwd_flops), bwd->median).c_str());
    }
    std::fflush(stdout);

    std::optional<CheckReport> rep;
    if (o.check_rows > 0) {
      progress.say("checking against the float64 reference");
      HostOutputs got;
      got.out = p.out.download();
      got.lse = p.lse.download();
      if (o.backward) {
        got.dq = p.dq.download();
        got.dk = p.dk.download();
        got.dv = p.dv.download();
      }
      rep = check_against_reference(o, in, got);
      std::printf("check     batch %lld, %zu rows x %lld heads vs float64 reference\n",
                  (long long)rep->batch, rep->rows.size(), (long long)o.heads);
      for (const ErrorStats& s : rep->stats)
        std::printf("  %-4s    max abs %.2e  max ref %.2e  scaled %.2e %s %.0e%s\n", s.name.c_str(),
                    s.max_abs, s.max_ref, s.scaled(), s.ok() ? "<=" : "> ", s.tol,
                    s.bad ? (" (" + std::to_string(s.bad) + " non-finite)").c_str() : "");
      if (!rep->note.empty()) std::printf("  note    %s\n", rep->note.c_str());
    }
    const bool pass = !rep || rep->ok();
    std::printf("result    %s\n", !rep ? "not checked (--check-rows 0)" : pass ? "PASS" : "FAIL: error over tolerance");
    if (!o.json_path.empty())
      write_json(o.json_path, o, device, fwd_flops, fwd, bwd ? &*bwd : nullptr, rep ? &*rep : nullptr, pass);
    return pass ? kOk : kOverTolerance;
  } catch (const std::exception& e) {
    progress.clear();
    std::fprintf(stderr, "fastattn run: %s\n", e.what());
    return kFailed;
  }
}

int info_command() {
  std::printf("fastattn %s\n", version());
  std::printf("build           %s\n", build_info());
  std::printf("cuda available  %s\n", cuda_available() ? "yes" : "no");
  for (const std::string& d : describe_cuda_devices()) std::printf("cuda device     %s\n", d.c_str());
  std::printf("cpu             %u hardware threads\n", std::thread::hardware_concurrency());
  return 0;
}

}  // namespace fastattn::cli
