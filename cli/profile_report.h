// What `fastattn profile` prints and writes, computed from the probe buffers: the region table
// (cycles per loop iteration and share of it, per consumer warpgroup), its markdown twin for
// summaries, and the JSON the timeline plot reads. Pure functions of the buffers, so they are
// tested without a GPU.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "cuda/prof/profile_api.h"
#include "options.h"

namespace fastattn::cli {

// One warpgroup's averages from one run's totals.
struct WarpgroupRegions {
  unsigned long long iterations = 0, tiles = 0;
  double per_slot[prof::kSlotCount] = {};  // loop slots: cycles per iteration; prologue/epilogue: per tile
  double iteration = 0;                    // sum of the loop slots: one iteration's cycles
};

WarpgroupRegions warpgroup_regions(const prof::ProbeTotals& totals, int wg);

// True for the slots that are part of one loop iteration (the rest are per tile).
bool slot_in_loop(int slot);

// Rows of the table in display order (program order of the iteration, then the per-tile slots).
const std::vector<int>& table_slots();

// Plain-text table for the terminal; `title` heads it.
std::string region_table(const prof::ProbeRun& run, const std::string& title);
// The same as a markdown table.
std::string region_table_markdown(const prof::ProbeRun& run, const std::string& title);

// Everything one profile produced, as one JSON object (format: docs/profiling.md).
void write_profile_json(std::ostream& os, const RunOptions& o, const std::string& device,
                        const prof::ProfileResult& r, const prof::ProfileRequest& request);

}  // namespace fastattn::cli
