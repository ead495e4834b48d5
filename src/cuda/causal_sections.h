// Host side of the longest-first tile order: sets FwdParams::section_slots for a launch.
#pragma once

#include <cstdint>

#include "cuda/common/fwd_params.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// p.section_slots for a launch of `ctas` CTAs whose tiles have `block_rows` query rows and whose
// (batch, head) slots each read `kv_bytes_per_slot` of K and V (sched/causal_sections.h). An
// unmasked longest-first launch whose sections would not balance better than the default order
// gets that order back (heavy_first and first_block_pad 0).
Status set_section_slots(FwdParams& p, int ctas, int block_rows, int64_t kv_bytes_per_slot);

}  // namespace fastattn::cuda_backend
