// DLPack arrays (nanobind ndarrays) -> fastattn::Tensor / IndexArray, and Status -> Python errors.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "fastattn/types.h"

namespace fastattn_py {

namespace nb = nanobind;

using InArray = nb::ndarray<nb::ro>;  // read-only input (q, k, v, dout, ...)
using OutArray = nb::ndarray<>;       // written output (out, lse, dq, ...)

// A strided view of `a`; raises ValueError naming `name` for an unsupported dtype, device or rank.
fastattn::Tensor to_tensor(const InArray& a, const char* name);
fastattn::Tensor to_tensor(const OutArray& a, const char* name);

// A 1-D contiguous int32 array living on `where`'s device; raises ValueError naming `name`.
fastattn::IndexArray to_index(const InArray& a, const char* name, const fastattn::Tensor& where);

// The data address of an index array or page table the caller passed, even an empty one: torch gives an
// empty tensor a null data pointer, which the C++ layer reads as absent (IndexArray::defined), so an empty
// cache_seqlens or seqused_k would silently mean "none given". Such an array gets a non-null address that is
// never read (it has no elements), and validation weighs its size instead.
const int32_t* given_int32_data(const void* data);

// A 4-D bool or uint8 block mask (fastattn::BlockMask, any strides) with (block_q, block_k);
// raises ValueError naming `name` for another dtype, rank or device kind. The C++ layer checks the
// rest (shape, device against q's).
fastattn::BlockMask to_block_mask(const InArray& a, const char* name, int32_t block_q, int32_t block_k);
// A packed element bitmask: 4-D 32-bit words (mask_batch, mask_heads, rows, words), the word dim
// contiguous (uint32 or int32: torch packs into int32).
fastattn::BitMask to_bit_mask(const InArray& a, const char* name);

// Raises ValueError (InvalidArgument), NotImplementedError (NotSupported) or RuntimeError.
void raise_if_error(const fastattn::Status& st);

}  // namespace fastattn_py
