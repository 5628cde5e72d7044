"""Reduction kernels: persistent, looped and split strategies over one fused group.

Every strategy gives each program XBLOCK rows (``xindex``, shape [XBLOCK, 1]) and walks the
inner axis pass by pass (a group holding softmax has three passes: max, sum of exp, output).
Between passes run the nodes that need a finished reduction.  The strategies differ only
in how one pass covers the inner axis.  A persistent pass reduces its one block; a loop
keeps one accumulator lane per tile element ([XBLOCK, RBLOCK]) and folds the lanes to
[XBLOCK, 1] once after the loop, so no loop step pays a cross-lane reduction (seed 000's
per-chunk reduce + combine moved the shared-memory tree into every step).
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
from typing import Optional

import sympy
import torch
import triton

from .. import indexing
from ..config import config
from ..counters import counters
from ..exc import CodegenError
from ..heuristics import (ReductionChoice, choose_reduction, may_read_again, mixed_order_prefetch, mixed_order_row_chunk,
                          mixed_order_warps, next_pow2, num_warps, persistent_wide, split_last_program_final,
                          split_partial_warps, tagged_split_warps)
from ..ops import reduction_identity
from ..scheduler import RSYM, XSYM, KernelGroup, Placed, _read_in_kernel
from .kernel import CSEVar, KernelSpec, TritonKernel, cast_source
from .prelude import tl_dtype
from . import online
from .nodes import GroupContext, emit_pointwise, evaluate, needs_int64, publish


# ------------------------------------------------------------------- one reduction's algebra

@dataclasses.dataclass
class ReductionOp:
    """How one reduction type accumulates: representation, identity, block reduce, combine, finish."""

    rtype: str
    acc_dtype: torch.dtype
    out_dtype: torch.dtype

    @property
    def boolish(self) -> bool:
        return self.rtype in ("any", "all") or self.acc_dtype == torch.bool

    @property
    def is_arg(self) -> bool:
        return self.rtype in ("argmax", "argmin")

    @property
    def repr_dtype(self) -> torch.dtype:
        return torch.int32 if self.boolish else self.acc_dtype

    def identity(self):
        if self.boolish:
            return 0 if self.rtype in ("any", "max", "sum") else 1
        return reduction_identity(self.rtype, self.acc_dtype)

    def prepare(self, k: TritonKernel, value: CSEVar, axis: int = 1) -> CSEVar:
        """The element value in the accumulator's representation, masked lanes set to the identity.

        ``axis`` is the tile axis being reduced: 1 (the inner axis, RSYM) everywhere except the
        column reductions of a mixed-order kernel, which reduce over the rows (axis 0, XSYM).
        """
        if self.boolish:
            v = k.newvar(f"({cast_source(value, torch.bool)}).to(tl.int32)", torch.int32)
        else:
            v = k.newvar(cast_source(value, self.acc_dtype), self.acc_dtype) if value.dtype != self.acc_dtype else value
        # Only lanes past the reduced extent need the identity: lanes past the kept extent are never stored.
        reduced = RSYM if axis == 1 else XSYM
        mask = k.axes[reduced].mask if reduced in k.active else None
        mask = " & ".join([m for m in [mask] + k.mask_stack if m]) or None
        if mask is None:  # still a full tile: the value may not depend on both axes (a scalar, a row value)
            return k.newvar(f"tl.broadcast_to({v.name}, {k.tile})", self.repr_dtype)
        ident = k.newvar(k.full(k.scalar_shape, self.identity(), self.repr_dtype), self.repr_dtype)
        return k.newvar(f"tl.where({mask}, {v.name}, {ident.name})", self.repr_dtype)

    def block(self, k: TritonKernel, v: CSEVar, index_src: Optional[str], axis: int = 1) -> list[CSEVar]:
        """Reduce a [XBLOCK, N] block along ``axis`` (to [XBLOCK, 1], or [1, N] for axis 0).

        Builtin reductions only: ``tl.reduce`` with a Python combine function runs element
        by element in Triton's interpreter; everything here is vectorised instead: NaN
        handling by flags, the first index of the extreme by a masked ``tl.min`` of indices,
        products by a tree of reshape/split halvings (those two along axis 1 only).
        """
        dt = self.repr_dtype
        keep = "[:, None]" if axis == 1 else "[None, :]"
        if axis != 1 and (self.is_arg or self.rtype == "prod"):
            raise CodegenError(f"{self.rtype} is reduced along the inner axis only (a scheduler legality bug)")
        if self.rtype == "sum" and not self.boolish:
            return [k.newvar(f"tl.sum({v.name}, {axis}){keep}", dt)]
        if self.boolish:
            fn = "tl.max" if self.rtype in ("any", "max", "sum") else "tl.min"
            return [k.newvar(f"{fn}({v.name}, {axis}){keep}", dt)]
        if self.rtype == "prod":
            return [self._tree_product(k, v)]
        fn = "tl.max" if self.rtype in ("max", "argmax") else "tl.min"
        extreme = k.newvar(f"{fn}({v.name}, {axis}){keep}", dt)
        if not dt.is_floating_point:
            if not self.is_arg:
                return [extreme]
            return [extreme, self._first_index(k, f"{v.name} == {extreme.name}", index_src)]
        nans = k.newvar(f"{v.name} != {v.name}", torch.bool)
        has_nan = k.newvar(f"tl.max({nans.name}.to(tl.int32), {axis}){keep} > 0", torch.bool)
        nan = k.newvar(k.full(k.scalar_shape, float("nan"), dt), dt)
        value = k.newvar(f"tl.where({has_nan.name}, {nan.name}, {extreme.name})", dt)
        if not self.is_arg:
            return [value]
        first_extreme = self._first_index(k, f"{v.name} == {extreme.name}", index_src)
        first_nan = self._first_index(k, nans.name, index_src)
        index = k.newvar(f"tl.where({has_nan.name}, {first_nan.name}, {first_extreme.name})", torch.int64)
        return [value, index]

    @staticmethod
    def _first_index(k: TritonKernel, condition: str, index_src: str) -> CSEVar:
        big = k.newvar(k.full(k.scalar_shape, 2**62, torch.int64), torch.int64)
        return k.newvar(f"tl.min(tl.where({condition}, {index_src}, {big.name}), 1)[:, None]", torch.int64)

    def _tree_product(self, k: TritonKernel, v: CSEVar) -> CSEVar:
        xblock, width = k.tile
        cur = v.name
        while width > 1:
            width //= 2
            halves = k.fresh("tmp")
            k.emit(f"{halves} = tl.reshape({cur}, [{xblock}, {width}, 2])")
            a, b = k.fresh("lo"), k.fresh("hi")
            k.emit(f"{a}, {b} = tl.split({halves})")
            cur = k.fresh("tmp")
            k.emit(f"{cur} = {a} * {b}")
        if cur == v.name:
            return v
        return CSEVar(cur, self.repr_dtype)

    def init(self, k: TritonKernel, shape: list[int], rnumel: int) -> list[str]:
        """Accumulators of ``shape``: [XBLOCK, RBLOCK] lanes in a loop (one per tile element)."""
        names = [k.fresh("acc")]
        k.emit(f"{names[0]} = {k.full(shape, self.identity(), self.repr_dtype)}")
        if self.is_arg:
            names.append(k.fresh("acc_idx"))
            k.emit(f"{names[1]} = {k.full(shape, rnumel, torch.int64)}")
        return names

    def combine(self, k: TritonKernel, accs: list[str], chunk: list[CSEVar]) -> None:
        """Fold values into the accumulators element by element (emitted inside the loop).

        ``chunk`` has the accumulators' shape: a loop's [XBLOCK, RBLOCK] lane values (with their
        element indices for argmax / argmin), or a mixed-order kernel's column terms.
        """
        a = accs[0]
        c = chunk[0].name
        if self.is_arg:
            fn = "_td_argmax" if self.rtype == "argmax" else "_td_argmin"
            k.emit(f"{a}, {accs[1]} = {fn}({a}, {accs[1]}, {c}, {chunk[1].name})")
        elif self.boolish:
            fn = "tl.maximum" if self.rtype in ("any", "max", "sum") else "tl.minimum"
            k.emit(f"{a} = {fn}({a}, {c})")
        elif self.rtype == "sum":
            k.emit(f"{a} = {a} + {c}")
        elif self.rtype == "prod":
            k.emit(f"{a} = {a} * {c}")
        else:
            k.emit(f"{a} = {'_td_maximum' if self.rtype == 'max' else '_td_minimum'}({a}, {c})")

    def finish(self, k: TritonKernel, values: list[CSEVar]) -> CSEVar:
        """The stored value, cast after the loop."""
        v = values[1] if self.is_arg else values[0]
        if self.boolish:
            v = k.newvar(f"({v.name} != 0)", torch.bool)
        return v if v.dtype == self.out_dtype else k.newvar(cast_source(v, self.out_dtype), self.out_dtype)


def reduction_op(p: Placed) -> ReductionOp:
    data = p.node.buf.data
    return ReductionOp(data.reduction_type, data.acc_dtype, data.dtype)


# -------------------------------------------------------------------------- the strategies

class ReductionStrategy:
    """Base: one kernel, rows across programs; ``emit_pass`` decides how a pass covers the axis."""

    name = "base"

    def kernels(self, name: str, ctx: GroupContext, choice: ReductionChoice) -> list[KernelSpec]:
        group = ctx.group
        if group.columns is not None:  # only the mixed-order strategy can emit a transposed part
            return _as_mixed(name, ctx, choice)
        k, passes = self.emit(name, ctx, choice)
        k.meta["comments"] = [f"{self.name} reduction: {group.xnumel} rows x {group.rnumel}, "
                              f"XBLOCK={choice.xblock} RBLOCK={choice.rblock}, {passes}"]
        return [KernelSpec(name, k.source(), (triton.cdiv(group.xnumel, choice.xblock),), list(k.args.values()),
                           choice.warps or num_warps(choice.xblock * choice.rblock), dict(k.meta))]

    def emit(self, name: str, ctx: GroupContext, choice: ReductionChoice) -> tuple[TritonKernel, str]:
        """The kernel's body over rows: the prologue, then every pass (``run_passes``'s summary beside it)."""
        k = _new_kernel(name, ctx, self.name, choice)
        _rows_prologue(k, ctx.group, choice.xblock, choice.rblock)
        return k, self.run_passes(k, ctx, choice)

    def run_passes(self, k: TritonKernel, ctx: GroupContext, choice: ReductionChoice) -> str:
        """Emit every pass with the row values between them; returns "N pass(es)" as emitted."""
        group = ctx.group
        paired = self.online_pairs(k, ctx)
        emitted = 0
        for phase in range(group.num_phases):
            for p in group.placed:
                if p.kind == "x" and p.phase == phase:
                    emit_pointwise(k, ctx, p)
            moved = [pair.sum for pair in paired.values() if pair.max.phase == phase]
            nodes = [p for p in group.placed if p.kind != "x" and p.phase == phase and p.name not in paired] + moved
            if not nodes:          # every node of this pass runs in an earlier one (online softmax)
                continue
            emitted += 1
            k.pass_starts.append(len(k.lines))
            _spread_loads(k, group, nodes)
            results = self.emit_pass(k, ctx, choice, nodes, paired)
            k.spread_loads = None
            for p in nodes:
                if p.kind == "reduction":
                    publish(k, ctx, p, results[p.name])
        for p in group.placed:
            if p.kind == "x" and p.phase >= group.num_phases:
                emit_pointwise(k, ctx, p)
        sums = ", ".join(f"{pair.sum.name} beside {pair.max.name}" for pair in paired.values())
        return f"{emitted} pass(es)" + (f" (online softmax: {sums})" if sums else "")

    def online_pairs(self, k: TritonKernel, ctx: GroupContext) -> dict[str, online.OnlinePair]:
        """Sums of exp(h - max) this strategy folds into their max's pass (``codegen.online``): none here."""
        return {}

    def emit_pass(self, k: TritonKernel, ctx: GroupContext, choice: ReductionChoice,
                  nodes: list[Placed], paired: dict[str, online.OnlinePair]) -> dict[str, CSEVar]:
        raise NotImplementedError


