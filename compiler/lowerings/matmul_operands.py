"""What the GEMM template reads for an operand: hoisted row / column scales and cast prologues.

The mm / bmm / addmm lowering (``lowerings.matmul``) asks ``read_operands`` what the template
should read for A and B.  Each operand's value is first *captured*: evaluated once at symbolic
indices into an expression tree over the buffers it reads, pointwise producers inlined (up to
``MAX_NODES`` ops; a body that is larger or calls ``ops.load`` itself is left as it is).  Then:

Scale hoisting (mm and bmm).  When A is a float32 product ``P(z, i, k) * s(z, i)`` whose factor
``s`` does not depend on the K index, ``(A @ B)[z, i, j] = s(z, i) * (P @ B)[z, i, j]``: the
template multiplies P, and the output is scaled by a pointwise node built here -- a consumer of
the template's output that the scheduler then fuses into it as an epilogue
(``templates.epilogue``).  Likewise ``B = P(z, k, j) * t(z, j)`` scales columns.  Factors are split
off while the rest is such a product (``(x * s1) * s2``).  Legality (``why_not_hoisted``, a reason
when it says no): both sides are the same sum of the same products in real arithmetic, so for a
finite ``s`` they differ by float32 rounding only (a few ulps of the result, as much as the GEMM's
summation order moves it) and NaN / inf propagate alike (s = 0 against an inf in P or B gives NaN
both ways).  An infinite ``s`` does not: eager's ``inf * 0`` makes a NaN where P is 0, the hoisted
product an inf -- and a consumer tells them apart (``sigmoid(inf) = 1``, ``sigmoid(NaN) = NaN``).  So a factor is hoisted only when ``bounds`` (a small interval analysis) shows it is
never +-inf -- as for a norm's ``rsqrt(mean(x * x) + eps)`` with eps > 0, whatever x holds; a
factor that is a plain input, or ``rsqrt(mean(x * x))``, stays in the operand.  addmm is not
rewritten: its bias is added after the product, so a row scale does not commute with it.

Cast prologue.  When what is left of an operand is ``to_dtype(load(src), float32)`` of a float16 /
bfloat16 buffer at an affine storage offset, the template reads ``src`` through that layout (a
``StridedView``) and widens each tile in the K loop (exact: every fp16 / bf16 value is an fp32
value).  The fp32 copy is never materialised.

Counters: ``gemm_template.hoisted_scale.rows`` / ``.columns`` (one per factor split off),
``gemm_template.hoisted_scale.refused_infinite`` (a K-invariant factor kept: it may be +-inf) and
``gemm_template.cast_prologue`` (one per operand read narrow).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional, Sequence

import sympy
import torch

from .. import indexing
from ..analysis import Read
from ..counters import counters
from ..ir import Buffer, ComputedBuffer, IRNode, Layout, Pointwise, Reduction, StridedView, realize, use_resolver
from ..ops import BOOL_RESULT_OPS, ops, use_handler

MAX_NODES = 64  # captured ops per operand; past it the operand is realized as it is
NARROW = (torch.float16, torch.bfloat16)


# ------------------------------------------------------------------------------ capture

@dataclasses.dataclass(frozen=True)
class Expr:
    """One op of a captured body: ``op(*args)`` with its result dtype; ``op == "read"``: args = (Read,).

    Equal trees compute the same value (``x * x`` is recognised as a square).
    """

    op: str
    args: tuple
    dtype: Optional[torch.dtype]


class _NotCaptured(Exception):
    """The body is too large or does something a captured expression cannot replay."""


class _CaptureOps:
    """Builds ``Expr`` trees; casts to the dtype a value already has are dropped (as in dumps)."""

    def __init__(self):
        self.count = 0

    def _node(self, op: str, args: tuple, dtype: Optional[torch.dtype]) -> Expr:
        self.count += 1
        if self.count > MAX_NODES:
            raise _NotCaptured(f"more than {MAX_NODES} ops")
        return Expr(op, args, dtype)

    def load(self, name, index):
        raise _NotCaptured("a direct ops.load")

    def store(self, name, index, value):
        raise _NotCaptured("a store")

    def reduction(self, reduction_type, value, acc_dtype):
        raise _NotCaptured("a reduction")

    def indirect_indexing(self, value, size):
        raise _NotCaptured("a data-dependent index")

    def constant(self, value, dtype):
        return self._node("constant", (value, dtype), dtype)

    def index_expr(self, expr, dtype):
        return self._node("index_expr", (expr, dtype), dtype)

    def to_dtype(self, x, dtype):
        return x if x.dtype == dtype else self._node("to_dtype", (x, dtype), dtype)

    def masked(self, mask, body, other):
        value = body()
        return self._node("masked", (mask, value, other), value.dtype)

    def where(self, cond, a, b):
        return self._node("where", (cond, a, b), a.dtype)

    def __getattr__(self, name: str) -> Callable:  # every unary and binary op of the protocol
        if name.startswith("_"):
            raise AttributeError(name)

        def op(*args):
            return self._node(name, args, torch.bool if name in BOOL_RESULT_OPS else args[0].dtype)
        return op


class _CaptureResolver:
    """Pointwise producers are inlined; every other buffer read becomes a ``read`` leaf."""

    def __init__(self, handler: _CaptureOps):
        self.handler = handler

    def load(self, buffer: Buffer, index: tuple):
        if _pointwise(buffer):
            return buffer.data.inner_fn(index)
        return self.handler._node("read", (Read(buffer, index=tuple(index)),), buffer.get_dtype())

    def load_storage(self, buffer: Buffer, offset: sympy.Expr):
        if _pointwise(buffer):
            return buffer.data.inner_fn(indexing.delinearize(offset, buffer.layout.size))
        return self.handler._node("read", (Read(buffer, offset=offset),), buffer.get_dtype())


def _pointwise(buffer: Buffer) -> bool:
    return isinstance(buffer, ComputedBuffer) and isinstance(buffer.data, Pointwise)


def capture(x: IRNode, index: Sequence[sympy.Expr]) -> Optional[Expr]:
    """``x``'s value at ``index`` as an expression tree, or None when it cannot be captured."""
    return _capture(lambda: x.make_loader()(tuple(index)))


