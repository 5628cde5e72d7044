"""The Triton interpretation of ``ops``: each op emits one CSE'd line of Triton source.

Values are ``CSEVar`` (a name and a torch dtype).  Operands of an op share one dtype (the
lowering guarantees it), so dtype tracking is local.  Semantics that differ between
Triton's defaults and torch (NaN in max/min, Python floor division and modulo, rounding)
go through the prelude's ``_td_*`` helpers.
"""
from __future__ import annotations

from typing import Any, Callable

import sympy
import torch

from .. import indexing
from ..counters import counters
from ..exc import CodegenError
from ..ops import BINARY_OPS, UNARY_OPS
from .kernel import CSEVar, TritonKernel, cast_source
from .prelude import tl_dtype


class TritonOps:
    """``ops`` handler writing into ``kernel``."""

    def __init__(self, kernel: TritonKernel):
        self.k = kernel

    def _var(self, expr: str, dtype: torch.dtype) -> CSEVar:
        return self.k.newvar(expr, dtype)

    # ---- memory and structure
    def load(self, name, index):
        return self.k.load(name, index)

    def store(self, name, index, value):
        self.k.store(name, index, value)

    def constant(self, value, dtype):
        return self._var(self.k.full(self.k.scalar_shape, value, dtype), dtype)

    def index_expr(self, expr, dtype):
        simplified = indexing.simplify(sympy.sympify(expr), self.k.bounds())
        if simplified.is_Integer:
            return self.constant(int(simplified), dtype)
        src, symbols = self.k.index_source(simplified)
        if self.k.in_reduction_loop and any(s.name == "rindex" for s in symbols):
            counters["loop_local_iota"] += 1  # an iota over the reduced axis, from the loop-local rindex
        return self._var(f"({src}).to({tl_dtype(dtype)})", dtype)

    def indirect_indexing(self, value, size):
        """``indN``: ``value`` with negative entries counted from ``size``.  Loads at it are masked by its
        in-range condition (an index out of range, which eager rejects, reads 0, never outside the buffer) and
        ``tl.device_assert`` reports it where Triton runs device asserts (TRITON_DEBUG=1)."""
        if value.dtype.is_floating_point or value.dtype == torch.bool:
            raise CodegenError(f"a data-dependent index of dtype {value.dtype}: only integer tensors index")
        if value.dtype != torch.int64 and self.k.int64:
            value = self.to_dtype(value, torch.int64)
        v, before = value.name, len(self.k.lines)
        wrapped = self.k.newvar(f"tl.where({v} < 0, {v} + {int(size)}, {v})", value.dtype, prefix="ind")
        if len(self.k.lines) > before:              # a new index, not the same one again
            inside = self.k.newvar(f"(0 <= {wrapped.name}) & ({wrapped.name} < {int(size)})", torch.bool)
            self.k.index_checks[wrapped.name] = inside.name
            lanes = " | ".join([inside.name] + [f"~({m})" for m in self.k.mask_stack])  # lanes a mask leaves out
            self.k.emit(f'tl.device_assert({lanes}, "index out of bounds: expected -{int(size)} <= index < '
                        f'{int(size)}")')
        return indexing.index_symbol(wrapped.name)

    def to_dtype(self, x, dtype):
        if x.dtype == dtype:
            return x
        return self._var(cast_source(x, dtype), dtype)

    def masked(self, mask, body: Callable[[], Any], other):
        self.k.mask_stack.append(mask.name)
        try:
            value = body()
        finally:
            self.k.mask_stack.pop()
        fill = self.constant(other, value.dtype)
        return self._var(f"tl.where({mask.name}, {value.name}, {fill.name})", value.dtype)

    def where(self, cond, a, b):
        return self._var(f"tl.where({cond.name}, {a.name}, {b.name})", a.dtype)

    def reduction(self, reduction_type, value, acc_dtype):
        raise CodegenError("reductions are emitted by the reduction strategies, not through ops.reduction")

    # ---- unary
    def _unary(self, template: str, x: CSEVar, dtype: Any = None) -> CSEVar:
        return self._var(template.format(x=x.name), dtype or x.dtype)

    def abs(self, x):
        return x if x.dtype == torch.bool else self._unary("tl.abs({x})", x)

    def neg(self, x):
        return self._unary("-{x}", x)

    def exp(self, x): return self._unary("tl.exp({x})", x)
    def exp2(self, x): return self._unary("tl.exp2({x})", x)
    def expm1(self, x): return self._unary("_td_expm1({x})", x)
    def log(self, x): return self._unary("tl.log({x})", x)
    def log2(self, x): return self._unary("tl.log2({x})", x)
    def log1p(self, x): return self._unary("_td_log1p({x})", x)
    def sqrt(self, x): return self._unary("tl.sqrt({x})", x)
    def rsqrt(self, x): return self._unary("tl.rsqrt({x})", x)
    def sin(self, x): return self._unary("tl.sin({x})", x)
    def cos(self, x): return self._unary("tl.cos({x})", x)
    def tan(self, x): return self._unary("(tl.sin({x}) / tl.cos({x}))", x)
    def tanh(self, x): return self._unary("_td_tanh({x})", x)
    def erf(self, x): return self._unary("tl.erf({x})", x)
    def sigmoid(self, x): return self._unary("tl.sigmoid({x})", x)
    def floor(self, x): return self._unary("tl.floor({x})", x)
    def ceil(self, x): return self._unary("tl.ceil({x})", x)
    def trunc(self, x): return self._unary("tl.where({x} < 0, tl.ceil({x}), tl.floor({x}))", x)
    def round(self, x): return self._unary("_td_round({x})", x)

    def sign(self, x):
        t = tl_dtype(x.dtype)
        return self._unary(f"(({{x}} > 0).to({t}) - ({{x}} < 0).to({t}))", x)

    def reciprocal(self, x):
        one = self.constant(1, x.dtype)
        return self._var(f"{one.name} / {x.name}", x.dtype)

    def isnan(self, x):
        return self._unary("({x} != {x})", x, torch.bool)

    def isinf(self, x):
        if not x.dtype.is_floating_point:
            return self.constant(False, torch.bool)
        return self._unary('(tl.abs({x}) == float("inf"))', x, torch.bool)

    def logical_not(self, x):
        return self._unary("({x} == 0)", x, torch.bool)

    def bitwise_not(self, x):
        if x.dtype == torch.bool:
            return self.logical_not(x)
        return self._unary("(~{x})", x)

    # ---- binary
    def _binary(self, template: str, a: CSEVar, b: CSEVar, dtype: Any = None) -> CSEVar:
        if a.dtype != b.dtype:
            raise CodegenError(f"binary op on {a.dtype} and {b.dtype}: the lowering must cast operands first")
        return self._var(template.format(a=a.name, b=b.name), dtype or a.dtype)

    def add(self, a, b):
        return self._binary("{a} | {b}" if a.dtype == torch.bool else "{a} + {b}", a, b)

    def sub(self, a, b): return self._binary("{a} - {b}", a, b)

    def mul(self, a, b):
        return self._binary("{a} & {b}" if a.dtype == torch.bool else "{a} * {b}", a, b)

    def truediv(self, a, b): return self._binary("{a} / {b}", a, b)

    def floordiv(self, a, b):
        if a.dtype.is_floating_point:
            return self._binary("_td_floordiv_float({a}, {b})", a, b)
        return self._binary("_td_floordiv_int({a}, {b})", a, b)

    def truncdiv(self, a, b): return self._binary("{a} // {b}", a, b)

    def remainder(self, a, b):
        if a.dtype.is_floating_point:
            return self._binary("_td_remainder_float({a}, {b})", a, b)
        return self._binary("_td_remainder_int({a}, {b})", a, b)

    def fmod(self, a, b): return self._binary("{a} % {b}", a, b)
    def maximum(self, a, b): return self._binary("_td_maximum({a}, {b})", a, b)
    def minimum(self, a, b): return self._binary("_td_minimum({a}, {b})", a, b)
    def eq(self, a, b): return self._binary("{a} == {b}", a, b, torch.bool)
    def ne(self, a, b): return self._binary("{a} != {b}", a, b, torch.bool)
    def lt(self, a, b): return self._binary("{a} < {b}", a, b, torch.bool)
    def le(self, a, b): return self._binary("{a} <= {b}", a, b, torch.bool)
    def gt(self, a, b): return self._binary("{a} > {b}", a, b, torch.bool)
    def ge(self, a, b): return self._binary("{a} >= {b}", a, b, torch.bool)
    def logical_and(self, a, b): return self._binary("{a} & {b}", a, b, torch.bool)
    def logical_or(self, a, b): return self._binary("{a} | {b}", a, b, torch.bool)
    def logical_xor(self, a, b): return self._binary("{a} ^ {b}", a, b, torch.bool)
    def bitwise_and(self, a, b): return self._binary("{a} & {b}", a, b)
    def bitwise_or(self, a, b): return self._binary("{a} | {b}", a, b)
    def bitwise_xor(self, a, b): return self._binary("{a} ^ {b}", a, b)


def _check_complete() -> None:
    missing = [n for n in UNARY_OPS + BINARY_OPS if not hasattr(TritonOps, n)]
    if missing:
        raise AssertionError(f"TritonOps misses {missing}")


_check_complete()
__all__ = ["TritonOps"]
