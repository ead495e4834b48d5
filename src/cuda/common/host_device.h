// FASTATTN_HD: inline on the host and the device under nvcc, plain inline C++ elsewhere, for the
// pure arithmetic (tile order, masks, block sources) that the CPU tests check without a GPU.
#pragma once

#ifdef __CUDACC__
#define FASTATTN_HD __host__ __device__ __forceinline__
#else
#define FASTATTN_HD inline
#endif
