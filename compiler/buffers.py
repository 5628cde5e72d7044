"""Buffers the runtime allocates on the execution device, by the fastest path nothing is watching."""
from __future__ import annotations

import torch
import torch.utils.deterministic as _deterministic

from tritondiff.base import device as _device

from .ir import Layout


def alloc(layout: Layout) -> torch.Tensor:
    """An uninitialised buffer on the execution device.  Through the C++ entry points Inductor's wrappers
    allocate with where this torch has them (a third of ``torch.empty_strided``'s host time), unless
    something watches allocations: those entry points skip the dispatcher, so neither the harness's NaN
    poisoning (deterministic ``fill_uninitialized_memory``) nor its zero-fill dispatch mode would see the
    buffer, and an output a kernel leaves half written would go unreported."""
    fast = FAST_EMPTY.get(_device.MODE)
    if fast is not None and not allocations_watched():
        return fast(layout.size, layout.stride, layout.dtype)
    return torch.empty_strided(layout.size, layout.stride, dtype=layout.dtype, device=_device.torch_device())


def allocations_watched() -> bool:
    """A dispatch mode is active, or torch fills fresh memory (deterministic mode's NaN fill)."""
    if _dispatch_stack_len is None or _dispatch_stack_len():
        return True
    return torch.are_deterministic_algorithms_enabled() and _deterministic.fill_uninitialized_memory


_dispatch_stack_len = getattr(torch._C, "_len_torch_dispatch_stack", None)


def _fast_empty() -> dict:
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    found = {"cuda": getattr(guards, "_empty_strided_cuda", None), "interpreter": getattr(guards, "_empty_strided_cpu", None)}
    return {mode: fn for mode, fn in found.items() if fn is not None}


FAST_EMPTY = _fast_empty()      # device mode -> fn(size, stride, dtype) (the current CUDA device / the CPU)
