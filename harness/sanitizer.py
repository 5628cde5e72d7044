"""Out-of-bounds memory checking for interpreted kernels.

What it catches
---------------
``bounds_checking()``: while active, every load, store and atomic that Triton's
interpreter performs is checked lane by lane, *before* it touches memory.  An
active lane (mask on) whose element ``[addr, addr + itemsize)`` lies outside
the span of the tensor argument its pointer was derived from is a violation:
reading or writing past the end of a view (also into a neighbouring argument),
before its start, into another part of the same storage, or into memory that
belongs to no argument at all.  The span of a view is ``[data_ptr +
min_offset*itemsize, data_ptr + (max_offset+1)*itemsize)``, so holes inside a
strided view count as inside.  The violation
is recorded and an ``OutOfBoundsAccess`` is raised, which stops the kernel
(the interpreter re-raises it as ``InterpreterError``): an out-of-bounds access
never reaches memory and never segfaults the process.

Stray writes on the GPU, where these checks do not run, are caught by the
canary guard regions every input is built inside (:mod:`harness.tensors`).

How
---
Pointer provenance: each tensor argument's base pointer is tagged with its
span when the interpreter converts it (``_implicit_cvt``), and the tag follows
the pointer through addptr, splat, broadcast, expand_dims, reshape, trans,
cat, join, split, select, bitcast and descriptor / block-pointer
materialisation.  A tagged pointer must stay inside the span(s) it derives
from.  Tags are per pointer tensor, not per lane: a pointer that ``tl.where``
picks from ``x`` or ``y`` may point into either.  An untagged pointer (loaded
from memory, made from an integer, mixed with an untagged one) only has to
fall inside *some* argument's span (a miss is possible, a false alarm not).
The one false alarm provenance can raise: a kernel that reaches argument ``y``
by arithmetic on ``x``'s pointer (an inter-allocation distance passed as an
integer) -- legal on a GPU, reported here as ``x`` out of bounds.

``InterpreterBuilder.create_masked_load / create_masked_store /
create_atomic_rmw / create_atomic_cas`` are wrapped at class level; every other
memory operation of the interpreter (plain loads/stores, atomic load/store,
tensor descriptors, block pointers) goes through those.  ``GridExecutor``'s
``__call__`` and ``_init_args_hst`` are wrapped to learn the kernel name and the
host tensors of the launch by parameter name.  Compiled (CUDA) kernels never
pass through the interpreter, so on CUDA ``bounds_checking()`` records nothing:
the GPU path uses compute-sanitizer.
"""
from __future__ import annotations

import dataclasses
import inspect
import threading
from typing import Any

import numpy as np

from tritondiff.base import device
from .exc import OutOfBoundsAccess
from .launches import patch_method

import torch  # noqa: E402

try:
    from triton.runtime import interpreter as _interp
except Exception:  # pragma: no cover  (a build without the interpreter)
    _interp = None

__all__ = ["Violation", "BoundsChecker", "bounds_checking"]


# --------------------------------------------------------------------------------------------
# Violations
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Violation:
    """One out-of-bounds access of an interpreted kernel."""
    kernel: str
    access: str                     # "load" | "store" | "atomic"
    tensor: str | None              # nearest tensor argument (the kernel's parameter name)
    offset_elements: int            # first offending lane, relative to that tensor's element 0
    extent_elements: int            # elements that tensor's view spans
    lanes: int                      # active lanes out of bounds in this access
    inside_storage: bool            # inside the tensor's storage, outside the view's span
    address: int = 0                # the first offending byte address
    lands_in: str | None = None     # another argument the address falls inside, if any

    def message(self) -> str:
        verb = {"load": "load from", "store": "store to", "atomic": "atomic on"}.get(self.access, self.access)
        lanes = f"{self.lanes} lane{'s' if self.lanes != 1 else ''} out of bounds"
        if self.tensor is None:
            return f"{self.kernel}: {verb} address {self.address:#x}, which is no tensor argument: {lanes}"
        where = f"{self.tensor}[{self.offset_elements:+d}]"
        extra = "; inside the tensor's storage but outside the view" if self.inside_storage else ""
        if self.lands_in:
            extra += f"; the address lies inside argument {self.lands_in}"
        return f"{self.kernel}: {verb} {where} (view spans {self.extent_elements} elements): {lanes}{extra}"

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "message": self.message()}


