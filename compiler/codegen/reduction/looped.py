"""The looped strategy: a loop over the inner axis per pass, with lane accumulators folded once after it."""
from __future__ import annotations

from typing import Optional

import torch

from ...config import config
from ...heuristics import ReductionChoice, loop_stages, looped_warps, next_pow2
from ...scheduler import RSYM, XSYM
from ..kernel import CSEVar
from .. import online
from ..nodes import emit_pointwise, evaluate
from .algebra import reduction_op
from .base import ReductionStrategy, block_budget, outer_tile, rindex_block, rows_block


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
    precedence = 2
    knobs = "looped"

    def applies(self, facts):
        """Every group the strategies asked before it declined."""
        return True

    def choose(self, facts):
        """Chunks of ``config.looped.rblock``, rows filling the block budget; warps for a row read again in a later
        pass (``heuristics.looped_warps``).  A column sum takes its outer tile."""
        tile = outer_tile(facts)
        if tile is not None:
            return ReductionChoice(self.name, *tile, stages=loop_stages(self.name))
        rblock = config.rblock or min(next_pow2(facts.rnumel), config.looped.rblock, block_budget())
        xblock = rows_block(facts.xnumel, rblock)
        return ReductionChoice(self.name, xblock, rblock, 1, loop_stages(self.name),
                               looped_warps(xblock * rblock, facts.rereads))

    def alternatives(self, choice, rnumel):
        """A row of up to twice ``config.persistent.max_rnumel`` also persistent, one row a program, at its warps
        and twice them."""
        whole = next_pow2(rnumel)
        if whole > min(2 * config.persistent.max_rnumel, config.max_triton_tensor_numel):
            return []
        return [("persistent", 1, whole, 1), ("persistent", 1, whole, 2)]

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
        with k.loop("roffset", 0, span or rnumel, choice.rblock, choice.stages, over_reduction=True):
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
                chunk = [v, CSEVar(rindex_block(k), torch.int64)] if op.is_arg else [v]
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
