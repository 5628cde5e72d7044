"""One Triton kernel being written: arguments, statements, scoped CSE, masks, registers, the numel guard.

A value is emitted in the block that is current when the body asks for it, as a typed statement
(``codegen.statements``); the passes there move loads only when the source is written.  A reduction loop opens a scope; values first computed inside it are forgotten when it
closes, so no later code can refer to a loop-local name (seed 000's ``rindex_1`` used before
assignment cannot happen), and every load that depends on ``rindex`` is emitted inside the
loop, from the loop-local ``rindex = roffset + rbase``.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from typing import Any, Iterator, Optional, Sequence

import sympy
import torch

from .. import indexing
from ..config import config
from ..counters import counters
from ..exc import CodegenError, ReductionTooLarge, TensorTooLarge
from ..ir import Buffer
from .prelude import tl_dtype
from .statements import Statement, Switches, finish, render


@dataclasses.dataclass(frozen=True)
class CSEVar:
    """A named Triton value with its torch dtype."""

    name: str
    dtype: torch.dtype

    def __str__(self) -> str:
        return self.name


@dataclasses.dataclass
class Axis:
    """One tile dimension: its symbol, extent, block and mask variable (None when never partial)."""

    symbol: sympy.Symbol
    numel: int
    block: int
    mask: Optional[str]


@dataclasses.dataclass
class KernelArg:
    """A pointer argument: a buffer of the graph, or a workspace the kernel pair shares.

    ``semaphore``: a workspace (int32 counters, int64 flagged slots) that the runtime keeps per device and
    stream, zeroed once when first made, which every launch leaves zeroed again (a split partial's arrival
    count and its tagged partials, ``reduction.SplitReduction``): not reallocated per call."""

    name: str
    param: str
    workspace: bool = False
    numel: int = 0
    dtype: Optional[torch.dtype] = None
    semaphore: bool = False


@dataclasses.dataclass
class KernelSpec:
    """A finished kernel: its source, how to launch it, and what it was built from."""

    name: str
    source: str
    grid: tuple[int, ...]
    args: list[KernelArg]
    num_warps: int
    meta: dict


class TritonKernel:
    """Accumulates the body of one ``@triton.jit`` function."""

    def __init__(self, name: str, buffers: dict[str, Buffer], *, what: str, reductions: Sequence[str] = (),
                 rnumel: int = 0, int64: bool = False):
        self.name = name
        self.buffers = buffers
        self.what = what
        self.reductions = list(reductions)
        self.rnumel = rnumel
        self.int64 = int64 or config.force_int64_indexing
        self.args: dict[str, KernelArg] = {}
        self.lines: list[Statement] = []                 # the body, typed as emitted (codegen.statements)
        self._indent = 1
        self._scopes: list[dict[str, CSEVar]] = [{}]
        self._count = 0
        self.axes: dict[sympy.Symbol, Axis] = {}
        self.active: list[sympy.Symbol] = []  # axes whose index variables exist right now
        self.mask_stack: list[str] = []
        self.registers: list[dict[str, tuple[CSEVar, Any]]] = [{}]
        self.tile: list[int] = []
        self.in_reduction_loop = False  # inside a loop over the reduced axis (rindex is loop-local)
        self.pass_starts: list[int] = []  # a reduction kernel's line count where each pass over the row began
        self.meta: dict = {}
        self.index_checks: dict[str, str] = {}  # data-dependent index -> its in-range condition's variable
        self._hinted = True                                  # loads emitted now take eviction hints (reads_once)
        self.load_indexes: list[sympy.Expr] = []             # the index of each load emitted (CSE hits once)
        self._loop = None                                    # the loop being emitted (a serial)
        self._loops = 0
        # The reduced axis when a whole row of it is in one block (persistent and mixed-order kernels set it):
        # a load of a row's first element is then taken from the row already loaded (row_element).
        self.whole_row: Optional[sympy.Symbol] = None
        # (the reduced axis, its block arange) when no load of the kernel moves along that axis: every load in
        # the reduction domain then spans the tile, so Triton lays the tile out along the axis (see
        # ``reduction.reads_along_reduced_axis``).
        self.spread_loads: Optional[tuple[sympy.Symbol, str]] = None
        # A mixed-order kernel whose row is held as static chunks (``reduction.RowChunk``): every chunk's values
        # are emitted side by side, and while one is emitted, ``row_chunk`` = (the reduced axis, the symbol of
        # that chunk's column index) renders the axis as the chunk's index.
        self.row_chunks: Optional[list] = None
        self.row_chunk: Optional[tuple[sympy.Symbol, sympy.Symbol]] = None
        # called as hook(chunk number, pass) after each chunk's nodes of a row pass (the mixed-order strategy's
        # column terms)
        self.row_chunk_hook = None

    # ---- arguments
    def arg(self, name: str) -> str:
        if name not in self.args:
            self.args[name] = KernelArg(name, f"p_{name}")
        return self.args[name].param

    def workspace(self, name: str, numel: int, dtype: torch.dtype) -> str:
        self.args[name] = KernelArg(name, f"p_{name}", workspace=True, numel=numel, dtype=dtype)
        return self.args[name].param

    def semaphore(self, name: str, numel: int, dtype: torch.dtype = torch.int32) -> str:
        """``numel`` counters or slots of ``dtype``, zero when the kernel starts; the kernel must leave them zero
        (KernelArg)."""
        self.args[name] = KernelArg(name, f"p_{name}", workspace=True, numel=numel, dtype=dtype, semaphore=True)
        return self.args[name].param

    # ---- lines and scopes
    def emit(self, line: str) -> None:
        """A line of free text (arithmetic, an index, a header, a barrier), typed from what it says."""
        self.lines.append(Statement.parse(self._indent, line, len(self.lines)))

    def fresh(self, prefix: str = "tmp") -> str:
        self._count += 1
        return f"{prefix}{self._count - 1}"

    def _cached(self, expr: str, dtype: torch.dtype) -> Optional[CSEVar]:
        """The variable in scope that already holds ``expr`` as ``dtype``, if any."""
        for scope in reversed(self._scopes):
            if expr in scope and scope[expr].dtype == dtype:
                return scope[expr]
        return None

    def newvar(self, expr: str, dtype: torch.dtype, prefix: str = "tmp") -> CSEVar:
        var = self._cached(expr, dtype)
        if var is not None:
            return var
        var = CSEVar(self.fresh(prefix), dtype)
        self.emit(f"{var.name} = {expr}")
        self._scopes[-1][expr] = var
        return var

    @staticmethod
    def for_range(var: str, start, stop, step, stages: Optional[int] = None) -> str:
        """A ``for`` header over ``range(start, stop, step)``; ``stages`` > 1 asks Triton to software-pipeline
        it (``tl.range(..., num_stages=stages)``: Triton pipelines a loop without ``tl.dot`` only then)."""
        if stages and stages > 1:
            return f"for {var} in tl.range({start}, {stop}, {step}, num_stages={stages}):"
        return f"for {var} in range({start}, {stop}, {step}):"

    @contextlib.contextmanager
    def loop(self, var: str, start, stop, step, stages: Optional[int] = None, *,
             over_reduction: bool) -> Iterator[None]:
        """A ``for var in range(start, stop, step)`` block (``for_range``), typed as such (``Statement.for_loop``): a
        new CSE scope and register scope, both dropped at its end.

        ``over_reduction``: the loop walks the reduced axis (looped / split chunks, where
        ``rindex = roffset + rbase`` is defined inside it), not the rows (a mixed-order kernel's
        row loop, where ``rindex`` is the whole row, defined once before the loop).
        """
        was, was_loop = self.in_reduction_loop, self._loop
        self.in_reduction_loop = over_reduction or was
        self._loops += 1
        self._loop = self._loops
        header = Statement.for_loop(self._indent, len(self.lines), var, start, stop, step,
                                self.for_range(var, start, stop, step, stages))
        try:
            with self.branch(header):
                yield
        finally:
            self.in_reduction_loop, self._loop = was, was_loop

    @contextlib.contextmanager
    def branch(self, header: str | Statement) -> Iterator[None]:
        """A block under ``header`` (an ``if``; ``loop``'s body too): values computed inside it are forgotten at
        its end (a new CSE and register scope); the reduction-loop state is the enclosing code's."""
        if isinstance(header, Statement):
            self.lines.append(header)
        else:
            self.emit(header)
        self._indent += 1
        self._scopes.append({})
        self.registers.append({})
        try:
            yield
        finally:
            self.registers.pop()
            self._scopes.pop()
            self._indent -= 1

    @contextlib.contextmanager
    def reads_once(self) -> Iterator[None]:
        """Loads emitted inside run once per program, after the loops (a split's last program re-reading its
        row block): they take no eviction hint, nor make a loop's read of the same buffer one that is read again,
        which ``statements.eviction_hints`` would keep in L2."""
        was, self._hinted = self._hinted, False
        try:
            yield
        finally:
            self._hinted = was

    # ---- the numel guard
    def guard(self, shape: Sequence[int], what: str) -> None:
        """Refuse any block tensor past ``config.max_triton_tensor_numel`` (seed 000)."""
        numel = 1
        for s in shape:
            numel *= int(s)
        limit = config.max_triton_tensor_numel
        if numel <= limit:
            return
        counters["numel_guard_hits"] += 1
        if self.reductions:
            block = tuple(int(s) for s in shape)
            # The forced knobs that shaped this block (a tile is [XBLOCK, RBLOCK]): the fix names them.
            used = {"xblock": block[0] if len(block) == 2 else None, "rblock": block[-1]}
            forced = {k: getattr(config, k) for k, v in used.items() if v is not None and getattr(config, k) == v}
            raise ReductionTooLarge(reduction=", ".join(self.reductions), extent=self.rnumel, block=block,
                                    limit=limit, strategy=self.meta.get("strategy", "?"), forced=forced)
        raise TensorTooLarge(
            f"{self.what}: block tensor {what} of shape {list(shape)} ({numel:,} elements) is past "
            f"max_triton_tensor_numel={limit:,}; lower compiler.config.pointwise_block / xblock",
            what=f"{self.what} {what}", shape=tuple(shape), numel=numel, limit=limit)

    def arange(self, n: int, what: str) -> str:
        self.guard([n], f"tl.arange for {what}")
        return f"tl.arange(0, {n})"

    def full(self, shape: Sequence[int], value: Any, dtype: torch.dtype) -> str:
        self.guard(shape, "tl.full")
        if dtype == torch.bfloat16:  # rounded by our helper: the interpreter truncates fp32 -> bf16
            return f"_td_to_bf16(tl.full({list(shape)}, {literal(value, torch.float32)}, tl.float32))"
        return f"tl.full({list(shape)}, {literal(value, dtype)}, {tl_dtype(dtype)})"

    @property
    def scalar_shape(self) -> list[int]:
        """Shape of a one-element block of this kernel's rank (Triton broadcasts only equal ranks)."""
        return [1] * max(len(self.tile), 1)

    # ---- axes and masks
    def add_axis(self, symbol: sympy.Symbol, numel: int, block: int, mask: bool) -> Axis:
        mask = mask or numel == 0
        axis = Axis(symbol, numel, block, f"{symbol.name[0]}mask" if mask else None)
        self.axes[symbol] = axis
        return axis

    def bounds(self) -> dict:
        return {s: max(a.numel, 1) for s, a in self.axes.items()}

    def index_source(self, expr: sympy.Expr) -> tuple[str, set]:
        simplified = indexing.simplify(sympy.sympify(expr), self.bounds())
        symbols = {s for s in simplified.free_symbols if s in self.axes}
        unknown = {s for s in simplified.free_symbols - set(self.active) if not indexing.is_indirect(s)}
        if unknown:
            raise CodegenError(f"{self.name}: index {simplified} uses {sorted(map(str, unknown))}, which is not "
                               f"defined here (only {sorted(map(str, self.active))} are): a loop-local index "
                               f"would escape its loop")
        if self.row_chunk is not None:
            simplified = simplified.xreplace(dict([self.row_chunk]))
        return indexing.to_source(simplified), symbols

    def axis_name(self, symbol: sympy.Symbol) -> str:
        """The variable that holds ``symbol``'s index here (a row chunk's own, while one is emitted)."""
        if self.row_chunk is not None and symbol == self.row_chunk[0]:
            return self.row_chunk[1].name
        return symbol.name

    def mask_for(self, symbols: set, *, all_active: bool = False) -> Optional[str]:
        parts = []
        for sym in self.active:
            axis = self.axes[sym]
            if axis.mask and (all_active or sym in symbols or axis.numel == 0):  # empty axis: nothing loads
                parts.append(axis.mask)
        parts.extend(self.mask_stack)
        return " & ".join(parts) if parts else None

    # ---- registers (values of nodes of this kernel)
    def set_register(self, name: str, var: CSEVar, canonical: Any, canonical_storage: Any = None) -> None:
        """``name``'s value is ``var`` here, for reads at exactly ``canonical`` (or storage offset)."""
        self.registers[-1][name] = (var, canonical, canonical_storage)

    def register(self, name: str) -> Optional[tuple[CSEVar, Any, Any]]:
        for scope in reversed(self.registers):
            if name in scope:
                return scope[name]
        return None

    # ---- memory
    def _index_var(self, src: str) -> str:
        """Name an index computation once per scope (loads of x and dy at one index share it)."""
        if src.isidentifier() or src.lstrip("-").isdigit():
            return src
        return self.newvar(src, torch.int64 if self.int64 else torch.int32, prefix="idx").name

    def load(self, name: str, index: sympy.Expr) -> CSEVar:
        buf = self.buffers[name]
        src, symbols = self.index_source(index)
        # A data-dependent index (``ops.indirect_indexing``) is a value of any of the tile's axes: its load is
        # masked on every active axis, and its pointer covers the whole tile.
        indirect = any(indexing.is_indirect(s) for s in sympy.sympify(index).free_symbols)
        element = None if indirect else self.row_element(name, src, symbols)
        if element is not None:
            return element
        mask = self.mask_for(symbols, all_active=indirect)
        if indirect:                                        # an index out of range reads nothing (0)
            mask = self._with_index_checks(mask, index)
        if mask is not None and (indirect or self.mask_stack or any(self.axes[s].numel == 0 for s in self.active)):
            # The mask may span axes the index does not use: Triton broadcasts the mask to the
            # pointer, never the pointer to the mask, so the pointer must cover the whole tile.
            for sym in self.active:
                if sym not in symbols:
                    src = f"{src} + 0 * {self.axis_name(sym)}"
        elif self.spread_loads is not None and self.spread_loads[0] in self.active:
            src = f"{src} + 0 * {self.spread_loads[1]}"     # the same address along the reduced axis
        elif not symbols:  # one element for every lane: load it as a [1] block, never a 0-d scalar
            self.guard(self.scalar_shape, "tl.zeros")
            src = f"{src} + tl.zeros({self.scalar_shape}, tl.int32)"
        src = self._index_var(src)
        address = f"{self.arg(name)} + {src}"
        expr = f"tl.load({address}, {mask}, other=0)" if mask else f"tl.load({address})"
        var = self._cached(expr, buf.get_dtype())
        if var is not None:
            return var
        # read again anyway: the same address for every row block (the row axis is not in the index), or on
        # every step of the loop (the reduced axis is not; in a mixed-order kernel's row loop, the row axis: a
        # per-row value is read once).  An axis all in one block repeats nothing (a split reduction of one row
        # streams its input once, chunk by chunk).
        if self._loop is not None and not self.in_reduction_loop:
            reread = bool(self.active) and self.active[0] not in symbols
        else:
            reread = any(sym not in symbols and self.axes[sym].numel > self.axes[sym].block for sym in self.active[:2])
        var = CSEVar(self.fresh(), buf.get_dtype())
        self.lines.append(Statement.load(self._indent, len(self.lines), var.name, address, mask, buffer=name,
                                         loop=self._loop, reread=reread, hinted=self._hinted))
        self._scopes[-1][expr] = var
        self.load_indexes.append(sympy.sympify(index))
        self._remember_row(name, index, symbols, var)
        return var

    # ---- a row's first element from its registers
    def _remember_row(self, name: str, index: sympy.Expr, symbols: set, var: CSEVar) -> None:
        """Note a whole-row load (its index uses ``whole_row``; no masked region) under the index of the row's
        first element, in the current CSE scope, so a later load of that element can reuse it."""
        row = self.whole_row
        if row is None or row not in symbols or self.mask_stack or _ROW_BITS.get(var.dtype) is None:
            return
        first, _ = self.index_source(sympy.sympify(index).subs(row, 0))
        self._scopes[-1][("row element", name, first)] = var

    def row_element(self, name: str, src: str, symbols: set) -> Optional[CSEVar]:
        """The first element of each row of ``name`` (index ``src``, which does not use the row axis), taken
        from a whole-row load of that buffer in scope instead of a second load (``config.row_elements_from_registers``).

        Layer norm's shifted variance subtracts each row's first element: loaded again, that is one strided
        scalar per row beside the row's vector loads.  Here it is the row's lane 0 picked by a sum of its bits
        (every other lane 0): exact for every value, NaN payloads and signed zeros included."""
        row = self.whole_row
        if not config.row_elements_from_registers or row is None or row in symbols or self.mask_stack:
            return None
        var = None
        for scope in reversed(self._scopes):
            var = scope.get(("row element", name, src))
            if var is not None:
                break
        if var is None:
            return None
        bits = _ROW_BITS[var.dtype]
        lanes = f"{var.name}.to({bits}, bitcast=True)" if var.dtype.is_floating_point else var.name
        picked = f"tl.sum(tl.where({row.name} == 0, {lanes}, 0), 1)[:, None].to({bits})"   # the row axis is axis 1
        if var.dtype.is_floating_point:
            picked = f"{picked}.to({tl_dtype(var.dtype)}, bitcast=True)"
        counters["row_elements_from_registers"] += 1
        return self.newvar(picked, var.dtype)

    def _with_index_checks(self, mask: Optional[str], index: sympy.Expr) -> Optional[str]:
        """``mask`` and the in-range condition of each data-dependent index in ``index``."""
        checks = [self.index_checks[s.name] for s in sympy.sympify(index).free_symbols if s.name in self.index_checks]
        return " & ".join(([mask] if mask else []) + checks) or None

    def atomic_add(self, name: str, index: sympy.Expr, value: CSEVar) -> None:
        """``name[index] += value`` for every lane, atomically (relaxed: only the sums matter); lanes whose
        data-dependent index is out of range add nothing."""
        address, value_src, mask = self._write_operands(name, index, value)
        self.lines.append(Statement.atomic_add(self._indent, len(self.lines), address, value_src, mask, buffer=name))

    def store(self, name: str, index: sympy.Expr, value: CSEVar) -> None:
        address, value_src, mask = self._write_operands(name, index, value)
        self.lines.append(Statement.store(self._indent, len(self.lines), self.arg(name), address, value_src, mask,
                                          buffer=name))

    def _write_operands(self, name: str, index: sympy.Expr, value: CSEVar) -> tuple[str, str, Optional[str]]:
        """(pointer, value, mask) of a write of ``value`` to ``name[index]`` from every lane of the tile."""
        buf = self.buffers[name]
        src, symbols = self.index_source(index)
        mask = self._with_index_checks(self.mask_for(symbols, all_active=True), index)
        value_src = value.name if value.dtype == buf.get_dtype() else cast_source(value, buf.get_dtype())
        for sym in self.active:  # a block value needs a block pointer, even when every lane hits one element
            if sym not in symbols:
                src = f"{src} + 0 * {self.axis_name(sym)}"
        return f"{self.arg(name)} + {self._index_var(src)}", value_src, mask

    # ---- assembly
    def source(self, params_extra: Sequence[str] = ()) -> str:
        params = [a.param for a in self.args.values()] + list(params_extra)
        out = ["@triton.jit", f"def {self.name}({', '.join(params)}):"]
        for comment in self.meta.get("comments", []):
            out.append(f"    # {comment}")
        # A kernel that prefetches its next rows keeps its invariant loads in the loop and gives no eviction
        # hints: a lifted weight held across the loop spills (reports/performance-log.md, prefetch).
        prefetch = bool(self.meta.get("prefetch_next_rows"))
        out += render(finish(self.lines, Switches(lift=config.lift_invariant_loads and not prefetch,
                                                  hints=config.eviction_hints and not prefetch,
                                                  hoist=config.hoist_loads, prefetch=prefetch)))
        if not self.lines:
            out.append("    pass")
        return "\n".join(out) + "\n"


# The integer type a row element's bits are summed in, by dtype (bool and other types: not reused).
_ROW_BITS = {torch.float32: "tl.int32", torch.float16: "tl.int16", torch.bfloat16: "tl.int16", torch.float64: "tl.int64",
             torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16", torch.int8: "tl.int8",
             torch.uint8: "tl.uint8"}

def literal(value: Any, dtype: torch.dtype) -> str:
    """A Python literal for ``value`` as Triton source (inf / nan spelled out)."""
    if dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        value = float(value)
        if value != value:
            return 'float("nan")'
        if value in (float("inf"), float("-inf")):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    return str(int(value))


_HELPER_BF16_CASTS = contextvars.ContextVar("helper_bf16_casts", default=False)


@contextlib.contextmanager
def helper_bf16_casts() -> Iterator[None]:
    """Within: ``cast_source`` converts bf16 through the prelude's helpers even where
    ``config.native_bf16_casts`` is on.  The GEMM templates' kernels use it: their fp32 dot of bf16 operands
    ran slower widened by ``.to()``, the same bits either way (reports/performance-log.md, GEMM bf16 casts)."""
    token = _HELPER_BF16_CASTS.set(True)
    try:
        yield
    finally:
        _HELPER_BF16_CASTS.reset(token)


def cast_source(value: CSEVar, dtype: torch.dtype) -> str:
    """Source of ``value`` converted to ``dtype`` with torch semantics.

    bf16 goes through fp32 both ways.  In the interpreter it is rounded to nearest-even by ``_td_to_bf16``
    and widened by ``_td_bf16_to_f32``: Triton's interpreter converts bf16 from other types bit-wise and
    truncates fp32 -> bf16, while GPUs round; the helpers give one answer in both places.  On a GPU
    (``config.native_bf16_casts``) Triton's own casts give that answer in one instruction.
    """
    if value.dtype == dtype:
        return value.name
    native = config.native_bf16_casts and not _HELPER_BF16_CASTS.get()
    src, src_dtype = value.name, value.dtype
    if src_dtype == torch.bfloat16:  # widened bit-exactly: the interpreter's .to() loses bf16 subnormals,
        src = f"{src}.to(tl.float32)" if native else f"_td_bf16_to_f32({src})"  # and its bf16 != 0 holds for -0.0
        src_dtype = torch.float32
        if dtype == torch.float32:
            return src
    if dtype == torch.bool:
        return f"({src} != 0)"
    if dtype == torch.bfloat16:
        if src_dtype != torch.float32:
            src = f"{src}.to(tl.float32)"
        return f"{src}.to(tl.bfloat16)" if native else f"_td_to_bf16({src})"
    return f"{src}.to({tl_dtype(dtype)})"
