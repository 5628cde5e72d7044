"""Hypothesis strategies that draw :class:`~harness.case.Case` objects for a subject.

Dims get deliberate mass on boundaries: 0 and 1, primes, 2^k-1 / 2^k / 2^k+1,
and the neighbourhood of Triton's 1,048,576-element block limit up to ~3x
beyond, under a per-example memory budget.  Every choice is a plain Hypothesis
draw ordered simplest-first, so shrinking walks towards the smallest shape,
float32, a contiguous layout and normal values.
"""
from __future__ import annotations

import math

from hypothesis import assume
from hypothesis import strategies as st

from typing import TYPE_CHECKING, Any

from .api import Constant, DimValue, Subject, TensorSpec, dims_allowed
from .tiers import normal_families
from .case import Case, TensorCase
from .config import config
from .tensors import torch_dtype

if TYPE_CHECKING:
    from .huge import HugePlan

#: Layouts drawn in huge mode (no memory beyond the elements; see harness.huge).
HUGE_LAYOUTS = ("contiguous", "offset")

TRITON_LIMIT = 1 << 20

_PRIMES = (2, 3, 5, 7, 13, 31, 41, 61, 127, 251, 341, 509, 1021, 2039, 4093, 4231, 8191, 65521, 131071)
_SMALL_POW = tuple(v for k in range(1, 17) for v in (2 ** k - 1, 2 ** k, 2 ** k + 1))
_LIMIT_NEIGHBOURHOOD = tuple(sorted({
    TRITON_LIMIT - 1, TRITON_LIMIT, TRITON_LIMIT + 1,
    2 * TRITON_LIMIT - 1, 2 * TRITON_LIMIT, 2 * TRITON_LIMIT + 1,
    3 * TRITON_LIMIT - 1, 3 * TRITON_LIMIT, 1_152_000, 1_500_007, 3_000_000,
}))


def boundary_values(lo: int, hi: int) -> tuple[list[int], list[int], list[int]]:
    """Boundaries inside [lo, hi]: (small, <= 4096), (medium, up to 2^20), (the Triton-limit neighbourhood)."""
    cands = {lo, hi, lo + 1, hi - 1, 0, 1, 2, 3, 4, 8, 9, 16, 17, 41, 64, 127, 128, 129}
    cands.update(_PRIMES, _SMALL_POW)
    cands.update(v for k in range(12, 21) for v in (2 ** k - 1, 2 ** k, 2 ** k + 1))   # looped paths switch here
    limit = set(_LIMIT_NEIGHBOURHOOD)
    limit.update(v for k in range(21, 25) for v in (2 ** k - 1, 2 ** k, 2 ** k + 1))
    inside = sorted(v for v in cands | limit if lo <= v <= hi)
    small = [v for v in inside if v <= 4096]
    medium = [v for v in inside if 4096 < v < TRITON_LIMIT - 1]
    large = [v for v in inside if v >= TRITON_LIMIT - 1]
    return small, medium, large


def dim_strategy(lo: int, hi: int) -> st.SearchStrategy[int]:
    """An int in [lo, hi] with mass on boundaries; shrinks towards the smallest failing int.

    Three equally likely branches: any small int (<= 4096), any int in range,
    the boundaries (one sorted list; the Triton-limit neighbourhood is listed
    twice to draw it more often).  The order is for the shrinker, which tries a
    lower branch with the same drawn number: from the boundaries, the index
    becomes a small int (never a multi-million boundary, ~17 s an example in
    the interpreter, as it did when the boundaries came first and a small int
    was re-read as an index into them); from any int, a value <= 4096 stays
    itself.  Within the boundaries the index shrinks down the sorted list.
    """
    if lo == hi:
        return st.just(lo)
    small, medium, large = boundary_values(lo, hi)
    branches = [st.integers(lo, min(hi, max(lo, 4096)))]
    if hi > 4096:
        branches.append(st.integers(lo, hi))
    branches.append(st.sampled_from(sorted(small + medium + large + large)))
    return st.one_of(*branches)


def _numel_with(spec: TensorSpec, dims: dict[str, int], unknown_default) -> int:
    n = 1
    for d in spec.shape:
        n *= d if isinstance(d, int) else dims.get(d, unknown_default(d))
    return n


def _cap_for(subject: Subject, name: str, lo: int, hi: int, dims: dict[str, int], budget: int) -> int:
    """Largest value of dim ``name`` keeping every input within ``budget`` bytes (others at their minimum)."""
    specs = subject.tensor_inputs()

    def total(v: int) -> int:
        trial = {**dims, name: v}
        out = 0
        for spec in specs.values():
            item = max(torch_dtype(dt).itemsize for dt in _dtypes_of(subject, spec))
            out += item * _numel_with(spec, trial, lambda d: max(subject.dims[d][0], 1))
        return out

    if total(hi) <= budget:
        return hi
    if total(lo) > budget:
        return lo
    a, b = lo, hi                      # total(a) <= budget < total(b)
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if total(mid) <= budget else (a, mid)
    return a


def _dtypes_of(subject: Subject, spec: TensorSpec) -> tuple[str, ...]:
    if spec.dtype_like is not None:
        return subject.inputs[spec.dtype_like].dtypes
    return spec.dtypes


