"""The persistent strategy: the whole inner axis in one block (or static chunks of a mixed-order row)."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional

import sympy
import torch

from ...config import config
from ...exc import ConfigError
from ...heuristics import ReductionChoice, loop_stages, next_pow2, persistent_wide
from ...scheduler import RSYM, XSYM, Placed
from ..kernel import CSEVar, TritonKernel
from ..nodes import GroupContext, emit_pointwise, evaluate
from .algebra import reduction_op
from .base import ReductionStrategy, auto, outer_tile, rindex_block, rows_block


class PersistentReduction(ReductionStrategy):
    """The whole inner axis in one block: ``rindex = tl.arange(0, RBLOCK)`` with RBLOCK >= rnumel.

    Each reduction is one block reduce; values loaded in an earlier pass stay in scope and
    are reused (a softmax reads its row once).  Only legal while XBLOCK * RBLOCK fits the
    numel limit, which the guard enforces.
    """

    name = "persistent"
    loops = False
    precedence = 1
    knobs = "persistent"

    def applies(self, facts):
        """A row whose padded length is at most ``config.persistent.max_rnumel``; a longer one where
        ``heuristics.persistent_wide`` says the tiles it holds fit one program (not a column sum); a column sum
        whose outer tile holds the whole reduced axis."""
        tile = outer_tile(facts)
        if tile is not None:
            return tile[1] >= facts.rnumel
        return fits(facts.rnumel) or (not facts.outer and persistent_wide(facts.rnumel, 1)
                                      and persistent_wide(facts.rnumel, facts.held))

    def choose(self, facts):
        """The whole row in one block.  Auto-chosen, a row past ``config.persistent.max_rnumel`` runs one a program
        at ``config.persistent.wide_warps``; a row whose held tiles are all plain loads (``facts.reread``,
        ``config.persistent.reread_loads``) runs as a looped kernel of one whole-row step per pass, which reads
        them again (warps as the persistent kernel's)."""
        tile = outer_tile(facts)
        if tile is not None:
            return ReductionChoice(self.name, *tile, stages=loop_stages(self.name))
        if auto() and not fits(facts.rnumel):
            return ReductionChoice(self.name, 1, next_pow2(facts.rnumel),
                                   warps=config.num_warps or config.persistent.wide_warps)
        rblock = config.rblock or next_pow2(facts.rnumel)
        if rblock < facts.rnumel:
            raise ConfigError(f"reduction_strategy='persistent' holds the whole axis in one block, but rblock={rblock} "
                              f"< {facts.rnumel} elements: drop the forced rblock or use 'looped'", knob="rblock")
        xblock = rows_block(facts.xnumel, rblock)
        if (auto() and config.persistent.reread_loads and not facts.outer and not config.rblock and not config.xblock
                and facts.reread):
            return ReductionChoice("looped", xblock, rblock, stages=loop_stages("looped"))
        return ReductionChoice(self.name, xblock, rblock, stages=loop_stages(self.name))

    def alternatives(self, choice, rnumel):
        """A row of 2048 or more also looped, over a quarter of it a step."""
        return [("looped", choice.xblock, next_pow2(rnumel) // 4, 1)] if rnumel >= 2048 else []

    def emit_pass(self, k, ctx, choice, nodes, paired):
        if k.row_chunks:
            return _chunked_pass(k, ctx, nodes)
        k.whole_row = RSYM
        if "rindex = rbase" not in [s.text for s in k.lines]:
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
            idx = rindex_block(k) if op.is_arg else None
            results[p.name] = op.finish(k, op.block(k, v, idx))
        k.active = [XSYM]
        return results


def fits(rnumel: int) -> bool:
    """Does a row of ``rnumel`` fit the auto strategy's persistent block (``config.persistent.max_rnumel``)?"""
    return next_pow2(rnumel) <= min(config.persistent.max_rnumel, config.max_triton_tensor_numel)


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
                lanes[p.name].append([v, CSEVar(rindex_block(k), torch.int64)] if op.is_arg else [v])
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
