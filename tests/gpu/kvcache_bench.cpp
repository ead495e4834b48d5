// GPU time of a forward_kvcache decode step, paged (page 64) against the contiguous cache: bf16,
// s_q 1, one new token appended, h 32/8, d 128, batch x cached keys over a grid. Each step is
// captured in a CUDA graph of kStepsPerGraph calls; the time is the median over replays (CUDA
// events) divided by the calls. Only the public API, so the same file also times another build
// of the library (the contiguous baseline of an earlier commit).
//   fastattn_kvcache_bench [page_size] [in-order] [no-append] [rotate] [splits=N] [batches=B,B,...]
// page_size: default 64; 0: the contiguous cache only. Prints a markdown table. The pages lie in a
// random order in the pool, as a server's do; `in-order` lays them out in sequence order instead, so
// that the paged cache occupies the same bytes as the contiguous one: what the paged call costs then
// is the kernel's own work (lookups, TMA boxes), without the scattered placement's memory effects.
// `no-append`: no new token (the cache read as it is: the attention launch alone, no append launch).
// `rotate`: the calls of a graph rotate over copies of the cache (>= 200 MiB in all, at most 8, as
// bench/decode.py does), so that each call reads its K/V from HBM, as a decode step over many layers
// does; without it every call after the first finds a cache of up to ~50 MB in the L2.
// splits=N forces num_splits for both caches (default 0: the heuristic's count for each);
// batches= times only those batches (default 1,4,16,64).
// A build with -DFASTATTN_SPLIT_STAMPS (library and bench; cuda/sm90/fwd/split_stamps.cuh) also
// takes `stamps`: after each timing it prints the last split launch's CTA timeline.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_check.h"
#include "fastattn/kvcache.h"

#ifdef FASTATTN_SPLIT_STAMPS
#include <cuda_bf16.h>

#include "cuda/sm90/fwd/split_stamps.h"
namespace fastattn::sm90 {
template <class T, int D, int DV = D>
cudaError_t read_split_stamps(unsigned long long* out, int ctas);
}
#endif

using namespace fastattn;

namespace {

constexpr int kHeadsQ = 32, kHeadsKv = 8, kDim = 128;
constexpr int kStepsPerGraph = 10, kReplays = 21;
constexpr double kHbmBytesPerUs = 3.35e6;  // H100 SXM peak, for the floor column only

struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t bytes) {
    CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    CHECK_CUDA(cudaMemset(p, 0x3C, std::max<size_t>(bytes, 16)));  // bf16 0x3C3C: a small finite value
  }
  ~DeviceMem() { cudaFree(p); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

Tensor bf16(void* p, std::initializer_list<int64_t> shape) { return make_tensor(p, DType::BF16, shape, Device::CUDA, 0); }

// Median us per call replayed from a graph whose calls take `calls` in turn (one call's arguments
// per cache copy; they share one workspace).
double time_step(std::vector<KvCacheArgs> calls, cudaStream_t s) {
  const size_t ws_bytes = kvcache_workspace_bytes(calls[0]);
  DeviceMem ws(ws_bytes);
  for (KvCacheArgs& a : calls) {
    a.workspace = ws.p;
    a.workspace_bytes = ws_bytes;
    Status st = forward_kvcache(a, s);  // checked once, with the index arrays read
    if (!st.ok()) {
      std::fprintf(stderr, "forward_kvcache: %s\n", st.message.c_str());
      std::exit(1);
    }
    a.check_index_arrays = false;
  }
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kStepsPerGraph; ++i) forward_kvcache(calls[size_t(i) % calls.size()], s);
  CHECK_CUDA(cudaStreamEndCapture(s, &g));
  CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CHECK_CUDA(cudaGraphLaunch(ge, s));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms(kReplays);
  for (float& m : ms) {
    CHECK_CUDA(cudaEventRecord(e0, s));
    CHECK_CUDA(cudaGraphLaunch(ge, s));
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaEventSynchronize(e1));
    CHECK_CUDA(cudaEventElapsedTime(&m, e0, e1));
  }
  std::nth_element(ms.begin(), ms.begin() + kReplays / 2, ms.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms[kReplays / 2] * 1e3 / kStepsPerGraph;
}

