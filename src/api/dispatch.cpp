// forward()/backward(): validate, resolve, then hand the Problem to the chosen backend.
#include "api/validate.h"
#include "cpu/cpu_backend.h"
#include "fastattn/fastattn.h"
#include "reference/reference.h"

#ifdef FASTATTN_WITH_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/empty_problem.h"
#endif

namespace fastattn {
namespace detail {

Status run_forward(const AttnArgs& args, const Prepared& p, void* stream) {
  switch (p.backend) {
    case Backend::CPU: return cpu::forward(p.problem);
    case Backend::Reference: return reference::forward(p.problem);
    case Backend::CUDA:
#ifdef FASTATTN_WITH_CUDA
      if (!detail::has_work(p.problem)) return cuda_backend::forward_empty(args, stream);
      return cuda_backend::forward(p.problem, stream);
#else
      break;
#endif
    case Backend::Auto: break;
  }
  return {Code::Internal, "forward: no backend resolved"};
}

}  // namespace detail

Status forward(const AttnArgs& args, void* stream) {
  detail::Prepared p;
  Status st = detail::prepare_forward(args, &p);
  return st.ok() ? detail::run_forward(args, p, stream) : st;
}

Status backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq, const Tensor& dk,
                const Tensor& dv, void* stream) {
  detail::Prepared p;
  Status st = detail::prepare_backward(args, dout, dq, dk, dv, &p);
  if (!st.ok()) return st;
  switch (p.backend) {
    case Backend::CPU: return cpu::backward(p.problem, p.grads);
    case Backend::Reference: return reference::backward(p.problem, p.grads);
    case Backend::CUDA:
#ifdef FASTATTN_WITH_CUDA
      if (!detail::has_work(p.problem)) return cuda_backend::backward_empty(args, dq, dk, dv, stream);
      return cuda_backend::backward(p.problem, p.grads, args.deterministic, stream);
#else
      break;
#endif
    case Backend::Auto: break;
  }
  return {Code::Internal, "backward: no backend resolved"};
}

}  // namespace fastattn
