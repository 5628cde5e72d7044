"""The strategy protocol (``ReductionStrategy``: when the auto choice takes it, its blocks, rows across programs,
``emit_pass`` covering the inner axis), what the choice reads about a group (``RowFacts``), and the helpers every
strategy's kernel starts from."""
from __future__ import annotations

from typing import Callable, Optional, Union

import torch
import triton

from ...config import config
from ...exc import CodegenError
from ...heuristics import ReductionChoice, next_pow2, num_warps
from ...scheduler import RSYM, XSYM, KernelGroup, Placed
from ..kernel import CSEVar, KernelSpec, TritonKernel
from .. import online
from ..nodes import GroupContext, emit_pointwise, needs_int64, publish
from .orientation import reads_along_reduced_axis


class RowFacts:
    """What the choice of a (not mixed-order) group's strategy reads.

    ``split_ok``: the group may split (``KernelGroup.split_ok``); ``outer``: its loads run along the kept axis
    (``orientation.reads_along_kept_axis``); ``rereads``: reads along the row a looped kernel makes again in a
    later pass; ``tagged``: a split's last program would finish through tagged partials.  ``held`` (row tiles a
    persistent kernel keeps from one pass to a later one) and ``reread`` (every such tile is a plain load) may be
    given as functions: counting them emits a trial kernel, so each is asked once, and only by a strategy that
    needs it."""

    def __init__(self, xnumel: int, rnumel: int, split_ok: bool, *, outer: bool = False,
                 held: Union[int, Callable[[], int]] = 0, rereads: int = 0,
                 reread: Union[bool, Callable[[], bool]] = False, tagged: bool = False) -> None:
        self.xnumel, self.rnumel, self.split_ok, self.outer = xnumel, rnumel, split_ok, outer
        self.rereads, self.tagged = rereads, tagged
        self._held, self._reread = held, reread

    @property
    def held(self) -> int:
        if callable(self._held):
            self._held = self._held()
        return self._held

    @property
    def reread(self) -> bool:
        if callable(self._reread):
            self._reread = self._reread()
        return self._reread


def auto() -> bool:
    """Is the strategy the auto choice's (``config.reduction_strategy`` "auto"), not a forced one?"""
    return config.reduction_strategy == "auto"


def block_budget() -> int:
    """Elements of one auto-chosen reduction tile at most."""
    return min(config.max_reduction_block_numel, config.max_triton_tensor_numel)


