#include "profile.h"

#include <cxxabi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "device.h"
#include "fastattn/fastattn.h"
#include "problem.h"
#include "profile_report.h"

namespace fastattn::cli {
namespace {

enum Exit { kOk = 0, kOutputDiffers = 1, kBadFlags = 2, kFailed = 3 };
using Error = std::optional<std::string>;

Error parse_count(const std::string& flag, const std::string& s, int& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < 0 || v > 1 << 30)
    return flag + ": expected an integer >= 0, got '" + s + "'";
  out = int(v);
  return {};
}

// "X,Y,Z": a blockIdx.
Error parse_block(const std::string& flag, const std::string& s, int (&b)[3]) {
  size_t from = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t comma = s.find(',', from);
    if ((i < 2) != (comma != std::string::npos)) return flag + ": expected X,Y,Z (e.g. 0,0,0), got '" + s + "'";
    if (auto e = parse_count(flag, s.substr(from, comma == std::string::npos ? std::string::npos : comma - from), b[i]))
      return flag + ": expected X,Y,Z (e.g. 0,0,0), got '" + s + "'";
    from = comma + 1;
  }
  return {};
}

// Readable kernel name for the terminal and profile.md (the JSON keeps the mangled one).
std::string demangled(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The plot script: $FASTATTN_PLOT_SCRIPT, else the source tree this binary was built from.
std::string plot_script() {
  if (const char* env = std::getenv("FASTATTN_PLOT_SCRIPT"); env && *env) return env;
#ifdef FASTATTN_SOURCE_DIR
  return std::string(FASTATTN_SOURCE_DIR) + "/tools/profile/plot_timeline.py";
#else
  return "tools/profile/plot_timeline.py";
#endif
}

// Draws the timeline when python3 with matplotlib is here; else says how to.
void plot(const std::string& json, const std::string& png) {
  const std::string cmd = "python3 " + shell_quote(plot_script()) + " " + shell_quote(json) + " --out " + shell_quote(png);
  if (!std::filesystem::exists(plot_script())) {
    std::printf("timeline  not drawn: %s is missing; draw it with tools/profile/plot_timeline.py %s --out %s\n",
                plot_script().c_str(), json.c_str(), png.c_str());
    return;
  }
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    std::printf("timeline  not drawn (no python3 with matplotlib here); elsewhere: %s\n", cmd.c_str());
    return;
  }
  std::fflush(stdout);
  if (std::system(cmd.c_str()) != 0) std::printf("timeline  the plot script failed: %s\n", cmd.c_str());
}

}  // namespace

Error take_profile_flags(std::vector<std::string>& args, ProfileOptions& p) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto take_value = [&]() -> Error {
      if (has_value) return {};
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) return flag + ": missing value";
      value = args[++i];
      return {};
    };
    Error e;
    if (flag == "--out") {
      if (!(e = take_value())) p.out_dir = value;
    } else if (flag == "--trace-block") {
      if (!(e = take_value())) e = parse_block(flag, value, p.request.trace_block);
    } else if (flag == "--trace-skip") {
      if (!(e = take_value())) e = parse_count(flag, value, p.request.trace_skip);
    } else if (flag == "--no-pv-sync" || flag == "--no-plot") {
      if (has_value) return flag + ": takes no value";
      (flag == "--no-plot" ? p.plot : p.request.pv_sync) = false;
    } else {
      rest.push_back(args[i]);
    }
    if (e) return e;
  }
  args = rest;
  return {};
}

