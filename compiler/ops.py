"""The ``ops`` namespace: the one vocabulary every IR body is written in.

An IR body (``inner_fn``) is a Python function that calls ``ops.<name>(...)``.  It is run
several times with different handlers installed (tagless-final style):

- ``analysis.AnalysisOps`` records which buffers are read at which index, and counts ops;
- ``codegen.triton_ops.TritonOps`` emits Triton source;
- ``eager.EagerOps`` computes the values with torch ops, so the IR can be checked against
  the eager graph independently of Triton.

``OpsHandler`` below is the contract (one docstring per op); ``ops`` forwards each call to
the handler installed by ``use_handler``.  Operands of an op always have one dtype (the
lowering inserts ``to_dtype`` where torch would promote); the result has that dtype except
where the docstring says otherwise.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any, Callable, Iterator, Protocol, TypeVar, Union

import sympy
import torch

V = TypeVar("V")
Scalar = Union[bool, int, float]


class OpsHandler(Protocol[V]):
    """Every op an IR body may call.  ``V`` is the handler's value type."""

    # ---- memory and structure ----------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> V:
        """Element of buffer ``name`` at storage offset ``index`` (elements, not bytes)."""

    def store(self, name: str, index: sympy.Expr, value: V) -> None:
        """Write ``value`` to buffer ``name`` at storage offset ``index`` (called by kernel drivers)."""

    def constant(self, value: Scalar, dtype: torch.dtype) -> V:
        """The scalar ``value`` (inf / nan allowed for floats) as ``dtype``."""

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> V:
        """An index expression's value as ``dtype`` (iota, arange, index comparisons)."""

    def indirect_indexing(self, value: V, size: int) -> sympy.Symbol:
        """A data-dependent index: an integer symbol that holds ``value`` (an integer tensor value), negative
        entries counted from ``size`` as torch's indexing does.  Indices outside ``[-size, size)`` raise in the
        eager evaluator; a Triton kernel reads 0 at them (its load is masked) and reports them through
        ``tl.device_assert`` where Triton runs device asserts.  The symbol may appear in load offsets only."""

    def to_dtype(self, x: V, dtype: torch.dtype) -> V:
        """Cast with torch semantics: float->int truncates, anything->bool is ``!= 0``."""

    def masked(self, mask: V, body: Callable[[], V], other: Scalar) -> V:
        """``body()`` where ``mask`` holds, ``other`` elsewhere; loads in body are masked (no access)."""

    def where(self, cond: V, a: V, b: V) -> V:
        """``a`` where bool ``cond`` holds, else ``b``."""

    def reduction(self, reduction_type: str, value: V, acc_dtype: torch.dtype) -> V:
        """Combine ``value`` over the reduction axis: sum, prod, max, min, argmax, argmin, any, all.

        ``value`` is first cast to ``acc_dtype`` (argmax/argmin compare in it too).  Result
        dtype: ``acc_dtype`` for sum/prod/max/min, int64 for argmax/argmin, bool for any/all.
        max/min propagate NaN; argmax/argmin treat NaN as the extreme and return the first
        index of the winning value.
        """

    # ---- unary math (floating operands unless noted) --------------------------------------
    def abs(self, x: V) -> V:
        """|x| (ints too)."""

    def neg(self, x: V) -> V:
        """-x (ints too)."""

    def exp(self, x: V) -> V:
        """e**x."""

    def exp2(self, x: V) -> V:
        """2**x."""

    def expm1(self, x: V) -> V:
        """e**x - 1, accurate near 0."""

    def log(self, x: V) -> V:
        """Natural log (nan below 0, -inf at 0)."""

    def log2(self, x: V) -> V:
        """Base-2 log."""

    def log1p(self, x: V) -> V:
        """log(1 + x), accurate near 0."""

    def sqrt(self, x: V) -> V:
        """Square root."""

    def rsqrt(self, x: V) -> V:
        """1 / sqrt(x)."""

    def sin(self, x: V) -> V:
        """Sine."""

    def cos(self, x: V) -> V:
        """Cosine."""

    def tan(self, x: V) -> V:
        """Tangent."""

    def tanh(self, x: V) -> V:
        """Hyperbolic tangent, accurate near 0."""

    def erf(self, x: V) -> V:
        """Error function."""

    def sigmoid(self, x: V) -> V:
        """1 / (1 + e**-x)."""

    def floor(self, x: V) -> V:
        """Round toward -inf."""

    def ceil(self, x: V) -> V:
        """Round toward +inf."""

    def trunc(self, x: V) -> V:
        """Round toward 0."""

    def round(self, x: V) -> V:
        """Round half to even."""

    def sign(self, x: V) -> V:
        """-1, 0 or 1 in x's dtype (ints too): (x > 0) - (x < 0), so nan gives 0 like torch."""

    def reciprocal(self, x: V) -> V:
        """1 / x."""

    def isnan(self, x: V) -> V:
        """x != x; bool result."""

    def isinf(self, x: V) -> V:
        """|x| == inf; bool result."""

    def logical_not(self, x: V) -> V:
        """not x, for a bool x; bool result."""

    def bitwise_not(self, x: V) -> V:
        """~x for ints."""

    # ---- binary ---------------------------------------------------------------------------
    def add(self, a: V, b: V) -> V:
        """a + b."""

    def sub(self, a: V, b: V) -> V:
        """a - b."""

    def mul(self, a: V, b: V) -> V:
        """a * b."""

    def truediv(self, a: V, b: V) -> V:
        """a / b for floats."""

    def floordiv(self, a: V, b: V) -> V:
        """Python floor division (torch ``div(rounding_mode="floor")``), ints and floats."""

    def truncdiv(self, a: V, b: V) -> V:
        """Division rounded toward zero (C semantics), ints."""

    def remainder(self, a: V, b: V) -> V:
        """Python modulo: the result has the sign of b (torch.remainder)."""

    def fmod(self, a: V, b: V) -> V:
        """C modulo: the result has the sign of a (torch.fmod)."""

    def maximum(self, a: V, b: V) -> V:
        """Elementwise max, nan-propagating; ``a`` on a tie, so maximum(-0.0, 0.0) is -0.0 (torch.maximum)."""

    def minimum(self, a: V, b: V) -> V:
        """Elementwise min, nan-propagating; ``a`` on a tie, so minimum(0.0, -0.0) is 0.0 (torch.minimum)."""

    def eq(self, a: V, b: V) -> V:
        """a == b; bool result."""

    def ne(self, a: V, b: V) -> V:
        """a != b; bool result."""

    def lt(self, a: V, b: V) -> V:
        """a < b; bool result."""

    def le(self, a: V, b: V) -> V:
        """a <= b; bool result."""

    def gt(self, a: V, b: V) -> V:
        """a > b; bool result."""

    def ge(self, a: V, b: V) -> V:
        """a >= b; bool result."""

    def logical_and(self, a: V, b: V) -> V:
        """a and b for bools."""

    def logical_or(self, a: V, b: V) -> V:
        """a or b for bools."""

    def logical_xor(self, a: V, b: V) -> V:
        """a xor b for bools."""

    def bitwise_and(self, a: V, b: V) -> V:
        """a & b for ints and bools."""

    def bitwise_or(self, a: V, b: V) -> V:
        """a | b for ints and bools."""

    def bitwise_xor(self, a: V, b: V) -> V:
        """a ^ b for ints and bools."""


