"""Ops that read or add at data-dependent positions: advanced indexing, embedding, index_select, gather, and
their backward, index_put / scatter_add with accumulation.

A gather becomes one Pointwise node whose body loads the index tensor and reads the input at the position it
holds (``ops.indirect_indexing``), so it fuses with what computes its index and with what consumes its rows,
where ATen would launch a kernel of its own and write the gathered rows out.  An accumulating put becomes one
``ir.Scatter`` (atomic adds).  Indices out of range raise in the eager evaluator; a kernel reads 0 at them and
adds nothing there, and reports them through ``tl.device_assert`` where Triton runs device asserts.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import torch

from ..exc import Unsupported
from ..ir import Pointwise, Scatter
from ..ops import ops
from .common import broadcast_shapes, check_dtype, expand_loader, is_ir, normalize_dim
from .registry import register_lowering

aten = torch.ops.aten

_INDEX_DTYPES = (torch.int64, torch.int32)


def _check_index(index: Any, op: str) -> None:
    if not is_ir(index):
        raise Unsupported(f"{op} with an index that is not a tensor")
    if index.get_dtype() in (torch.bool, torch.uint8):
        raise Unsupported(f"{op} with a boolean mask: the output's shape depends on the data")
    if index.get_dtype() not in _INDEX_DTYPES:
        raise Unsupported(f"{op} with an index of dtype {index.get_dtype()}")


def _gathered(x: Any, out: Sequence[int], position: Callable[[tuple], tuple]) -> Any:
    """out[o] = x[position(o)], ``position`` giving each of x's dims an index (a symbol of ``o`` or of data)."""
    if not is_ir(x) or x.ndim == 0:
        raise Unsupported("indexing a non-tensor or a 0-d tensor")
    check_dtype(x.get_dtype())
    load_x = x.make_loader()
    return Pointwise.create(lambda o: load_x(position(tuple(o))), tuple(out), x.get_dtype())


def _take(load_index: Callable[[tuple], Any], at: tuple, size: int):
    """The data-dependent index ``load_index(at)`` into a dim of ``size``."""
    return ops.indirect_indexing(load_index(at), size)


def _advanced(x: Any, indices: Sequence[Optional[Any]], op: str) -> tuple[list, Callable[[tuple], tuple]]:
    """numpy's advanced indexing of ``x`` by tensor ``indices``: the indexed view's shape (the indexed dims
    replaced by the indices' broadcast shape, in place when they are adjacent, in front otherwise) and the
    position in ``x`` of each of its elements."""
    if not is_ir(x) or x.ndim == 0:
        raise Unsupported(f"{op} of a non-tensor or a 0-d tensor")
    indices = list(indices)
    if len(indices) > x.ndim:
        raise Unsupported(f"{op} of a {x.ndim}-d tensor with {len(indices)} indices")
    picked = [(d, t) for d, t in enumerate(indices) if t is not None]
    if not picked:
        raise Unsupported(f"{op} without a tensor index")
    for _, t in picked:
        _check_index(t, op)
    shape = broadcast_shapes(*[t.get_size() for _, t in picked])
    dims = [d for d, _ in picked]
    sizes = tuple(x.get_size())
    start = dims[0] if dims == list(range(dims[0], dims[-1] + 1)) else 0
    out = [sizes[d] for d in range(x.ndim) if d not in dims]
    out[start:start] = shape
    loaders = {d: expand_loader(t, shape) for d, t in picked}

    def position(o: tuple) -> tuple:
        b = o[start:start + len(shape)]
        rest = iter(o[:start] + o[start + len(shape):])
        return tuple(_take(loaders[d], b, sizes[d]) if d in loaders else next(rest) for d in range(x.ndim))
    return out, position


@register_lowering(aten.index.Tensor)
def index(x, indices: Sequence[Optional[Any]]):
    """``x[indices]`` with tensor indices."""
    out, position = _advanced(x, indices, "index")
    return _gathered(x, out, position)


if hasattr(aten, "_unsafe_index"):
    register_lowering(aten._unsafe_index.Tensor)(index)


@register_lowering(aten.embedding.default)
def embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq: bool = False, sparse: bool = False):
    """``weight[indices]``: padding_idx and the gradient options concern the backward only."""
    if not is_ir(weight) or weight.ndim != 2:
        raise Unsupported("embedding of a table that is not 2-d")
    return index(weight, [indices])


