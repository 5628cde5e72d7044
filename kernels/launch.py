"""Launch the hand-written kernels with less host time: the compiled kernel's own launcher.

``kernel[grid](...)`` goes through ``JITFunction.run``, which binds every argument and
recomputes the specialisation key on each call: 30 us of host time per launch on an H100 VM
with triton 3.6, against 12 us through the compiled kernel's launcher
(reports/performance-log.md).  Layer norm forward + backward is three launches
around 0.16 ms of GPU time, so that host time is most of what a caller waits for.

:func:`launch` takes the JIT path once per specialisation and keeps the ``CompiledKernel`` it
returns; later calls with arguments of the same specialisation call ``compiled[grid](...)``.
The key holds everything Triton specialises a compiled kernel on, for the arguments these
launchers pass: each tensor's dtype and 16-byte alignment, each integer's being 1, a multiple of
16, or past 32 bits, every constexpr, the launch options and the device.  The JIT path runs
whenever something observes launches -- the interpreter, a Triton launch hook, the harness's
launch recorder (which wraps ``JITFunction.run`` to capture sources and check grids) -- and when
``kernels.config.fast_launch`` is off (``TRITONDIFF_FAST_LAUNCH=0``).

Where the compiled kernel allows it, the cached launch skips Triton's launcher too and goes through
torch's static CUDA launcher (``torch._C._StaticCudaLauncher``, the one Inductor launches its
kernels with): one C call that packs the arguments by a type string worked out once and calls
``cuLaunchKernel`` with the function Triton already loaded.  What it cannot express takes Triton's
launcher: scratch memory, clusters, cooperative or PDL launches, tensor descriptors, instrumented
builds, fp16 / bf16 scalars, grids of 2^31 programs or more (its C code multiplies the three
extents in an int), ROCm, a torch without it, or ``kernels.config.static_launch`` off
(``TRITONDIFF_STATIC_LAUNCH=0``).
"""
from __future__ import annotations

import re
import sys
from typing import Any, Callable

import torch
import triton

from tritondiff.base import device as _device

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


_compiled: dict[tuple, Any] = {}     # launch()'s specialisations -> their relaunchers


_cuda_get_device = getattr(torch._C, "_cuda_getDevice", None)     # absent from CPU-only builds


def _current_device() -> int:
    """``torch.cuda.current_device()`` without its Python wrapper (asked on every relaunch)."""
    return _cuda_get_device() if _cuda_get_device is not None else torch.cuda.current_device()


def _arg_key(a: Any) -> tuple:
    if isinstance(a, torch.Tensor):
        return ("t", a.dtype, a.data_ptr() % 16 == 0)
    if isinstance(a, bool):
        return ("b", a)
    if isinstance(a, int):
        return ("i", a == 1, a % 16 == 0, not -2 ** 31 <= a < 2 ** 31, a >= 2 ** 63)   # i32 / i64 / u64
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
    launches = sys.modules.get("tritondiff.harness.launches")
    return launches is not None and launches.recording()


def launch(kernel, grid: tuple, *args: Any, **meta: Any) -> None:
    """``kernel[grid](*args, **meta)`` (meta: the constexprs by name, num_warps / num_stages), through the
    cached compiled kernel when one of this specialisation exists."""
    if _observed():
        kernel[grid](*args, **meta)
        return
    try:
        key = (kernel, _current_device(), tuple(_arg_key(a) for a in args),
               tuple(sorted((k, v) for k, v in meta.items() if k not in _OPTIONS)),
               tuple(meta.get(k) for k in _OPTIONS))
        fire = _compiled.get(key)                # hashing the key: an unhashable constexpr raises TypeError
    except TypeError:                            # an argument we do not key on
        kernel[grid](*args, **meta)
        return
    if fire is None:
        launched = kernel[grid](*args, **meta)
        rest = _trailing_constexprs(kernel, len(args), meta)   # None: never relaunched, always the JIT path
        if rest is not None:
            _compiled[key] = relauncher(launched, len(args), rest)
        return
    fire(tuple(grid) + (1,) * (3 - len(grid)), key[1], args)


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

    def __call__(self, *tensors: torch.Tensor) -> Any:
        """Launch; returns Triton's compiled kernel where the launch took the JIT path, else None."""
        if _observed():
            return self.kernel[self.grid](*tensors, **self.meta)
        return self.relaunch(_current_device(), tensors)

    def relaunch(self, device: int, tensors: tuple) -> Any:
        """The launch on ``device`` (the current CUDA device) once the caller has found that nothing observes
        launches (:func:`_observed` is False): a caller launching many sites asks that once, not per site.
        Returns the compiled kernel where the launch took the JIT path (a first launch), else None."""
        key = (device, tuple([t.data_ptr() % 16 == 0 for t in tensors]))
        fire = self._compiled.get(key)
        if fire is None:
            if self._rest is None:      # False: a defaulted parameter, every call takes the JIT path
                rest = _trailing_constexprs(self.kernel, len(tensors), self.meta)
                self._rest = False if rest is None else rest
            launched = self.kernel[self.grid](*tensors, **self.meta)
            if self._rest is not False:
                self._compiled[key] = relauncher(launched, len(tensors), self._rest)
            return launched
        fire(self._grid3, device, tensors)
        return None


# ------------------------------------------------------------------ relaunching a compiled kernel

