"""Elementwise ops: arithmetic, comparisons, math functions, casts, where, clamp, activations.

Type promotion follows torch (``torch._prims_common.elementwise_dtypes``): inputs are cast
to the computation dtype (fp16/bf16 compute in fp32), the result is cast back.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch

from ..exc import Unsupported
from ..ir import Pointwise
from .registry import register_lowering
from ..ops import ops
from .common import Kind, broadcast_shapes, check_dtype, elementwise, expand_loader, is_ir, promote

aten = torch.ops.aten
prims = torch.ops.prims


def _unary(targets, op: str, kind: Kind, int_identity: bool = False):
    def lowering(x, *args, **kwargs):
        if args or kwargs:
            raise Unsupported(f"{op} with extra arguments")
        if int_identity and not x.get_dtype().is_floating_point:
            return x
        return elementwise(lambda v: getattr(ops, op)(v), x, kind=kind)
    register_lowering(*targets)(lowering)


_unary([aten.exp, prims.exp], "exp", Kind.INT_TO_FLOAT)
_unary([aten.exp2, prims.exp2], "exp2", Kind.INT_TO_FLOAT)
_unary([aten.expm1, prims.expm1], "expm1", Kind.INT_TO_FLOAT)
_unary([aten.log, prims.log], "log", Kind.INT_TO_FLOAT)
_unary([aten.log2, prims.log2], "log2", Kind.INT_TO_FLOAT)
_unary([aten.log1p, prims.log1p], "log1p", Kind.INT_TO_FLOAT)
_unary([aten.sqrt, prims.sqrt], "sqrt", Kind.INT_TO_FLOAT)
_unary([aten.rsqrt, prims.rsqrt], "rsqrt", Kind.INT_TO_FLOAT)
_unary([aten.sin, prims.sin], "sin", Kind.INT_TO_FLOAT)
_unary([aten.cos, prims.cos], "cos", Kind.INT_TO_FLOAT)
_unary([aten.tan, prims.tan], "tan", Kind.INT_TO_FLOAT)
_unary([aten.tanh, prims.tanh], "tanh", Kind.INT_TO_FLOAT)
_unary([aten.erf, prims.erf], "erf", Kind.INT_TO_FLOAT)
_unary([aten.sigmoid], "sigmoid", Kind.INT_TO_FLOAT)
_unary([aten.reciprocal, prims.reciprocal], "reciprocal", Kind.INT_TO_FLOAT)
_unary([aten.abs, prims.abs], "abs", Kind.DEFAULT)
_unary([aten.neg, prims.neg], "neg", Kind.DEFAULT)
_unary([aten.floor, prims.floor], "floor", Kind.DEFAULT, int_identity=True)
_unary([aten.ceil, prims.ceil], "ceil", Kind.DEFAULT, int_identity=True)
_unary([aten.trunc, prims.trunc], "trunc", Kind.DEFAULT, int_identity=True)
_unary([aten.bitwise_not, prims.bitwise_not], "bitwise_not", Kind.DEFAULT)
_unary([aten.isnan], "isnan", Kind.ALWAYS_BOOL)
_unary([aten.isinf], "isinf", Kind.ALWAYS_BOOL)
_unary([aten.logical_not], "logical_not", Kind.ALWAYS_BOOL)


@register_lowering(aten.round.default, prims.round.default)
def round_(x):
    if not x.get_dtype().is_floating_point:
        return x
    return elementwise(ops.round, x)


@register_lowering(aten.sign.default, prims.sign.default)
def sign(x):
    if x.get_dtype() == torch.bool:
        return x
    return elementwise(ops.sign, x)


@register_lowering(aten.log10.default, prims.log10.default)
def log10(x):
    compute, _ = promote([x], Kind.INT_TO_FLOAT)
    return elementwise(lambda v: ops.mul(ops.log(v), ops.constant(1.0 / math.log(10.0), compute)), x,
                       kind=Kind.INT_TO_FLOAT)


@register_lowering(aten.sinh.default, prims.sinh.default)
def sinh(x):
    compute, _ = promote([x], Kind.INT_TO_FLOAT)
    half = lambda: ops.constant(0.5, compute)  # noqa: E731
    return elementwise(lambda v: ops.mul(ops.sub(ops.expm1(v), ops.expm1(ops.neg(v))), half()), x,
                       kind=Kind.INT_TO_FLOAT)


@register_lowering(aten.cosh.default, prims.cosh.default)
def cosh(x):
    compute, _ = promote([x], Kind.INT_TO_FLOAT)
    return elementwise(lambda v: ops.mul(ops.add(ops.exp(v), ops.exp(ops.neg(v))), ops.constant(0.5, compute)), x,
                       kind=Kind.INT_TO_FLOAT)


@register_lowering(aten.isfinite.default)
def isfinite(x):
    if not x.get_dtype().is_floating_point:
        return elementwise(lambda v: ops.eq(v, v), x, kind=Kind.ALWAYS_BOOL)
    return elementwise(lambda v: ops.logical_not(ops.logical_or(ops.isnan(v), ops.isinf(v))), x,
                       kind=Kind.ALWAYS_BOOL)


@register_lowering(aten.relu.default)
def relu(x):
    if x.get_dtype() == torch.bool:
        raise Unsupported("relu of bool")
    compute, _ = promote([x], Kind.DEFAULT)
    return elementwise(lambda v: ops.maximum(v, ops.constant(0, compute)), x)


# ----------------------------------------------------------------------------- binary ops

def _binary(targets, op: str, kind: Kind):
    def lowering(a, b, *, out: Optional[Any] = None):
        return elementwise(getattr(ops, op), a, b, kind=kind)
    register_lowering(*targets)(lowering)


_binary([aten.mul.Tensor, aten.mul.Scalar, prims.mul.default], "mul", Kind.DEFAULT)
_binary([aten.maximum.default, prims.maximum.default], "maximum", Kind.DEFAULT)
_binary([aten.minimum.default, prims.minimum.default], "minimum", Kind.DEFAULT)


def _integer_modulo(targets, op: str):
    """Integer fmod / remainder only.  Triton's float ``%`` compiles on NVIDIA GPUs to the
    inexact a - b*trunc(a/b) (fmod(1e10, 3) came out 255 off on an H100) while the interpreter
    uses numpy's exact fmod; exact float fmod needs libdevice, which the interpreter cannot
    run.  So floating operands stay with ATen (an extern), correct in both modes."""
    def lowering(a, b, *, out: Optional[Any] = None):
        if promote([a, b], Kind.DEFAULT)[0].is_floating_point:
            raise Unsupported(f"floating-point {op}: no exact Triton lowering without libdevice")
        return elementwise(getattr(ops, op), a, b, kind=Kind.DEFAULT)
    register_lowering(*targets)(lowering)


_integer_modulo([aten.fmod.Tensor, aten.fmod.Scalar, prims.fmod.default], "fmod")
_integer_modulo([aten.remainder.Tensor, aten.remainder.Scalar, prims.remainder.default], "remainder")
_binary([aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, prims.bitwise_and.default], "bitwise_and", Kind.DEFAULT)
_binary([aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, prims.bitwise_or.default], "bitwise_or", Kind.DEFAULT)
_binary([aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, prims.bitwise_xor.default], "bitwise_xor", Kind.DEFAULT)
_binary([aten.eq.Tensor, aten.eq.Scalar, prims.eq.default], "eq", Kind.ALWAYS_BOOL)
_binary([aten.ne.Tensor, aten.ne.Scalar, prims.ne.default], "ne", Kind.ALWAYS_BOOL)
_binary([aten.lt.Tensor, aten.lt.Scalar, prims.lt.default], "lt", Kind.ALWAYS_BOOL)
_binary([aten.le.Tensor, aten.le.Scalar, prims.le.default], "le", Kind.ALWAYS_BOOL)
_binary([aten.gt.Tensor, aten.gt.Scalar, prims.gt.default], "gt", Kind.ALWAYS_BOOL)
_binary([aten.ge.Tensor, aten.ge.Scalar, prims.ge.default], "ge", Kind.ALWAYS_BOOL)
def _logical(targets, op: str):
    def lowering(a, b):
        as_bool = lambda v: ops.to_dtype(v, torch.bool)  # noqa: E731  (any dtype: nonzero is true)
        return elementwise(lambda x, y: getattr(ops, op)(as_bool(x), as_bool(y)), a, b, kind=Kind.ALWAYS_BOOL)
    register_lowering(*targets)(lowering)


_logical([aten.logical_and.default], "logical_and")
_logical([aten.logical_or.default], "logical_or")
_logical([aten.logical_xor.default], "logical_xor")


def _nan_ignoring(pick):
    """Like maximum / minimum, but a NaN loses to a number (NaN only when both are NaN)."""
    def lowering(a, b):
        compute, _ = promote([a, b], Kind.DEFAULT)

        def fn(x, y):
            if not compute.is_floating_point:
                return pick(x, y)
            return ops.where(ops.isnan(x), y, ops.where(ops.isnan(y), x, pick(x, y)))
        return elementwise(fn, a, b)
    return lowering


register_lowering(aten.fmax.default)(_nan_ignoring(ops.maximum))
register_lowering(aten.fmin.default)(_nan_ignoring(ops.minimum))


def _check_int_div(a, b):
    for v in (a, b):
        if is_ir(v) and v.get_dtype() == torch.bool:
            raise Unsupported("integer division of bools")


@register_lowering(aten.add.Tensor, aten.add.Scalar, prims.add.default)
def add(a, b, *, alpha: Any = 1):
    if alpha == 1:
        return elementwise(ops.add, a, b)
    return elementwise(lambda x, y, al: ops.add(x, ops.mul(y, al)), a, b, alpha)


@register_lowering(aten.sub.Tensor, aten.sub.Scalar, prims.sub.default)
def sub(a, b, *, alpha: Any = 1):
    for v in (a, b):
        if is_ir(v) and v.get_dtype() == torch.bool:
            raise Unsupported("subtraction of bools")
    if alpha == 1:
        return elementwise(ops.sub, a, b)
    return elementwise(lambda x, y, al: ops.sub(x, ops.mul(y, al)), a, b, alpha)


@register_lowering(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(a, b, *, alpha: Any = 1):
    return sub(b, a, alpha=alpha)


@register_lowering(aten.div.Tensor, aten.div.Scalar, aten.true_divide.Tensor)
def div(a, b):
    return elementwise(ops.truediv, a, b, kind=Kind.INT_TO_FLOAT)


@register_lowering(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a, b, *, rounding_mode: Optional[str] = None):
    if rounding_mode is None:
        return div(a, b)
    compute, _ = promote([a, b], Kind.DEFAULT)
    if compute.is_floating_point:
        if rounding_mode == "trunc":
            return elementwise(lambda x, y: ops.trunc(ops.truediv(x, y)), a, b)
        return elementwise(ops.floordiv, a, b)
    _check_int_div(a, b)
    return elementwise(ops.truncdiv if rounding_mode == "trunc" else ops.floordiv, a, b)


@register_lowering(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(a, b):
    return div_mode(a, b, rounding_mode="floor")


@register_lowering(prims.div.default)
def prims_div(a, b):
    compute, _ = promote([a, b], Kind.DEFAULT)
    if compute.is_floating_point:
        return elementwise(ops.truediv, a, b)
    _check_int_div(a, b)
    return elementwise(ops.truncdiv, a, b)


@register_lowering(aten.pow.Tensor_Scalar, prims.pow.default)
def pow_(x, exponent):
    """Scalar exponents with exact or accurate forms; anything else falls back to ATen."""
    if not is_ir(x) or is_ir(exponent) or not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
        raise Unsupported("pow with a tensor exponent or scalar base")
    compute, result = promote([x, exponent], Kind.DEFAULT)
    e = float(exponent)
    if e == 0.0:
        return elementwise(lambda v: ops.constant(1, compute), x, compute_dtype=compute, result_dtype=result)
    if e == 0.5 and compute.is_floating_point:
        return elementwise(ops.sqrt, x, compute_dtype=compute, result_dtype=result)
    if e == -0.5 and compute.is_floating_point:
        return elementwise(ops.rsqrt, x, compute_dtype=compute, result_dtype=result)
    if e.is_integer() and 1 <= abs(e) <= 16 and (e > 0 or compute.is_floating_point):
        n = int(abs(e))

        def power(v):
            out, base, k = None, v, n
            while k:
                if k & 1:
                    out = base if out is None else ops.mul(out, base)
                k >>= 1
                if k:
                    base = ops.mul(base, base)
            return ops.reciprocal(out) if e < 0 else out
        return elementwise(power, x, compute_dtype=compute, result_dtype=result)
    raise Unsupported(f"pow with exponent {exponent}")


@register_lowering(aten.where.self, prims.where.default, aten.where.ScalarSelf, aten.where.ScalarOther,
                   aten.where.Scalar)
def where(cond, a, b):
    if not is_ir(cond) or cond.get_dtype() != torch.bool:
        raise Unsupported("where with a non-bool condition")
    if not (is_ir(a) or is_ir(b)):
        raise Unsupported("where with two scalars")
    _, dtype = promote([a, b], Kind.NO_OPMATH)
    return _where(cond, a, b, dtype)


def _where(cond, a, b, dtype: torch.dtype):
    tensors = [t for t in (cond, a, b) if is_ir(t)]
    size = broadcast_shapes(*[t.get_size() for t in tensors])
    lc = expand_loader(cond, size)
    la = expand_loader(a, size) if is_ir(a) else None
    lb = expand_loader(b, size) if is_ir(b) else None

    def inner(index):
        x = ops.to_dtype(la(index), dtype) if la else ops.constant(a, dtype)
        y = ops.to_dtype(lb(index), dtype) if lb else ops.constant(b, dtype)
        return ops.where(lc(index), x, y)
    return Pointwise.create(inner, size, dtype)


@register_lowering(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(x, mask, value):
    if is_ir(value):
        if value.ndim != 0:
            raise Unsupported("masked_fill with a non-scalar tensor value")
    return _where(mask, value, x, x.get_dtype())


def _clamp_value(x, lo, hi):
    operands = [x] + [v for v in (lo, hi) if v is not None]
    compute, result = promote(operands, Kind.DEFAULT)
    args = [x]
    if lo is not None:
        args.append(lo)
    if hi is not None:
        args.append(hi)

    def fn(v, *bounds):
        bounds = list(bounds)
        if lo is not None:
            v = ops.maximum(v, bounds.pop(0))
        if hi is not None:
            v = ops.minimum(v, bounds.pop(0))
        return v
    return elementwise(fn, *args, compute_dtype=compute, result_dtype=result)


@register_lowering(aten.clamp.default, aten.clamp.Tensor, aten.clip.default)
def clamp(x, min: Any = None, max: Any = None):
    if min is None and max is None:
        raise Unsupported("clamp without bounds")
    if x.get_dtype() == torch.bool:
        raise Unsupported("clamp of bool")
    return _clamp_value(x, min, max)


@register_lowering(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x, min):
    return clamp(x, min=min)


@register_lowering(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x, max):
    return clamp(x, max=max)


@register_lowering(aten.hardtanh.default)
def hardtanh(x, min_val: float = -1.0, max_val: float = 1.0):
    return clamp(x, min_val, max_val)


@register_lowering(aten.sigmoid_backward.default)
def sigmoid_backward(grad, y):
    compute, _ = promote([grad, y], Kind.DEFAULT)
    return elementwise(lambda g, s: ops.mul(g, ops.mul(s, ops.sub(ops.constant(1, compute), s))), grad, y)


@register_lowering(aten.tanh_backward.default)
def tanh_backward(grad, y):
    compute, _ = promote([grad, y], Kind.DEFAULT)
    return elementwise(lambda g, t: ops.mul(g, ops.sub(ops.constant(1, compute), ops.mul(t, t))), grad, y)


@register_lowering(aten.threshold_backward.default)
def threshold_backward(grad, x, threshold):
    compute, result = promote([grad, x], Kind.DEFAULT)
    return elementwise(lambda g, v, t: ops.where(ops.le(v, t), ops.constant(0, compute), g), grad, x, threshold,
                       compute_dtype=compute, result_dtype=result)


# ------------------------------------------------------------------------------- casts

@register_lowering(prims.convert_element_type.default)
def convert_element_type(x, dtype: torch.dtype):
    check_dtype(dtype)
    if x.get_dtype() == dtype:
        return x
    return elementwise(lambda v: v, x, compute_dtype=x.get_dtype(), result_dtype=dtype)


@register_lowering(aten._to_copy.default)
def to_copy(x, *, dtype: Optional[torch.dtype] = None, layout: Any = None, device: Any = None,
            pin_memory: Any = None, non_blocking: bool = False, memory_format: Any = None):
    if device is not None and torch.device(device).type != _kernel_device_type():
        raise Unsupported("_to_copy across devices")
    if layout not in (None, torch.strided):
        raise Unsupported("_to_copy to a non-strided layout")
    if dtype is None or dtype == x.get_dtype():
        return x
    return convert_element_type(x, dtype)


def _kernel_device_type() -> str:
    from tritondiff.base import device
    return device.torch_device().type


@register_lowering(aten.copy.default)
def copy(dst, src, non_blocking: bool = False):
    """Functional copy: ``src`` broadcast to ``dst``'s shape, in ``dst``'s dtype."""
    if not is_ir(src):
        raise Unsupported("copy from a scalar")
    check_dtype(dst.get_dtype(), src.get_dtype())
    load = expand_loader(src, dst.get_size())
    dtype = dst.get_dtype()
    return Pointwise.create(lambda index: ops.to_dtype(load(index), dtype), dst.get_size(), dtype)
