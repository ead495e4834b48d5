// Writes a synthetic `fastattn profile` JSON through the CLI's own writer, for the plot test
// (test_plot_timeline.py): two warpgroups in ping-pong, fixed region lengths, 16 traced iterations.
#include <cstdio>
#include <fstream>

#include "options.h"
#include "profile_report.h"

using namespace fastattn;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  cli::RunOptions o;
  if (cli::parse_run_options({"--batch", "4", "--seqlen", "4096", "--heads", "64", "--kv-heads", "8", "--no-causal",
                              "--dtype", "fp16"}, o) ||
      cli::resolve_defaults(o, Device::CUDA))
    return 1;
  prof::ProfileRequest req;
  prof::ProfileResult r;
  r.default_kernel = "_ZN8fastattn4sm9010fwd_kernel_sample";
  r.grid[0] = 132, r.grid[1] = r.grid[2] = 1, r.block[0] = 384, r.block[1] = r.block[2] = 1;
  r.block_m = 128, r.block_n = 128, r.head_dim = 128, r.ping_pong = true, r.default_ms = 3.5;
  // Mark offsets inside one 2000-cycle iteration; warpgroup 1 runs half an iteration later.
  const long long at[prof::kLoopMarks] = {0, 20, 60, 160, 420, 480, 1500, 1520, 1960};
  auto fill = [&](prof::ProbeRun& run, long long pv_sync) {
    run.ran = true;
    run.kernel = "_ZN8fastattn4sm9010fwd_kernel_probed_sample";
    run.ms = 3.6;
    run.output_identical = true;
    prof::ProbeBuffer& b = run.buffer;
    b.trace.smid = 7;
    for (int wg = 0; wg < prof::kWarpgroups; ++wg) {
      b.totals.iterations[wg] = 31 * 100;
      b.totals.tiles[wg] = 100;
      for (int m = 1; m < prof::kLoopMarks; ++m) b.totals.cycles[wg][m] = (at[m] - at[m - 1]) * 3100;
      b.totals.cycles[wg][prof::kIterBegin] = 40 * 3000;
      b.totals.cycles[wg][prof::kSlotPrologue] = 2500 * 100;
      b.totals.cycles[wg][prof::kEpilogueEnd] = 900 * 100;
      b.totals.cycles[wg][prof::kSlotPvSync] = pv_sync * 3100;
      b.trace.iterations[wg] = 31;
      const long long t0 = 100000 + wg * 1000;
      b.trace.start[wg] = t0 - 2500;
      for (int i = 0; i < prof::kTraceIters; ++i) {
        for (int m = 0; m < prof::kLoopMarks; ++m) b.trace.marks[wg][i][m] = t0 + i * 2000 + at[m];
        if (pv_sync) b.trace.pv_sync[wg][i] = t0 + i * 2000 + at[prof::kScoresReady] + pv_sync;
      }
      b.trace.end[wg] = t0 + 31 * 2000 + 900;
    }
  };
  fill(r.pipeline, 0);
  fill(r.pv_sync, 230);
  std::ofstream f(argv[1]);
  cli::write_profile_json(f, o, "cuda:0 synthetic", r, req);
  return f ? 0 : 1;
}
