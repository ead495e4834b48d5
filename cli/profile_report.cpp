#include "profile_report.h"

#include <cstdio>
#include <ostream>

#include "fastattn/fastattn.h"

namespace fastattn::cli {
namespace {

using prof::kSlotCount;

const char* const kMarkNames[prof::kMarkCount] = {
    "kIterBegin", "kTilesReady", "kTurnTaken", "kIssued",  "kScoresReady",
    "kMasked",    "kSoftmaxDone", "kPvDone",   "kIterEnd", "kEpilogueEnd"};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// Lines shared by both tables: tiles, iterations, time against the default kernel, output check.
std::vector<std::string> run_notes(const prof::ProbeRun& run, const WarpgroupRegions& w0) {
  std::vector<std::string> notes;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%llu tiles with loop iterations, %llu iterations (%.1f per tile), over the counted launches",
                w0.tiles, w0.iterations, w0.tiles ? double(w0.iterations) / double(w0.tiles) : 0.0);
  notes.emplace_back(buf);
  std::snprintf(buf, sizeof buf, "probed kernel %.3f ms per launch; output %s", run.ms,
                run.output_identical ? "bitwise identical to the default kernel's"
                                     : "DIFFERS from the default kernel's");
  notes.emplace_back(buf);
  return notes;
}

}  // namespace

bool slot_in_loop(int slot) {
  return (slot >= prof::kIterBegin && slot <= prof::kIterEnd) || slot == prof::kSlotPvSync;
}

const std::vector<int>& table_slots() {
  static const std::vector<int> order = {
      prof::kTilesReady,  prof::kTurnTaken, prof::kIssued,       prof::kScoresReady,
      prof::kSlotPvSync,  prof::kMasked,    prof::kSoftmaxDone,  prof::kPvDone,
      prof::kIterEnd,     prof::kIterBegin, prof::kSlotPrologue, prof::kEpilogueEnd};
  return order;
}

WarpgroupRegions warpgroup_regions(const prof::ProbeTotals& t, int wg) {
  WarpgroupRegions w;
  w.iterations = t.iterations[wg];
  w.tiles = t.tiles[wg];
  for (int s = 0; s < kSlotCount; ++s) {
    const unsigned long long n = slot_in_loop(s) ? w.iterations : w.tiles;
    w.per_slot[s] = n ? double(t.cycles[wg][s]) / double(n) : 0.0;
    if (slot_in_loop(s)) w.iteration += w.per_slot[s];
  }
  return w;
}

std::string region_table(const prof::ProbeRun& run, const std::string& title) {
  const WarpgroupRegions w[2] = {warpgroup_regions(run.buffer.totals, 0), warpgroup_regions(run.buffer.totals, 1)};
  std::string s = title + "\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-44s %9s %7s %9s %7s\n", "region (cycles per loop iteration)", "wg0", "%", "wg1", "%");
  s += buf;
  const bool pv_sync = run.buffer.totals.cycles[0][prof::kSlotPvSync] + run.buffer.totals.cycles[1][prof::kSlotPvSync] > 0;
  bool per_tile_header = false;
  for (int slot : table_slots()) {
    if (slot == prof::kSlotPvSync && !pv_sync) continue;
    if (!slot_in_loop(slot) && !per_tile_header) {
      std::snprintf(buf, sizeof buf, "  %-44s %9.0f %6.1f%% %9.0f %6.1f%%\n", "iteration total", w[0].iteration,
                    w[0].iteration > 0 ? 100.0 : 0.0, w[1].iteration, w[1].iteration > 0 ? 100.0 : 0.0);
      s += buf;
      s += "  per tile (cycles)\n";
      per_tile_header = true;
    }
    if (slot_in_loop(slot)) {
      auto pct = [&](int k) { return w[k].iteration > 0 ? 100.0 * w[k].per_slot[slot] / w[k].iteration : 0.0; };
      std::snprintf(buf, sizeof buf, "  %-44s %9.0f %6.1f%% %9.0f %6.1f%%\n", prof::slot_label(slot),
                    w[0].per_slot[slot], pct(0), w[1].per_slot[slot], pct(1));
    } else {
      std::snprintf(buf, sizeof buf, "  %-44s %9.0f %7s %9.0f\n", prof::slot_label(slot), w[0].per_slot[slot], "",
                    w[1].per_slot[slot]);
    }
    s += buf;
  }
  for (const std::string& n : run_notes(run, w[0])) s += "  " + n + "\n";
  return s;
}

std::string region_table_markdown(const prof::ProbeRun& run, const std::string& title) {
  const WarpgroupRegions w[2] = {warpgroup_regions(run.buffer.totals, 0), warpgroup_regions(run.buffer.totals, 1)};
  std::string s = "### " + title + "\n\n| region | wg0 cycles | wg0 % | wg1 cycles | wg1 % |\n|---|---:|---:|---:|---:|\n";
  const bool pv_sync = run.buffer.totals.cycles[0][prof::kSlotPvSync] + run.buffer.totals.cycles[1][prof::kSlotPvSync] > 0;
  bool total_done = false;
  for (int slot : table_slots()) {
    if (slot == prof::kSlotPvSync && !pv_sync) continue;
    if (!slot_in_loop(slot) && !total_done) {
      s += "| **iteration total** | **" + fmt("%.0f", w[0].iteration) + "** | 100% | **" + fmt("%.0f", w[1].iteration) +
           "** | 100% |\n";
      total_done = true;
    }
    auto pct = [&](int k) {
      if (!slot_in_loop(slot)) return std::string("per tile");
      return w[k].iteration > 0 ? fmt("%.1f%%", 100.0 * w[k].per_slot[slot] / w[k].iteration) : std::string("-");
    };
    s += std::string("| ") + prof::slot_label(slot) + " | " + fmt("%.0f", w[0].per_slot[slot]) + " | " + pct(0) +
         " | " + fmt("%.0f", w[1].per_slot[slot]) + " | " + pct(1) + " |\n";
  }
  s += "\n";
  for (const std::string& n : run_notes(run, w[0])) s += "- " + n + "\n";
  return s;
}