class PersistentReduction(ReductionStrategy):
    """The whole inner axis in one block: ``rindex = tl.arange(0, RBLOCK)`` with RBLOCK >= rnumel.

    Each reduction is one block reduce; values loaded in an earlier pass stay in scope and
    are reused (a softmax reads its row once).  Only legal while XBLOCK * RBLOCK fits the
    numel limit, which the guard enforces.
    """

    name = "persistent"

    def emit_pass(self, k, ctx, choice, nodes, paired):
        if k.row_chunks:
            return _chunked_pass(k, ctx, nodes)
        k.whole_row = RSYM
        if "rindex = rbase" not in [line for _, line in k.lines]:
            k.emit("rindex = rbase")
            if k.axes[RSYM].mask:
                k.emit(f"rmask = rindex < {ctx.group.rnumel}")
        k.active = [XSYM, RSYM]
        results = {}
        for p in nodes:
            if p.kind == "xr":
                emit_pointwise(k, ctx, p)
                continue
            op = reduction_op(p)
            v = op.prepare(k, evaluate(k, ctx, p))
            idx = _rindex_block(k) if op.is_arg else None
            results[p.name] = op.finish(k, op.block(k, v, idx))
        k.active = [XSYM]
        return results


@dataclasses.dataclass
class RowChunk:
    """One static chunk of a mixed-order kernel's row (``MixedOrderReduction``): its column index variable
    ``symbol`` ([1, CHUNK] lanes), ``mask`` where it runs past the row's end, and the registers of the values
    computed on it (each chunk holds its own values of the row's nodes)."""

    symbol: sympy.Symbol
    mask: Optional[str]
    registers: dict = dataclasses.field(default_factory=dict)

    @contextlib.contextmanager
    def entered(self, k: TritonKernel):
        """Within: the kernel's reduced axis is this chunk (its index, mask and registers)."""
        axis = k.axes[RSYM]
        saved = axis.mask, k.row_chunk, k.active
        axis.mask, k.row_chunk, k.active = self.mask, (RSYM, self.symbol), [XSYM, RSYM]
        k.registers.append(self.registers)
        try:
            yield
        finally:
            k.registers.pop()
            axis.mask, k.row_chunk, k.active = saved