def _protocol_ops() -> tuple[str, ...]:
    return tuple(name for name, value in vars(OpsHandler).items()
                 if callable(value) and not name.startswith("_"))


#: Names of every op, in declaration order.
OP_NAMES: tuple[str, ...] = _protocol_ops()
UNARY_OPS = ("abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos",
             "tan", "tanh", "erf", "sigmoid", "floor", "ceil", "trunc", "round", "sign", "reciprocal",
             "isnan", "isinf", "logical_not", "bitwise_not")
BINARY_OPS = ("add", "sub", "mul", "truediv", "floordiv", "truncdiv", "remainder", "fmod", "maximum",
              "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
              "bitwise_and", "bitwise_or", "bitwise_xor")
#: Ops whose result is bool whatever the operand dtype.
BOOL_RESULT_OPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "logical_not",
                             "logical_and", "logical_or", "logical_xor"})
REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")


def reduction_result_dtype(reduction_type: str, acc_dtype: torch.dtype) -> torch.dtype:
    """The dtype ``ops.reduction`` returns."""
    if reduction_type in ("argmax", "argmin"):
        return torch.int64
    if reduction_type in ("any", "all"):
        return torch.bool
    return acc_dtype


def reduction_identity(reduction_type: str, dtype: torch.dtype) -> Scalar:
    """The value a masked-out element contributes (``dtype`` is the accumulator's)."""
    if reduction_type == "sum":
        return False if dtype == torch.bool else 0
    if reduction_type == "prod":
        return 1
    if reduction_type == "any":
        return False
    if reduction_type == "all":
        return True
    if reduction_type in ("max", "argmax"):
        return _lowest(dtype)
    if reduction_type in ("min", "argmin"):
        return _highest(dtype)
    raise ValueError(f"unknown reduction type {reduction_type!r}")