@st.composite
def cases(draw, subject: Subject, max_example_bytes: int | None = None, *, huge: "HugePlan | None" = None,
          normal: bool = False) -> Case:
    """Draw one example for ``subject``.

    ``normal``: values from the declared families that are not at the dtype's edge, never a
    non-finite sprinkle (:mod:`harness.tiers`: the space where a finding is ``wrong``).

    ``huge`` (a :class:`harness.huge.HugePlan`, GPU only): draw the dtype, the size
    dim and the other dims from the plan's combinations (the largest input just past
    2^31 elements), in layouts that cost no extra memory, instead of the declared ranges.
    """
    dims: dict[str, int] = {}
    dtypes: dict[str, str] = {}
    specs = subject.tensor_inputs()
    if huge is not None:
        dtype, size, others = draw(st.sampled_from(huge.pairs), label="huge (dtype, size, other dims)")
        dims.update(others)
        dims[huge.dim] = size
        for key, spec in specs.items():
            if spec.dtype_like is None:
                own = not spec.shape or dtype not in spec.dtypes        # 0-d and integer inputs: their own
                dtypes[key] = draw(st.sampled_from(spec.dtypes)) if own else dtype
    else:
        budget = max_example_bytes or subject.max_example_bytes or config.max_example_bytes
        for name, (lo, hi) in subject.dims.items():
            cap = _cap_for(subject, name, lo, hi, dims, budget)
            dims[name] = draw(dim_strategy(lo, cap), label=f"dim {name}")
        for key, spec in specs.items():
            if spec.dtype_like is None:
                dtypes[key] = draw(st.sampled_from(spec.dtypes))
    assume(dims_allowed(subject, dims))               # where=: dims that relate (heads divisible by KV heads)
    tensors: dict[str, TensorCase] = {}
    for key, spec in specs.items():
        dtype = dtypes[spec.dtype_like] if spec.dtype_like is not None else dtypes[key]
        shape = tuple(d if isinstance(d, int) else dims[d] for d in spec.shape)
        bounds = (dims[spec.low] if isinstance(spec.low, str) else spec.low,
                  dims[spec.high] - 1 if isinstance(spec.high, str) else spec.high)   # an index into that dim
        tensors[key] = draw(_tensor_case(spec, shape, dtype, key in subject.mutates, huge is not None, bounds,
                                         normal))
    scalars = {}
    for key, spec in subject.inputs.items():
        if isinstance(spec, Constant):
            scalars[key] = spec.value
        elif isinstance(spec, DimValue):
            scalars[key] = dims[spec.name]
        elif not isinstance(spec, TensorSpec):
            scalars[key] = draw(spec, label=f"input {key}")
    ordinary = subject.edge(dict(scalars)) if subject.edge is not None else None
    assume(not (normal and ordinary is not None))    # the normal range: no description at the dtype's edge
    return Case(dims, tensors, scalars, ordinary, huge.dim if huge is not None else None)


@st.composite
def _tensor_case(draw, spec: TensorSpec, shape: tuple[int, ...], dtype: str, mutated: bool,
                 huge: bool, bounds: tuple, normal: bool = False) -> TensorCase:
    """Layout, value family, seed and non-finite sprinkle of one tensor input."""
    layouts = [lay for lay in spec.layouts if _layout_fits(lay, shape, mutated)
               and (not huge or lay in HUGE_LAYOUTS)]
    layout = draw(st.sampled_from(layouts or ["contiguous"]))
    param = draw(st.integers(0, 7)) if layout != "contiguous" else 0
    family = draw(st.sampled_from(normal_families(spec.values) if normal else spec.values))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    nonfinite = ""
    if spec.nonfinite and not normal and torch_dtype(dtype).is_floating_point:
        # a minority of examples (1 in 4) sprinkle one kind of non-finite value; shrinks to none
        nonfinite = ("", "", "", "", "", "", "", "", "", "", "", "", "nan", "inf", "-inf", "mixed")[
            draw(st.integers(0, 15))]
        nonfinite = within_bounds(nonfinite, *bounds)
    return TensorCase(shape, dtype, layout, param if layout != "strided" else 2 + param % 2,
                      family, seed, nonfinite, *bounds)


def within_bounds(nonfinite: str, low: Any, high: Any) -> str:
    """The sprinkle ``nonfinite`` kept inside declared bounds: NaN always (any domain's propagation test), an
    infinity only on a side the input has no bound (``low=0.0``: a probability, a sqrt's domain -- never -inf)."""
    bounded_low, bounded_high = low is not None, high is not None
    if nonfinite == "mixed" and (bounded_low or bounded_high):
        return "nan" if bounded_low and bounded_high else ("inf" if bounded_low else "-inf")
    if (nonfinite == "-inf" and bounded_low) or (nonfinite == "inf" and bounded_high):
        return "nan"
    return nonfinite


def _layout_fits(layout: str, shape: tuple[int, ...], mutated: bool) -> bool:
    if layout == "transposed":
        return len(shape) >= 2
    if layout == "expanded":
        return not mutated and len(shape) >= 1 and max(shape, default=0) > 1
    if layout == "strided":
        return len(shape) >= 1
    return True


def example_cost(case: Case) -> int:
    """A size measure used to order failing cases (smaller is simpler)."""
    return case.total_numel() + 10 * sum(math.prod(t.shape[:-1]) if t.shape else 0 for t in case.tensors.values())