def _capture(body: Callable[[], Any]) -> Optional[Expr]:
    handler = _CaptureOps()
    try:
        with use_handler(handler), use_resolver(_CaptureResolver(handler)):
            return body()
    except _NotCaptured:
        return None


def replay(e: Expr, subst: dict) -> Any:
    """``e`` under the installed ``ops`` handler and resolver, its index symbols replaced by ``subst``."""
    def sub(v: Any) -> Any:
        return sympy.sympify(v).xreplace(subst)
    if e.op == "read":
        (read,) = e.args
        if read.index is not None:
            return read.buffer.make_loader()(tuple(sub(i) for i in read.index))
        return read.buffer.load_storage(sub(read.offset))
    if e.op == "masked":
        mask, body, other = e.args
        return ops.masked(replay(mask, subst), lambda: replay(body, subst), other)
    if e.op == "index_expr":
        return ops.index_expr(sub(e.args[0]), e.args[1])
    args = tuple(replay(a, subst) if isinstance(a, Expr) else a for a in e.args)
    return getattr(ops, e.op)(*args)


def depends_on(e: Expr, symbol: sympy.Symbol) -> bool:
    """Whether any read or index expression in ``e`` involves ``symbol``."""
    if e.op == "read":
        (read,) = e.args
        exprs = read.index if read.index is not None else (read.offset,)
        return any(symbol in sympy.sympify(i).free_symbols for i in exprs)
    if e.op == "index_expr":
        return symbol in sympy.sympify(e.args[0]).free_symbols
    return any(depends_on(a, symbol) for a in e.args if isinstance(a, Expr))


# ------------------------------------------------------------------------------ bounds

FINITE = 1e38  # below float32's largest value (3.4e38) by more than any rounding of the analysis
_ANY = (-math.inf, math.inf)


def _mul_end(a: float, b: float) -> float:
    return 0.0 if a == 0.0 or b == 0.0 else a * b  # 0 * inf: the value is 0 or NaN, and NaN is harmless


def _product(a: tuple, b: tuple) -> tuple:
    ends = [_mul_end(x, y) for x in a for y in b]
    return min(ends), max(ends)


def _read_bounds(read: Read) -> tuple:
    """A sum / max / min reduction's bounds from its body's; any other stored value: unbounded."""
    buffer = read.buffer
    if not (isinstance(buffer, ComputedBuffer) and isinstance(buffer.data, Reduction)):
        return _ANY
    data = buffer.data
    if data.reduction_type not in ("sum", "max", "min"):
        return _ANY
    index, rindex = _symbols("rd", len(data.ranges)), _symbols("rr", len(data.reduction_ranges))
    body = _capture(lambda: data.inner_fn(index, rindex))
    if body is None:
        return _ANY
    lo, hi = bounds(body)
    if data.reduction_type == "sum":
        n = data.reduction_numel
        return (min(lo * n, lo), max(hi * n, hi)) if n else (0.0, 0.0)
    return lo, hi