def _chunked_pass(k: TritonKernel, ctx: GroupContext, nodes: list[Placed]) -> dict[str, CSEVar]:
    """A persistent pass over a row held as static chunks (``k.row_chunks``): every node on each chunk, then
    each reduction's chunk lanes combined element-wise (in chunk order, as a loop would) and reduced once."""
    ops_ = {p.name: reduction_op(p) for p in nodes if p.kind == "reduction"}
    lanes: dict[str, list[list[CSEVar]]] = {name: [] for name in ops_}
    for c, chunk in enumerate(k.row_chunks):
        with chunk.entered(k):
            for p in nodes:
                if p.kind == "xr":
                    emit_pointwise(k, ctx, p)
                    continue
                op = ops_[p.name]
                v = op.prepare(k, evaluate(k, ctx, p))
                lanes[p.name].append([v, CSEVar(_rindex_block(k), torch.int64)] if op.is_arg else [v])
            if k.row_chunk_hook is not None:
                k.row_chunk_hook(c, nodes[0].phase)
    k.active = [XSYM, RSYM]
    results = {}
    for name, op in ops_.items():
        first, *rest = lanes[name]
        values = first
        if rest:
            accs = [k.fresh("acc")] + ([k.fresh("acc_idx")] if op.is_arg else [])
            for acc, v in zip(accs, first):
                k.emit(f"{acc} = {v.name}")
            for chunk_values in rest:
                op.combine(k, accs, chunk_values)
            values = [CSEVar(acc, v.dtype) for acc, v in zip(accs, first)]
        results[name] = op.finish(k, op.block(k, values[0], values[1].name if op.is_arg else None))
    k.active = [XSYM]
    return results


class LoopedReduction(ReductionStrategy):
    """A ``for roffset in range(0, rnumel, RBLOCK)`` loop per pass.

    ``rindex = roffset + rbase`` is defined inside the loop and every load or temporary
    that depends on it is emitted there (the loop opens a CSE scope that is dropped when it
    closes).  Accumulators are lanes: one per tile element, [XBLOCK, RBLOCK], combined
    element by element inside the loop (sum, prod, NaN-propagating max/min, argmax/argmin
    with a lane index accumulator), so a loop step does no cross-lane work; after the loop
    the lanes are reduced to [XBLOCK, 1] once, and cast to the stored dtype.
    """

    name = "looped"

    def online_pairs(self, k, ctx):
        return online.pairs(k, ctx)

    def emit_pass(self, k, ctx, choice, nodes, paired):
        ops_, folded = self.loop(k, ctx, choice, nodes, paired=paired)
        return {name: op.finish(k, folded[name]) for name, op in ops_.items()}

    def loop(self, k, ctx, choice, nodes, start: str = "", span: Optional[int] = None,
             paired: Optional[dict] = None):
        """Emit the chunk loop and the fold of its lanes.

        Returns the reduction ops and, per op, its [XBLOCK, 1] values (value, and index for
        argmax / argmin) before ``finish``.  A sum in ``paired`` (online softmax) is summed beside
        its max, at the running lane max (``codegen.online``).
        """
        paired = paired or {}
        partner = {pair.max.name: pair.sum for pair in paired.values()}
        rnumel = ctx.group.rnumel
        ops_ = {p.name: reduction_op(p) for p in nodes if p.kind == "reduction"}
        lanes = [choice.xblock, choice.rblock]
        k.guard(lanes, "lane accumulator")
        accs = {name: op.init(k, lanes, rnumel) for name, op in ops_.items()}
        with k.loop(k.for_range("roffset", 0, span or rnumel, choice.rblock, choice.stages), over_reduction=True):
            k.emit(f"rindex = {start}roffset + rbase")
            if k.axes[RSYM].mask:
                k.emit(f"rmask = rindex < {rnumel}")
            k.active = [XSYM, RSYM]
            for p in nodes:
                if p.kind == "xr":
                    emit_pointwise(k, ctx, p)
                    continue
                if p.name in paired:                 # summed beside its max, below
                    continue
                op = ops_[p.name]
                v = op.prepare(k, evaluate(k, ctx, p))
                if p.name in partner:
                    s = partner[p.name]
                    lane_max = k.newvar(f"_td_maximum({accs[p.name][0]}, {v.name})", op.repr_dtype)
                    online.hold_lane_max(k, ctx, p, lane_max)
                    term = ops_[s.name].prepare(k, evaluate(k, ctx, s))
                    online.combine(k, accs[p.name][0], accs[s.name][0], lane_max, term)
                    continue
                chunk = [v, CSEVar(_rindex_block(k), torch.int64)] if op.is_arg else [v]
                op.combine(k, accs[p.name], chunk)
            k.active = [XSYM]
        k.active = [XSYM, RSYM]
        folded = {}
        for name, op in ops_.items():
            if name in paired:
                continue
            lane_values = CSEVar(accs[name][0], op.repr_dtype)
            folded[name] = op.block(k, lane_values, accs[name][1] if op.is_arg else None)
        for name, pair in paired.items():
            if name in ops_:
                folded[name] = [online.fold(k, accs[pair.max.name][0], accs[name][0], folded[pair.max.name][0])]
        k.active = [XSYM]
        return ops_, folded


#: Partial dtypes that the tagged last-program form carries (their bits below the flag), and the flag: bit 32.
_TAG_BITS = {torch.float32: 32, torch.int32: 32}
_TAG_FLAG = 1 << 32


def tagged_partials(ops) -> bool:
    """Does a split whose last program finishes (``split_last_program_final``) learn that the partials of
    reductions ``ops`` are in from flags stored with them (``config.split_last_program_sync``)?  Only where each
    partial fits in 32 bits beside its flag: an arg reduction's int64 index or a float64 sum takes the fence.  Not
    on ROCm: the poll's padding counts 32 threads a warp (``_tagged_last_program``)."""
    return (config.split_last_program_sync == "tagged" and torch.version.hip is None
            and all(op.repr_dtype in _TAG_BITS and not op.is_arg for op in ops))


