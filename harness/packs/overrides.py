"""Subjects for a library that overrides ATen ops: each op, called the torch way with the library on, against
the same call with it off.

A library such as flag-gems registers its own kernels for ATen ops and switches them on with a context
manager, so that ordinary torch calls run them.  :func:`declare` makes one subject per overridden op whose
input is a whole call drawn from PyTorch's OpInfo samples for that op (every OpInfo whose ATen name is the
op's), widened the harness's way: the sample's floating tensors in each dtype the OpInfo supports (its integer
dtypes for an op that takes no floating tensor), moved to
non-contiguous layouts (a transposed or strided copy holding the same values) and scaled by a drawn power of
two (values near 1, tiny, large; a scale that takes the values past the dtype's normal range makes a finding
``edge``).  The reference is the same call with the library off; the float64 truth is that call on the sample
upcast (``harness.runner``).  Where an op's contract specifies less than every element of its outputs (the
order of ties, statistics it leaves unspecified), both sides are judged on what it specifies (``CONTRACTS``).
Random, uninitialised-memory and in-place ops are left out (their outputs are not a reference, or the sample
is their output).
"""
from __future__ import annotations

import inspect
import random
from typing import Any, Callable, ContextManager, Iterable, Mapping

import torch
from hypothesis import strategies as st
from torch.utils._pytree import tree_map_only

from .. import opinfo
from ..api import Subject, subject
from ..opinfo import SKIP_RANDOM, SKIP_UNINITIALIZED, load_op_db, op_name

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
#: The dtypes of an op that takes no floating tensor (bitwise ops, bincount).
INTEGERS = (torch.int32, torch.int64, torch.bool)
#: Powers of two the floating values of a sample are scaled by: as drawn, tiny, large.
SCALES = (1.0, 2.0 ** -20, 2.0 ** 20)
LAYOUTS = ("as drawn", "transposed", "strided")


def opinfos_by_aten() -> dict[str, list]:
    """OpInfos by the ATen op name they call (``aten_name``, else the name), random / uninitialised ones out."""
    out: dict[str, list] = {}
    for info in load_op_db():
        if info.name in SKIP_RANDOM or info.name in SKIP_UNINITIALIZED:
            continue
        out.setdefault(getattr(info, "aten_name", None) or info.name, []).append(info)
    return out


def _relayout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """``t``'s values in ``layout``: a transposed-storage copy, or every other element of a wider buffer."""
    if layout == "transposed" and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "strided" and t.dim() >= 1 and t.numel():
        wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        view = wide[..., ::2]
        view.copy_(t)
        return view
    return t


def _widen(value: Any, layout: str, scale: float) -> Any:
    """Every tensor inside ``value`` (a sample's args or kwargs) scaled (floating ones) and moved to ``layout``."""
    def widen(t: torch.Tensor) -> torch.Tensor:
        return _relayout(t * scale if t.is_floating_point() and scale != 1.0 else t, layout)
    return tree_map_only(torch.Tensor, widen, value)


_SAMPLES: dict = {}


def _samples(info: Any, dtype: torch.dtype, device: str) -> tuple:
    """The OpInfo's samples for ``dtype``, made once per process from fixed seeds (torch's and ``random``'s,
    restored after), so that a drawn index names the same sample in every process and in a replay."""
    key = (id(info), dtype, device)
    if key not in _SAMPLES:
        state = random.getstate()
        try:
            with torch.random.fork_rng(devices=[] if device == "cpu" else None):
                torch.manual_seed(0)
                random.seed(0)
                _SAMPLES[key] = tuple(info.sample_inputs(device, dtype, requires_grad=False))
        finally:
            random.setstate(state)
    return _SAMPLES[key]


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def call_strategy(infos: dict[str, Any], device: str) -> st.SearchStrategy:
    """A call of one of ``infos`` (by OpInfo name) as a JSON-able description ``[opinfo name, dtype, sample
    index, layout, scale, truth]`` (``truth``: build it in float64): what the case stores and replays."""
    choices = [(name, str(dtype)[6:]) for name, info in infos.items() for dtype in _dtypes(info, device)]
    if not choices:
        return st.nothing()

    @st.composite
    def draw(data):
        name, dtype = data(st.sampled_from(choices))
        count = len(_samples(infos[name], _dtype(dtype), device))
        if not count:
            return data(st.nothing())
        return [name, dtype, data(st.integers(0, count - 1)), data(st.sampled_from(LAYOUTS)),
                data(st.sampled_from(SCALES)), False]
    return draw()


