"""The float64 truth of a huge example computed a slice of its size dim at a time.

``runner.float64_reference`` upcasts every input and runs the reference on the whole: layer norm's forward and
backward at 2^31 elements holds ~137 GiB of float64 autograd state, more than an H200 has, so subjects whose
truth is a backward (or any reference with large float64 temporaries) could not run past 2^31.  Most references
separate along the dim huge mode sizes (rows of a row-wise op, tokens of a batch): each output is either the
slices' outputs laid side by side along one of its dims (y and dx of layer norm) or their sum (dw and db, sums
over the rows).  Then :func:`truth` runs the reference on slices of about :data:`CHUNK_ELEMENTS` input
elements, writing each output's slice into its place or adding it into a float64 accumulator: the phase holds
the truth's outputs plus one slice's reference, not the whole float64 computation.

Whether a reference separates is measured, not declared (users' subjects declare nothing of the kind):
:func:`find_split` runs it on a short leading slice of the case's own inputs (about :data:`CHECK_ELEMENTS`),
whole and in three uneven slices, and keeps, output by output, the rule that reproduces the whole run in
float64 (to :data:`RTOL` of its scale); :func:`split_for` does so once per subject, sized dim, dtypes and
other dims.  The dim is the one huge mode sized (``Case.sized``).  A reference that separates no
way -- a softmax or a mean over the sized dim, a max over it, an output whose shape does not follow the
slices -- is run whole, as before; so is one that mutates its inputs or whose inputs describe tensors
(``subject(upcast=...)``).  A sum of slices differs from the whole sum in float64's last bits only: the truth
is still float64, orders of magnitude below the low-precision errors it arbitrates.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from .api import DimValue, Subject, TensorSpec
from .case import Case

#: Sized-input elements from which a case's truth is computed in slices (huge draws only: a normal draw is
#: bounded by ``config.max_example_bytes``, far below).
CHUNKED_FROM = 1 << 30
#: About this many elements of the sized input a slice (whole indices of the size dim).
CHUNK_ELEMENTS = 1 << 26
#: About this many elements of the sized input in the slice :func:`split_for` checks the rules on.
CHECK_ELEMENTS = 1 << 16
#: Relative agreement (of an output's largest finite magnitude, or of the slices' summed magnitudes) a rule
#: must reach on the check to be kept: float64 reorderings move the last few bits, a wrong rule moves whole
#: digits.
RTOL = 1e-9

CAT, SUM, SAME = "cat", "sum", "same"


@dataclasses.dataclass(frozen=True)
class Split:
    """How the truth separates along ``dim``: per output leaf (``torch.utils._pytree`` order), ``(CAT, axis)``
    -- the slices' outputs side by side along ``axis`` --, ``(SUM, -1)`` -- their sum -- or ``(SAME, -1)`` -- a
    value every slice returns alike (a non-tensor)."""

    dim: str
    rules: tuple[tuple[str, int], ...]


_SPLITS: dict[tuple, "Split | None"] = {}


def split_for(subject: Subject, case: Case, kwargs: dict[str, Any], truth_of: Callable[[dict[str, Any]], Any], *,
              at_any_size: bool = False) -> "Split | None":
    """The :class:`Split` of ``case``'s float64 truth along its sized dim, where the case is huge (an input with
    the dim of :data:`CHUNKED_FROM` elements or more; any size with ``at_any_size``) and the reference
    separates; else None.  ``kwargs``: the case's native reference inputs (only a short leading slice of them
    is run here), ``truth_of``: the float64 reference of native inputs.  Checked once per subject, sized dim,
    dtypes and other dims."""
    dim = case.sized
    if dim is None or dim not in case.dims:
        return None
    sized = [v for name, v in kwargs.items() if isinstance(v, torch.Tensor)
             and isinstance(subject.inputs.get(name), TensorSpec) and dim in subject.inputs[name].shape]
    if not sized or (not at_any_size and max(t.numel() for t in sized) < CHUNKED_FROM):
        return None
    key = (subject.name, id(subject.reference), dim, tuple(sorted((k, t.dtype) for k, t in case.tensors.items())),
           tuple(sorted((d, v) for d, v in case.dims.items() if d != dim)))
    if key not in _SPLITS:
        n = case.dims[dim]
        short = min(n, max(3, CHECK_ELEMENTS // max(1, max(t.numel() for t in sized) // max(n, 1))))
        try:
            _SPLITS[key] = find_split(subject, slice_inputs(subject, kwargs, dim, 0, short), dim, short, truth_of)
        except Exception:  # noqa: BLE001 - the reference raises on a slice (or in float64): run it whole
            _SPLITS[key] = None
    return _SPLITS[key]


def separable_inputs(subject: Subject, dim: str) -> bool:
    """Whether ``subject``'s inputs can be sliced along ``dim`` at all: no mutation, no described inputs, and
    ``dim`` at most once in each tensor input's shape (a square input would need its rows and columns cut
    alike)."""
    if subject.mutates or subject.upcast is not None:
        return False
    return all(spec.shape.count(dim) <= 1 for spec in subject.tensor_inputs().values())


def slice_inputs(subject: Subject, kwargs: dict[str, Any], dim: str, start: int, stop: int) -> dict[str, Any]:
    """``kwargs`` with every tensor input that has ``dim`` narrowed to ``[start, stop)`` along it (a view) and a
    ``DimValue`` of ``dim`` set to the slice's length; the other inputs whole."""
    out = {}
    for name, value in kwargs.items():
        spec = subject.inputs.get(name)
        if isinstance(spec, TensorSpec) and dim in spec.shape and isinstance(value, torch.Tensor):
            out[name] = value.narrow(spec.shape.index(dim), start, stop - start)
        elif isinstance(spec, DimValue) and spec.name == dim:
            out[name] = stop - start
        else:
            out[name] = value
    return out