int profile_command(const std::vector<std::string>& argv) {
  std::vector<std::string> args = argv;
  ProfileOptions p;
  RunOptions o;
  Error err = take_profile_flags(args, p);
  if (!err) err = parse_run_options(args, o);
  if (!err && o.device == Device::CPU) err = "--device cpu: profile runs the CUDA kernels only";
  if (!err && o.backward) err = "--backward: profile covers the forward only";
  if (!err) {
    if (o.iters < 0) o.iters = 3;   // counted launches: the sums need no more
    if (o.warmup < 0) o.warmup = 2;
    err = resolve_defaults(o, Device::CUDA);
  }
  if (err) {
    std::fprintf(stderr, "fastattn profile: %s (see fastattn profile --help)\n", err->c_str());
    return kBadFlags;
  }
  p.request.launches = o.iters;
  p.request.warmup = o.warmup;

#ifndef FASTATTN_WITH_PROFILE
  std::fprintf(stderr,
               "fastattn profile: this build has no probed kernels (they need a CUDA build with sm_90a in "
               "FASTATTN_CUDA_ARCHS and FASTATTN_PROFILE=ON)\n");
  return kFailed;
#else
  if (!prof::probed_kernel_built(o.dtype, int(o.dim))) {
    std::fprintf(stderr, "fastattn profile: no probed kernel for %s d=%lld in this build (built: %s; see "
                 "FASTATTN_PROFILE_KERNELS)\n", dtype_name(o.dtype), (long long)o.dim, prof::probed_kernels().c_str());
    return kFailed;
  }
  if (!cuda_available()) {
    const std::vector<std::string> devs = describe_cuda_devices();
    std::fprintf(stderr, "fastattn profile: no usable CUDA device (%s); the probed kernels need a Hopper GPU\n",
                 devs.empty() ? "none found" : devs.front().c_str());
    return kFailed;
  }
  const std::string device = device_name(Device::CUDA);
  std::printf("fastattn %s | %s | profile\n", version(), device.c_str());
  std::printf("problem   %s\n", describe_problem(o).c_str());
  std::fflush(stdout);

  prof::ProfileResult r;
  try {
    HostInputs in = random_inputs(o);
    DeviceProblem dp = upload(o, Device::CUDA, in);
    if (Status st = prof::profile_forward(dp.args, p.request, &r); !st.ok()) {
      std::fprintf(stderr, "fastattn profile: %s\n", st.message.c_str());
      return kFailed;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fastattn profile: %s\n", e.what());
    return kFailed;
  }

  std::printf("kernel    %s\n          grid %dx%dx%d, %d threads, %u B smem, tile %dx%d, d=%d%s; default %.3f ms\n",
              demangled(r.default_kernel).c_str(), r.grid[0], r.grid[1], r.grid[2], r.block[0], r.smem_bytes, r.block_m,
              r.block_n, r.head_dim, r.ping_pong ? ", ping-pong" : "", r.default_ms);
  std::printf("probes    thread 0 of each consumer warpgroup; %d counted launches after %d warm-up\n\n",
              p.request.launches, p.request.warmup);
  std::fputs(region_table(r.pipeline, "pipeline (the kernel as it is)").c_str(), stdout);
  if (r.pv_sync.ran)
    std::fputs(("\n" + region_table(r.pv_sync, "PV-sync (wait<0> right after wait<1>: the PV's time on the "
                                               "tensor cores, no IntraWG overlap)")).c_str(), stdout);

  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(p.out_dir, ec);
  const std::string json = (fs::path(p.out_dir) / "profile.json").string();
  const std::string md = (fs::path(p.out_dir) / "profile.md").string();
  {
    std::ofstream f(json);
    write_profile_json(f, o, device, r, p.request);
    std::ofstream m(md);
    m << "## fastattn profile: " << describe_problem(o) << "\n\n" << device << ", `" << demangled(r.default_kernel) << "`, grid "
      << r.grid[0] << "x" << r.grid[1] << "x" << r.grid[2] << ", default kernel " << r.default_ms << " ms\n\n"
      << region_table_markdown(r.pipeline, "pipeline (the kernel as it is)");
    if (r.pv_sync.ran) m << "\n" << region_table_markdown(r.pv_sync, "PV-sync (wait<0> moved before the softmax)");
    if (!f || !m) {
      std::fprintf(stderr, "fastattn profile: cannot write %s and %s\n", json.c_str(), md.c_str());
      return kFailed;
    }
  }
  std::printf("\nwrote     %s, %s\n", json.c_str(), md.c_str());
  if (p.plot) plot(json, (fs::path(p.out_dir) / "timeline.png").string());
  const bool same = r.pipeline.output_identical && (!r.pv_sync.ran || r.pv_sync.output_identical);
  if (!same) std::printf("result    FAIL: a probed kernel's output differs from the default kernel's\n");
  return same ? kOk : kOutputDiffers;
#endif
}

const char* profile_help() {
  return R"(usage: fastattn profile [problem flags] [--out DIR] [--trace-block X,Y,Z] [--trace-skip N]
                        [--no-pv-sync] [--no-plot] [--iters N] [--warmup N]

Runs the Hopper forward built with clock64 probes (-DFASTATTN_LOOP_PROBES, a separate library;
the default kernels carry none) on random inputs, replaying the exact launch the library makes,
and prints where one K-loop iteration of each consumer warpgroup spends its cycles. Writes
DIR/profile.json (totals and the raw timestamps of one tile), DIR/profile.md (the tables) and,
with python3 + matplotlib, DIR/timeline.png (both warpgroups and the inferred tensor-core row).
Method and region meanings: docs/profiling.md. Needs a CUDA build with sm_90a and a Hopper GPU.
Exit status: 0 ok, 1 a probed kernel's output differs from the default's, 2 bad flags,
3 cannot profile here (no probed kernels, no GPU) or the run failed.

problem flags: as `fastattn run` (--batch --seqlen --seqlen-k --heads --kv-heads --dim --causal
  --no-causal --window --softcap --scale --dtype --seed); defaults: the GPU default problem
profile
  --out DIR            output folder (default profile-out)
  --iters N            counted launches, their sums add up (default 3)
  --warmup N           probed launches before them (default 2)
  --trace-block X,Y,Z  blockIdx of the CTA whose timestamps are kept (default 0,0,0)
  --trace-skip N       in a persistent grid: that CTA's tiles to pass before the traced one (default 0)
  --no-pv-sync         skip the second kernel, which moves wgmma_wait<0> before the softmax to time
                       the PV on the tensor cores (seed 003, method 3)
  --no-plot            write the JSON only
)";
}

}  // namespace fastattn::cli