class BoundsChecker:
    """``with bounds_checking() as bc: ...`` then read ``bc.violations``.

    ``enabled`` is False on CUDA, where compiled kernels bypass the interpreter.
    """

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.enabled = device.is_interpreter() and _interp is not None

    def __enter__(self) -> "BoundsChecker":
        if self.enabled:
            _install()
        _checkers.append(self)
        return self

    def __exit__(self, *exc) -> None:
        for i in range(len(_checkers) - 1, -1, -1):
            if _checkers[i] is self:
                del _checkers[i]
                break


def bounds_checking() -> BoundsChecker:
    """A context manager checking every interpreted memory access against the launch's tensors."""
    return BoundsChecker()


_checkers: list[BoundsChecker] = []
_tls = threading.local()


# --------------------------------------------------------------------------------------------
# Spans of a launch's tensor arguments
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)  # identity semantics: spans are hashed into provenance tags
class _Span:
    name: str
    first: int          # byte address of element 0 (data_ptr)
    lo: int             # byte span of the view [lo, hi)
    hi: int
    itemsize: int
    storage_lo: int
    storage_hi: int
    obj_id: int = 0     # id() of the host object the interpreter turns into this base pointer

    @property
    def extent(self) -> int:
        return (self.hi - self.lo) // self.itemsize


@dataclasses.dataclass
class _LaunchCtx:
    kernel: str
    arg_names: list
    spans: list | None = None


def _launch_stack() -> list[_LaunchCtx]:
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


def _tensor_span(name: str, t: Any) -> _Span | None:
    tensor = getattr(t, "base", None) if not isinstance(t, torch.Tensor) else t  # TensorWrapper
    if not isinstance(tensor, torch.Tensor):
        return None
    itemsize = tensor.element_size()
    first = tensor.data_ptr()
    if tensor.numel() == 0:
        lo = hi = first
    else:
        lo_off = sum(min(0, (n - 1) * s) for n, s in zip(tensor.shape, tensor.stride()))
        hi_off = sum(max(0, (n - 1) * s) for n, s in zip(tensor.shape, tensor.stride()))
        lo, hi = first + lo_off * itemsize, first + (hi_off + 1) * itemsize
    storage = tensor.untyped_storage()
    return _Span(name, first, lo, hi, itemsize, storage.data_ptr(), storage.data_ptr() + storage.nbytes(), id(t))


def _collect_spans(name: str, value: Any, out: list) -> None:
    if isinstance(value, tuple):
        for i, v in enumerate(value):
            _collect_spans(f"{name}[{i}]", v, out)
        return
    if hasattr(value, "block_shape") and hasattr(value, "base"):  # host TensorDescriptor
        value = value.base
    if hasattr(value, "data_ptr"):
        span = _tensor_span(name, value)
        if span is not None:
            out.append(span)


def _spans_of(arg_names: list, args: list | tuple, kwargs: dict) -> list[_Span]:
    spans: list[_Span] = []
    for name, value in zip(arg_names, args):
        _collect_spans(name, value, spans)
    for name, value in kwargs.items():
        _collect_spans(name, value, spans)
    return spans


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------

def _nearest(spans: list[_Span], addr: int) -> tuple[_Span | None, bool]:
    if not spans:
        return None, False

    def distance(s: _Span) -> int:
        return s.lo - addr if addr < s.lo else max(0, addr - s.hi + 1)

    in_storage = [s for s in spans if s.storage_lo <= addr < s.storage_hi]
    pool = in_storage or spans
    best = min(pool, key=distance)
    return best, bool(in_storage)