def find_split(subject: Subject, kwargs: dict[str, Any], dim: str, n: int,
               truth_of: Callable[[dict[str, Any]], Any]) -> Split | None:
    """The :class:`Split` along ``dim`` (of size ``n`` in ``kwargs``, at least 3) that reproduces
    ``truth_of(kwargs)`` -- the float64 reference of these native inputs -- from three uneven slices, or None
    where some output follows no rule."""
    if n < 3 or not separable_inputs(subject, dim):
        return None
    whole, spec = pytree.tree_flatten(truth_of(kwargs))
    cuts = sorted({0, max(1, n // 5), max(2, (11 * n) // 20), n})
    parts = []
    for start, stop in zip(cuts, cuts[1:]):
        leaves, part_spec = pytree.tree_flatten(truth_of(slice_inputs(subject, kwargs, dim, start, stop)))
        if part_spec != spec:
            return None
        parts.append((stop - start, leaves))
    rules = []
    for i, w in enumerate(whole):
        rule = _rule(w, [(k, leaves[i]) for k, leaves in parts])
        if rule is None:
            return None
        rules.append(rule)
    return Split(dim, tuple(rules))


def _rule(whole: Any, parts: list[tuple[int, Any]]) -> tuple[str, int] | None:
    if not isinstance(whole, torch.Tensor):
        return (SAME, -1) if all(_same(p, whole) for _, p in parts) else None
    if not all(isinstance(p, torch.Tensor) and p.dtype == whole.dtype for _, p in parts):
        return None
    shapes = [tuple(p.shape) for _, p in parts]
    if all(s == tuple(whole.shape) for s in shapes):
        if whole.dtype == torch.bool:
            return None
        total = sum(p.double() for _, p in parts)
        scale = sum(p.double().abs() for _, p in parts)
        return (SUM, -1) if _close(total, whole.double(), scale) else None
    for axis in range(whole.dim()):
        if all(len(s) == whole.dim() and s[axis] == k and s[:axis] + s[axis + 1:] == whole.shape[:axis]
               + whole.shape[axis + 1:] for (k, _), s in zip(parts, shapes)):
            laid = torch.cat([p for _, p in parts], dim=axis)
            if laid.shape == whole.shape and _close(laid.double(), whole.double(), _scale(whole)):
                return CAT, axis
    return None


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:  # noqa: BLE001 - values without a plain equality (then no rule)
        return False


def _scale(t: torch.Tensor) -> torch.Tensor:
    finite = t.double().abs()
    finite = finite[torch.isfinite(finite)]
    return torch.full_like(t, float(finite.max()) if finite.numel() else 1.0, dtype=torch.float64)


def _close(got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor) -> bool:
    same_special = ((torch.isnan(got) & torch.isnan(want)) | (torch.isinf(want) & (got == want)))
    finite = torch.isfinite(want) & torch.isfinite(got)
    within = (got - want).abs() <= RTOL * scale + 1e-300
    return bool(((finite & within) | same_special).all())


def slice_length(subject: Subject, kwargs: dict[str, Any], dim: str, n: int, chunk_elements: int | None = None
                 ) -> int:
    """Indices of ``dim`` a slice takes: about ``chunk_elements`` elements of the largest input that has it."""
    per_index = max((value.numel() // max(n, 1) for name, value in kwargs.items()
                     if isinstance(value, torch.Tensor) and isinstance(subject.inputs.get(name), TensorSpec)
                     and dim in subject.inputs[name].shape), default=1)
    return max(1, (chunk_elements or CHUNK_ELEMENTS) // max(per_index, 1))


def truth(subject: Subject, kwargs: dict[str, Any], split: Split, n: int,
          truth_of: Callable[[dict[str, Any]], Any], chunk_elements: int | None = None) -> Any:
    """The float64 truth of ``kwargs`` (native inputs, ``split.dim`` of size ``n``) computed slice by slice:
    laid-side-by-side outputs written into place in a tensor of the whole's shape, summed ones accumulated in
    float64 and cast back to the reference's dtype (a float64 reference's is float64 already)."""
    step = slice_length(subject, kwargs, split.dim, n, chunk_elements)
    acc: list[Any] = []
    dtypes: list[Any] = []
    spec = None
    for start in range(0, n, step):
        stop = min(n, start + step)
        leaves, spec = pytree.tree_flatten(truth_of(slice_inputs(subject, kwargs, split.dim, start, stop)))
        if not acc:
            acc = [_allocate(leaf, rule, n) for leaf, rule in zip(leaves, split.rules)]
            dtypes = [getattr(leaf, "dtype", None) for leaf in leaves]
        for i, (leaf, (rule, axis)) in enumerate(zip(leaves, split.rules)):
            if rule == CAT:
                acc[i].narrow(axis, start, stop - start).copy_(leaf)
            elif rule == SUM:
                acc[i] += leaf.to(acc[i].dtype)
        del leaves
    out = [a.to(dtype) if rule == SUM else a for a, (rule, _), dtype in zip(acc, split.rules, dtypes)]
    return pytree.tree_unflatten(out, spec)


def _allocate(leaf: Any, rule: tuple[str, int], n: int) -> Any:
    kind, axis = rule
    if kind == CAT:
        shape = list(leaf.shape)
        shape[axis] = n
        return torch.empty(shape, dtype=leaf.dtype, device=leaf.device)
    if kind == SUM:
        return torch.zeros(leaf.shape, dtype=torch.float64 if leaf.dtype.is_floating_point else leaf.dtype,
                           device=leaf.device)
    return leaf
