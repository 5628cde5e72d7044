"""Materialise tensors from a :class:`~harness.case.TensorCase`: values, layout and guard regions.

Values come from the case's seed and value family, so every process and device
rebuilds the same numbers.  Two generators, one rule for which:

* below :data:`ON_DEVICE_MIN_NUMEL` elements (every normal draw): float64 on the
  CPU from a ``torch.Generator`` seeded with the case's seed, then cast and
  copied into place -- the values every stored failure and regression replays;
* from it on (huge mode's 2^31-element inputs on the GPU): on the tensor's own
  device, :data:`CHUNK_NUMEL` elements at a time, each chunk cast straight into
  the destination, so no full-size float64 tensor exists on the host or the
  device.  A counter-based generator (splitmix64 of seed, stream and element
  index) makes the values independent of chunking and bitwise the same on every
  CUDA device.  Same families, clamp and non-finite sprinkle, other numbers.

Either way they are placed into the drawn layout.  Every tensor lives inside a
larger storage whose elements before and after its span are a canary (NaN for
floats, the dtype's max for ints): a kernel that reads past the end picks up
poison, one that writes past the end is caught by :func:`guards_intact`.
``materialize(..., fill=(before, after))`` fills the guards with other values
instead: the control run that tells a read of the canary apart from a NaN the
kernel made itself.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch

from tritondiff.base import device
from .case import TensorCase

GUARD_ELEMENTS = 256

_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
    "int32": torch.int32, "int64": torch.int64, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
    "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
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

#: Tensors of at least this many elements get their values generated on their own device (the GPU in
#: huge mode), chunk by chunk, by a counter-based generator (:func:`_fill_on_device`).  Above every
#: normal draw (the nightly profile's 512 MiB budget bounds those at 2^29 one-byte elements), so every
#: case drawn outside huge mode keeps the CPU values it always had; huge mode's largest inputs (2^31 - 1
#: elements and up) are past it.
ON_DEVICE_MIN_NUMEL = 1 << 30
#: Elements generated at a time there.  The values do not depend on it; it bounds the workspace
#: (:func:`on_device_workspace_bytes`).
CHUNK_NUMEL = 1 << 22
#: Chunk-sized 8-byte temporaries the generator holds at once, at most (the "large" family's peak).
_WORKSPACE_CHUNKS = 8


def _values(tc: TensorCase, shape: tuple[int, ...]) -> torch.Tensor:
    """float64 (or int64 / bool) CPU values of the case's family, before layout."""
    with torch.device("cpu"):      # whatever default device the caller set (a CPU generator draws them)
        return _cpu_values(tc, shape)


