"""Materialise tensors from a :class:`~harness.case.TensorCase`: values, layout and guard regions.

Values are generated in float64 on the CPU from the case's seed (so every
process and device sees the same numbers), then cast and placed into the drawn
layout.  Every tensor lives inside a larger storage whose elements before and
after its span are a canary (NaN for floats, the dtype's max for ints): a
kernel that reads past the end picks up poison, one that writes past the end
is caught by :func:`guards_intact`.  ``materialize(..., fill=(before, after))``
fills the guards with other values instead: the control run that tells a read
of the canary apart from a NaN the kernel made itself.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from . import device
from .case import TensorCase

GUARD_ELEMENTS = 256

_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
    "int32": torch.int32, "int64": torch.int64, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def is_float(name: str) -> bool:
    return torch_dtype(name).is_floating_point


def canary_value(dtype: torch.dtype):
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max


# ---------------------------------------------------------------------------- values

def _values(tc: TensorCase, shape: tuple[int, ...]) -> torch.Tensor:
    """float64 (or int64 / bool) CPU values of the case's family, before layout."""
    with torch.device("cpu"):      # whatever default device the caller set (a CPU generator draws them)
        return _cpu_values(tc, shape)


def _cpu_values(tc: TensorCase, shape: tuple[int, ...]) -> torch.Tensor:
    gen = torch.Generator().manual_seed(tc.seed)
    dtype = torch_dtype(tc.dtype)
    n = math.prod(shape)
    if dtype == torch.bool:
        return (torch.rand(n, generator=gen, dtype=torch.float64) < 0.5).reshape(shape)
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        lo, hi = (max(info.min, -100), min(info.max, 100)) if tc.values != "large" else (info.min, info.max)
        return torch.randint(lo, hi, (n,), generator=gen, dtype=torch.int64).reshape(shape)
    finfo = torch.finfo(dtype)
    fam = tc.values
    sign = torch.where(torch.rand(n, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0)
    if fam == "normal":
        v = torch.randn(n, generator=gen, dtype=torch.float64)
    elif fam == "uniform_pos":
        v = torch.rand(n, generator=gen, dtype=torch.float64) * 2 + 1e-3
    elif fam == "large_offset":
        # mean >> std: catches E[x^2] - E[x]^2 cancellation and naive variance.
        offset = {torch.float16: 64.0, torch.bfloat16: 64.0}.get(dtype, 1000.0)
        v = offset + torch.randn(n, generator=gen, dtype=torch.float64)
    elif fam == "large":
        # Squares overflow the dtype: |x| in [sqrt(max), 100 sqrt(max)).
        base = math.sqrt(finfo.max) * 1.01
        v = sign * base * (1 + 99 * torch.rand(n, generator=gen, dtype=torch.float64))
        v = v.clamp(-finfo.max, finfo.max)
    elif fam == "near_max":
        v = sign * finfo.max * (0.25 + 0.5 * torch.rand(n, generator=gen, dtype=torch.float64))
    elif fam == "tiny":
        # Down to subnormals of the dtype.  Exception: Triton's interpreter converts bfloat16
        # subnormals to float32 wrongly (seen with triton 3.9: -3.4e-39 loads as -1.8e-39), which
        # no kernel can fix, so in interpreter mode bfloat16 "tiny" stays in the normal range.
        u = torch.rand(n, generator=gen, dtype=torch.float64).clamp_min(1e-3)
        v = sign * finfo.tiny * ((1 + u) if (dtype == torch.bfloat16 and device.is_interpreter()) else u)
    elif fam == "zeros":
        v = torch.zeros(n, dtype=torch.float64)
    elif fam == "integer":
        v = torch.randint(-8, 9, (n,), generator=gen).to(torch.float64)
    else:
        raise ValueError(f"unknown value family {fam!r}")
    if tc.low is not None or tc.high is not None:
        v = v.clamp(tc.low, tc.high)
    if tc.nonfinite and n:
        k = max(1, n // 1000)
        pos = torch.randint(0, n, (k,), generator=gen)
        specials = {"nan": [float("nan")], "inf": [float("inf")], "-inf": [float("-inf")],
                    "mixed": [float("nan"), float("inf"), float("-inf")]}[tc.nonfinite]
        kinds = torch.randint(0, len(specials), (k,), generator=gen)
        v[pos] = torch.tensor(specials, dtype=torch.float64)[kinds]
    return v.reshape(shape)


# ---------------------------------------------------------------------------- layouts

def _layout_strides(tc: TensorCase) -> tuple[tuple[int, ...], int, int]:
    """(strides, storage offset of element 0 inside the span, span length in elements)."""
    shape = tc.shape
    nd = len(shape)
    contiguous = _contiguous_strides(shape)
    if tc.layout == "transposed" and nd >= 2:
        order = list(range(nd))[::-1]                 # dims stored in reverse order
        perm_shape = [shape[i] for i in order]
        perm_strides = _contiguous_strides(tuple(perm_shape))
        strides = [0] * nd
        for pos, dim in enumerate(order):
            strides[dim] = perm_strides[pos]
        return tuple(strides), 0, math.prod(shape)
    if tc.layout == "strided" and nd >= 1:
        step = max(2, tc.layout_param)
        padded = list(shape)
        padded[-1] = shape[-1] * step
        strides = list(_contiguous_strides(tuple(padded)))
        strides[-1] = step
        return tuple(strides), 0, math.prod(padded)
    if tc.layout == "offset":
        off = 1 + tc.layout_param % 63
        return contiguous, off, math.prod(shape) + off
    if tc.layout == "expanded" and nd >= 1:
        dim = tc.layout_param % nd
        small = list(shape)
        small[dim] = 1 if shape[dim] > 0 else 0
        strides = list(_contiguous_strides(tuple(small)))
        strides[dim] = 0
        return tuple(strides), 0, math.prod(small)
    return contiguous, 0, math.prod(shape)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def materialize(tc: TensorCase, device: torch.device | str = "cpu", *, guard: int = GUARD_ELEMENTS,
                fill: tuple | None = None) -> torch.Tensor:
    """Build the tensor described by ``tc`` on ``device`` inside a canary-guarded storage.

    ``fill`` = (before, after) puts other values than the canary in the guard regions before and
    after the tensor's span (None on a side keeps the canary); :func:`guards_intact` then
    checks for those values."""
    dtype = torch_dtype(tc.dtype)
    strides, offset, span = _layout_strides(tc)
    if tc.layout == "expanded" and len(tc.shape) >= 1:
        # values (and any NaN/inf sprinkle) drawn for the size-1 slice, then broadcast
        dim = tc.layout_param % len(tc.shape)
        small = tuple(min(1, d) if i == dim else d for i, d in enumerate(tc.shape))
        values = _values(tc, small).expand(tc.shape)
    elif tc in _host_cache:
        values = None                                  # _cast_values has them
    else:
        values = _values(tc, tc.shape)
    storage = torch.full((guard + span + guard,), canary_value(dtype), dtype=dtype, device=device)
    if tc.layout == "strided" and span:
        # a slice of a real tensor: the elements the steps skip hold values of the same family
        filler = dataclasses.replace(tc, seed=tc.seed ^ 0x5EED, nonfinite="")
        storage[guard:guard + span] = _values(filler, (span,)).to(dtype).to(device)
    before, after = fill if fill is not None else (None, None)
    before = canary_value(dtype) if before is None else before
    after = canary_value(dtype) if after is None else after
    if fill is not None:
        storage[:guard + offset].fill_(before)
        storage[guard + span:].fill_(after)
    view = storage.as_strided(tc.shape, strides, guard + offset)
    if view.numel():
        if tc.layout == "expanded":
            dim = tc.layout_param % len(tc.shape)
            view.narrow(dim, 0, 1).copy_(values.narrow(dim, 0, 1).to(dtype))
        else:
            view.copy_(_cast_values(tc, values, dtype))
    view._tritondiff_guard = (guard, offset, span, before, after)
    return view


#: Tensors of at least this many elements keep their host values for the next build of the same case.
HOST_CACHE_MIN_NUMEL = 1 << 28
_host_cache: dict[TensorCase, torch.Tensor] = {}


def _cast_values(tc: TensorCase, values: "torch.Tensor | None", dtype: torch.dtype) -> torch.Tensor:
    """The case's values in its dtype on the CPU.  One example builds its inputs four times (eager,
    float64, two calls); for a huge case (2^31 elements) generating them costs tens of seconds, so the
    last huge one is kept (one entry: a few GiB of host memory)."""
    hit = _host_cache.get(tc)
    if hit is not None:
        return hit
    out = (values if values is not None else _values(tc, tc.shape)).to(dtype)
    if out.numel() >= HOST_CACHE_MIN_NUMEL:
        _host_cache.clear()
        _host_cache[tc] = out
    return out


def guards_intact(t: torch.Tensor) -> str | None:
    """None when the canaries around ``t`` are untouched, else where they were overwritten."""
    info = getattr(t, "_tritondiff_guard", None)
    if info is None:
        return None
    guard, offset, span, fill_before, fill_after = info
    flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage())
    before, after = flat[:guard + offset], flat[guard + span:]
    # The "offset" layout leaves a gap between the guard and the view start: it is canary too.
    problems = []
    for region, name, base, value in ((before, "before", -(guard + offset), fill_before),
                                      (after, "after", span - offset, fill_after)):
        bad = _not_filled(region, value)
        if bad.numel():
            first = int(bad[0]) + base
            problems.append(f"{bad.numel()} element(s) {name} the tensor overwritten (first at element offset {first})")
    return "; ".join(problems) or None


def _not_filled(region: torch.Tensor, value) -> torch.Tensor:
    """Indices of ``region`` whose element is not ``value`` (NaN matches NaN)."""
    if region.dtype.is_floating_point and value != value:
        return (~torch.isnan(region)).nonzero().flatten()
    return (region != value).nonzero().flatten()


def layout_of(tc: TensorCase, *, guard: int = GUARD_ELEMENTS) -> tuple[tuple[int, ...], int]:
    """(strides, storage offset) :func:`materialize` gives the tensor of ``tc``, without building it."""
    strides, offset, _span = _layout_strides(tc)
    return strides, guard + offset


def nbytes(tc: TensorCase) -> int:
    return _layout_strides(tc)[2] * torch_dtype(tc.dtype).itemsize
