"""fastattn: fused attention kernels with FlashAttention-3- and SDPA-compatible Python APIs.

Arrays arrive through DLPack: numpy (CPU backend), CuPy, and other CPU DLPack producers; torch
tensors (CPU or CUDA, differentiable, custom ops fastattn::fwd / fastattn::bwd usable under
torch.compile) as plain-value views read off the tensor (_torch_views), DLPack in fastattn.forward.
"""
from . import _C
from ._core import backward, forward
from .interface import flash_attn_func, flash_attn_varlen_func
from .kvcache import flash_attn_with_kvcache
from .packed import flash_attn_kvpacked_func, flash_attn_qkvpacked_func
from .sdpa import scaled_dot_product_attention

try:  # torch integration only when torch is importable
    import torch as _torch  # noqa: F401
except ImportError:
    HAS_TORCH = False
else:
    from . import _torch_ops  # noqa: F401  (registers fastattn::fwd / fastattn::bwd)
    HAS_TORCH = True

__version__ = _C.version()
cuda_available = _C.cuda_available
build_info = _C.build_info

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func", "flash_attn_with_kvcache", "scaled_dot_product_attention", "forward",
           "backward", "cuda_available", "build_info", "HAS_TORCH", "__version__"]