def _cpu_values(tc: TensorCase, shape: tuple[int, ...]) -> torch.Tensor:
    n = math.prod(shape)
    draws = _GeneratorDraws(tc.seed, n)
    v = _family_values(tc, draws)
    if tc.nonfinite and n and v.dtype == torch.float64:
        k = max(1, n // 1000)
        pos = torch.randint(0, n, (k,), generator=draws.gen)
        specials = _SPECIALS[tc.nonfinite]
        kinds = torch.randint(0, len(specials), (k,), generator=draws.gen)
        v[pos] = torch.tensor(specials, dtype=torch.float64)[kinds]
    return v.reshape(shape)


_SPECIALS = {"nan": [float("nan")], "inf": [float("inf")], "-inf": [float("-inf")],
             "mixed": [float("nan"), float("inf"), float("-inf")]}


def _family_values(tc: TensorCase, draws: "_GeneratorDraws | _CounterDraws") -> torch.Tensor:
    """The ``draws.n`` values of the case's family, 1-D: float64 (clamped to ``tc.low`` / ``tc.high``),
    int64 or bool; no non-finite sprinkle.  The same code for the CPU generator and the device's."""
    dtype = torch_dtype(tc.dtype)
    n = draws.n
    if dtype == torch.bool:
        return draws.uniform() < 0.5
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        lo, hi = (max(info.min, -100), min(info.max, 100)) if tc.values != "large" else (info.min, info.max)
        if tc.low is not None or tc.high is not None:      # declared bounds, inclusive: [low, high]
            lo = lo if tc.low is None else min(max(info.min, math.ceil(tc.low)), info.max)
            top = hi - 1 if tc.high is None else max(min(info.max, math.floor(tc.high)), info.min)
            hi = min(max(top, lo) + 1, info.max)      # torch draws below hi; int64's max + 1 overflows
        return draws.integers(lo, hi)
    finfo = torch.finfo(dtype)
    fam = tc.values
    signs = draws.signs()              # a function giving +-1 per element (the CPU draws them here, always)
    if fam == "normal":
        v = draws.normal()
    elif fam == "uniform_pos":
        v = draws.uniform() * 2 + 1e-3
    elif fam == "large_offset":
        # mean >> std: catches E[x^2] - E[x]^2 cancellation and naive variance.
        offset = {torch.float16: 64.0, torch.bfloat16: 64.0, torch.float8_e4m3fn: 16.0,
                  torch.float8_e5m2: 16.0}.get(dtype, 1000.0)
        v = offset + draws.normal()
    elif fam == "large":
        # Squares overflow the dtype: |x| in [sqrt(max), 100 sqrt(max)).
        base = math.sqrt(finfo.max) * 1.01
        v = signs() * base * (1 + 99 * draws.uniform())
        v = v.clamp(-finfo.max, finfo.max)
    elif fam == "near_max":
        v = signs() * finfo.max * (0.25 + 0.5 * draws.uniform())
    elif fam == "tiny":
        # Down to subnormals of the dtype.  Exception: Triton's interpreter converts bfloat16
        # subnormals to float32 wrongly (seen with triton 3.9: -3.4e-39 loads as -1.8e-39), which
        # no kernel can fix, so in interpreter mode bfloat16 "tiny" stays in the normal range.
        u = draws.uniform().clamp_min(1e-3)
        v = signs() * finfo.tiny * ((1 + u) if (dtype == torch.bfloat16 and device.is_interpreter()) else u)
    elif fam == "masked":
        v = draws.normal().masked_fill(_masked_block(tc, draws.device), -math.inf)
    elif fam == "zeros":
        v = torch.zeros(n, dtype=torch.float64, device=draws.device)
    elif fam == "integer":
        v = draws.integers(-8, 9).to(torch.float64)
    else:
        raise ValueError(f"unknown value family {fam!r}")
    if tc.low is not None or tc.high is not None:
        v = v.clamp(tc.low, tc.high)
    return v


#: Lengths of a row's masked block ("masked" family): the tile boundaries kernels get wrong, one short of and
#: one past them; ``None`` stands for "all but one element" and for "half the row".
MASK_LENGTHS = (1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, None)


def _masked_block(tc: TensorCase, device: Any) -> torch.Tensor:
    """Flat bool mask, True on one block of each row of the last dim: a prefix (left padding, a sliding
    window), a suffix (causal) or a span, of a boundary length (:data:`MASK_LENGTHS`), always leaving at least
    one element of the row unmasked (a fully masked row is NaN in eager and a design choice in kernels)."""
    width = tc.shape[-1] if tc.shape else 1
    n = math.prod(tc.shape)
    if width < 2 or n == 0:
        return torch.zeros(n, dtype=torch.bool, device=device)
    rows = n // width
    gen = torch.Generator().manual_seed(tc.seed ^ 0x3A5C)
    pick = torch.randint(0, len(MASK_LENGTHS), (rows,), generator=gen)
    table = torch.tensor([width - 1 if m is None else m for m in MASK_LENGTHS])
    length = table[pick].clamp(1, width - 1)
    half = torch.randint(0, 2, (rows,), generator=gen).bool() & (pick == len(MASK_LENGTHS) - 1)
    length = torch.where(half, torch.full_like(length, max(1, width // 2)), length)
    kind = torch.randint(0, 3, (rows,), generator=gen)                    # prefix, suffix, span
    span_start = (torch.rand(rows, generator=gen, dtype=torch.float64) * (width - length + 1)).long()
    start = torch.where(kind == 0, 0, torch.where(kind == 1, width - length, span_start))
    start, length = start.to(device)[:, None], length.to(device)[:, None]
    cols = torch.arange(width, device=device)[None, :]
    return ((cols >= start) & (cols < start + length)).reshape(-1)


class _GeneratorDraws:
    """The CPU draws: one ``torch.Generator`` seeded with the case's seed, consumed in call order.
    These are the values of every case below :data:`ON_DEVICE_MIN_NUMEL` (stored failures replay them)."""

    device = "cpu"

    def __init__(self, seed: int, n: int):
        self.gen, self.n = torch.Generator().manual_seed(seed), n

    def uniform(self) -> torch.Tensor:
        return torch.rand(self.n, generator=self.gen, dtype=torch.float64)

    def normal(self) -> torch.Tensor:
        return torch.randn(self.n, generator=self.gen, dtype=torch.float64)

    def integers(self, lo: int, hi: int) -> torch.Tensor:
        return torch.randint(lo, hi, (self.n,), generator=self.gen, dtype=torch.int64)

    def signs(self) -> Callable[[], torch.Tensor]:
        sign = torch.where(self.uniform() < 0.5, -1.0, 1.0)       # default dtype, as it always was
        return lambda: sign


# ---------------------------------------------------------------------------- values on the device

_MASK64 = (1 << 64) - 1


def _int64(x: int) -> int:
    """``x`` mod 2^64 as a signed 64-bit int (what a torch int64 holds)."""
    x &= _MASK64
    return x - (1 << 64) if x >> 63 else x


_GOLDEN, _MIX1, _MIX2 = _int64(0x9E3779B97F4A7C15), _int64(0xBF58476D1CE4E5B9), _int64(0x94D049BB133111EB)


def _stream_key(seed: int, stream: int) -> int:
    """The key of one stream of a case's draws: splitmix64's finaliser of (seed, stream), in Python ints."""
    z = ((seed & _MASK64) * 0x9E3779B97F4A7C15 + (stream + 1) * 0xD1B54A32D192ED03) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return _int64(z ^ (z >> 31))


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 ``z`` (torch's ``>>`` is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _hash(counter: torch.Tensor, key: int) -> torch.Tensor:
    """64 random bits (int64) per element of ``counter``: splitmix64 of ``key + counter * golden``,
    in int64 ops that wrap mod 2^64, so every device computes the same bits."""
    z = counter * _GOLDEN
    z += key
    z ^= _shr(z, 30)
    z *= _MIX1
    z ^= _shr(z, 27)
    z *= _MIX2
    z ^= _shr(z, 31)
    return z


def _to_range(bits: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """Integers in [lo, hi) from 64 random bits (modulo bias below 2^-30 for the spans drawn here)."""
    if hi - lo > 1 << 62:                     # int64 "large": the bits themselves, hi left out
        return bits.clamp_max(hi - 1)
    return _shr(bits, 1).remainder_(hi - lo).add_(lo)


class _CounterDraws:
    """Draws for elements ``start .. end - 1`` of a tensor generated on its device (:func:`_fill_on_device`).

    Counter-based: a draw is splitmix64 of (case seed, stream, element index), the streams numbered in
    call order (the signs have their own, drawn only by the families that use them), so an element's
    value does not depend on the chunk it falls in, the chunk size, the order of the chunks, or the
    device: torch's own CUDA generator would not do (its numbers depend on the GPU's SM count once a
    tensor passes a few hundred thousand elements).  Integers and uniforms are bitwise the same on
    every device; normals (Box-Muller: float64 log1p, sqrt, cos) on every CUDA device, and may differ
    from the CPU's in the last float64 bit."""

    def __init__(self, seed: int, start: int, end: int, device: torch.device):
        self.seed, self.n, self.device, self._stream = seed, end - start, device, 0
        self._index = torch.arange(start, end, dtype=torch.int64, device=device)

    def _bits(self, stream: int | None = None) -> torch.Tensor:
        if stream is None:
            self._stream += 1
            stream = self._stream
        return _hash(self._index, _stream_key(self.seed, stream))

    def uniform(self) -> torch.Tensor:
        """float64 in [0, 1) from the top 53 bits (exact)."""
        return _shr(self._bits(), 11).to(torch.float64).mul_(2.0 ** -53)

    def normal(self) -> torch.Tensor:
        r = self.uniform().neg_().log1p_().mul_(-2.0).sqrt_()      # sqrt(-2 ln(1 - u)), finite: u < 1
        return r.mul_(self.uniform().mul_(2 * math.pi).cos_())

    def integers(self, lo: int, hi: int) -> torch.Tensor:
        return _to_range(self._bits(), lo, hi)

    def signs(self) -> Callable[[], torch.Tensor]:
        return lambda: torch.where(self._bits(stream=0) < 0, -1.0, 1.0)   # default dtype, as on the CPU


#: Streams of the non-finite sprinkle, apart from the families' (numbered from 0 up): its positions (drawn
#: over the sprinkle's own counter) and their kinds (drawn over the position).
_SPRINKLE_POS, _SPRINKLE_KIND = 1 << 32, (1 << 32) + 1


def _fill_on_device(target: torch.Tensor, tc: TensorCase, *, chunk: int | None = None) -> None:
    """Write the values of ``tc`` into ``target`` (any layout, on its own device) with no full-size
    temporary: :data:`CHUNK_NUMEL` elements at a time (``chunk`` overrides), each chunk generated in
    float64 by :class:`_CounterDraws` and cast into place, then the non-finite sprinkle straight into
    ``target``.  An N-D view that cannot be flattened goes through one buffer in its own dtype.

    The families, the clamp and the sprinkle (``max(1, n // 1000)`` positions drawn with replacement)
    are the CPU's; the numbers are others (see :class:`_CounterDraws`)."""
    chunk = chunk or CHUNK_NUMEL
    scratch = None
    if target.dim() == 1:
        flat = target
    elif target.is_contiguous():
        flat = target.view(-1)
    else:
        scratch = torch.empty(target.shape, dtype=target.dtype, device=target.device)
        flat = scratch.view(-1)
    n = flat.numel()
    for start in range(0, n, chunk):
        end = min(n, start + chunk)
        flat[start:end].copy_(_family_values(tc, _CounterDraws(tc.seed, start, end, target.device)))
    if tc.nonfinite and n and target.dtype.is_floating_point:
        specials = torch.tensor(_SPECIALS[tc.nonfinite], dtype=target.dtype, device=target.device)
        k = max(1, n // 1000)
        for start in range(0, k, chunk):
            counter = torch.arange(start, min(k, start + chunk), dtype=torch.int64, device=target.device)
            pos = _to_range(_hash(counter, _stream_key(tc.seed, _SPRINKLE_POS)), 0, n)
            # the kind is a function of the position: a position drawn twice gets one value, in any order
            kinds = _to_range(_hash(pos, _stream_key(tc.seed, _SPRINKLE_KIND)), 0, len(specials))
            flat[pos] = specials[kinds]
    if scratch is not None:
        target.copy_(scratch)


def on_device_workspace_bytes() -> int:
    """Memory the on-device generator holds while it runs (kept by CUDA's caching allocator after)."""
    return _WORKSPACE_CHUNKS * 8 * CHUNK_NUMEL


def _fill(target: torch.Tensor, tc: TensorCase, *, cache: bool = False) -> None:
    """Write the values of ``tc`` (its family, seed, clamp and sprinkle; ``target``'s shape) into ``target``:
    generated on ``target``'s device when it has :data:`ON_DEVICE_MIN_NUMEL` elements or more, else on
    the CPU as always (``cache``: through the one-entry host cache of :func:`_host_values`)."""
    if target.numel() >= ON_DEVICE_MIN_NUMEL:
        _fill_on_device(target, tc)
    else:
        target.copy_(_host_values(tc, tuple(target.shape), target.dtype, cache=cache))


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
                fill: tuple | None = None, storage_offset: bool = True) -> torch.Tensor:
    """Build the tensor described by ``tc`` on ``device`` inside a canary-guarded storage.

    ``fill`` = (before, after) puts other values than the canary in the guard regions before and
    after the tensor's span (None on a side keeps the canary); :func:`guards_intact` then
    checks for those values.  ``storage_offset=False`` starts an ``offset`` layout's view at its
    storage's (aligned) start: same values and strides, no misaligned data pointer."""
    dtype = torch_dtype(tc.dtype)
    strides, offset, span = _layout_strides(tc)
    if not storage_offset:
        span, offset = span - offset, 0
    storage = torch.full((guard + span + guard,), canary_value(dtype), dtype=dtype, device=device)
    if tc.layout == "strided" and span:
        # a slice of a real tensor: the elements the steps skip hold values of the same family
        filler = dataclasses.replace(tc, seed=tc.seed ^ 0x5EED, nonfinite="")
        _fill(storage[guard:guard + span], filler)
    before, after = fill if fill is not None else (None, None)
    before = canary_value(dtype) if before is None else before
    after = canary_value(dtype) if after is None else after
    if fill is not None:
        storage[:guard + offset].fill_(before)
        storage[guard + span:].fill_(after)
    view = storage.as_strided(tc.shape, strides, guard + offset)
    if view.numel():
        if tc.layout == "expanded":
            # values (and any NaN/inf sprinkle) drawn for the size-1 slice, which the view broadcasts
            _fill(view.narrow(tc.layout_param % len(tc.shape), 0, 1), tc)
        else:
            _fill(view, tc, cache=True)
    view._tritondiff_guard = (guard, offset, span, before, after)
    return view


#: Tensors of at least this many elements generated on the CPU keep their values in their dtype
#: for the next build of the same case.
HOST_CACHE_MIN_NUMEL = 1 << 28
_host_cache: dict[tuple[TensorCase, tuple[int, ...]], torch.Tensor] = {}


def _host_values(tc: TensorCase, shape: tuple[int, ...], dtype: torch.dtype, *, cache: bool) -> torch.Tensor:
    """The case's values of ``shape`` in ``dtype`` on the CPU.  One example builds its inputs four times
    (eager, float64, two calls), so with ``cache`` the last large one is kept (one entry); large tensors
    are generated on their device instead (:data:`ON_DEVICE_MIN_NUMEL`): this is for those below that."""
    hit = _host_cache.get((tc, shape)) if cache else None
    if hit is not None:
        return hit
    out = _values(tc, shape).to(dtype)
    if cache and out.numel() >= HOST_CACHE_MIN_NUMEL:
        _host_cache.clear()
        _host_cache[(tc, shape)] = out
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
