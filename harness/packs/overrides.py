"""Subjects for a library that overrides ATen ops: each op, called the torch way with the library on, against
the same call with it off.

A library such as flag-gems registers its own kernels for ATen ops and switches them on with a context
manager, so that ordinary torch calls run them.  :func:`declare` makes one subject per overridden op whose
input is a whole call drawn from PyTorch's OpInfo samples for that op (every OpInfo whose ATen name is the
op's), widened the harness's way: the sample's floating tensors in each dtype the OpInfo supports (its integer
dtypes for an op that takes no floating tensor), moved to
non-contiguous layouts (a transposed or strided copy holding the same values) and scaled by a drawn power of
two (values near 1, tiny, large).  The reference is the same call with the library off; the float64 truth is
that call on the sample upcast (``harness.runner``).  Random, uninitialised-memory and in-place ops are left
out (their outputs are not a reference, or the sample is their output).
"""
from __future__ import annotations

import random
from typing import Any, Callable, ContextManager, Iterable, Mapping

import torch
from hypothesis import strategies as st
from torch.utils._pytree import tree_map_only

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


def _truth(kwargs: dict) -> dict:
    return {**kwargs, "call": [*kwargs["call"][:5], True]}


def declare(prefix: str, overridden: Iterable[str], enabled: Callable[[str], ContextManager], module: str,
            device: str, skip: Mapping[str, str] = {}) -> dict[str, Subject]:
    """One subject ``<prefix>.<op>`` per ATen op name in ``overridden`` that OpInfo has samples for (in-place ops
    and ``skip``, name -> why, left out): its candidate runs the drawn call inside ``enabled(op)``, its
    reference the same call outside.  ``module`` is the pack module the subjects belong to (workers find them
    by it)."""
    by_aten = opinfos_by_aten()
    out: dict[str, Subject] = {}
    for name in sorted(set(overridden)):
        if not by_aten.get(name) or name.endswith("_") or name in skip:
            continue
        infos = {op_name(info): info for info in by_aten[name] if _dtypes(info, device)}
        if not infos:
            continue

        def candidate(call, name=name, infos=infos):
            op, args, kwargs = build_call(infos, call, device)
            with enabled(name):
                return op(*args, **kwargs)

        def reference(call, infos=infos):
            op, args, kwargs = build_call(infos, call, device)
            return op(*args, **kwargs)

        candidate.__module__ = reference.__module__ = module
        candidate.__name__ = f"{prefix}.{name}".replace(".", "_")
        out[f"{prefix}.{name}"] = subject(name=f"{prefix}.{name}", reference=reference, upcast=_truth,
                                          inputs={"call": call_strategy(infos, device)})(candidate)
    return out


__all__ = ["declare", "call_strategy", "build_call", "opinfos_by_aten", "FLOATS", "INTEGERS", "SCALES", "LAYOUTS"]