# Triton scalar types torch's static launcher packs as they are (its type letters).  fp16 / bf16 are
# left out: it would pack them as a 4-byte float where Triton's launcher packs 2 bytes.
_STATIC_CODES = {"i1": "i", "i8": "b", "i16": "h", "i32": "i", "i64": "l", "u1": "I", "u8": "B", "u16": "H",
                 "u32": "I", "u64": "K", "fp32": "f", "f32": "f", "fp64": "d"}
_STATIC_GRID_LIMIT = 2 ** 31         # its C code takes grid x * y * z as an int


def static_plan(compiled: Any, nargs: int) -> tuple[str, tuple[int, ...] | None, int] | str:
    """How torch's static CUDA launcher relaunches ``compiled`` for calls passing its first ``nargs``
    parameters (the rest are constexprs): the type letters of the parameters the binary takes, the
    positions of those among the ``nargs`` (None: all of them, in order) and how many scratch pointers
    (None) follow them.  A string instead says why it cannot (the launch then takes Triton's launcher).
    """
    if not config.static_launch:
        return "kernels.config.static_launch is off"
    if torch.version.hip is not None:
        return "ROCm (the static launcher here is CUDA's)"
    if not hasattr(torch._C, "_StaticCudaLauncher"):
        return f"torch {torch.__version__} has no torch._C._StaticCudaLauncher"
    try:
        md, src = compiled.metadata, compiled.src
        names = list(src.fn.arg_names)
        signature = dict(src.signature)
        constants = list(getattr(src, "constants", {}) or {})
    except AttributeError as e:
        return f"not a Triton CompiledKernel ({e})"
    if getattr(md, "num_ctas", 1) != 1:
        return f"num_ctas={md.num_ctas} (a cluster launch)"
    for flag in ("launch_cooperative_grid", "launch_pdl"):
        if getattr(md, flag, False):
            return f"{flag} is set"
    if getattr(md, "tensordesc_meta", None):
        return "tensor-descriptor arguments"
    if getattr(md, "instrumentation_mode", ""):
        return f"instrumented build ({md.instrumentation_mode})"
    slots = 0
    for scratch in ("global_scratch_size", "profile_scratch_size"):
        if hasattr(md, scratch):                # the binary takes the pointer whenever Triton knows of it
            if getattr(md, scratch):
                return f"{scratch}={getattr(md, scratch)} (scratch memory the launcher must allocate)"
            slots += 1

    def index(k: Any) -> int | None:
        if isinstance(k, str):
            return names.index(k) if k in names else None
        if isinstance(k, tuple):
            return k[0] if len(k) == 1 else None
        return k if isinstance(k, int) else None

    typed = {index(k): ty for k, ty in signature.items()}
    folded = {index(k) for k in constants}
    if None in typed or None in folded:
        return "tuple parameters"
    codes, keep = [], []
    for i in sorted(typed):
        ty = typed[i]
        if ty == "constexpr" or i in folded:
            continue
        if not isinstance(ty, str):
            return f"parameter {names[i]} has type {ty!r}"
        if i >= nargs:
            return f"parameter {names[i]} ({ty}) is passed as a constexpr"
        code = "O" if ty.startswith("*") else _STATIC_CODES.get(ty)
        if code is None:
            return f"parameter {names[i]} has type {ty}"
        codes.append(code)
        keep.append(i)
    codes += ["O"] * slots
    params = _entry_params(getattr(compiled, "asm", {}).get("ptx"))
    if params is not None and params != len(codes):      # a Triton whose ABI adds parameters we do not know of
        return f"the binary takes {params} parameters, the plan passes {len(codes)}"
    return "".join(codes), (None if keep == list(range(nargs)) else tuple(keep)), slots


def _entry_params(ptx: Any) -> int | None:
    """Parameters of the kernel entry in PTX text (None: no PTX to read)."""
    if not isinstance(ptx, str):
        return None
    m = re.search(r"\.entry\s+[\w$]+\s*\((.*?)\)", ptx, re.S)
    return m.group(1).count(".param") if m else None


def relauncher(compiled: Any, nargs: int, rest: list) -> Callable[[tuple, int, tuple], None]:
    """``fire(grid3, device, args)``: launch ``compiled`` again on ``grid3`` (three extents) with ``args`` (its
    first ``nargs`` parameters; ``rest`` are the constexprs after them, as Triton's launcher takes them) on
    ``device``'s current stream.  Through torch's static launcher where :func:`static_plan` allows,
    else through Triton's compiled launcher.  ``fire.via`` says which ("static" / "triton")."""
    plan = static_plan(compiled, nargs)
    if isinstance(plan, str):
        def fire(grid3: tuple, device: int, args: tuple) -> None:
            compiled[grid3](*args, *rest)
        fire.via, fire.why = "triton", plan
        return fire
    codes, keep, slots = plan
    compiled._init_handles()                 # a no-op: the launch that compiled it loaded it
    function, warps, shared = compiled.function, compiled.metadata.num_warps, compiled.metadata.shared
    launch_kernel = torch._C._StaticCudaLauncher._launch_kernel
    raw_stream = torch._C._cuda_getCurrentRawStream
    tail = (None,) * slots

    def fire(grid3: tuple, device: int, args: tuple) -> None:
        gx, gy, gz = grid3
        if gx * gy * gz >= _STATIC_GRID_LIMIT:
            compiled[grid3](*args, *rest)
            return
        passed = args if keep is None else tuple(args[i] for i in keep)
        launch_kernel(function, gx, gy, gz, warps, shared, codes, passed + tail, raw_stream(device))
    fire.via, fire.why = "static", ""
    return fire
