// The float64 naive oracle: forward (out, lse) and backward (dq, dk, dv) straight from the
// definition, for everything AttnArgs can express (GQA, varlen + seqused, causal, local,
// softcap). Slow by design: O(s_q * s_k * d) with no tiling, float64 everywhere.
//
// Conventions (the CPU and CUDA backends follow them too):
//   x_ij  = scale * q_i . k_j;  s_ij = (softcap ? softcap * tanh(x_ij / softcap) : x_ij) + bias_ij + alibi_ij
//   (bias_ij = bias[b or 0, h / head_div, i, j] when the call has a bias, else 0; alibi_ij =
//   -slope[b, h] |i + len_k - len_q - j| when it has alibi_slopes, else 0)
//   lse_i = log sum_{j kept} exp(s_ij)      (natural log; -inf when row i keeps no key)
//   out_i = sum_{j kept} exp(s_ij - lse_i) v_j                   (0 when row i keeps no key)
//   rows beyond seqused_q: out = 0, lse = -inf, dq = 0; rows beyond seqused_k: dk = dv = 0.
//   a NaN s_ij on a kept pair: lse_i and out_i NaN (docs/masks.md, "NaN").
// Reads host memory of any dtype and strides; GPU tests copy tensors to the host first.
#pragma once

#include <vector>

#include "api/problem.h"
#include "fastattn/types.h"

namespace fastattn::reference {

struct Options {
  // Emulate a low-precision kernel: round P (before P.V and P^T.dO) and dS (before dS.K and
  // dS^T.Q) to the input dtype, and (backward) take D = rowsum(dO * out) from the forward's
  // output in the input dtype, as a backward that reads the stored out does. Gives the "same
  // math in the input precision" baseline of the FA3 tolerance rule for kernels that feed P and
  // dS to tensor cores in fp16/bf16.
  bool round_p_to_input_dtype = false;
};

// Results in the contiguous row-major layout of the corresponding tensor's shape:
// out like args.out, lse like args.lse ((b, h_q, s_q) or (h_q, total_q)) -- lse is filled even
// when args.lse is undefined; dq/dk/dv like q/k/v.
struct ForwardF64 {
  std::vector<double> out, lse;
};
// dbias (when the call has a bias) like the bias's logical shape (bias_batch, bias_heads, rows,
// cols) contiguous: dS summed over the batch entries / q heads sharing an entry, 0 where masked.
struct BackwardF64 {
  std::vector<double> dq, dk, dv, dbias;
};

// Validates `args` (as the reference backend) and computes in float64. backward_f64 validates
// like backward, so args.out and args.lse must be given (they are not read).
Status forward_f64(const AttnArgs& args, ForwardF64* result, const Options& opt = {});
Status backward_f64(const AttnArgs& args, const Tensor& dout, BackwardF64* result,
                    const Options& opt = {});

// Validates and writes args.out / args.lse (rounded to their dtypes): the same as
// fastattn::forward with backend = Reference.
Status forward(const AttnArgs& args, const Options& opt = {});
// Writes dq, dk, dv (and args.dbias when given). Recomputes everything from q, k, v, dout (args.out / args.lse are
// validated but not read).
Status backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq, const Tensor& dk,
                const Tensor& dv, const Options& opt = {});

// On an already validated and resolved problem (what src/api dispatches to).
void forward_f64(const detail::Problem& p, ForwardF64* result, const Options& opt = {});
void backward_f64(const detail::Problem& p, const detail::Operand& dout, BackwardF64* result,
                  const Options& opt = {});
Status forward(const detail::Problem& p, const Options& opt = {});
Status backward(const detail::Problem& p, const detail::GradOperands& g, const Options& opt = {});

}  // namespace fastattn::reference