def _dtypes(info: Any, device: str) -> list[torch.dtype]:
    """The floating dtypes ``info`` supports on ``device``; its integer ones where it supports no float."""
    supported = info.supported_dtypes(device)
    return [d for d in FLOATS if d in supported] or [d for d in INTEGERS if d in supported]


def build_call(infos: dict[str, Any], call: list, device: str) -> tuple[Any, list, dict]:
    """``(op, args, kwargs)`` of a drawn description (``call_strategy``), on ``device``."""
    name, dtype, index, layout, scale, truth = call
    info = infos[name]
    sample = _samples(info, _dtype(dtype), device)[index]
    args = _widen((sample.input, *sample.args), layout, scale)
    kwargs = _widen(dict(sample.kwargs), layout, scale)
    if truth:
        args, kwargs = tree_map_only(torch.Tensor, lambda t: t.double() if t.is_floating_point() else t,
                                     (args, kwargs))
    return info.op, list(args), kwargs


def _arg(args: list, kwargs: dict, position: int, name: str, default: Any) -> Any:
    return args[position] if len(args) > position else kwargs.get(name, default)


def _picked(values_and_indices: Any, x: torch.Tensor, dim: int) -> tuple:
    """(values, the elements of ``x`` the indices pick): equal elements in another order give the same pair.
    Indices that cannot pick (not int64, out of range, another shape) stay as they are, to be found wrong."""
    values, indices = values_and_indices
    size = x.shape[dim] if x.dim() else 1
    if (not x.dim() or indices.dtype != torch.int64 or indices.shape != values.shape
            or (indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= size))):
        return values, indices
    return values, x.gather(dim, indices)


def _sort(args: list, kwargs: dict, out: Any) -> Any:
    """torch.sort: equal elements' order is unspecified unless ``stable=True``."""
    if kwargs.get("stable"):
        return out
    return _picked(out, args[0], _arg(args, kwargs, 1, "dim", -1))


def _topk(args: list, kwargs: dict, out: Any) -> Any:
    """torch.topk: which of equal elements is returned is unspecified."""
    return _picked(out, args[0], _arg(args, kwargs, 2, "dim", -1))


def _native_batch_norm(args: list, kwargs: dict, out: Any) -> Any:
    """aten.native_batch_norm in eval mode: the saved mean and inverse deviation are unspecified (the CPU
    returns empty tensors, CUDA values; its backward reads the running statistics instead)."""
    return out if _arg(args, kwargs, 5, "training", True) else out[:1]


#: What an op's contract specifies of its outputs, where that is less than every element of them: aten op name
#: -> f(args, kwargs, outputs) giving the specified part (index outputs judged by the elements they pick where
#: ties may come in any order; outputs the op leaves unspecified dropped).  Candidate and reference alike.
CONTRACTS: dict[str, Callable[[list, dict, Any], Any]] = {
    "sort": _sort, "topk": _topk, "native_batch_norm": _native_batch_norm}


def _truth(kwargs: dict) -> dict:
    return {**kwargs, "call": [*kwargs["call"][:5], True]}


#: Magnitudes OpInfo's samples hold (``make_tensor`` draws within about [-9, 9]), as powers of two: where the
#: scaled band leaves the dtype's normal range the call is at its edge.
SAMPLE_BAND = (2.0 ** -4, 2.0 ** 4)


def _edge(scalars: dict) -> dict | None:
    """The drawn call scaled to 1 where its scale puts the sample's values past the dtype's normal range (float16
    times 2^20 overflows to inf, times 2^-20 goes subnormal), else None: such findings are ``edge``."""
    name, dtype, index, layout, scale, truth = scalars["call"]
    kind = _dtype(dtype)
    if scale == 1.0 or not kind.is_floating_point:
        return None
    info = torch.finfo(kind)
    if SAMPLE_BAND[1] * scale <= info.max and SAMPLE_BAND[0] * scale >= info.tiny:
        return None
    return {**scalars, "call": [name, dtype, index, layout, 1.0, truth]}


#: The functions a standalone repro of an op's finding carries, in order (their source, not a copy).
_STANDALONE_FUNCTIONS = (opinfo.load_op_db, opinfo.op_name, _relayout, _widen, _samples, _dtype, build_call, _truth)

