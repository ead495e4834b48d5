// Rows past seqused, zeroed in smem before the backward's MMAs read them. TMA loads whole boxes, so
// the sequence's last key block and last q-block hold whatever memory lies past seqused_k /
// seqused_q (a padded batch's or a cache's unused rows, maybe NaN). Their P and dS are 0 (masked
// scores; lse +inf and dpsum 0 past len_q: preprocess.cuh), but 0 x NaN is NaN: V's and dO's rows
// reach dS through dP, K's reach dQ (dS K), Q's and dO's reach dK and dV (dS^T Q, P^T dO). Only with
// seqused: without it the rows past a varlen sequence are the next sequence's own data, and a
// fixed-length tensor ends there (TMA fills zeros), so those calls pay nothing.
#pragma once

#include <cstdint>

#include "cuda/sm90/prim/barriers.h"
#include "cuda/sm90/prim/regs.cuh"  // named_bar_sync
#include "cuda/sm90/prim/smem_rows.cuh"
#include "cuda/sm90/prim/tma.cuh"    // fence_smem_for_tma
#include "cuda/sm90/prim/wgmma.cuh"  // smem_addr

namespace fastattn::sm90 {

// Rows [first_row, Rows) of tile `a` (AtomsA atoms: K or Q) and of tile `b` (AtomsB atoms: V or dO),
// atoms `atom_bytes` apart in both, zeroed by the two consumer warpgroups (threads 128..383) together;
// then the fence for the MMAs' async proxy, and both warpgroups meet: each reads rows the other zeroed.
template <int Rows, int AtomsA, int AtomsB>
__device__ __forceinline__ void bwd_zero_rows(const uint8_t* a, const uint8_t* b, uint32_t atom_bytes, int first_row) {
  const int t = threadIdx.x - 128;
  zero_atom_rows<Rows, AtomsA, 256>(smem_addr(a), atom_bytes, first_row, t);
  zero_atom_rows<Rows, AtomsB, 256>(smem_addr(b), atom_bytes, first_row, t);
  fence_smem_for_tma();
  named_bar_sync(kBwdZeroBar, 256);
}

}  // namespace fastattn::sm90
