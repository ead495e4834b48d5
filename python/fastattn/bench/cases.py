"""Benchmark cases, named presets, and exact FLOP counts.

FLOPs of a forward: 4 * b * h * d * (kept (query, key) pairs per head and batch), i.e. two
matmuls (QK^T and PV) of 2 flops per multiply-add over the pairs the mask keeps. Dense
attention keeps s_q * s_k pairs (4*b*h*s_q*s_k*d); causal and local masks are counted exactly
with the bottom-right alignment fastattn uses. Softmax and masking work is not counted.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Case:
    """One forward problem in (batch, seqlen, heads, head_dim) layout."""

    preset: str
    b: int
    s_q: int
    s_k: int
    h: int
    h_kv: int
    d: int
    causal: bool = False
    window: tuple = (-1, -1)
    dtype: str = "bfloat16"

    @property
    def mask(self):
        if self.causal:
            return "causal"
        if self.window != (-1, -1):
            return f"window{self.window}"
        return "full"

    @property
    def label(self):
        gqa = f"/{self.h_kv}" if self.h_kv != self.h else ""
        return f"b{self.b} s{self.s_q} h{self.h}{gqa} d{self.d} {self.mask} {self.dtype}"

    def series(self):
        """Cases differing only in seqlen (and batch) share a series: one line in the plot."""
        gqa = f"/{self.h_kv}" if self.h_kv != self.h else ""
        return f"{self.preset}: d{self.d} h{self.h}{gqa} {self.mask}"

    def kept_pairs(self):
        """Exact number of (query, key) pairs the mask keeps in one (batch, head)."""
        left, right = self.window
        if self.causal:
            right = 0
        i = np.arange(self.s_q, dtype=np.int64)
        diag = i + self.s_k - self.s_q
        hi = np.full_like(i, self.s_k - 1) if right < 0 else np.minimum(diag + right, self.s_k - 1)
        lo = np.zeros_like(i) if left < 0 else np.maximum(diag - left, 0)
        return int(np.clip(hi - lo + 1, 0, None).sum())

    def flops(self):
        return 4 * self.b * self.h * self.d * self.kept_pairs()

    def as_dict(self):
        out = asdict(self)
        out.update(mask=self.mask, label=self.label, flops=self.flops())
        return out


def _hopper_fwd(seqlens=(1024, 4096, 8192, 16384), dims=(64, 128, 256)):
    """Issue 3's shapes: b*s = 16k tokens, hidden 2048 (h = 2048/d), bf16, causal and not."""
    return [Case("hopper-fwd", 16384 // s, s, s, 2048 // d, 2048 // d, d, causal)
            for d in dims for causal in (False, True) for s in seqlens]


def _gqa():
    return [Case("gqa", 4, 4096, 4096, 64, 8, 128, causal, dtype="float16") for causal in (False, True)]


def _sliding_window():
    return [Case("sliding-window", 2, 8192, 8192, 2048 // d, 2048 // d, d, window=(64, 0))
            for d in (64, 128)]


def _quick():
    return [Case("quick", 16384 // s, s, s, 16, 16, 128, causal) for causal in (False, True)
            for s in (1024, 4096)]


def _cpu():
    """Small enough for seconds on a laptop core: the CPU backend against torch/numpy."""
    return [Case("cpu", 1, s, s, 4, 4, 64, causal, dtype="float32") for causal in (False, True)
            for s in (128, 256, 512)]


def _cpu_quick():
    return [Case("cpu-quick", 1, s, s, 2, 2, 64, causal, dtype="float32") for causal in (False, True)
            for s in (64, 128)]


PRESETS = {
    "hopper-fwd": _hopper_fwd,
    "gqa": _gqa,
    "sliding-window": _sliding_window,
    "quick": _quick,
    "cpu": _cpu,
    "cpu-quick": _cpu_quick,
}
GPU_DEFAULT = ("hopper-fwd", "gqa", "sliding-window")
CPU_DEFAULT = ("cpu",)


def cases_for(names):
    """All cases of the named presets, in order; ValueError for an unknown name."""
    out = []
    for name in names:
        if name not in PRESETS:
            raise ValueError(f"--preset: unknown preset {name!r} (known: {', '.join(PRESETS)})")
        out.extend(PRESETS[name]())
    return out
