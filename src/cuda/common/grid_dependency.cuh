// Programmatic dependent launch (sm_90): a kernel launched with the stream-serialization attribute
// (cudaLaunchAttributeProgrammaticStreamSerialization) may be scheduled before the kernel ahead of it
// on the stream has ended, once every CTA of that kernel has called grid_dependents_launch (or exited);
// it must call grid_dependency_wait before it reads anything the kernel ahead wrote. Below sm_90
// (no such launch there) both are no-ops.
#pragma once

namespace fastattn::cuda_backend {

// Lets the kernel that follows on the stream be scheduled now (its own wait still orders its reads).
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Returns once the kernel ahead on the stream has completed and its writes are visible; a no-op
// when this kernel was not launched early.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace fastattn::cuda_backend