#ifdef FASTATTN_SPLIT_STAMPS
// The CTAs of the last bf16 d 128 split launch (those that started within 100 us of the last
// start: the array keeps older launches' CTAs past this grid) as quantiles over CTAs of each phase,
// in ns (SM clocks at `ghz`), and the launch's span from the first start to the last store.
void print_stamps(const char* cache, int b, int sk, double ghz) {
  using namespace fastattn::sm90;
  std::vector<unsigned long long> w(size_t(kStampCtas) * kStampWords);
  CHECK_CUDA((read_split_stamps<__nv_bfloat16, 128>(w.data(), kStampCtas)));
  unsigned long long last = 0;
  for (int c = 0; c < kStampCtas; ++c) last = std::max(last, w[size_t(c) * kStampWords + kStamps]);
  std::vector<int> ctas;
  unsigned long long first = last;
  for (int c = 0; c < kStampCtas; ++c) {
    const unsigned long long t = w[size_t(c) * kStampWords + kStamps];
    if (t + 100000 >= last && t != 0) {
      ctas.push_back(c);
      first = std::min(first, t);
    }
  }
  const char* names[] = {"start skew",         "barrier set-up",    "to producer regs given", "to first tile known",
                         "to Q + K issued",    "to first K landed", "first K to last PV",     "last PV to stored",
                         "start to stored",    "first start to this store"};
  constexpr int kRows = sizeof(names) / sizeof(names[0]);
  std::vector<std::vector<double>> v(kRows);
  for (int c : ctas) {
    const unsigned long long* x = &w[size_t(c) * kStampWords];
    auto ns = [&](int a, int z) { return double(x[z] - x[a]) / ghz; };
    const double skew = double(x[kStamps] - first);
    v[0].push_back(skew);
    v[1].push_back(ns(kStampStart, kStampBarrier));
    v[2].push_back(ns(kStampBarrier, kStampRegs));
    v[3].push_back(ns(kStampRegs, kStampTile));
    v[4].push_back(ns(kStampTile, kStampIssued));
    v[5].push_back(ns(kStampIssued, kStampFirstK));
    v[6].push_back(ns(kStampFirstK, kStampLastPv));
    v[7].push_back(ns(kStampLastPv, kStampStored));
    v[8].push_back(ns(kStampStart, kStampStored));
    v[9].push_back(skew + ns(kStampStart, kStampStored));
  }
  std::printf("\nstamps %s b%d s_k %d: %zu CTAs (ns; SM clock %.2f GHz): phase | min | median | max\n", cache, b,
              sk, ctas.size(), ghz);
  for (int i = 0; i < kRows; ++i) {
    std::sort(v[i].begin(), v[i].end());
    if (v[i].empty()) continue;
    std::printf("  %-26s | %7.0f | %7.0f | %7.0f\n", names[i], v[i].front(), v[i][v[i].size() / 2], v[i].back());
  }
  std::printf("\n");
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int page = 64, splits = 0;
  bool in_order = false, append = true, rotate = false;
  [[maybe_unused]] bool stamps = false;
  [[maybe_unused]] double ghz = 1.98;  // the H100's SM clock under load (stamps only)
  if (const char* g = std::getenv("FASTATTN_STAMP_GHZ")) ghz = std::atof(g);
  std::vector<int> batches = {1, 4, 16, 64};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "in-order") {
      in_order = true;
    } else if (arg == "no-append") {
      append = false;
    } else if (arg == "rotate") {
      rotate = true;
    } else if (arg == "stamps") {
      stamps = true;
    } else if (arg.rfind("splits=", 0) == 0) {
      splits = std::atoi(arg.c_str() + 7);
    } else if (arg.rfind("batches=", 0) == 0) {
      batches.clear();
      std::stringstream list(arg.substr(8));
      for (std::string b; std::getline(list, b, ',');) batches.push_back(std::atoi(b.c_str()));
    } else {
      page = std::atoi(arg.c_str());
    }
  }
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  std::mt19937 rng(1);
  if (splits > 0) std::printf("num_splits forced to %d\n\n", splits);
  if (!append) std::printf("no token appended: the attention launch alone\n\n");
  if (rotate) std::printf("calls rotate over cache copies of >= 200 MiB in all (K/V read from HBM)\n\n");
  std::printf("| batch | s_k | contiguous us | paged %d%s us | paged / contiguous | K+V floor us |\n", page,
              in_order ? " in order" : "");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int b : batches) {
    for (int sk : {4096, 8192, 16384, 32768}) {
      const size_t row = size_t(kHeadsKv) * kDim * 2;  // bytes of one position's K (or V)
      DeviceMem q(size_t(b) * kHeadsQ * kDim * 2), out(size_t(b) * kHeadsQ * kDim * 2);
      DeviceMem kn(size_t(b) * row), vn(size_t(b) * row);
      // The cache's copies (one without `rotate`), each of its K and V.
      const size_t cache_bytes = size_t(b) * sk * row;
      const size_t per_copy = 2 * cache_bytes, want = size_t(200) << 20;
      const size_t copies = rotate ? std::clamp<size_t>((want + per_copy - 1) / per_copy, 1, 8) : 1;
      std::vector<std::unique_ptr<DeviceMem>> kc, vc;
      for (size_t c = 0; c < copies; ++c) {
        kc.push_back(std::make_unique<DeviceMem>(cache_bytes));
        vc.push_back(std::make_unique<DeviceMem>(cache_bytes));
      }
      std::vector<int32_t> seqlens(size_t(b), append ? sk - 1 : sk);
      DeviceMem seq(seqlens.size() * 4);
      CHECK_CUDA(cudaMemcpy(seq.p, seqlens.data(), seqlens.size() * 4, cudaMemcpyHostToDevice));

      KvCacheArgs a;
      a.q = bf16(q.p, {b, 1, kHeadsQ, kDim});
      a.out = bf16(out.p, {b, 1, kHeadsQ, kDim});
      if (append) {
        a.k_new = bf16(kn.p, {b, 1, kHeadsKv, kDim});
        a.v_new = bf16(vn.p, {b, 1, kHeadsKv, kDim});
      }
      a.cache_seqlens = {static_cast<const int32_t*>(seq.p), b};
      a.causal = true;
      a.num_splits = splits;
      // One call's arguments per copy, its cache viewed as `shape`.
      auto over_copies = [&](std::initializer_list<int64_t> shape) {
        std::vector<KvCacheArgs> calls(copies, a);
        for (size_t c = 0; c < copies; ++c) {
          calls[c].k_cache = bf16(kc[c]->p, shape);
          calls[c].v_cache = bf16(vc[c]->p, shape);
        }
        return calls;
      };
      const double contiguous = time_step(over_copies({b, sk, kHeadsKv, kDim}), s);
#ifdef FASTATTN_SPLIT_STAMPS
      if (stamps) print_stamps("contiguous", b, sk, ghz);
#endif

      const double floor = 2.0 * b * sk * row / kHbmBytesPerUs;
      if (page == 0) {
        std::printf("| %d | %d | %.1f | - | - | %.1f |\n", b, sk, contiguous, floor);
        continue;
      }
      // The same cache as pages of a pool, in a random order (or in sequence order).
      const int pages_per_seq = sk / page;
      std::vector<int32_t> table(size_t(b) * pages_per_seq);
      std::iota(table.begin(), table.end(), 0);
      if (!in_order) std::shuffle(table.begin(), table.end(), rng);
      DeviceMem pt(table.size() * 4);
      CHECK_CUDA(cudaMemcpy(pt.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
      a.page_table = {static_cast<const int32_t*>(pt.p), b, pages_per_seq};
      const double paged = time_step(over_copies({int64_t(table.size()), page, kHeadsKv, kDim}), s);
#ifdef FASTATTN_SPLIT_STAMPS
      if (stamps) print_stamps("paged", b, sk, ghz);
#endif
      std::printf("| %d | %d | %.1f | %.1f | %.3f | %.1f |\n", b, sk, contiguous, paged, paged / contiguous, floor);
      std::fflush(stdout);
    }
  }
  cudaStreamDestroy(s);
  return 0;
}
