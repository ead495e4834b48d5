#include "api/index_arrays.h"

#include <cstring>
#include <string>

#ifdef FASTATTN_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace fastattn::detail {

Status copy_to_host(const IndexArray& a, Device dev, const char* name, std::vector<int32_t>* dst) {
  dst->clear();
  if (!a.defined() || a.size == 0) return Status::Ok();  // an empty array's address is never read
  dst->resize(size_t(a.size));
  if (dev == Device::CPU) {
    std::memcpy(dst->data(), a.data, size_t(a.size) * sizeof(int32_t));
    return Status::Ok();
  }
#ifdef FASTATTN_WITH_CUDA
  const cudaError_t err = cudaMemcpy(dst->data(), a.data, size_t(a.size) * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) {
    return {Code::CudaError, std::string(name) + ": copying to the host to check it failed: " +
                                 cudaGetErrorString(err)};
  }
  return Status::Ok();
#else
  return Status::Unsupported(std::string(name) +
                             ": lives on a CUDA device but fastattn was built without CUDA");
#endif
}

Status read_index_arrays(const AttnArgs& args, HostIndexArrays* out) {
  const Device dev = args.q.device;
  out->read = false;
  if (dev != Device::CPU && !args.check_index_arrays) return Status::Ok();
  Status st = copy_to_host(args.cu_seqlens_q, dev, "cu_seqlens_q", &out->cu_q);
  if (st.ok()) st = copy_to_host(args.cu_seqlens_k, dev, "cu_seqlens_k", &out->cu_k);
  if (st.ok()) st = copy_to_host(args.seqused_q, dev, "seqused_q", &out->used_q);
  if (st.ok()) st = copy_to_host(args.seqused_k, dev, "seqused_k", &out->used_k);
  out->read = st.ok();
  return st;
}

}  // namespace fastattn::detail
