"""Launch the hand-written kernels with less host time: the compiled kernel's own launcher.

``kernel[grid](...)`` goes through ``JITFunction.run``, which binds every argument and
recomputes the specialisation key on each call: 30 us of host time per launch on an H100 VM
with triton 3.6, against 12 us through the compiled kernel's launcher
(reports/gpu/2026-11-24-h100/breakdown.md).  Layer norm forward + backward is three launches
around 0.16 ms of GPU time, so that host time is most of what a caller waits for.

:func:`launch` takes the JIT path once per specialisation and keeps the ``CompiledKernel`` it
returns; later calls with arguments of the same specialisation call ``compiled[grid](...)``.
The key holds everything Triton specialises a compiled kernel on, for the arguments these
launchers pass: each tensor's dtype and 16-byte alignment, each integer's being 1, a multiple of
16, or past 32 bits, every constexpr, the launch options and the device.  The JIT path runs
whenever something observes launches -- the interpreter, a Triton launch hook, the harness's
launch recorder (which wraps ``JITFunction.run`` to capture sources and check grids) -- and when
``kernels.config.fast_launch`` is off (``TRITONDIFF_FAST_LAUNCH=0``).
"""
from __future__ import annotations

import sys
from typing import Any

import torch
import triton

from harness import device as _device

from .config import config

_OPTIONS = ("num_warps", "num_stages", "enable_fp_fusion")


# Host-side launch arithmetic in plain ints (triton.next_power_of_2 / triton.cdiv are @jit functions:
# microseconds a host call, on every launch).

def pow2_ceil(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << (max(int(n), 1) - 1).bit_length()


def pow2_floor(n: int) -> int:
    """The largest power of two <= n (1 for n <= 1)."""
    return 1 << (max(int(n), 1).bit_length() - 1)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
_compiled: dict[tuple, Any] = {}


def _arg_key(a: Any) -> tuple:
    if isinstance(a, torch.Tensor):
        return ("t", a.dtype, a.data_ptr() % 16 == 0)
    if isinstance(a, bool):
        return ("b", a)
    if isinstance(a, int):
        return ("i", a == 1, a % 16 == 0, not -2 ** 31 <= a < 2 ** 31)
    if isinstance(a, float):
        return ("f",)
    raise TypeError(type(a).__name__)          # anything else: not cached (JIT path)


def _observed() -> bool:
    """True when launches must go through JITFunction.run (see the module docstring)."""
    if not config.fast_launch or _device.is_interpreter():
        return True
    knobs = getattr(triton, "knobs", None)
    hook = knobs.runtime.launch_enter_hook if knobs is not None else True
    if hook is not None and bool(getattr(hook, "calls", True)):   # triton >= 3.7: a HookChain, empty unless hooked
        return True
    launches = sys.modules.get("harness.launches")
    return launches is not None and launches.recording()


def launch(kernel, grid: tuple, *args: Any, **meta: Any) -> None:
    """``kernel[grid](*args, **meta)`` (meta: the constexprs by name, num_warps / num_stages), through the
    cached compiled kernel when one of this specialisation exists."""
    if _observed():
        kernel[grid](*args, **meta)
        return
    rest = _trailing_constexprs(kernel, len(args), meta)
    try:
        if rest is None:
            raise TypeError(type(kernel).__name__)
        key = (kernel, torch.cuda.current_device(), tuple(_arg_key(a) for a in args),
               tuple(sorted((k, v) for k, v in meta.items() if k not in _OPTIONS)),
               tuple(meta.get(k) for k in _OPTIONS))
        compiled = _compiled.get(key)            # hashing the key: an unhashable constexpr raises TypeError
    except TypeError:                            # an argument we do not key on
        kernel[grid](*args, **meta)
        return
    if compiled is None:
        _compiled[key] = kernel[grid](*args, **meta)
        return
    compiled[tuple(grid) + (1,) * (3 - len(grid))](*args, *rest)


def _trailing_constexprs(kernel, nargs: int, meta: dict) -> list | None:
    """The values of ``kernel``'s parameters after its first ``nargs`` (its constexprs), in parameter order,
    as its compiled launcher takes them; None when one is left to its default or ``kernel`` is no
    JITFunction (such a launch always takes the JIT path)."""
    names = getattr(kernel, "arg_names", None)
    if names is None:
        return None
    constexprs = {k: v for k, v in meta.items() if k not in _OPTIONS}
    tail = names[nargs:]
    return [constexprs[n] for n in tail] if all(n in constexprs for n in tail) else None


class Site:
    """One launch site whose kernel, grid, constexprs and options stay fixed and whose arguments are
    tensors of fixed dtypes (a compiled graph's kernel: its executable is specialised on them).

    What is left for Triton to specialise on is each tensor's 16-byte alignment and the device, so the
    key is just that; a call costs the alignment check and the compiled kernel's launcher.  Observed
    launches take the JIT path as :func:`launch` does.
    """

    __slots__ = ("kernel", "grid", "meta", "_grid3", "_rest", "_compiled")

    def __init__(self, kernel, grid: tuple, **meta: Any):
        self.kernel, self.grid, self.meta = kernel, tuple(grid), meta
        self._grid3 = self.grid + (1,) * (3 - len(self.grid))
        self._rest: list | None = None          # the constexprs in parameter order, after the tensors
        self._compiled: dict[tuple, Any] = {}

    def __call__(self, *tensors: torch.Tensor) -> None:
        if _observed():
            self.kernel[self.grid](*tensors, **self.meta)
            return
        key = (torch.cuda.current_device(), tuple(t.data_ptr() % 16 == 0 for t in tensors))
        compiled = self._compiled.get(key)
        if compiled is None:
            if self._rest is None:      # False: a defaulted parameter, every call takes the JIT path
                rest = _trailing_constexprs(self.kernel, len(tensors), self.meta)
                self._rest = False if rest is None else rest
            launched = self.kernel[self.grid](*tensors, **self.meta)
            if self._rest is not False:
                self._compiled[key] = launched
            return
        compiled[self._grid3](*tensors, *self._rest)
