"""The persistent strategy: the whole inner axis in one block (or static chunks of a mixed-order row)."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional

import sympy
import torch

from ...heuristics import next_pow2
from ...scheduler import RSYM, XSYM, Placed
from ..kernel import CSEVar, TritonKernel
from ..nodes import GroupContext, emit_pointwise, evaluate
from .algebra import reduction_op
from .base import ReductionStrategy, rindex_block


class PersistentReduction(ReductionStrategy):
    """The whole inner axis in one block: ``rindex = tl.arange(0, RBLOCK)`` with RBLOCK >= rnumel.

    Each reduction is one block reduce; values loaded in an earlier pass stay in scope and
    are reused (a softmax reads its row once).  Only legal while XBLOCK * RBLOCK fits the
    numel limit, which the guard enforces.
    """

    name = "persistent"
    loops = False

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