def bounds(e: Expr) -> tuple:
    """An interval ``(lo, hi)`` holding every non-NaN value ``e`` takes (``+-inf`` included).

    A small interval analysis, enough to show that a norm's ``rsqrt(mean(x * x) + eps)`` is
    finite whatever ``x`` holds; anything it does not know is unbounded.
    """
    op, args = e.op, e.args
    sub = [bounds(a) if isinstance(a, Expr) else None for a in args]
    if op == "constant":
        v = float(args[0])
        return (v, v) if args[1].is_floating_point and not math.isnan(v) else _ANY
    if op == "read":
        return _read_bounds(args[0])
    if op == "to_dtype":
        if not (args[1].is_floating_point and args[0].dtype.is_floating_point):
            return _ANY
        top = float(torch.finfo(args[1]).max)  # a narrowing cast rounds past its range to inf
        return (sub[0][0] if sub[0][0] >= -top else -math.inf), (sub[0][1] if sub[0][1] <= top else math.inf)
    if op == "mul" and args[0] == args[1]:
        lo, hi = sub[0]
        return (0.0 if lo <= 0.0 <= hi else min(lo * lo, hi * hi)), max(lo * lo, hi * hi)
    if op == "mul":
        return _product(sub[0], sub[1])
    if op == "add":
        lo, hi = sub[0][0] + sub[1][0], sub[0][1] + sub[1][1]
        return _ANY if math.isnan(lo) or math.isnan(hi) else (lo, hi)
    if op == "rsqrt":
        lo, hi = sub[0]
        return (1.0 / math.sqrt(hi), 1.0 / math.sqrt(lo)) if lo > 0.0 else _ANY
    if op in ("truediv", "reciprocal"):
        lo, hi = sub[-1]
        if lo <= 0.0 <= hi:  # may divide by zero
            return _ANY
        return _product(sub[0] if op == "truediv" else (1.0, 1.0), (1.0 / hi, 1.0 / lo))
    if op == "sqrt":
        lo, hi = sub[0]
        return (math.sqrt(max(lo, 0.0)), math.sqrt(hi)) if hi >= 0 else _ANY
    if op == "abs":
        lo, hi = sub[0]
        return (0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    if op == "sigmoid":
        return 0.0, 1.0
    return _ANY


def is_finite(e: Expr) -> bool:
    """True when ``e`` is never +-inf in float32 (NaN allowed: it propagates the same either way)."""
    lo, hi = bounds(e)
    return -FINITE < lo and hi < FINITE


# ------------------------------------------------------------------------------ operands

@dataclasses.dataclass
class _Operand:
    """One operand while it is looked through: its symbols, the K axis, the output axis of each dim."""

    node: IRNode
    symbols: tuple
    k_axis: int
    out_axes: tuple  # per dim: the GEMM output dim indexing it (None for K)

    @property
    def ranges(self) -> dict:
        return {s: n for s, n in zip(self.symbols, self.node.get_size())}


def _symbols(prefix: str, rank: int) -> tuple:
    return tuple(indexing.index_symbol(f"{prefix}{d}") for d in range(rank))


DEPENDS_ON_K = "it depends on the K index"
MAY_BE_INFINITE = "it may be +-inf (eager's inf * 0 is NaN, the hoisted product need not be)"


def why_not_hoisted(factor: Expr, k: sympy.Symbol) -> Optional[str]:
    """None when ``factor`` of an operand may leave the K-sum; otherwise the reason it may not."""
    if depends_on(factor, k):
        return DEPENDS_ON_K
    if not is_finite(factor):
        return MAY_BE_INFINITE
    return None


def _split_scales(op: _Operand, value: Expr, count: bool = True) -> tuple[Expr, list[Expr]]:
    """``value`` as ``rest * s1 * s2 ...``: the float32 factors that may leave the K-sum split off."""
    k = op.symbols[op.k_axis]
    scales = []
    while value.op == "mul" and value.dtype == torch.float32:
        left, right = value.args
        why_right, why_left = why_not_hoisted(right, k), why_not_hoisted(left, k)
        if why_right is None:
            value, scale = left, right
        elif why_left is None:
            value, scale = right, left
        else:
            if count and MAY_BE_INFINITE in (why_right, why_left):
                counters["gemm_template.hoisted_scale.refused_infinite"] += 1
            break
        scales.append(scale)
    return value, scales


def _affine_view(op: _Operand, read: Read, fix: bool = True) -> Optional[StridedView]:
    """``read`` as a strided view of its buffer over the operand's indices, when its offset is affine; ``fix``:
    the buffer's layout is pinned (the template will read it through these strides)."""
    buffer = read.buffer
    offset = read.offset if read.offset is not None else buffer.layout.index(read.index)
    offset = sympy.expand(indexing.simplify(sympy.sympify(offset), op.ranges))
    zero = {s: 0 for s in op.symbols}
    base = offset.xreplace(zero)
    strides = [offset.coeff(s) for s in op.symbols]
    if not all(sympy.sympify(v).is_Integer and int(v) >= 0 for v in [base, *strides]):
        return None
    if sympy.expand(offset - base - sum(st * s for st, s in zip(strides, op.symbols))) != 0:
        return None
    if fix and isinstance(buffer, ComputedBuffer):
        buffer.fixed_layout = True  # its strides are now baked into the template (as View.as_strided_view)
    return StridedView(buffer, Layout(tuple(op.node.get_size()), tuple(int(s) for s in strides),
                                      buffer.get_dtype(), int(base)))


def _narrow_source(op: _Operand, rest: Expr, dtype: torch.dtype, fix: bool = True) -> Optional[StridedView]:
    """The narrow buffer ``rest`` up-casts, read through its layout (the cast prologue), or None."""
    if dtype != torch.float32 or rest.op != "to_dtype" or rest.dtype != torch.float32:
        return None
    src = rest.args[0]
    if src.op != "read" or src.dtype not in NARROW:
        return None
    return _affine_view(op, src.args[0], fix)


def _read_operand(op: _Operand, dtype: torch.dtype, hoist: bool, scales: list) -> IRNode:
    """What the template reads for ``op``; factors split off are appended to ``scales``."""
    value = capture(op.node, op.symbols)
    if value is None:
        return realize(op.node)
    rest, found = _split_scales(op, value) if hoist else (value, [])
    narrow = _narrow_source(op, rest, dtype)
    if narrow is not None:
        counters["gemm_template.cast_prologue"] += 1
    if not found:
        return narrow if narrow is not None else realize(op.node)
    side = "rows" if op.k_axis == op.node.ndim - 1 else "columns"
    counters[f"gemm_template.hoisted_scale.{side}"] += len(found)
    scales.extend((op, s) for s in found)
    if narrow is not None:
        return narrow
    if rest.op == "read":
        view = _affine_view(op, rest.args[0])
        if view is not None:
            return view
    symbols = op.symbols
    return realize(Pointwise.create(lambda index: replay(rest, dict(zip(symbols, index))), op.node.get_size(),
                                    dtype))


def _scaled(out: IRNode, scales: list) -> IRNode:
    """``out`` times every hoisted factor, each evaluated at its operand's row (or column) of the output."""
    if not scales:
        return out
    load = out.make_loader()

    def inner_fn(index):
        value = load(index)
        for op, scale in scales:
            at = {s: (index[axis] if axis is not None else sympy.Integer(0))
                  for s, axis in zip(op.symbols, op.out_axes)}
            value = ops.mul(value, replay(scale, at))
        return value
    return Pointwise.create(inner_fn, out.get_size(), out.get_dtype())


def _operands(a: IRNode, b: IRNode) -> tuple[_Operand, _Operand]:
    lead = (0,) if a.ndim == 3 else ()
    row, col = len(lead), len(lead) + 1
    return (_Operand(a, _symbols("mma", a.ndim), a.ndim - 1, lead + (row, None)),
            _Operand(b, _symbols("mmb", b.ndim), b.ndim - 2, lead + (None, col)))


def reads_narrow(a: IRNode, b: IRNode, dtype: torch.dtype, *, hoist: bool = True) -> bool:
    """Whether ``read_operands`` would read A or B narrow through a cast prologue -- asked before choosing the
    template, so nothing is realized, pinned or counted."""
    for op in _operands(a, b):
        value = capture(op.node, op.symbols)
        if value is None:
            continue
        rest = _split_scales(op, value, count=False)[0] if hoist else value
        if _narrow_source(op, rest, dtype, fix=False) is not None:
            return True
    return False


def read_operands(a: IRNode, b: IRNode, dtype: torch.dtype, *,
                  hoist: bool = True) -> tuple[IRNode, IRNode, Callable[[IRNode], IRNode]]:
    """The template's inputs for A ([.., M, K]) and B ([.., K, N]), and how to finish its output.

    ``finish(out)`` is ``out`` when no scale was hoisted, otherwise the pointwise node that
    multiplies the hoisted factors in.  ``hoist=False`` looks for cast prologues only.
    """
    ops_a, ops_b = _operands(a, b)
    scales: list = []
    read_a = _read_operand(ops_a, dtype, hoist, scales)
    read_b = _read_operand(ops_b, dtype, hoist, scales)
    return read_a, read_b, lambda out: _scaled(out, scales)


__all__ = ["read_operands", "reads_narrow", "capture", "replay", "depends_on", "bounds", "is_finite",
           "why_not_hoisted", "Expr", "MAX_NODES"]
