"""Shared pieces of lowerings: dtype promotion, broadcasting, building Pointwise nodes."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Kind
from torch._prims_common import elementwise_dtypes

from ..exc import Unsupported
from ..ir import IRNode, Pointwise
from ..ops import ops

Scalar = (bool, int, float)
SUPPORTED_DTYPES = frozenset({torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                              torch.float16, torch.bfloat16, torch.float32, torch.float64})

__all__ = ["Kind", "is_ir", "check_dtype", "promote", "broadcast_shapes", "expand_loader", "elementwise",
           "pointwise_from", "normalize_dim", "normalize_dims", "numel", "cast"]


def is_ir(x: Any) -> bool:
    return isinstance(x, IRNode)


def check_dtype(*dtypes: torch.dtype) -> None:
    for dtype in dtypes:
        if dtype not in SUPPORTED_DTYPES:
            raise Unsupported(f"dtype {dtype} is not lowered")


def promote(args: Sequence[Any], kind: Kind) -> tuple[torch.dtype, torch.dtype]:
    """(computation dtype, result dtype) of an elementwise op over ``args``, torch's rules."""
    items = []
    for a in args:
        if is_ir(a):
            items.append(torch.empty([1] * a.ndim, dtype=a.get_dtype(), device="meta"))
        elif isinstance(a, Scalar):
            items.append(a)
        else:
            raise Unsupported(f"argument of type {type(a).__name__} in an elementwise op")
    compute, result = elementwise_dtypes(*items, type_promotion_kind=kind)
    check_dtype(compute, result)
    return compute, result


def broadcast_shapes(*sizes: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(torch.broadcast_shapes(*[torch.Size(s) for s in sizes]))
    except RuntimeError as e:
        raise Unsupported(str(e)) from e


def expand_loader(x: IRNode, size: Sequence[int]) -> Callable:
    """Loader of ``x`` broadcast (numpy rules) to ``size``."""
    inner = x.make_loader()
    xsize = x.get_size()
    lead = len(size) - len(xsize)
    if lead < 0:
        raise Unsupported(f"cannot broadcast {list(xsize)} to {list(size)}")

    def loader(index):
        sub = []
        for k, s in enumerate(xsize):
            sub.append(0 if s == 1 and size[lead + k] != 1 else index[lead + k])
        return inner(tuple(sub))
    return loader


def cast(value: Any, dtype: torch.dtype) -> Any:
    return ops.to_dtype(value, dtype)


def elementwise(fn: Callable[..., Any], *args: Any, kind: Kind = Kind.DEFAULT,
                compute_dtype: Optional[torch.dtype] = None, result_dtype: Optional[torch.dtype] = None):
    """A Pointwise applying ``fn`` (over ops values) to broadcast ``args`` (IR or Python scalars).

    Inputs are cast to the computation dtype before ``fn``; the result is cast to the result
    dtype after (fp16 math runs in fp32, like torch's opmath).
    """
    tensors = [a for a in args if is_ir(a)]
    if not tensors:
        raise Unsupported("elementwise op without tensor arguments")
    for t in tensors:
        check_dtype(t.get_dtype())
    compute, result = promote(args, kind)
    compute = compute_dtype or compute
    result = result_dtype or result
    size = broadcast_shapes(*[t.get_size() for t in tensors])
    loaders = [expand_loader(a, size) if is_ir(a) else None for a in args]

    def inner_fn(index):
        values = []
        for a, load in zip(args, loaders):
            values.append(ops.constant(a, compute) if load is None else ops.to_dtype(load(index), compute))
        return ops.to_dtype(fn(*values), result)
    return Pointwise.create(inner_fn, size, result)


def pointwise_from(x: IRNode, fn: Callable[[Any], Any], dtype: torch.dtype):
    """A Pointwise with ``x``'s shape: ``out[i] = fn(x[i])``."""
    load = x.make_loader()
    return Pointwise.create(lambda index: fn(load(index)), x.get_size(), dtype)


def normalize_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise Unsupported(f"dim {dim} out of range for a {ndim}-d tensor")
    return dim % n


def normalize_dims(dims: Any, ndim: int) -> list[int]:
    """Reduction dims as a sorted list; None or [] means every dim."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    out = sorted({normalize_dim(d, ndim) for d in dims})
    return [d for d in out if d < ndim]


def numel(size: Sequence[int]) -> int:
    n = 1
    for s in size:
        n *= s
    return n