namespace {

void write_run(std::ostream& os, const prof::ProbeRun& run) {
  const prof::ProbeBuffer& b = run.buffer;
  os << "{\"kernel\": " << json_string(run.kernel) << ", \"ms\": " << run.ms
     << ", \"output_identical\": " << (run.output_identical ? "true" : "false") << ",\n   \"warpgroups\": [";
  for (int wg = 0; wg < prof::kWarpgroups; ++wg) {
    const WarpgroupRegions w = warpgroup_regions(b.totals, wg);
    os << (wg ? ",\n     " : "\n     ") << "{\"iterations\": " << w.iterations << ", \"tiles\": " << w.tiles
       << ", \"iteration_cycles\": " << w.iteration << ", \"cycles\": {";
    for (int s = 0; s < kSlotCount; ++s)
      os << (s ? ", " : "") << json_string(prof::slot_key(s)) << ": " << b.totals.cycles[wg][s];
    os << "}, \"average\": {";
    for (int s = 0; s < kSlotCount; ++s) os << (s ? ", " : "") << json_string(prof::slot_key(s)) << ": " << w.per_slot[s];
    os << "}}";
  }
  const prof::ProbeTrace& t = b.trace;
  os << "],\n   \"trace\": {\"block\": [" << t.block[0] << ", " << t.block[1] << ", " << t.block[2]
     << "], \"skip\": " << t.skip << ", \"smid\": " << t.smid << ", \"warpgroups\": [";
  for (int wg = 0; wg < prof::kWarpgroups; ++wg) {
    const int kept = t.iterations[wg] < prof::kTraceIters ? t.iterations[wg] : prof::kTraceIters;
    os << (wg ? ",\n     " : "\n     ") << "{\"iterations\": " << t.iterations[wg] << ", \"start\": " << t.start[wg]
       << ", \"end\": " << t.end[wg] << ", \"marks\": [";
    for (int i = 0; i < kept; ++i) {
      os << (i ? ", " : "") << "[";
      for (int m = 0; m < prof::kLoopMarks; ++m) os << (m ? ", " : "") << t.marks[wg][i][m];
      os << "]";
    }
    os << "], \"pv_sync\": [";
    for (int i = 0; i < kept; ++i) os << (i ? ", " : "") << t.pv_sync[wg][i];
    os << "]}";
  }
  os << "]}}";
}

}  // namespace

void write_profile_json(std::ostream& os, const RunOptions& o, const std::string& device,
                        const prof::ProfileResult& r, const prof::ProfileRequest& request) {
  os << "{\"format\": \"fastattn-profile/1\", \"version\": " << json_string(version())
     << ", \"device\": " << json_string(device) << ",\n \"problem\": {\"batch\": " << o.batch
     << ", \"seqlen_q\": " << o.seqlen << ", \"seqlen_k\": " << o.seqlen_k << ", \"heads\": " << o.heads
     << ", \"kv_heads\": " << o.kv_heads << ", \"dim\": " << o.dim << ", \"dtype\": " << json_string(dtype_name(o.dtype))
     << ", \"causal\": " << (o.causal.value_or(false) ? "true" : "false") << ", \"window\": [" << o.window_left
     << ", " << o.window_right << "], \"softcap\": " << o.softcap << "},\n \"kernel\": {\"default\": "
     << json_string(r.default_kernel) << ", \"default_ms\": " << r.default_ms << ", \"grid\": [" << r.grid[0] << ", "
     << r.grid[1] << ", " << r.grid[2] << "], \"block\": [" << r.block[0] << ", " << r.block[1] << ", " << r.block[2]
     << "], \"smem_bytes\": " << r.smem_bytes << ", \"block_m\": " << r.block_m << ", \"block_n\": " << r.block_n
     << ", \"head_dim\": " << r.head_dim << ", \"ping_pong\": " << (r.ping_pong ? "true" : "false")
     << ", \"warmup\": " << request.warmup << ", \"launches\": " << request.launches << "},\n \"marks\": [";
  for (int m = 0; m < prof::kMarkCount; ++m) os << (m ? ", " : "") << json_string(kMarkNames[m]);
  os << "],\n \"slots\": [";
  for (int s = 0; s < kSlotCount; ++s)
    os << (s ? ",\n   " : "\n   ") << "{\"key\": " << json_string(prof::slot_key(s)) << ", \"label\": "
       << json_string(prof::slot_label(s)) << ", \"per\": " << (slot_in_loop(s) ? "\"iteration\"" : "\"tile\"") << "}";
  os << "],\n \"runs\": {\"pipeline\": ";
  write_run(os, r.pipeline);
  if (r.pv_sync.ran) {
    os << ",\n  \"pv_sync\": ";
    write_run(os, r.pv_sync);
  }
  os << "}}\n";
}

}  // namespace fastattn::cli
