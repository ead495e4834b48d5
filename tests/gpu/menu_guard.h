// Cases whose (dtype, head dims) a narrower build leaves out of its kernel menu. Engineers configure
// FASTATTN_HEAD_DIMS / FASTATTN_DTYPES for a quicker build; there such a case is not run and says so
// (it used to fail as "not built"). A build of the whole menu (scripts/gpu-check's, CI's) runs every
// case, and a kernel missing from it fails as a user's call would.
#pragma once

#include <cstdio>

#include "cuda/built_kernels.h"
#include "cuda/device_info.h"

namespace fastattn::gputest {

inline bool case_in_menu(cuda_backend::KernelFamily family, DType dt, int d, int dv) {
#ifdef FASTATTN_TESTS_NARROW_MENU
  int major = 0;
  if (!cuda_backend::compute_major(&major).ok()) return true;  // the call reports it
  if (cuda_backend::kernel_built(family, major, dt, d, dv)) return true;
  std::printf("[ NOT BUILT ] %s %s d %d / %d on sm_%d0: outside this build's FASTATTN_HEAD_DIMS / DTYPES; case not run\n",
              family == cuda_backend::KernelFamily::Forward ? "forward" : "backward", dtype_name(dt), d, dv, major);
  return false;
#else
  (void)family, (void)dt, (void)d, (void)dv;
  return true;
#endif
}

}  // namespace fastattn::gputest
