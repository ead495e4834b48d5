// Host copies of the varlen index arrays (cu_seqlens, seqused), wherever they live.
#pragma once

#include <cstdint>
#include <vector>

#include "fastattn/types.h"

namespace fastattn::detail {

struct HostIndexArrays {
  bool read = false;  // false: on a device and check_index_arrays was off; contents unknown
  std::vector<int32_t> cu_q, cu_k, used_q, used_k;
};

// One array into `dst` (cleared when absent): host memory is read directly, device memory is
// copied (a synchronisation). `name` names it in the error.
Status copy_to_host(const IndexArray& a, Device dev, const char* name, std::vector<int32_t>* dst);

// Reads the arrays of `args` (sizes already checked). Host tensors are read directly; device
// tensors are copied (one synchronisation) only when args.check_index_arrays is set.
Status read_index_arrays(const AttnArgs& args, HostIndexArrays* out);

}  // namespace fastattn::detail
