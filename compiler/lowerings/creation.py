"""Tensors made from nothing: full, scalar_tensor, iota, arange, empty (as zeros), fill."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import sympy
import torch

from ..exc import Unsupported
from ..ir import Pointwise
from .registry import register_lowering
from ..ops import ops
from .common import check_dtype, is_ir

aten = torch.ops.aten
prims = torch.ops.prims


def _check_device(device: Any) -> None:
    from tritondiff.base import device as _device
    if device is not None and torch.device(device).type != _device.torch_device().type:
        raise Unsupported(f"tensor created on {device}, kernels run on {_device.torch_device()}")


def _default_dtype(value: Any) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    return torch.get_default_dtype()


def full(size: Sequence[int], value: Any, dtype: Optional[torch.dtype] = None):
    if isinstance(value, complex):
        raise Unsupported("complex fill value")
    dtype = dtype or _default_dtype(value)
    check_dtype(dtype)
    if dtype == torch.bool:
        value = bool(value)
    elif not dtype.is_floating_point:
        if isinstance(value, float) and not math.isfinite(value):
            raise Unsupported("non-finite fill of an integer tensor")
        value = int(value)
    return Pointwise.create(lambda index: ops.constant(value, dtype), [int(s) for s in size], dtype)


@register_lowering(aten.full.default)
def full_(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    _check_device(device)
    return full(size, fill_value, dtype)


@register_lowering(aten.full_like.default)
def full_like(x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    _check_device(device)
    return full(x.get_size(), fill_value, dtype or x.get_dtype())


@register_lowering(aten.scalar_tensor.default)
def scalar_tensor(value, *, dtype=None, layout=None, device=None, pin_memory=None):
    _check_device(device)
    return full([], value, dtype or torch.get_default_dtype())


@register_lowering(aten.zeros.default, aten.empty.memory_format, aten.new_zeros.default, aten.new_empty.default)
def zeros(*args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    size = args[-1] if args and not is_ir(args[-1]) else []
    if args and is_ir(args[0]):  # new_zeros / new_empty(self, size)
        dtype = dtype or args[0].get_dtype()
    _check_device(device)
    return full(size, 0, dtype or torch.get_default_dtype())


@register_lowering(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    _check_device(device)
    return full(size, 0, dtype or torch.get_default_dtype())


@register_lowering(aten.ones.default)
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    _check_device(device)
    return full(size, 1, dtype or torch.get_default_dtype())


@register_lowering(aten.zeros_like.default, aten.empty_like.default)
def zeros_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    _check_device(device)
    return full(x.get_size(), 0, dtype or x.get_dtype())


@register_lowering(aten.ones_like.default)
def ones_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    _check_device(device)
    return full(x.get_size(), 1, dtype or x.get_dtype())


@register_lowering(aten.fill.Scalar)
def fill(x, value):
    return full(x.get_size(), value, x.get_dtype())


@register_lowering(prims.iota.default)
def iota(length, *, start, step, dtype, device, requires_grad):
    _check_device(device)
    check_dtype(dtype)
    if dtype.is_floating_point or dtype == torch.bool:
        raise Unsupported("iota of a non-integer dtype")

    def inner_fn(index):
        return ops.index_expr(start + step * sympy.sympify(index[0]), dtype)
    return Pointwise.create(inner_fn, [int(length)], dtype)


@register_lowering(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    _check_device(device)
    nums = list(args) + [None] * (3 - len(args))
    if len(args) == 1:
        start, end, step = 0, args[0], 1
    else:
        start, end, step = nums[0], nums[1], nums[2] if nums[2] is not None else 1
    if any(isinstance(v, float) for v in (start, end, step)):
        dtype = dtype or torch.get_default_dtype()
    else:
        dtype = dtype or torch.int64
    check_dtype(dtype)
    if step == 0:
        raise Unsupported("arange step 0 (torch raises)")
    length = math.ceil((end - start) / step)
    length = max(int(length), 0)
    if not dtype.is_floating_point:
        if all(isinstance(v, int) for v in (start, step)):
            return Pointwise.create(lambda index: ops.index_expr(start + step * sympy.sympify(index[0]), dtype),
                                    [length], dtype)
        raise Unsupported("integer arange with float bounds")

    def inner_fn(index):
        i = ops.index_expr(index[0], torch.float64)
        value = ops.add(ops.mul(i, ops.constant(float(step), torch.float64)), ops.constant(float(start), torch.float64))
        return ops.to_dtype(value, dtype)
    return Pointwise.create(inner_fn, [length], dtype)