@register_lowering(aten.index_select.default)
def index_select(x, dim: int, index_):
    _check_index(index_, "index_select")
    if index_.ndim > 1:
        raise Unsupported("index_select with an index of more than one dim")
    if x.ndim == 0:
        raise Unsupported("index_select of a 0-d tensor")
    dim = normalize_dim(dim, x.ndim)
    load_index = index_.make_loader()
    n = index_.get_numel()
    sizes = tuple(x.get_size())
    out = list(sizes)
    out[dim] = n

    def position(o: tuple) -> tuple:
        at = (o[dim],) if index_.ndim else ()
        return o[:dim] + (_take(load_index, at, sizes[dim]),) + o[dim + 1:]
    return _gathered(x, out, position)


@register_lowering(aten.gather.default)
def gather(x, dim: int, index_, sparse_grad: bool = False):
    """out[o] = x[o with o[dim] = index[o]]: the output has the index's shape."""
    _check_index(index_, "gather")
    if x.ndim == 0 or index_.ndim != x.ndim:
        raise Unsupported("gather with an index of another rank than the input's")
    dim = normalize_dim(dim, x.ndim)
    sizes, isizes = tuple(x.get_size()), tuple(index_.get_size())
    if any(i > s for d, (i, s) in enumerate(zip(isizes, sizes)) if d != dim):
        raise Unsupported("gather with an index larger than the input outside dim")
    load_index = index_.make_loader()

    def position(o: tuple) -> tuple:
        return o[:dim] + (_take(load_index, o, sizes[dim]),) + o[dim + 1:]
    return _gathered(x, isizes, position)


@register_lowering(aten.index_put.default)
def index_put(x, indices: Sequence[Optional[Any]], values, accumulate: bool = False):
    """``x`` with ``values`` added at ``x[indices]`` (``accumulate=True``: duplicates sum; the backward of a
    gather, an embedding's included) as a scatter: atomic adds, in float32 for float16 / bfloat16 values and
    rounded once, as ATen's CUDA kernel sums duplicates.  Without ``accumulate`` which of duplicate indices
    wins is unspecified on CUDA: left to ATen."""
    if not accumulate:
        raise Unsupported("index_put without accumulate: which of duplicate indices wins is unspecified on CUDA")
    out, position = _advanced(x, indices, "index_put")
    if not is_ir(values) or values.get_dtype() != x.get_dtype():
        raise Unsupported("index_put with values of another dtype")
    return _accumulated(x, out, position, expand_loader(values, out), "index_put")


def scatter_add(x: Any, dim: int, index: Any, src: Any) -> Any:
    """``x`` with ``src[p]`` added at ``p`` with ``dim`` replaced by ``index[p]``, for every position ``p`` of
    ``index``, as a scatter (``lowerings.structured`` takes a short index as a pointwise node instead)."""
    _check_index(index, "scatter_add")
    if not is_ir(x) or not is_ir(src) or x.ndim == 0 or index.ndim != x.ndim or src.ndim != x.ndim \
            or src.get_dtype() != x.get_dtype():
        raise Unsupported("scatter_add with an index or source of another rank, or a source of another dtype")
    dim = normalize_dim(dim, x.ndim)
    sizes, isizes = tuple(x.get_size()), tuple(index.get_size())
    if any(i > s for d, (i, s) in enumerate(zip(isizes, sizes)) if d != dim) or \
            any(i > s for i, s in zip(isizes, src.get_size())):
        raise Unsupported("scatter_add with an index larger than the input outside dim, or than the source")
    load_index = index.make_loader()

    def position(p: tuple) -> tuple:
        return p[:dim] + (_take(load_index, p, sizes[dim]),) + p[dim + 1:]
    return _accumulated(x, isizes, position, src.make_loader(), "scatter_add")


def _accumulated(x: Any, domain: Sequence[int], position: Callable[[tuple], tuple], load_values: Callable,
                 op: str) -> Any:
    """``x`` plus ``load_values(p)`` at ``position(p)`` for every ``p`` of ``domain``: one ``ir.Scatter``, in float32
    for float16 / bfloat16 and rounded once."""
    dtype = x.get_dtype()
    if not (dtype.is_floating_point or dtype == torch.int32) or dtype == torch.float64:
        raise Unsupported(f"{op} of {dtype}: no atomic add lowered for it")
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    load_x = x.make_loader()
    added = Scatter.create(lambda p: ops.to_dtype(load_values(p), acc), domain, position,
                           lambda o: ops.to_dtype(load_x(o), acc), x.get_size(), acc)
    if acc == dtype:
        return added
    load = added.make_loader()
    return Pointwise.create(lambda o: ops.to_dtype(load(o), dtype), x.get_size(), dtype)


__all__ = ["index", "embedding", "index_select", "gather", "index_put", "scatter_add"]
