// The softcap of a score on the device, s = softcap * tanh(x * scale / softcap), shared by the sm90
// forward (every variant) and backward so that the backward's recomputed P matches the LSE that the
// forward stored (a different tanh on either side would leave P off by its error). The sm80 forward
// keeps tanhf (sm80/fwd/kernel.cuh says why); sm80 has no softcap backward.
//
// The tanh is the hardware's tanh.approx.f32 (sm_75 and later): one MUFU.TANH. CUDA's accurate
// tanhf costs an EX2, an RCP and about a dozen FP32 instructions a score, three MUFU operations
// beside the softmax's one exp2 (docs/notes/fwd-sm90.md). Its error (PTX ISA:
// relative 2^-11 at most; measured about 2^-16.5 on sm_75) is far below the bf16 / fp16
// rounding of P that the tests' baseline carries; the CPU backend keeps the accurate tanh.
// FASTATTN_ACCURATE_SOFTCAP_TANH (a measurement build only) puts tanhf back for an A/B.
#pragma once

namespace fastattn::cuda_backend {

__device__ __forceinline__ float softcap_tanh(float x) {
#ifdef FASTATTN_ACCURATE_SOFTCAP_TANH
  return tanhf(x);
#else
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// softcap * tanh(x * cap_in), cap_in = scale / softcap (AttnParams::softcap_in): x is the raw q.k.
__device__ __forceinline__ float softcap_score(float x, float softcap, float cap_in) {
  return softcap * softcap_tanh(x * cap_in);
}

}  // namespace fastattn::cuda_backend
