// Host side of the causal tile order: sets FwdParams::section_slots for a launch.
#pragma once

#include <cstdint>

#include "cuda/common/fwd_params.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// p.section_slots for a launch of `ctas` CTAs whose tiles have `block_rows` query rows and whose
// (batch, head) slots each read `kv_bytes_per_slot` of K and V (sched/causal_sections.h).
Status set_section_slots(FwdParams& p, int ctas, int block_rows, int64_t kv_bytes_per_slot);

}  // namespace fastattn::cuda_backend
