"""Read/write analysis: run IR bodies with a recording ``ops`` handler.

``AnalysisOps`` counts ops and records loads; ``CaptureResolver`` records each buffer read
with its *logical* index (before linearisation), following inlining decisions, which is
what the scheduler needs to decide whether a consumer reads a producer at the same element
(register reuse is legal) or elsewhere (it is not).  ``FormatOps`` renders a body as text
for dumps.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import sympy
import torch

from . import indexing
from .ir import Buffer, ComputedBuffer, Reduction, Scatter, use_resolver
from .ops import BINARY_OPS, BOOL_RESULT_OPS, UNARY_OPS, use_handler


class _Token:
    """The value type of AnalysisOps: carries nothing."""

    __slots__ = ()


_TOKEN = _Token()


class AnalysisOps:
    """Counts ops and records every ``ops.load`` / ``ops.store`` (name, storage index)."""

    def __init__(self):
        self.op_count = 0
        self.casts = 0
        self.loads: list[tuple[str, sympy.Expr]] = []
        self.stores: list[tuple[str, sympy.Expr]] = []
        self.index_exprs: list[sympy.Expr] = []
        self.reductions: list[str] = []
        self.indirect = 0  # data-dependent indices taken (``ops.indirect_indexing``)

    def _op(self, *args: Any) -> _Token:
        self.op_count += 1
        return _TOKEN

    def load(self, name, index):
        self.op_count += 1
        self.loads.append((name, index))
        return _TOKEN

    def store(self, name, index, value):
        self.stores.append((name, index))

    def constant(self, value, dtype):
        return _TOKEN

    def index_expr(self, expr, dtype):
        self.op_count += 1
        self.index_exprs.append(expr)
        return _TOKEN

    def indirect_indexing(self, value, size):
        self.op_count += 1
        self.indirect += 1
        return indexing.indirect_symbol(str(self.indirect - 1))

    def to_dtype(self, x, dtype):
        self.casts += 1
        return self._op()

    def masked(self, mask, body, other):
        self.op_count += 1
        return body()

    def where(self, cond, a, b):
        return self._op()

    def reduction(self, reduction_type, value, acc_dtype):
        self.reductions.append(reduction_type)
        return self._op()


for _name in UNARY_OPS + BINARY_OPS:
    setattr(AnalysisOps, _name, AnalysisOps._op)


@dataclasses.dataclass(frozen=True)
class Read:
    """One read of ``buffer`` by a body: a logical ``index`` tuple, or a storage ``offset``."""

    buffer: Buffer
    index: Optional[tuple] = None
    offset: Optional[sympy.Expr] = None


class CaptureResolver:
    """Records reads, recomputing (and descending into) buffers named in ``inline``."""

    def __init__(self, inline: frozenset = frozenset()):
        self.inline = inline
        self.reads: list[Read] = []

    def load(self, buffer: Buffer, index: tuple):
        if buffer.name in self.inline:
            return buffer.data.inner_fn(index)
        self.reads.append(Read(buffer, index=tuple(index)))
        return _ops_load(buffer, buffer.layout.index(index))

    def load_storage(self, buffer: Buffer, offset: sympy.Expr):
        if buffer.name in self.inline:
            return buffer.data.inner_fn(indexing.delinearize(offset, buffer.layout.size))
        self.reads.append(Read(buffer, offset=offset))
        return _ops_load(buffer, offset)


def _ops_load(buffer: Buffer, offset):
    from .ops import ops
    return ops.load(buffer.name, offset)


def body_symbols(node: ComputedBuffer) -> tuple[tuple, tuple, dict]:
    """Fresh symbols for a node's index (``i0..``) and reduction index (``r0..``), with bounds."""
    data = node.data
    index = tuple(indexing.index_symbol(f"i{k}") if s != 1 else sympy.Integer(0)
                  for k, s in enumerate(data.ranges))
    rranges = data.reduction_ranges if isinstance(data, Reduction) else ()
    rindex = tuple(indexing.index_symbol(f"r{k}") if s != 1 else sympy.Integer(0)
                   for k, s in enumerate(rranges))
    bounds = {sym: s for sym, s in zip(index, data.ranges) if s != 1}
    bounds.update({sym: s for sym, s in zip(rindex, rranges) if s != 1})
    return index, rindex, bounds


def run_body(node: ComputedBuffer, handler: Any, resolver: Any, index: Sequence, rindex: Sequence = ()):
    """Evaluate ``node``'s body once under ``handler`` and ``resolver``; returns its value."""
    with use_handler(handler), use_resolver(resolver):
        if isinstance(node.data, Reduction):
            return node.data.inner_fn(tuple(index), tuple(rindex))
        if isinstance(node.data, Scatter):     # the initial value's reads, the destination's, then the value
            node.data.init(output_symbols(node))
            node.data.dest(tuple(index))
        return node.data.inner_fn(tuple(index))


def output_symbols(node: ComputedBuffer) -> tuple:
    """Symbols (``o0..``) for an index of a scatter's output, whose domain is not the one it loops over."""
    return tuple(indexing.index_symbol(f"o{k}") if s != 1 else sympy.Integer(0)
                 for k, s in enumerate(node.data.out_ranges))


