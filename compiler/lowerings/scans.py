"""Prefix sums: ``cumsum`` as one scan node (``ir.Scan``) over the input's values, any producer recomputed inside.

The scanned dim is moved last (the scan reads through a permuted index, and the result is permuted back as a
view); float16 / bfloat16 values are summed in float32 and each prefix rounded once, integers and bools in int64,
as torch does.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..exc import Unsupported
from ..ir import Pointwise, Scan
from ..ops import ops
from .common import check_dtype, is_ir, normalize_dim
from .registry import register_lowering
from .views import permute

aten = torch.ops.aten


@register_lowering(aten.cumsum.default)
def cumsum(x, dim: int, dtype: Optional[torch.dtype] = None):
    if not is_ir(x):
        raise Unsupported("cumsum of a non-tensor")
    out_dtype = dtype or (torch.int64 if not (x.get_dtype().is_floating_point or x.get_dtype().is_complex)
                          else x.get_dtype())
    check_dtype(x.get_dtype(), out_dtype)
    if x.ndim == 0:
        return Pointwise.create(lambda o: ops.to_dtype(x.make_loader()(o), out_dtype), (), out_dtype)
    dim = normalize_dim(dim, x.ndim)
    acc = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    order = [d for d in range(x.ndim) if d != dim] + [dim]
    moved = permute(x, order) if dim != x.ndim - 1 else x
    load = moved.make_loader()
    scanned = Scan.create(lambda i: ops.to_dtype(load(i), acc), moved.get_size(), acc)
    if acc != out_dtype:
        cast = scanned.make_loader()
        scanned = Pointwise.create(lambda i: ops.to_dtype(cast(i), out_dtype), moved.get_size(), out_dtype)
    if dim == x.ndim - 1:
        return scanned
    back = [order.index(d) for d in range(x.ndim)]
    return permute(scanned, back)


__all__ = ["cumsum"]