def rows_block(xnumel: int, rblock: int) -> int:
    """XBLOCK beside ``rblock``: as many rows as fill the block budget (``config.xblock`` where forced)."""
    budget = block_budget()
    return config.xblock or max(1, min(next_pow2(xnumel), budget // rblock if rblock <= budget else 1))


def outer_tile(facts: RowFacts) -> Optional[tuple[int, int]]:
    """(XBLOCK, RBLOCK) of an auto-chosen tile over a group whose loads run along the kept axis (a column sum such
    as layer-norm backward's dW), or None for any other group or a forced RBLOCK.  Such a tile takes
    ``config.outer_reduction_xblock`` kept elements side by side -- whole memory sectors per reduced step -- and
    the rest of the block budget along the reduced axis, instead of the inner-reduction shape (a long reduced
    axis, few rows) that reads a few bytes per row."""
    if not (facts.outer and auto() and not config.rblock):
        return None
    budget = block_budget()
    xblock = config.xblock or min(next_pow2(facts.xnumel), config.outer_reduction_xblock, budget)
    return xblock, min(next_pow2(facts.rnumel), max(1, budget // xblock))


class ReductionStrategy:
    """Base: one kernel, rows across programs; ``emit_pass`` decides how a pass covers the axis."""

    name = "base"
    #: May ``config.reduction_strategy`` force it on any group?
    forcible = True
    #: Does a pass loop over the reduced axis (RBLOCK is then a block to tune, and the loop may be pipelined)?
    loops = True
    #: Where the auto choice asks ``applies`` (lowest first; the last asked takes every group); None: never.
    precedence: Optional[int] = None
    #: Its knobs: ``config.<knobs>.*`` (``compiler.config.SECTIONS``).
    knobs = ""

    def applies(self, facts: RowFacts) -> bool:
        """Does the auto choice give ``facts``' group this strategy (every strategy asked before it declined)?"""
        return False

    def choose(self, facts: RowFacts) -> ReductionChoice:
        """Blocks of this strategy over ``facts``' group, auto-chosen or forced by ``config.reduction_strategy``.
        Forced values are returned as asked, even when too large: the code generator's numel guard then raises
        ``ReductionTooLarge`` with the fix, instead of a silent clamp."""
        raise CodegenError(f"the {self.name} strategy is not chosen by the extents of a group")

    def alternatives(self, choice: ReductionChoice, rnumel: int) -> list[tuple[str, int, int, float]]:
        """(strategy, XBLOCK, RBLOCK, warp factor) of other strategies worth timing beside the heuristic's
        ``choice`` of this one (autotuning, ``config.reduction_strategy`` "auto"): none here."""
        return []

    def kernels(self, name: str, ctx: GroupContext, choice: ReductionChoice) -> list[KernelSpec]:
        group = ctx.group
        if group.columns is not None:
            raise CodegenError(f"{name}: a mixed-order group has a column part only the mixed-order strategy emits; "
                               "emit it through codegen.reduction.kernels")
        k, passes = self.emit(name, ctx, choice)
        k.meta["comments"] = [f"{self.name} reduction: {group.xnumel} rows x {group.rnumel}, "
                              f"XBLOCK={choice.xblock} RBLOCK={choice.rblock}, {passes}"]
        return [KernelSpec(name, k.source(), (triton.cdiv(group.xnumel, choice.xblock),), list(k.args.values()),
                           choice.warps or num_warps(choice.xblock * choice.rblock), dict(k.meta))]

    def emit(self, name: str, ctx: GroupContext, choice: ReductionChoice) -> tuple[TritonKernel, str]:
        """The kernel's body over rows: the prologue, then every pass (``run_passes``'s summary beside it)."""
        k = new_kernel(name, ctx, self.name, choice)
        group_prologue(k, ctx.group, choice.xblock, choice.rblock)
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
            spread_loads(k, group, nodes)
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


def new_kernel(name: str, ctx: GroupContext, strategy: str, choice: ReductionChoice) -> TritonKernel:
    """An empty reduction kernel for ``ctx``'s group, its plan metadata (strategy and blocks) filled in."""
    reductions = [f"{p.name} ({p.node.buf.data.reduction_type})" for p in ctx.group.placed if p.kind == "reduction"]
    k = TritonKernel(name, ctx.buffers, what=f"reduction kernel {name}", reductions=reductions,
                     rnumel=ctx.group.rnumel, int64=needs_int64(ctx))
    k.meta.update(kind="reduction", strategy=strategy, xblock=choice.xblock, rblock=choice.rblock,
                  splits=choice.splits, loop_stages=choice.stages, xnumel=ctx.group.xnumel, rnumel=ctx.group.rnumel)
    return k


def group_prologue(k: TritonKernel, group: KernelGroup, xblock: int, rblock: int, rname: str = "rbase",
                   rmask: Optional[bool] = None) -> None:
    """``rows_prologue`` over ``group``'s rows."""
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


def spread_loads(k: TritonKernel, group: KernelGroup, nodes: list[Placed]) -> None:
    """Before a pass over ``nodes``: its loads span the tile if none of them moves along the reduced axis."""
    spread = config.spread_row_loads and not reads_along_reduced_axis(group, nodes)
    k.spread_loads = (RSYM, "rbase") if spread else None


def rindex_block(k: TritonKernel) -> str:
    """Each tile lane's index along the reduced axis (the current row chunk's, in a chunked kernel), int64."""
    k.guard(k.tile, "argmax index block")
    return k.newvar(f"tl.broadcast_to({k.axis_name(RSYM)}.to(tl.int64), {k.tile})", torch.int64).name


def row_mask(k: TritonKernel) -> Optional[str]:
    """The rows' mask (``xmask``), or None where the row blocks tile the rows exactly."""
    return k.axes[XSYM].mask