class SplitReduction(ReductionStrategy):
    """Few outputs over a huge axis: S programs per row block each reduce one chunk of the axis.

    Kernel 1 (grid: row blocks x S) loops over its chunk like the looped strategy and
    stores its [XBLOCK, 1] partials to a workspace of S x rows; kernel 2 reduces the S
    partials of each row in a fixed order (deterministic, no atomics on values) and runs the
    epilogue.  Where the partials are few (``heuristics.split_last_program_final``) kernel 2's
    body runs instead in whichever of a row block's programs finishes last, counted on an
    arrival counter (``_last_program_final``): one launch.  Legal only for groups whose reductions need no finished reduction
    (``KernelGroup.split_ok``): layer-norm backward's dW/dB sums, a norm over 2^21 elements.
    """

    name = "split"

    def kernels(self, name, ctx, choice):
        group = ctx.group
        if group.columns is not None:
            return _as_mixed(name, ctx, choice)
        chunk = max(choice.rblock, triton.cdiv(triton.cdiv(group.rnumel, choice.splits), choice.rblock) * choice.rblock)
        splits = max(1, triton.cdiv(group.rnumel, chunk))
        if split_last_program_final(choice.xblock, splits):
            return [self._partial(f"{name}_partial", ctx, choice, chunk, splits, last_program_final=True)]
        partial = self._partial(f"{name}_partial", ctx, choice, chunk, splits)
        final = self._final(f"{name}_final", ctx, choice, splits, partial)
        return [partial, final]

    def _partial(self, name, ctx, choice, chunk, splits, last_program_final: bool = False):
        group = ctx.group
        k = _new_kernel(name, ctx, "split", choice)
        k.meta.update(splits=splits, chunk=chunk, last_program_final=last_program_final)
        # the chunks (multiples of RBLOCK) tile the axis exactly: no step reads past it, no mask
        _rows_prologue(k, group, choice.xblock, choice.rblock, rmask=chunk * splits != group.rnumel or not group.rnumel)
        pid = "tl.program_id(1).to(tl.int64)" if k.int64 else "tl.program_id(1)"
        k.emit(f"rstart = {pid} * {chunk}")
        nodes = [p for p in group.placed if p.kind != "x"]
        _spread_loads(k, group, nodes)
        ops_, folded = LoopedReduction().loop(k, ctx, choice, nodes, start="rstart + ", span=chunk)
        k.spread_loads = None
        comments = [f"split reduction, partial pass: {group.xnumel} rows x {group.rnumel} in {splits} "
                    f"chunks of {chunk}, XBLOCK={choice.xblock} RBLOCK={choice.rblock}"]
        workspaces = {}
        steps = triton.cdiv(chunk, choice.rblock)
        warps = split_partial_warps(choice.xblock * choice.rblock, steps, len(ops_))
        if last_program_final and tagged_partials(ops_.values()):
            warps = tagged_split_warps(warps, steps, choice.xblock * next_pow2(splits))
            width = self._tagged_last_program(k, ctx, choice, splits, ops_, folded, 32 * warps)
            # the poll's volatile loads: one of each slot array before its loop, one in it
            k.meta.update(max_warps=choice.xblock * width // 32, owned_loads=2 * len(ops_))
            comments.append(f"the last of a row block's {splits} programs to count in polls their flagged "
                            f"partials (tagged, no fence), reduces them and zeroes them")
        else:
            for pname, op in ops_.items():
                ws = k.workspace(f"{pname}_partials", splits * group.xnumel, op.repr_dtype)
                k.emit(f"tl.store({ws} + ({pid} * {group.xnumel} + xindex), {folded[pname][0].name}, {_xmask(k)})")
                entry = [(f"{pname}_partials", op.repr_dtype)]
                if op.is_arg:
                    wsi = k.workspace(f"{pname}_partial_idx", splits * group.xnumel, torch.int64)
                    k.emit(f"tl.store({wsi} + ({pid} * {group.xnumel} + xindex), {folded[pname][1].name}, "
                           f"{_xmask(k)})")
                    entry.append((f"{pname}_partial_idx", torch.int64))
                workspaces[pname] = entry
            if last_program_final:
                self._last_program_final(k, ctx, choice, splits, workspaces)
                comments.append(f"the last of a row block's {splits} programs to finish reduces their "
                                f"partials (an arrival count per row block)")
        k.meta["workspaces"] = workspaces
        k.meta["comments"] = comments
        return KernelSpec(name, k.source(), (triton.cdiv(group.xnumel, choice.xblock), splits),
                          list(k.args.values()), warps, dict(k.meta))

    def _tagged_last_program(self, k, ctx, choice, splits, ops_, folded, threads: int) -> int:
        """The partial kernel's end where its last program finishes through tagged partials
        (``config.split_last_program_sync``): no program waits on a fence.  Returns the poll's padded width.

        Each program writes each of its partials as one 64-bit word, the partial's bits below bit 32 and a flag
        at bit 32, with a relaxed atomic exchange into a slot of its own; then it counts itself in on its row
        block's counter with a relaxed atomic.  The program that takes the count's last value polls the row
        block's slots (volatile loads, which L1 cannot answer) until every flag is set, reduces the partials in
        split order as the final kernel would, and leaves the slots and the counter zeroed for the next launch,
        which the stream runs after this one.  The flag travels in the same word as its partial, so no program
        has to order its partial before its count.  The poll ends: every program that counted is running and
        waits on nothing, so each of its threads issues its exchange.

        One thread alone loads each slot.  A tile smaller than the program's ``threads`` would have Triton give
        several warps a copy of each word, each loaded on its own, and a reduction takes each element from
        whichever copy writes shared memory last: the poll's count could then come from a copy that saw a flag
        while the sum took one that did not.  So the poll's tile
        (XBLOCK x width words, padded splits masked off) holds at least one word per thread: Triton's coalescing
        then gives a thread at most words / threads of them and covers the tile without a copy (the kernel
        records ``max_warps``, which tuning keeps to, and ``owned_loads``, its count of volatile loads, which the
        runtime checks in the compiled layout before the first launch: ``compiler.layouts``).  The count and the sum read the same registers, and the poll's
        last count, a reduction across the warps, has every load in before any slot is zeroed.  (A barrier and
        a second load of the slots would close the race too, at several times the poll's cost:
        reports/performance-log.md, split_last_program_sync.)"""
        group = ctx.group
        pid = "tl.program_id(1).to(tl.int64)" if k.int64 else "tl.program_id(1)"
        xmask = _xmask(k)
        width = max(next_pow2(splits), next_pow2(triton.cdiv(threads, choice.xblock)))
        slots = {}
        for pname, op in ops_.items():
            slot = k.semaphore(f"{pname}_slots", splits * group.xnumel, torch.int64)
            bits = _TAG_BITS[op.repr_dtype]
            word = (f"({folded[pname][0].name}.to(tl.int{bits}, bitcast=True).to(tl.int64) & {(1 << bits) - 1})"
                    f" | {_TAG_FLAG}")
            where = f", mask={xmask}" if xmask else ""
            k.emit(f"tl.atomic_xchg({slot} + ({pid} * {group.xnumel} + xindex), {word}{where}, sem='relaxed')")
            slots[pname] = (slot, op.repr_dtype)
        with self._counted_last(k, ctx, choice, splits, "relaxed", width=width) as sblock:
            mask = " & ".join(m for m in (xmask, f"(sbase < {splits})" if splits % sblock else None) if m)
            at = f"sbase * {group.xnumel} + xindex"
            words = {p: k.fresh("words") for p in slots}
            pending = k.fresh("pending")

            def poll() -> None:
                for p, (slot, _) in slots.items():
                    load = (f"tl.load({slot} + ({at}), {mask}, other={_TAG_FLAG}, volatile=True)" if mask
                            else f"tl.load({slot} + ({at}), volatile=True)")
                    k.emit(f"{words[p]} = {load}")
                k.emit(f"{pending} = " + " + ".join(f"tl.sum(tl.where({words[p]} < {_TAG_FLAG}, 1, 0))"
                                                     for p in slots))
            poll()
            with k.branch(f"while {pending} > 0:"):
                poll()
            decoded = {}
            for p, (slot, dtype) in slots.items():
                bits = _TAG_BITS[dtype]
                value = f"({words[p]} & {(1 << bits) - 1}).to(tl.int{bits})"
                if dtype.is_floating_point:
                    value += f".to({tl_dtype(dtype)}, bitcast=True)"
                decoded[f"{p}_partials"] = k.newvar(value, dtype).name
            self._final_body(k, ctx, splits, sblock, lambda p: [(f"{p.name}_partials", slots[p.name][1])],
                             decoded=decoded)
            for p, (slot, _) in slots.items():
                zeros = k.full([choice.xblock, sblock], 0, torch.int64)
                k.emit(f"tl.store({slot} + ({at}), {zeros}" + (f", {mask})" if mask else ")"))
        return width

    @staticmethod
    def _last_program_final(k: TritonKernel, ctx: GroupContext, choice: ReductionChoice, splits: int,
                            workspaces: dict) -> None:
        """The final pass inside the partial kernel: each program counts itself in on its row block's
        counter once its partials are stored, and the one that arrives last reduces the block's partials in
        split order (as the final kernel would: deterministic, no atomics on values) and resets the counter.

        Ordering: a barrier puts every thread's partial stores before the count, whose acq_rel atomic
        publishes them at GPU scope (a release) and, in the last program, orders its reads after the others'
        stores (an acquire); those reads bypass L1 (``.cg``), where a line of an earlier launch may linger.
        One launch instead of two; the counters are a semaphore workspace (``KernelArg.semaphore``)."""
        with SplitReduction._counted_last(k, ctx, choice, splits, "acq_rel", barrier=True) as sblock:
            SplitReduction._final_body(k, ctx, splits, sblock, lambda p: workspaces[p.name], cache=".cg")

    @staticmethod
    @contextlib.contextmanager
    def _counted_last(k: TritonKernel, ctx: GroupContext, choice: ReductionChoice, splits: int, sem: str,
                      barrier: bool = False, width: Optional[int] = None):
        """Count this program in on its row block's arrival counter (an atomic add of semantics ``sem``; a
        semaphore workspace).  The body runs in the program that takes the last count, on an [XBLOCK, padded
        splits] tile that ``sbase`` indexes (the padded width, ``width`` where given, is yielded), and then the
        counter is zeroed.  ``barrier``: a CTA barrier before the count and after it, so that every thread's
        stores precede the count and the last program's reads follow it."""
        counter = k.semaphore("arrivals", ctx.group.xnumel)
        if barrier:
            k.emit("tl.debug_barrier()")
        arrived = k.fresh("arrived")
        k.emit(f"{arrived} = tl.atomic_add({counter} + tl.program_id(0), 1, sem='{sem}')")
        with k.branch(f"if {arrived} == {splits - 1}:"), k.reads_once():
            if barrier:
                k.emit("tl.debug_barrier()")
            sblock = width or next_pow2(splits)
            k.guard([choice.xblock, sblock], "the last program's partials")
            cast = ".to(tl.int64)" if k.int64 else ""
            k.emit(f"sbase = {k.arange(sblock, 'the split partials')}{cast}[None, :]")
            tile, k.tile = k.tile, [choice.xblock, sblock]
            try:
                yield sblock
            finally:
                k.tile = tile
            k.emit(f"tl.store({counter} + tl.program_id(0), 0)")

    def _final(self, name, ctx, choice, splits, partial: KernelSpec):
        group = ctx.group
        sblock = next_pow2(splits)
        xblock = max(1, min(next_pow2(group.xnumel), max(1, 4096 // sblock)))
        k = _new_kernel(name, ctx, "split", ReductionChoice("split", xblock, sblock, splits))
        _rows_prologue(k, group, xblock, sblock, rname="sbase", rmask=False)
        self._final_body(k, ctx, splits, sblock, lambda p: partial.meta["workspaces"][p.name])
        k.meta["comments"] = [f"split reduction, final pass: {splits} partials per row, XBLOCK={xblock}"]
        return KernelSpec(name, k.source(), (triton.cdiv(group.xnumel, xblock),), list(k.args.values()),
                          num_warps(xblock * sblock), dict(k.meta))

    @staticmethod
    def _final_body(k: TritonKernel, ctx: GroupContext, splits: int, sblock: int, entry_of, cache: str = "",
                    decoded: Optional[dict] = None) -> None:
        """Reduce each row's ``splits`` partials (``sbase`` indexes them; ``entry_of(p)``: the workspaces
        that hold reduction ``p``'s; ``decoded``: workspace name -> a variable already holding its tile, as the
        tagged form's poll leaves them), publish the results and run the epilogue."""
        group = ctx.group
        if splits % sblock:
            k.emit(f"smask = sbase < {splits}")
        mask = " & ".join(m for m in (_xmask(k), "smask" if splits % sblock else None) if m)
        hint = f", cache_modifier='{cache}'" if cache else ""
        for p in group.placed:
            if p.kind != "reduction":
                continue
            op = reduction_op(p)
            loaded = []
            for ws_name, dtype in entry_of(p):
                if decoded is not None:
                    loaded.append(CSEVar(decoded[ws_name], dtype))
                    continue
                ws = k.workspace(ws_name, splits * group.xnumel, dtype)
                other = op.identity() if dtype == op.repr_dtype else 0
                load = f"tl.load({ws} + (sbase * {group.xnumel} + xindex)" + (
                    f", {mask}, other={_lit(other, dtype)}{hint})" if mask else f"{hint})")
                loaded.append(k.newvar(load, dtype))
            if mask:
                ident = k.newvar(k.full(k.scalar_shape, op.identity(), op.repr_dtype), op.repr_dtype)
                loaded[0] = k.newvar(f"tl.where({mask}, {loaded[0].name}, {ident.name})", op.repr_dtype)
            values = op.block(k, loaded[0], loaded[1].name if op.is_arg else None)
            publish(k, ctx, p, op.finish(k, values))
        for p in group.placed:
            if p.kind == "x":
                emit_pointwise(k, ctx, p)


class MixedOrderReduction(ReductionStrategy):
    """Row reductions and column reductions of the same rows, in one pass over the rows.

    Layer-norm backward reads x and dy for dx (per-row sums) and again for dW and dB
    (per-column sums over every row).  Here each program owns a contiguous range of rows
    and walks it XBLOCK whole rows at a time (RBLOCK >= the row length, so the row group
    runs as in the persistent strategy, all its passes on the same loaded tile).  On that
    tile each column reduction is evaluated too -- its body's output index is the column
    (``rindex``), its reduced index the row (``xindex``) -- and combined element-wise into
    an [XBLOCK, RBLOCK] accumulator that lives across the row loop (no cross-row reduce per
    step); after the loop the accumulator is folded over its rows once (``_fold_rows``).
    Loads of a shared input are the same expression in both parts, so the kernel's CSE
    reads it once.

    Kernel 1 stores each program's column partials to a workspace of programs x columns;
    kernel 2 is the split strategy's final pass: it reduces the partials of each column in
    program order (deterministic, no atomics) and runs the column group's epilogue.
    """

    name = "mixed_order"

    def kernels(self, name, ctx, choice):
        group = ctx.group
        rows_per_program = choice.xblock * triton.cdiv(triton.cdiv(max(group.xnumel, 1), choice.splits),
                                                       choice.xblock)
        programs = max(1, triton.cdiv(group.xnumel, rows_per_program))
        partial = self._partial(f"{name}_partial", ctx, choice, rows_per_program, programs)
        columns = GroupContext(group.columns, ctx.inlined, ctx.stored, ctx.buffers)
        final = SplitReduction()._final(f"{name}_final", columns, choice, programs, partial)
        return [partial, final]

    def _partial(self, name, ctx, choice, rows_per_program, programs):
        group, cols = ctx.group, ctx.group.columns
        xnumel, rnumel, xblock, rblock = group.xnumel, group.rnumel, choice.xblock, choice.rblock
        k = _new_kernel(name, ctx, "mixed_order", choice)
        width = mixed_order_row_chunk(rnumel, rblock)       # lanes of a row chunk (rblock: the whole padded row)
        prefetch = mixed_order_prefetch(xblock * rblock, cols.accumulator_bytes())
        k.meta.update(programs=programs, rows_per_program=rows_per_program, row_chunk=width, prefetch_next_rows=prefetch)
        k.guard([xblock, width], "tile")
        k.tile = [xblock, width]
        k.add_axis(XSYM, xnumel, xblock, mask=xnumel % rows_per_program != 0)
        k.add_axis(RSYM, rnumel, width, mask=rnumel % width != 0)
        pid = "tl.program_id(0).to(tl.int64)" if k.int64 else "tl.program_id(0)"
        cast = ".to(tl.int64)" if k.int64 else ""
        if width < rblock:
            counters["mixed_order_row_chunks"] += 1
            k.emit(f"rbase = {k.arange(width, 'a row chunk')}{cast}[None, :]")
            k.row_chunks = chunks = []
            for c in range(triton.cdiv(rnumel, width)):
                symbol = indexing.index_symbol(f"rindex{c}")
                k.emit(f"{symbol.name} = {c * width} + rbase" if c else f"{symbol.name} = rbase")
                mask = f"rmask{c}" if (c + 1) * width > rnumel else None
                if mask:
                    k.emit(f"{mask} = {symbol.name} < {rnumel}")
                chunks.append(RowChunk(symbol, mask))
        else:
            k.emit(f"rbase = {k.arange(rblock, 'the row')}{cast}[None, :]")
            k.emit("rindex = rbase")
            k.whole_row = RSYM
            if k.axes[RSYM].mask:
                k.emit(f"rmask = rindex < {rnumel}")
            chunks = [RowChunk(RSYM, k.axes[RSYM].mask)]      # the whole row, its registers the loop's
        ops_ = {p.name: reduction_op(p) for p in cols.placed if p.kind == "reduction"}
        accs = {pname: [op.init(k, [xblock, width], rnumel)[0] for _ in chunks] for pname, op in ops_.items()}
        rows = GroupContext(group.rows(), ctx.inlined, ctx.stored, ctx.buffers)
        transposed = GroupContext(cols, ctx.inlined, ctx.stored, ctx.buffers, subst={XSYM: RSYM, RSYM: XSYM},
                                  held=frozenset(rows.group.names))
        pending = {(p.name, c) for p in cols.placed if p.kind == "reduction" for c in range(len(chunks))}
        passes = _column_passes(cols, rows.group)

        def column_terms(c: int, phase: Optional[int] = None) -> None:
            """Chunk ``c``'s terms of the column reductions (all those left, or those whose row values pass
            ``phase`` has by now: ``_column_passes``), combined into their accumulators."""
            for p in cols.placed:
                if (p.name, c) not in pending or (phase is not None and passes[p.name] != phase):
                    continue
                pending.discard((p.name, c))
                op = ops_[p.name]
                v = op.prepare(k, evaluate(k, transposed, p), axis=0)
                op.combine(k, [accs[p.name][c]], [v])    # element-wise: one lane per (row slot, column)
                if chunks[c].mask:
                    # lanes past the last column stay at the identity: a padded row's mask is known per lane
                    # at compile time, so their accumulation is dead code LLVM drops (16384 lanes for 10240
                    # columns: 49 of ~700 FADDs a row, sm_90)
                    ident = k.newvar(k.full(k.scalar_shape, op.identity(), op.repr_dtype), op.repr_dtype)
                    k.emit(f"{accs[p.name][c]} = tl.where({chunks[c].mask}, {accs[p.name][c]}, {ident.name})")

        if k.row_chunks:
            # a chunk's column terms as soon as the row pass has their inputs, before the pass's reductions:
            # the row's values they read (layer norm's dy and xhat) need not stay live through the barriers
            k.row_chunk_hook = column_terms
        with k.loop(k.for_range("xstep", 0, rows_per_program, xblock, choice.stages), over_reduction=False):
            k.emit(f"xindex = {pid} * {rows_per_program} + xstep + {k.arange(xblock, 'rows')}{cast}[:, None]")
            if k.axes[XSYM].mask:
                k.emit(f"xmask = xindex < {xnumel}")
            k.active = [XSYM]
            PersistentReduction().run_passes(k, rows, choice)
            k.row_chunk_hook = None
            for c, chunk in enumerate(chunks):
                with chunk.entered(k):
                    column_terms(c)
            k.active = [XSYM]
        workspaces = {}
        for pname, op in ops_.items():
            ws = k.workspace(f"{pname}_partials", programs * rnumel, op.repr_dtype)
            for c, chunk in enumerate(chunks):
                with chunk.entered(k):
                    folded = self._fold_rows(k, op, CSEVar(accs[pname][c], op.repr_dtype), xblock, width)
                    mask = f", {chunk.mask}" if chunk.mask else ""
                    k.emit(f"tl.store({ws} + ({pid} * {rnumel} + {chunk.symbol.name}), {folded.name}{mask})")
            workspaces[pname] = [(f"{pname}_partials", op.repr_dtype)]
        k.active = [XSYM, RSYM]
        k.meta["workspaces"] = workspaces
        k.meta["comments"] = [f"mixed-order reduction: {xnumel} rows x {rnumel}, rows reduced in registers, "
                              f"{len(ops_)} column reduction(s) into {programs} partials of {rows_per_program} rows, "
                              f"XBLOCK={xblock} RBLOCK={rblock}"]
        return KernelSpec(name, k.source(), (programs,), list(k.args.values()),
                          mixed_order_warps(xblock * rblock, cols.accumulator_bytes()), dict(k.meta))

    @staticmethod
    def _fold_rows(k: TritonKernel, op: ReductionOp, acc: CSEVar, xblock: int, rblock: int) -> CSEVar:
        """[XBLOCK, RBLOCK] lane accumulators -> [1, RBLOCK], once, after the row loop.

        Max / min / any / all are exact in any order: one block reduce.  A float sum of many
        rows folds in two stages, [A, B, RBLOCK] summed over B then A (A * B = XBLOCK), so no
        chain of additions is longer than ~sqrt(XBLOCK) even where the reduction runs
        sequentially (Triton's interpreter sums along a strided axis one row after another:
        3,626 equal rows in one chain came out 4e-5 off).
        """
        if op.rtype != "sum" or op.boolish or not op.repr_dtype.is_floating_point or xblock <= 64:
            return op.block(k, acc, None, axis=0)[0]
        b = 1 << ((xblock.bit_length() - 1) // 2)
        return k.newvar(f"tl.sum(tl.sum(tl.reshape({acc.name}, [{xblock // b}, {b}, {rblock}]), 1), 0)[None, :]",
                        op.repr_dtype)


def _column_passes(cols: KernelGroup, rows: KernelGroup) -> dict[str, int]:
    """Column reduction -> the row pass during which a mixed-order kernel can take its terms: its row-group
    inputs (per-row values, ``scheduler._column_reads_of_rows``) are a pass's per-row nodes, held from that
    pass's start, or a pass's reductions, held once the pass is over."""
    held = {q.name: q.phase + (q.kind == "reduction") for q in rows.placed}
    return {p.name: max((held[r.buffer.name] for r in p.node.info.reads if r.buffer.name in held), default=0)
            for p in cols.placed if p.kind == "reduction"}


STRATEGIES = {s.name: s for s in (PersistentReduction(), LoopedReduction(), SplitReduction(),
                                  MixedOrderReduction())}


def _as_mixed(name: str, ctx: GroupContext, choice: ReductionChoice) -> list[KernelSpec]:
    """A mixed-order group handed to another strategy (an autotune variant): keep its XBLOCK."""
    base = ctx.group.mixed_order_choice()
    return STRATEGIES["mixed_order"].kernels(name, ctx, ReductionChoice("mixed_order", choice.xblock, base.rblock,
                                                                        base.splits, choice.stages))


# ------------------------------------------------------------------------- tile orientation

def reads_along_kept_axis(group: KernelGroup) -> bool:
    """Do most of the group's reduction-domain loads walk memory along the kept axis?

    A load whose storage offset has stride 1 in ``rindex`` reads contiguously along the
    reduced axis (a row sum); one with stride 1 in ``xindex`` and another stride in
    ``rindex`` reads along the kept axis (a column sum: layer-norm backward's dW over rows).
    The second kind wants an outer-reduction tile (``heuristics.choose_reduction(outer=True)``).
    """
    along_kept = along_reduced = 0
    for offset in _domain_offsets(group):
        if indexing.affine_strides(offset, [RSYM]) == (1,):
            along_reduced += 1
        else:
            along_kept += indexing.walks_across(offset, [XSYM, RSYM])
    return along_kept > along_reduced


def reads_along_reduced_axis(group: KernelGroup, nodes: list[Placed]) -> bool:
    """Does any load of ``nodes`` (one pass of the group) move with ``rindex`` in storage?  Reads of the
    group's own values come from registers, not memory, and do not count.

    Without one (every input broadcast along the reduced axis: stride 0, an expanded row) the
    pass's loads are all [XBLOCK, 1] blocks.  Triton lays such a block out with its threads
    along the rows, and with no [XBLOCK, RBLOCK] load to anchor another layout the tile broadcast
    from it keeps that one: each thread holds whole rows.  On an H100 (triton 3.6) a persistent
    sum of 4093 copies of one value then ran as one sequential chain, 266 ulp off, and a looped
    kernel over bf16 [2, 956086] spilled 2,582 registers and took 45 s to compile.  Such passes
    load over the whole tile instead (``TritonKernel.spread_loads``)."""
    return any(RSYM in offset.free_symbols
               for offset in _domain_offsets(group, nodes, skip=frozenset(group.names)))


def _domain_offsets(group: KernelGroup, nodes: Optional[list[Placed]] = None, skip: frozenset = frozenset()):
    """The storage offset of each read of ``nodes`` (default: the group's) in the reduction domain, in kernel
    symbols; reads of the buffers in ``skip`` left out."""
    return (offset for _, _, offset in _domain_reads(group, nodes, skip))


def _domain_reads(group: KernelGroup, nodes: Optional[list[Placed]] = None, skip: frozenset = frozenset()):
    """(node, read, storage offset in kernel symbols) of each read of ``nodes`` (default: the group's) in the
    reduction domain; reads of the buffers in ``skip`` left out."""
    bounds = group.bounds()
    for p in group.placed if nodes is None else nodes:
        if p.kind not in ("reduction", "xr"):
            continue
        for read in p.node.info.reads:
            if read.buffer.name in skip:
                continue
            offset = _read_in_kernel(read, p, bounds)
            if read.offset is None:
                offset = read.buffer.layout.index(offset)
            yield p, read, sympy.expand(offset)


def reread_row_reads(group: KernelGroup) -> int:
    """Reads along the reduced axis that ``group`` makes in more than one pass: what a looped kernel of it reads
    again from memory (layer norm's dx: x, dy and w, read for its row sums and again for dx; softmax: x).
    A read one pass makes (an RMSNorm's weight, read for the output alone) is not counted.  Reads of one buffer
    at two offsets (``x[:, 1:]`` and ``x[:, :-1]``) are two reads."""
    passes: dict = {}
    for p, read, offset in _domain_reads(group, skip=frozenset(group.names)):
        if RSYM in offset.free_symbols:
            passes.setdefault((read.buffer.name, offset), set()).add(p.phase)
    return sum(1 for phases in passes.values() if len(phases) > 1)


def live_row_tiles(ctx: GroupContext) -> int:
    """Row tiles ([XBLOCK, RBLOCK] values) a persistent kernel of the group keeps in registers from one pass to a
    later one: the group is emitted persistent (one row a program, nothing kept) and, at the start of each pass
    after the first, the row-shaped values defined before it that it or a later pass uses are counted; the
    largest count is returned.  Softmax keeps x into its sum's pass and exp(x - max) into its output's: 1.  An
    entropy, -(softmax(x) * log_softmax(x)).sum(-1), keeps both x - max and its exp into the last pass: 2.
    Values inside one pass (a max's NaN flags) are not counted: the compiler schedules them together."""
    k = _persistent_trial(ctx)
    return max(map(len, _live_across(k.lines, k.pass_starts)), default=0)


def held_tiles_are_loads(ctx: GroupContext) -> bool:
    """Is a persistent kernel of the group two passes, keeping row tiles from the first to the second, every one
    of them a plain load of an input (cast or broadcast at most)?  An RMSNorm keeps x: reading it again costs a
    cache hit and nothing else (``config.persistent_reread_loads``).  Softmax keeps exp(x - max): computing it
    again costs more than holding it.  A layer norm's forward (three passes) would read x twice more and
    subtract its mean twice: unmeasured, it stays persistent."""
    k = _persistent_trial(ctx)
    if len(k.pass_starts) != 2:
        return False
    held = set().union(*_live_across(k.lines, k.pass_starts))
    if not held:
        return False
    exprs = {}
    for _, line in k.lines:
        m = _ASSIGN.match(line)
        if m and "," not in m.group(1):
            exprs.setdefault(m.group(1).strip(), m.group(2))
    return all(_is_load(name, exprs) for name in held)


_LOAD_OF = (re.compile(r"^(\w+)\.to\(tl\.\w+\)$"), re.compile(r"^_td_bf16_to_f32\((\w+)\)$"),
            re.compile(r"^tl\.broadcast_to\((\w+), \[[\d, ]*\]\)$"))


def _is_load(name: str, exprs: dict) -> bool:
    """``name`` is a ``tl.load`` in ``exprs`` (name -> source), through casts and broadcasts."""
    for _ in range(8):
        src = exprs.get(name, "")
        if src.startswith("tl.load("):
            return True
        inner = next((m.group(1) for m in (p.match(src) for p in _LOAD_OF) if m), None)
        if inner is None:
            return False
        name = inner
    return False


def _persistent_trial(ctx: GroupContext) -> TritonKernel:
    """The group emitted persistent, one row a program, on trial (the debug counters count real emissions only)."""
    choice = ReductionChoice("persistent", 1, next_pow2(ctx.group.rnumel))
    before = dict(counters)
    try:
        k, _ = STRATEGIES["persistent"].emit("live_row_tiles", ctx, choice)
    finally:
        counters.clear()
        counters.update(before)
    return k


_ASSIGN = re.compile(r"^([A-Za-z_][\w, ]*?) = (.*)$")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_BLOCK_REDUCE = re.compile(r"\btl\.(?:sum|max|min)\(.*, 1\)\[:, None\]")
_ROW_AXIS = ("rbase", "rindex", "rmask")


def _live_across(lines: list[tuple[int, str]], starts: list[int]) -> list[set]:
    """For each of ``starts`` (line counts) after the first, the row tiles of ``lines`` (a kernel's (indent, line)
    pairs) defined before it and used at or after it.  A row tile is row-shaped -- computed from the reduced
    axis's ``rbase`` / ``rindex`` / ``rmask`` or from another row-shaped value, and not a block reduction's
    [XBLOCK, 1] result -- and read from the row: a load whose address moves along the reduced axis, or computed
    from one.  Index arithmetic (``idx``) and values of the axis alone (a one-hot compare against ``rindex``, a
    load spread over the row at one address) are left out: a loop computes them again at no memory cost."""
    row, moving, reads, defined = set(_ROW_AXIS), set(_ROW_AXIS), set(), {}
    uses: list[set] = []
    for i, (_, line) in enumerate(lines):
        m = _ASSIGN.match(line)
        names = _NAME.findall(m.group(2) if m else line)
        uses.append(set(names))
        if m:
            src = m.group(2)
            targets = [t.strip() for t in m.group(1).split(",")]
            shaped = not _BLOCK_REDUCE.search(src) and any(n in row for n in names)
            moves = any(n in moving for n in _NAME.findall(_SPREAD.sub("", src)))
            read = any(n in reads for n in names) or (
                src.startswith("tl.load(") and any(n in moving for n in _NAME.findall(_SPREAD.sub("", _pointer(src)))))
            for t in targets:
                defined.setdefault(t, i)
                for flag, into in ((shaped, row), (moves, moving), (read, reads)):
                    if flag:
                        into.add(t)
    tiles = row.difference(_ROW_AXIS) & reads
    out = []
    for start in starts[1:]:
        later = set().union(*uses[start:]) if start < len(uses) else set()
        out.append({t for t in tiles if defined[t] < start and t in later and not t.startswith("idx")})
    return out


_SPREAD = re.compile(r"\+ 0 \* \w+")


def _pointer(load: str) -> str:
    """The address argument of a ``tl.load(...)`` source (its first argument: mask and options left out)."""
    depth = 0
    for i, ch in enumerate(load[len("tl.load("):], len("tl.load(")):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                return load[len("tl.load("):i]
            depth -= 1
        elif ch == "," and depth == 0:
            return load[len("tl.load("):i]
    return load


def choose(ctx: GroupContext) -> ReductionChoice:
    """The strategy and blocks of a (not mixed-order) reduction group.

    A row in the wide persistent range (``heuristics.persistent_wide``) is emitted persistent once on trial to
    count the row tiles it would keep (``live_row_tiles``); other groups pay nothing for it."""
    group = ctx.group
    outer = reads_along_kept_axis(group)
    held, reread = 0, False
    if not outer and group.rnumel > config.persistent_max_rnumel and persistent_wide(group.rnumel, 1):
        held = live_row_tiles(ctx)
    elif may_read_again(group.xnumel, group.rnumel, group.split_ok(), outer):
        reread = held_tiles_are_loads(ctx)
    tagged = config.split_last_program_final and tagged_partials(
        reduction_op(p) for p in group.placed if p.kind == "reduction")
    return choose_reduction(group.xnumel, group.rnumel, group.split_ok(), outer=outer, held=held,
                            rereads=reread_row_reads(group), reread=reread, tagged=tagged)


# ------------------------------------------------------------------------------- helpers

def _new_kernel(name: str, ctx: GroupContext, strategy: str, choice: ReductionChoice) -> TritonKernel:
    reductions = [f"{p.name} ({p.node.buf.data.reduction_type})" for p in ctx.group.placed if p.kind == "reduction"]
    k = TritonKernel(name, ctx.buffers, what=f"reduction kernel {name}", reductions=reductions,
                     rnumel=ctx.group.rnumel, int64=needs_int64(ctx))
    k.meta.update(kind="reduction", strategy=strategy, xblock=choice.xblock, rblock=choice.rblock,
                  splits=choice.splits, loop_stages=choice.stages, xnumel=ctx.group.xnumel, rnumel=ctx.group.rnumel)
    return k


def _rows_prologue(k: TritonKernel, group: KernelGroup, xblock: int, rblock: int, rname: str = "rbase",
                   rmask: Optional[bool] = None) -> None:
    rows_prologue(k, group.xnumel, group.rnumel, xblock, rblock, rname, rmask)


def rows_prologue(k: TritonKernel, xnumel: int, rnumel: int, xblock: int, rblock: int, rname: str = "rbase",
                  rmask: Optional[bool] = None) -> None:
    """A [xblock, rblock] tile over ``xnumel`` rows of ``rnumel``: ``xindex`` (and ``xmask``) and the row block's
    lanes ``rname``; only the row axis active yet."""
    k.guard([xblock, rblock], "tile")
    k.tile = [xblock, rblock]
    k.add_axis(XSYM, xnumel, xblock, mask=xnumel % xblock != 0)
    k.add_axis(RSYM, rnumel, rblock, mask=(rnumel % rblock != 0 or rnumel == 0) if rmask is None else rmask)
    pid = "tl.program_id(0).to(tl.int64)" if k.int64 else "tl.program_id(0)"
    k.emit(f"xoffset = {pid} * {xblock}")
    k.emit(f"xindex = xoffset + {k.arange(xblock, 'rows')}[:, None]")
    if xnumel % xblock:
        k.emit(f"xmask = xindex < {xnumel}")
    cast = ".to(tl.int64)" if k.int64 else ""
    k.emit(f"{rname} = {k.arange(rblock, 'the reduction block')}{cast}[None, :]")
    k.active = [XSYM]


def _spread_loads(k: TritonKernel, group: KernelGroup, nodes: list[Placed]) -> None:
    """Before a pass over ``nodes``: its loads span the tile if none of them moves along the reduced axis."""
    spread = config.spread_row_loads and not reads_along_reduced_axis(group, nodes)
    k.spread_loads = (RSYM, "rbase") if spread else None


def _rindex_block(k: TritonKernel) -> str:
    """Each tile lane's index along the reduced axis (the current row chunk's, in a chunked kernel), int64."""
    k.guard(k.tile, "argmax index block")
    return k.newvar(f"tl.broadcast_to({k.axis_name(RSYM)}.to(tl.int64), {k.tile})", torch.int64).name


def _xmask(k: TritonKernel) -> Optional[str]:
    return k.axes[XSYM].mask


def _lit(value, dtype) -> str:
    from .kernel import literal
    return literal(value, dtype)


__all__ = ["STRATEGIES", "choose", "rows_prologue", "reread_row_reads", "live_row_tiles", "reads_along_kept_axis", "ReductionStrategy", "PersistentReduction", "LoopedReduction", "SplitReduction",
           "MixedOrderReduction", "ReductionOp"]
