"""Uninitialised reads: fresh allocations are filled with NaN (floats) or the dtype's max (ints) during
each call; an output that is non-finite then, and right with fresh allocations zeroed, read memory
nothing wrote."""
from __future__ import annotations

import contextlib
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..oracle import has_new_nan
from ..verdict import fail
from .base import Hunter


@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty & co. return NaN (floats) / the dtype's max (ints) while active."""
    import torch.utils.deterministic as det

    was, was_warn, was_fill = (torch.are_deterministic_algorithms_enabled(),
                               torch.is_deterministic_algorithms_warn_only_enabled(), det.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)
        det.fill_uninitialized_memory = was_fill


class ZeroFill(TorchDispatchMode):
    """Zero every fresh allocation: the control run that tells uninitialised reads apart."""

    _EMPTY = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default,
              torch.ops.aten.empty_like.default, torch.ops.aten.new_empty.default,
              torch.ops.aten.new_empty_strided.default}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self._EMPTY:
            out.zero_()
        return out


class Poison(Hunter):
    name = "poison"
    summary = "NaN-filled allocations (deterministic-mode fill)"

    def arm(self, call, stack) -> None:
        stack.enter_context(poisoned_allocations())

    def diagnose(self, ex, first, second, cmp, label):
        if cmp.failure_class != "nonfinite" or not has_new_nan(first.output, ex.truth()):
            return None
        control = ex.call(ex.hazards - {self.name}, contexts=(ZeroFill,))
        if control.error or not ex.passes(control.output):
            return None
        return fail("uninitialized", "output depends on uninitialised memory: with allocations poisoned (NaN) it is "
                    f"wrong, with them zeroed it is right. {cmp.message}", label, first, cmp.location,
                    comparison=cmp.to_json())