@dataclasses.dataclass
class BodyInfo:
    """What a node's body reads and how big it is, with inlining applied."""

    reads: list[Read]
    op_count: int
    index: tuple
    rindex: tuple
    bounds: dict
    casts: int = 0                  # of op_count, the to_dtype ops

    @property
    def widening_load(self) -> bool:
        """One read and nothing but casts, at least one (``x.float()``; a plain copy, maybe strided, is
        not one) -- the caller compares the dtypes' widths."""
        return len(self.reads) == 1 and self.casts >= 1 and self.op_count == 1 + self.casts


def analyze(node: ComputedBuffer, inline: frozenset = frozenset()) -> BodyInfo:
    index, rindex, bounds = body_symbols(node)
    handler = AnalysisOps()
    resolver = CaptureResolver(inline)
    run_body(node, handler, resolver, index, rindex)
    return BodyInfo(resolver.reads, handler.op_count, index, rindex, bounds, handler.casts)


# ------------------------------------------------------------------------------ formatting

class _Text(str):
    """A rendered value that remembers its dtype (None when unknown)."""

    dtype: Optional[torch.dtype] = None


def _text(s: str, dtype: Optional[torch.dtype]) -> _Text:
    t = _Text(s)
    t.dtype = dtype
    return t


class FormatOps:
    """Renders a body as nested text: ``add(load(buf0, i1 + 16*i0), 1.0:float32)``.

    Casts to the dtype a value already has are left out, so dumps stay readable.
    """

    def __init__(self, dtypes: Optional[dict] = None):
        self.dtypes = dtypes or {}

    def load(self, name, index):
        return _text(f"load({name}, {index})", self.dtypes.get(name))

    def store(self, name, index, value):
        return _text(f"store({name}, {index}, {value})", None)

    def constant(self, value, dtype):
        return _text(f"{value!r}:{_short(dtype)}", dtype)

    def index_expr(self, expr, dtype):
        return _text(f"index({expr}):{_short(dtype)}", dtype)

    def indirect_indexing(self, value, size):
        return sympy.Symbol(f"[{value}]")

    def to_dtype(self, x, dtype):
        if getattr(x, "dtype", None) == dtype:
            return x
        return _text(f"to({x}, {_short(dtype)})", dtype)

    def masked(self, mask, body, other):
        value = body()
        return _text(f"masked({mask}, {value}, {other!r})", getattr(value, "dtype", None))

    def where(self, cond, a, b):
        return _text(f"where({cond}, {a}, {b})", getattr(a, "dtype", None))

    def reduction(self, reduction_type, value, acc_dtype):
        return _text(f"{reduction_type}[{_short(acc_dtype)}]({value})", acc_dtype)


def _format_op(name: str) -> Callable:
    def fmt(self, *args):
        dtype = torch.bool if name in BOOL_RESULT_OPS else getattr(args[0], "dtype", None)
        return _text(f"{name}({', '.join(str(a) for a in args)})", dtype)
    return fmt


for _name in UNARY_OPS + BINARY_OPS:
    setattr(FormatOps, _name, _format_op(_name))


def _short(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def format_body(node: ComputedBuffer, inline: frozenset = frozenset(), *, at: Optional[tuple] = None,
                held: frozenset = frozenset(), simplify: Optional[Callable] = None) -> str:
    """``node``'s body as text, producers in ``inline`` recomputed.

    ``at``: (index, rindex) to render it at (default: the node's own symbols).  Reads of buffers in ``held``
    render as ``reg(name)`` (a value the kernel keeps in a register) and ``simplify`` rewrites every other
    read's offset, so two bodies rendered at one kernel position compare as text.
    """
    index, rindex = at if at is not None else body_symbols(node)[:2]
    resolver = _FormatResolver(inline, held, simplify)
    return str(run_body(node, FormatOps(), resolver, index, rindex))


class _FormatResolver(CaptureResolver):
    def __init__(self, inline: frozenset, held: frozenset = frozenset(), simplify: Optional[Callable] = None):
        super().__init__(inline)
        self.held = held
        self.simplify = simplify or (lambda e: e)

    def load(self, buffer: Buffer, index: tuple):
        if buffer.name in self.held and buffer.name not in self.inline:
            return _text(f"reg({buffer.name})", buffer.get_dtype())
        if buffer.name in self.inline:
            return super().load(buffer, index)
        return self.load_storage(buffer, buffer.layout.index(index))

    def load_storage(self, buffer: Buffer, offset):
        if buffer.name in self.held and buffer.name not in self.inline:
            return _text(f"reg({buffer.name})", buffer.get_dtype())
        if buffer.name not in self.inline:
            offset = self.simplify(offset)
        value = super().load_storage(buffer, offset)
        if isinstance(value, _Text) and value.dtype is None:
            value.dtype = buffer.get_dtype()
        return value


def describe(node: ComputedBuffer, inline: frozenset = frozenset()) -> str:
    """One line per node for IR dumps."""
    data = node.data
    kind = type(data).__name__ if not isinstance(data, Reduction) else f"Reduction.{data.reduction_type}"
    extra = f" size={list(data.size)}" if isinstance(data, Scatter) else ""
    if isinstance(data, Reduction):
        extra = f" rranges={list(data.reduction_ranges)} acc={_short(data.acc_dtype)}"
    layout = node.layout
    return (f"{node.name} = {kind}[{_short(data.dtype)}](ranges={list(data.ranges)}{extra}) "
            f"stride={list(layout.stride)} origin={node.origin}\n    {format_body(node, inline)}")
