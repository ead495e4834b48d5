"""Array-framework adapters: allocate outputs like an input, find its CUDA stream, fix strides.

The extension reads these arrays through DLPack (the torch front ends use _torch_views instead);
this module only decides where outputs live (numpy, torch, CuPy, or numpy for any other CPU
DLPack producer such as JAX on CPU).
"""
from __future__ import annotations

import sys

import numpy as np


def tma_unreadable(shape, strides):
    """Whether a CUDA array has a dim of more than one element with a stride <= 0 (broadcast, as
    torch's expand or cupy.broadcast_to give, or reversed): the CUDA kernels load q, k, v and dout
    by TMA, which takes positive strides only, so such an array is copied first (the C++ layer would
    refuse it by name). Strides in any unit (elements or bytes): only their sign counts."""
    return any(n > 1 and st <= 0 for n, st in zip(shape, strides))


class NumpyArrays:
    """numpy arrays (CPU)."""

    name = "numpy"

    def empty(self, like, shape, float32=False):
        return np.empty(shape, dtype=np.float32 if float32 else like.dtype)

    def stream(self, like):
        return 0

    def unit_last(self, x):
        """x itself when its last dimension has unit stride, else a C-contiguous copy."""
        if x.ndim and x.shape[-1] > 1 and x.strides[-1] != x.itemsize:
            return np.ascontiguousarray(x)
        return x

    def swap12(self, x):
        return np.swapaxes(x, 1, 2)

    def wrap(self, x):
        return x


class TorchArrays:
    """torch tensors (CPU or CUDA); inputs are detached because DLPack refuses autograd tensors."""

    name = "torch"

    def __init__(self, torch):
        self.torch = torch

    def empty(self, like, shape, float32=False):
        dtype = self.torch.float32 if float32 else like.dtype
        return self.torch.empty(shape, dtype=dtype, device=like.device)

    def stream(self, like):
        if like.device.type != "cuda":
            return 0
        return self.torch.cuda.current_stream(like.device).cuda_stream

    def unit_last(self, x):
        if x.requires_grad:
            x = x.detach()
        if x.dim() and x.shape[-1] > 1 and x.stride(-1) != 1:
            return x.contiguous()
        if x.is_cuda and tma_unreadable(x.shape, x.stride()):
            return x.contiguous()
        return x

    def swap12(self, x):
        return x.transpose(1, 2)

    def wrap(self, x):
        return x


class CupyArrays(NumpyArrays):
    """CuPy arrays (CUDA), allocated on the current CuPy device and stream."""

    name = "cupy"

    def __init__(self, cupy):
        self.cupy = cupy

    def empty(self, like, shape, float32=False):
        with like.device:
            return self.cupy.empty(shape, dtype=self.cupy.float32 if float32 else like.dtype)

    def stream(self, like):
        return self.cupy.cuda.get_current_stream().ptr

    def unit_last(self, x):
        if x.ndim and x.shape[-1] > 1 and x.strides[-1] != x.itemsize:
            return self.cupy.ascontiguousarray(x)
        if tma_unreadable(x.shape, x.strides):
            return self.cupy.ascontiguousarray(x)
        return x

    def swap12(self, x):
        return self.cupy.swapaxes(x, 1, 2)


class ForeignCpuArrays(NumpyArrays):
    """Any other DLPack producer on the CPU (e.g. JAX): computed through numpy views, results
    handed back through the producer's array namespace when it has one."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.name = getattr(namespace, "__name__", "dlpack")

    def unit_last(self, x):
        if not isinstance(x, np.ndarray):
            x = np.from_dlpack(x)
        return super().unit_last(x)

    def wrap(self, x):
        if self.namespace is not None and hasattr(self.namespace, "from_dlpack"):
            return self.namespace.from_dlpack(x)
        return x


_NUMPY = NumpyArrays()
_TORCH = []  # the TorchArrays adapter, made on first use


def _torch_arrays(torch):
    if not _TORCH:
        _TORCH.append(TorchArrays(torch))
    return _TORCH[0]


def torch_module():
    """The torch module if the user has imported it, else None (never imports torch itself)."""
    return sys.modules.get("torch")


def arrays_for(x, name="q"):
    """The adapter for array `x`; TypeError naming `name` when x is no supported array."""
    if isinstance(x, np.ndarray):
        return _NUMPY
    torch = torch_module()
    if torch is not None and isinstance(x, torch.Tensor):
        return _torch_arrays(torch)
    module = type(x).__module__.split(".")[0]
    if module == "cupy":
        return CupyArrays(sys.modules["cupy"])
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        device_type, _ = x.__dlpack_device__()
        if int(device_type) != 1:  # kDLCPU
            raise NotImplementedError(
                f"{name}: {type(x).__name__} arrays on a GPU are not supported yet "
                "(torch and CuPy are); pass a torch or CuPy view of it (from_dlpack)")
        namespace = x.__array_namespace__() if hasattr(x, "__array_namespace__") else None
        return ForeignCpuArrays(namespace)
    raise TypeError(f"{name}: expected a numpy, torch or DLPack array, got {type(x).__name__}")


def same_kind(adapter, arrays):
    """TypeError unless every (name, array) in `arrays` is None or handled by `adapter`'s kind."""
    for name, x in arrays:
        if x is not None and arrays_for(x, name).name != adapter.name:
            raise TypeError(f"{name}: expected a {adapter.name} array like q, got {type(x).__name__}")
