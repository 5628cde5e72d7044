"""Reductions: sum, prod, amax/amin, max/min with indices, argmax/argmin, any/all, mean, var/std.

Each becomes a ``Reduction`` node over the reduced dims (flattened into the reduction
ranges, in order).  ``mean`` is a sum then a division; ``var`` is two passes (mean, then
the sums of squared and of plain deviations, for the corrected two-pass algorithm), which the
scheduler fuses into one kernel with two phases.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ..exc import Unsupported
from ..ir import IRNode, Pointwise, Reduction
from .registry import register_lowering
from ..ops import accumulator_dtype, ops
from .common import check_dtype, normalize_dims, numel
from .views import squeeze

aten = torch.ops.aten
prims = torch.ops.prims


def reduce(x: IRNode, dims: Any, keepdim: bool, reduction_type: str, *, dtype: Optional[torch.dtype] = None,
           src_dtype: Optional[torch.dtype] = None, acc_dtype: Optional[torch.dtype] = None, value_fn=None):
    """A Reduction of ``x`` over ``dims``; ``value_fn(value, full_index)`` may transform elements."""
    check_dtype(x.get_dtype())
    size = list(x.get_size())
    ndim = len(size)
    dims = normalize_dims(dims, ndim)
    kept = [d for d in range(ndim) if d not in dims]
    ranges = [1 if d in dims else size[d] for d in range(ndim)] if keepdim else [size[d] for d in kept]
    rranges = [size[d] for d in dims]
    load = x.make_loader()
    src = src_dtype or x.get_dtype()

    def inner_fn(index, rindex):
        full: list = [None] * ndim
        for pos, d in enumerate(kept):
            full[d] = index[d] if keepdim else index[pos]
        for pos, d in enumerate(dims):
            full[d] = rindex[pos]
        value = ops.to_dtype(load(tuple(full)), src)
        return value_fn(value, full) if value_fn else value
    return Reduction.create(inner_fn, ranges, rranges, reduction_type, src, dtype=dtype, acc_dtype=acc_dtype)


def _no_complex(x: IRNode) -> None:
    if x.get_dtype().is_complex:
        raise Unsupported("complex reduction")


@register_lowering(aten.sum.dim_IntList, aten.sum.default)
def sum_(x, dim: Any = None, keepdim: bool = False, *, dtype: Optional[torch.dtype] = None):
    _no_complex(x)
    src = dtype or x.get_dtype()
    if dtype is None and (src == torch.bool or not src.is_floating_point):
        out = torch.int64
    else:
        out = src
    return reduce(x, dim, keepdim, "sum", dtype=out, src_dtype=src)


@register_lowering(prims.sum.default)
def prims_sum(x, dims: Sequence[int], *, output_dtype: Optional[torch.dtype] = None):
    if not dims:
        raise Unsupported("prims.sum over no dims")
    return reduce(x, dims, False, "sum", dtype=output_dtype or x.get_dtype())


@register_lowering(aten.prod.default, aten.prod.dim_int)
def prod(x, dim: Any = None, keepdim: bool = False, *, dtype: Optional[torch.dtype] = None):
    _no_complex(x)
    src = dtype or x.get_dtype()
    out = torch.int64 if dtype is None and (src == torch.bool or not src.is_floating_point) else src
    product = reduce(x, dim, keepdim, "prod", dtype=out, src_dtype=src)
    if not out.is_floating_point:
        return product
    # A zero factor among finite ones makes the product exactly +-0, but the order a reduction multiplies in
    # may overflow a partial product to inf first (inf * 0 = NaN): the zero is found apart, with the sign.
    load = x.make_loader()

    def any_of(test) -> IRNode:
        flags = Pointwise.create(lambda i: test(ops.to_dtype(load(i), src)), x.get_size(), torch.bool)
        return reduce(flags, dim, keepdim, "any", dtype=torch.bool, src_dtype=torch.bool)
    zero = any_of(lambda v: ops.eq(v, ops.constant(0, src))).make_loader()
    nonfinite = any_of(lambda v: ops.logical_or(ops.isnan(v), ops.isinf(v))).make_loader()
    sign = reduce(x, dim, keepdim, "prod", dtype=out, src_dtype=src, value_fn=lambda v, _: ops.where(
        ops.lt(v, ops.constant(0, src)), ops.constant(-1, src), ops.constant(1, src))).make_loader()
    load_product = product.make_loader()

    def exact(i):
        signed_zero = ops.mul(sign(i), ops.constant(0, out))
        return ops.where(ops.logical_and(zero(i), ops.logical_not(nonfinite(i))), signed_zero, load_product(i))
    return Pointwise.create(exact, product.get_size(), out)


@register_lowering(aten.amax.default, prims.amax.default)
def amax(x, dim: Any = (), keepdim: bool = False, **kwargs: Any):
    _empty_check(x, dim)
    return reduce(x, dim, keepdim, "max", dtype=x.get_dtype())


@register_lowering(aten.amin.default, prims.amin.default)
def amin(x, dim: Any = (), keepdim: bool = False, **kwargs: Any):
    _empty_check(x, dim)
    return reduce(x, dim, keepdim, "min", dtype=x.get_dtype())


def _empty_check(x: IRNode, dim: Any) -> None:
    dims = normalize_dims(dim, x.ndim)
    if x.get_numel() == 0 or any(x.get_size()[d] == 0 for d in dims):
        raise Unsupported("max/min over an empty axis (torch raises)")


@register_lowering(aten.max.default)
def max_all(x):
    _empty_check(x, None)
    return reduce(x, None, False, "max", dtype=x.get_dtype())


@register_lowering(aten.min.default)
def min_all(x):
    _empty_check(x, None)
    return reduce(x, None, False, "min", dtype=x.get_dtype())


@register_lowering(aten.argmax.default)
def argmax(x, dim: Optional[int] = None, keepdim: bool = False):
    return _arg(x, dim, keepdim, "argmax")


@register_lowering(aten.argmin.default)
def argmin(x, dim: Optional[int] = None, keepdim: bool = False):
    return _arg(x, dim, keepdim, "argmin")


def _arg(x: IRNode, dim: Optional[int], keepdim: bool, rtype: str):
    if x.get_dtype() == torch.bool:
        raise Unsupported(f"{rtype} of bool")
    _empty_check(x, dim)
    if dim is None:
        out = reduce(x, None, False, rtype)
        if keepdim:
            from .views import view
            return view(out, [1] * x.ndim)
        return out
    if x.ndim == 0:
        return reduce(x, [], keepdim, rtype)
    return reduce(x, [dim], keepdim, rtype)


@register_lowering(aten.max.dim)
def max_dim(x, dim: int, keepdim: bool = False):
    return amax(x, [dim], keepdim), argmax(x, dim, keepdim)


@register_lowering(aten.min.dim)
def min_dim(x, dim: int, keepdim: bool = False):
    return amin(x, [dim], keepdim), argmin(x, dim, keepdim)


def _any_all(x, dim: Any, keepdim: bool, rtype: str):
    _no_complex(x)
    out_dtype = torch.uint8 if x.get_dtype() == torch.uint8 else torch.bool
    return reduce(x, dim, keepdim, rtype, dtype=out_dtype, src_dtype=torch.bool)


@register_lowering(aten.any.default, aten.any.dim, aten.any.dims)
def any_(x, dim: Any = None, keepdim: bool = False):
    return _any_all(x, dim, keepdim, "any")


@register_lowering(aten.all.default, aten.all.dim, aten.all.dims)
def all_(x, dim: Any = None, keepdim: bool = False):
    return _any_all(x, dim, keepdim, "all")


@register_lowering(aten.mean.dim, aten.mean.default)
def mean(x, dim: Any = None, keepdim: bool = False, *, dtype: Optional[torch.dtype] = None):
    _no_complex(x)
    src = dtype or x.get_dtype()
    if not src.is_floating_point:
        raise Unsupported("mean of an integer tensor (torch raises)")
    acc = accumulator_dtype("sum", src)
    dims = normalize_dims(dim, x.ndim)
    count = numel([x.get_size()[d] for d in dims])
    total = reduce(x, dim, keepdim, "sum", dtype=acc, src_dtype=src)
    load = total.make_loader()
    return Pointwise.create(lambda index: ops.to_dtype(ops.truediv(load(index), ops.constant(float(count), acc)), src),
                            total.get_size(), src)


def variance(x: IRNode, dims: Any, correction: float, keepdim: bool, *, with_mean: bool = False):
    """Shifted, corrected two-pass variance (and mean): with s = the slice's first element (0 if not
    finite), m = s + sum(x - s)/N, d = x - m, c = sum(d) (0 if not finite),

        mean = m + c/N,    var = max(sum(d^2) - c * (c/N), 0) / max(N - correction, 0).

    The shift makes constant slices exact (mean = s, var = 0: layer norm then returns the bias,
    as float64 eager does) and keeps a large common offset out of the float32 sum.  The
    correction c (the corrected two-pass algorithm of Chan, Golub and LeVeque) takes the first
    pass's rounding out of the mean and the variance: m alone errs by a few ulps of the
    accumulated sum, and layer-norm dx with dy at a large offset amplifies that error by the
    offset (rows of 31 and 100: largest error 2.5-2.9x eager's; with c, at most 1.06x).  c sums in the same pass as the
    squares, so it reads nothing more."""
    _no_complex(x)
    dtype = x.get_dtype()
    if not dtype.is_floating_point:
        raise Unsupported("var of an integer tensor (torch raises)")
    acc = accumulator_dtype("sum", dtype)
    dims = normalize_dims(dims, x.ndim)
    count = numel([x.get_size()[d] for d in dims])
    ndim = x.ndim
    load_x = x.make_loader()

    def finite(v):
        return ops.eq(ops.sub(v, v), ops.constant(0.0, acc))     # inf - inf and NaN are not 0

    def shift(full):
        if count == 0:
            return ops.constant(0.0, acc)
        s = ops.to_dtype(load_x(tuple(0 if d in dims else full[d] for d in range(ndim))), acc)
        return ops.where(finite(s), s, ops.constant(0.0, acc))

    total = reduce(x, dims, True, "sum", dtype=acc, src_dtype=acc,
                   value_fn=lambda value, full: ops.sub(value, shift(full)))
    load_total = total.make_loader()

    def mean_at(full):
        index = tuple(0 if d in dims else full[d] for d in range(ndim))
        return ops.add(shift(full), ops.truediv(load_total(index), ops.constant(float(max(count, 1)), acc)))

    def centered_square(value, full):
        diff = ops.sub(value, mean_at(full))
        return ops.mul(diff, diff)
    squares = reduce(x, dims, True, "sum", dtype=acc, src_dtype=acc, value_fn=centered_square)
    deviations = reduce(x, dims, True, "sum", dtype=acc, src_dtype=acc,
                        value_fn=lambda value, full: ops.sub(value, mean_at(full)))
    load_sq, load_dev = squares.make_loader(), deviations.make_loader()
    n = float(max(count, 1))

    def dev_mean(index):
        # c/N, or 0 where c is not finite (a slice holding inf or NaN, or one whose deviations overflow):
        # there the first pass's mean and sum of squares stand as they are
        c = ops.truediv(load_dev(index), ops.constant(n, acc))
        return ops.where(finite(c), c, ops.constant(0.0, acc))

    def corrected_squares(index):
        # c * (c/N) <= sum(d^2) in exact arithmetic (Cauchy-Schwarz); rounding may take the difference a
        # hair below 0 on a (near-)constant slice: clamped, with NaN kept.  Where sum(d^2) overflowed,
        # c * (c/N) may overflow too (inf - inf): the sum of squares stands as it is (inf, as eager's)
        sq, cn = load_sq(index), dev_mean(index)
        v = ops.sub(sq, ops.mul(ops.mul(cn, ops.constant(n, acc)), cn))
        v = ops.where(ops.lt(v, ops.constant(0.0, acc)), ops.constant(0.0, acc), v)
        return ops.where(finite(sq), v, sq)
    denom = float(max(count - correction, 0))
    var = Pointwise.create(
        lambda index: ops.to_dtype(ops.truediv(corrected_squares(index), ops.constant(denom, acc)), dtype),
        squares.get_size(), dtype)
    mean_ = Pointwise.create(
        lambda index: ops.to_dtype(ops.add(mean_at(index), dev_mean(index)) if count
                                   else ops.truediv(load_total(index), ops.constant(0.0, acc)),
                                   dtype), total.get_size(), dtype) if with_mean else None
    if not keepdim:
        var = squeeze(var, dims) if dims else var
        mean_ = squeeze(mean_, dims) if (mean_ is not None and dims) else mean_
    return (var, mean_) if with_mean else var


def _correction(correction: Any, unbiased: Any = None) -> float:
    if correction is not None:
        return float(correction)
    if unbiased is not None:
        return 1.0 if unbiased else 0.0
    return 1.0


@register_lowering(aten.var.correction)
def var(x, dim: Any = None, *, correction: Any = None, keepdim: bool = False):
    return variance(x, dim, _correction(correction), keepdim)


@register_lowering(aten.var.dim)
def var_dim(x, dim: Any = None, unbiased: bool = True, keepdim: bool = False):
    return variance(x, dim, _correction(None, unbiased), keepdim)


@register_lowering(aten.var_mean.correction)
def var_mean(x, dim: Any = None, *, correction: Any = None, keepdim: bool = False):
    return variance(x, dim, _correction(correction), keepdim, with_mean=True)


@register_lowering(prims.var.default)
def prims_var(x, dims: Sequence[int], correction: float = 1.0, *, output_dtype: Optional[torch.dtype] = None):
    if not dims:
        raise Unsupported("prims.var over no dims")
    if output_dtype is not None and output_dtype != x.get_dtype():
        raise Unsupported("prims.var with another output dtype")
    return variance(x, dims, float(correction), False)


@register_lowering(aten.std.correction)
def std(x, dim: Any = None, *, correction: Any = None, keepdim: bool = False):
    v = variance(x, dim, _correction(correction), keepdim)
    load = v.make_loader()
    dtype = v.get_dtype()
    acc = accumulator_dtype("sum", dtype)
    return Pointwise.create(lambda index: ops.to_dtype(ops.sqrt(ops.to_dtype(load(index), acc)), dtype),
                            v.get_size(), dtype)