_STANDALONE_HEADER = '''"""{library} {op}: a tritondiff finding, rebuilt with torch and {library} alone.

The call is one of PyTorch's OpInfo samples for aten.{op} (``inputs.pt`` holds its description:
[OpInfo name, dtype, sample index, layout, scale, truth]), moved to the drawn layout and scaled; ``CALL.fn``
runs it with {library}'s kernels for the op switched on, ``CALL.reference`` with them off, and
``CALL.upcast`` describes the float64 truth run.  standalone.py beside this file runs the three and
prints the worst elements.
"""
from __future__ import annotations

import random
import sys
import types
import unittest
from typing import Any

import torch
from torch.utils._pytree import tree_map_only
{imports}

OPINFOS = {opinfos!r}
DEVICE = {device!r}
_SAMPLES: dict = {{}}
'''

_STANDALONE_FOOTER = '''

INFOS = {{op_name(info): info for info in load_op_db() if op_name(info) in OPINFOS}}


def reference(call):
    op, args, kwargs = build_call(INFOS, call, DEVICE)
    return contract(args, kwargs, op(*args, **kwargs))


def candidate(call):
    op, args, kwargs = build_call(INFOS, call, DEVICE)
    with {enable}:
        return contract(args, kwargs, op(*args, **kwargs))


class CALL:
    fn, reference, upcast = staticmethod(candidate), staticmethod(reference), staticmethod(_truth)
'''


def standalone_source(library: str, op: str, opinfos: Iterable[str], device: str, imports: str, enable: str) -> str:
    """A kernel file for a finding's ``standalone.py`` (attribute ``CALL``) that rebuilds an op's drawn call with
    torch alone and runs it with the library on (``imports``, then ``with <enable>:``) and off."""
    head = _STANDALONE_HEADER.format(library=library, op=op, imports=imports, opinfos=sorted(opinfos),
                                     device=device)
    functions = list(_STANDALONE_FUNCTIONS)
    if op in CONTRACTS:
        functions += [_arg, _picked, CONTRACTS[op]]
        contract = f"contract = {CONTRACTS[op].__name__}\n"
    else:
        contract = "def contract(args, kwargs, out):\n    return out\n"
    body = "\n\n".join(inspect.getsource(fn) for fn in functions)
    return f"{head}\n\n{body}\n\n{contract}{_STANDALONE_FOOTER.format(enable=enable)}"


def declare(prefix: str, overridden: Iterable[str], enabled: Callable[[str], ContextManager], module: str,
            device: str, skip: Mapping[str, str] = {},
            standalone: Callable[[str], tuple[str, str, str]] | None = None) -> dict[str, Subject]:
    """One subject ``<prefix>.<op>`` per ATen op name in ``overridden`` that OpInfo has samples for (in-place ops
    and ``skip``, name -> why, left out): its candidate runs the drawn call inside ``enabled(op)``, its
    reference the same call outside.  ``module`` is the pack module the subjects belong to (workers find them
    by it).  ``standalone(op)`` gives ``(library name, import lines, context-manager expression)`` that switch
    the op's kernels on without tritondiff: a finding's dump then replays with torch and the library alone."""
    by_aten = opinfos_by_aten()
    out: dict[str, Subject] = {}
    for name in sorted(set(overridden)):
        if not by_aten.get(name) or name.endswith("_") or name in skip:
            continue
        infos = {op_name(info): info for info in by_aten[name] if _dtypes(info, device)}
        if not infos:
            continue

        contract = CONTRACTS.get(name, lambda args, kwargs, out: out)

        def candidate(call, name=name, infos=infos, contract=contract):
            op, args, kwargs = build_call(infos, call, device)
            with enabled(name):
                return contract(args, kwargs, op(*args, **kwargs))

        def reference(call, infos=infos, contract=contract):
            op, args, kwargs = build_call(infos, call, device)
            return contract(args, kwargs, op(*args, **kwargs))

        candidate.__module__ = reference.__module__ = module
        candidate.__name__ = f"{prefix}.{name}".replace(".", "_")
        made = subject(name=f"{prefix}.{name}", reference=reference, upcast=_truth, edge=_edge,
                       inputs={"call": call_strategy(infos, device)})(candidate)
        if standalone is not None:
            library, imports, enable = standalone(name)
            made.standalone = ("CALL", standalone_source(library, name, infos, device, imports, enable))
        out[made.name] = made
    return out


__all__ = ["declare", "standalone_source", "call_strategy", "build_call", "opinfos_by_aten", "FLOATS", "INTEGERS",
           "SCALES", "LAYOUTS"]