def reduction_combine(reduction_type: str, acc_dtype: torch.dtype) -> Callable[[Any, Any], Any]:
    """``combine(partial, value)``: one more value folded into a partial result, as ops.

    Used where a reduction is unrolled into ops (``ir.Reduction.create``): sum/prod add and
    multiply in ``acc_dtype``, max/min are ``ops.maximum`` / ``ops.minimum`` (NaN-propagating;
    the partial wins a tie, so the first of 0.0 and -0.0 is kept, as eager's reductions do),
    any/all are or/and.  A bool accumulator reduces as the code generator's does: sum/max as
    or, prod/min as and.  argmax/argmin carry an index and have no such op (ValueError).
    """
    if reduction_type in ("argmax", "argmin") or reduction_type not in REDUCTION_TYPES:
        raise ValueError(f"{reduction_type!r} has no single combine op")
    if reduction_type in ("any", "all") or acc_dtype == torch.bool:
        return ops.logical_or if reduction_type in ("any", "sum", "max") else ops.logical_and
    return {"sum": ops.add, "prod": ops.mul, "max": ops.maximum, "min": ops.minimum}[reduction_type]


def _lowest(dtype: torch.dtype) -> Scalar:
    if dtype == torch.bool:
        return False
    if dtype.is_floating_point:
        return -math.inf
    return torch.iinfo(dtype).min


def _highest(dtype: torch.dtype) -> Scalar:
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point:
        return math.inf
    return torch.iinfo(dtype).max


def accumulator_dtype(reduction_type: str, src_dtype: torch.dtype) -> torch.dtype:
    """What a reduction of ``src_dtype`` values accumulates in (fp16/bf16 upcast to fp32)."""
    if reduction_type in ("any", "all"):
        return torch.bool
    if src_dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    if reduction_type in ("sum", "prod") and (src_dtype == torch.bool or not src_dtype.is_floating_point):
        return torch.int64
    return src_dtype


# ------------------------------------------------------------------------------ dispatch

_handler: contextvars.ContextVar[Any] = contextvars.ContextVar("tritondiff_ops_handler", default=None)


class _OpsProxy:
    """``ops.add(a, b)`` calls ``add`` on the handler installed by ``use_handler`` at call time.

    ``ops.add`` itself can be taken outside any handler (lowerings pass it around as a
    function); only calling it needs one.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def dispatch(*args: Any, **kwargs: Any) -> Any:
            handler = _handler.get()
            if handler is None:
                raise RuntimeError(f"ops.{name} called outside compiler.ops.use_handler(...): IR bodies only "
                                   f"run under an ops handler (analysis, codegen or the eager evaluator)")
            return getattr(handler, name)(*args, **kwargs)
        dispatch.__name__ = name
        setattr(self, name, dispatch)
        return dispatch


ops: Any = _OpsProxy()


@contextlib.contextmanager
def use_handler(handler: Any) -> Iterator[Any]:
    """Install ``handler`` as the target of ``ops.*`` for the duration of the block."""
    token = _handler.set(handler)
    try:
        yield handler
    finally:
        _handler.reset(token)


def current_handler() -> Any:
    return _handler.get()