def _check(access: str, ptrs: Any, mask: Any) -> None:
    stack = _launch_stack()
    if not stack or stack[-1].spans is None:
        return
    ctx = stack[-1]
    addrs = np.asarray(getattr(ptrs, "data", ptrs))
    if mask is not None:
        m = np.asarray(getattr(mask, "data", mask)).astype(bool, copy=False)
        active = addrs[np.broadcast_to(m, addrs.shape)] if m.shape != addrs.shape else addrs[m]
    else:
        active = addrs.reshape(-1)
    if active.size == 0:
        return
    active = active.astype(np.uint64, copy=False)
    element_ty = ptrs.get_element_ty() if hasattr(ptrs, "get_element_ty") else None
    itemsize = max(1, getattr(element_ty, "primitive_bitwidth", 8) // 8)
    provenance = getattr(ptrs, "attr", {}).get(_PROV)
    allowed = provenance if provenance else ctx.spans
    ok = np.zeros(active.shape, dtype=bool)
    end = active + np.uint64(itemsize)
    for s in allowed:
        ok |= (active >= np.uint64(s.lo)) & (end <= np.uint64(s.hi))
    if ok.all():
        return
    bad = active[~ok]
    addr = int(bad[0])
    span, inside_storage = _nearest(list(allowed), addr)
    lands_in = None
    if provenance:
        inside_storage = span is not None and span.storage_lo <= addr < span.storage_hi
        lands_in = next((s.name for s in ctx.spans if s.lo <= addr < s.hi), None)
    violation = Violation(
        kernel=ctx.kernel, access=access,
        tensor=span.name if span else None,
        offset_elements=(addr - span.first) // span.itemsize if span else 0,
        extent_elements=span.extent if span else 0,
        lanes=int(bad.size), inside_storage=inside_storage, address=addr, lands_in=lands_in)
    for checker in list(_checkers):
        checker.violations.append(violation)
    raise OutOfBoundsAccess(violation)


def _load_factory(original):
    def create_masked_load(self, ptrs, mask, *rest, **kwargs):
        if _checkers:
            _check("load", ptrs, mask)
        return original(self, ptrs, mask, *rest, **kwargs)
    return create_masked_load


def _store_factory(original):
    def create_masked_store(self, ptrs, value, mask, *rest, **kwargs):
        if _checkers:
            _check("store", ptrs, mask)
        return original(self, ptrs, value, mask, *rest, **kwargs)
    return create_masked_store


def _rmw_factory(original):
    def create_atomic_rmw(self, rmwOp, ptr, val, mask, *rest, **kwargs):
        if _checkers:
            _check("atomic", ptr, mask)
        return original(self, rmwOp, ptr, val, mask, *rest, **kwargs)
    return create_atomic_rmw


def _cas_factory(original):
    def create_atomic_cas(self, ptr, cmp, val, *rest, **kwargs):
        if _checkers:
            _check("atomic", ptr, None)
        return original(self, ptr, cmp, val, *rest, **kwargs)
    return create_atomic_cas


_has_init_args_hst = False


def _grid_call_factory(original):
    def __call__(self, *args_dev, **kwargs):
        if not _checkers:
            return original(self, *args_dev, **kwargs)
        arg_names = list(getattr(self, "arg_names", None) or inspect.signature(self.fn).parameters)
        ctx = _LaunchCtx(kernel=getattr(self.fn, "__name__", "<kernel>"), arg_names=arg_names)
        if not _has_init_args_hst:
            # Older layout: the host copies are not visible; CPU tensors are their own host copies.
            ctx.spans = _spans_of(arg_names, args_dev, kwargs)
        stack = _launch_stack()
        stack.append(ctx)
        try:
            return original(self, *args_dev, **kwargs)
        finally:
            stack.pop()
    return __call__


def _init_args_factory(original):
    def _init_args_hst(self, args_dev, kwargs):
        result = original(self, args_dev, kwargs)
        stack = _launch_stack()
        if _checkers and stack and stack[-1].spans is None:
            args_hst, kwargs_hst = result
            stack[-1].spans = _spans_of(stack[-1].arg_names, args_hst, kwargs_hst)
        return result
    return _init_args_hst


# --------------------------------------------------------------------------------------------
# Pointer provenance
# --------------------------------------------------------------------------------------------

_PROV = "tritondiff.provenance"   # TensorHandle.attr key: tuple of the _Spans a pointer derives from


def _implicit_cvt_factory(original):
    def _implicit_cvt(arg):
        result = original(arg)
        stack = _launch_stack() if _checkers else None
        if stack and stack[-1].spans and hasattr(arg, "data_ptr"):
            spans = tuple(s for s in stack[-1].spans if s.obj_id == id(arg))
            handle = getattr(result, "handle", None)
            if spans and isinstance(getattr(handle, "attr", None), dict):
                handle.attr[_PROV] = spans
        return result
    return _implicit_cvt


def _is_pointer_handle(h: Any) -> bool:
    return isinstance(getattr(h, "attr", None), dict) and type(getattr(h, "dtype", None)).__name__ == "pointer_type"


def _tag(out: Any, spans: tuple) -> None:
    for h in (out if isinstance(out, tuple) else (out,)):
        if _is_pointer_handle(h):
            h.attr[_PROV] = spans


def _propagate_factory(original):
    """Results of a pointer-shaping op derive from the union of its pointer inputs' spans --
    provided every pointer input is tagged (one untagged input leaves the result untagged)."""
    def op(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if _checkers:
            pointers = [a for a in (*args, *kwargs.values()) if _is_pointer_handle(a)]
            if pointers and all(_PROV in p.attr for p in pointers):
                spans = tuple(dict.fromkeys(s for p in pointers for s in p.attr[_PROV]))
                _tag(out, spans)
        return out
    return op


def _materialize_factory(original):
    def materialize_pointers(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        spans = getattr(getattr(self, "base", None), "attr", {}).get(_PROV) if _checkers else None
        if spans and isinstance(out, tuple) and out:
            _tag(out[0], spans)
        return out
    return materialize_pointers


_PROPAGATING_OPS = ("create_addptr", "create_splat", "create_unsplat", "create_broadcast", "create_expand_dims",
                    "create_reshape", "create_trans", "create_cat", "create_join", "create_split", "create_select",
                    "create_bitcast")

_install_lock = threading.Lock()
_installed = False


def _install() -> None:
    global _installed, _has_init_args_hst
    with _install_lock:
        if _installed or _interp is None:
            return
        builder = getattr(_interp, "InterpreterBuilder", None)
        patch_method(builder, "create_masked_load", "tritondiff.sanitizer", _load_factory)
        patch_method(builder, "create_masked_store", "tritondiff.sanitizer", _store_factory)
        patch_method(builder, "create_atomic_rmw", "tritondiff.sanitizer", _rmw_factory)
        patch_method(builder, "create_atomic_cas", "tritondiff.sanitizer", _cas_factory)
        for name in _PROPAGATING_OPS:
            patch_method(builder, name, "tritondiff.sanitizer", _propagate_factory)
        for handle_cls in ("TensorDescHandle", "BlockPointerHandle"):
            patch_method(getattr(_interp, handle_cls, None), "materialize_pointers", "tritondiff.sanitizer",
                         _materialize_factory)
        cvt = getattr(_interp, "_implicit_cvt", None)
        if callable(cvt) and getattr(cvt, "__tritondiff_tag__", None) != "tritondiff.sanitizer":
            wrapped = _implicit_cvt_factory(cvt)
            wrapped.__wrapped__ = cvt  # type: ignore[attr-defined]
            wrapped.__tritondiff_tag__ = "tritondiff.sanitizer"  # type: ignore[attr-defined]
            _interp._implicit_cvt = wrapped
        executor = getattr(_interp, "GridExecutor", None)
        _has_init_args_hst = patch_method(executor, "_init_args_hst", "tritondiff.sanitizer", _init_args_factory)
        patch_method(executor, "__call__", "tritondiff.sanitizer", _grid_call_factory)
        _installed = True
