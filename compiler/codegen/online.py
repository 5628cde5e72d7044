"""Online softmax: a looped kernel folds ``sum(exp(h - max(h)))`` into the pass that finds ``max(h)``.

Softmax, log-softmax and logsumexp reach the compiler as two reductions over one row, a max ``M`` and then
a sum ``S = sum(exp(h - M))``, so a looped kernel walks the row once for ``M``, again for ``S`` and once
more for the output: three reads of a row that no longer fits a block (nor, for a wave of long rows, L2).
Kept as lanes, ``S`` can be summed beside ``M`` (Milakov and Gimelshein's online normalizer): each lane
keeps its running max ``m`` and ``s = sum(exp(h - m))``, rescaled by ``exp(m_old - m_new)`` whenever its
max grows; after the loop ``S = sum(s * exp(m - M))`` over the lanes.  One pass less, same algebra:

- a lane that has seen only -inf (or masked lanes) keeps ``s = 0`` and adds nothing;
- NaN and +inf reach ``s`` as in the plain sum (``exp(inf - inf)`` is NaN there too);
- a row whose max is -inf sums to NaN, as ``exp(-inf - -inf)`` does in the plain sum.

Only the exact shape is rewritten: ``S``'s body must be ``exp(sub(<M's body>, M))`` at the same element, with
``M`` a floating max kept in its accumulator dtype (``matches``).  Anything else keeps its own pass.
"""
from __future__ import annotations

import dataclasses

from .. import analysis, indexing
from ..config import config
from ..counters import counters
from ..scheduler import Placed
from .kernel import CSEVar, TritonKernel
from .nodes import GroupContext, canonical_index


@dataclasses.dataclass(frozen=True)
class OnlinePair:
    """A max reduction and the sum of exp(h - max) that runs in its pass."""

    max: Placed
    sum: Placed


def pairs(k: TritonKernel, ctx: GroupContext) -> dict[str, OnlinePair]:
    """The online pairs of a looped group, keyed by the sum's name (empty when ``config.online_softmax`` is
    off)."""
    if not config.online_softmax:
        return {}
    reductions = [p for p in ctx.group.placed if p.kind == "reduction"]
    found = {}
    for m in reductions:
        for s in reductions:
            if s.phase == m.phase + 1 and s.name not in found and matches(k, ctx, m, s):
                found[s.name] = OnlinePair(m, s)
                counters["online_softmax"] += 1
                break
    return found


def matches(k: TritonKernel, ctx: GroupContext, m: Placed, s: Placed) -> bool:
    """Is ``s`` the sum of exp(h - m) over the elements ``m`` is the max of?"""
    md, sd = m.node.buf.data, s.node.buf.data
    if md.reduction_type != "max" or sd.reduction_type != "sum":
        return False
    if not (md.acc_dtype.is_floating_point and md.dtype == md.acc_dtype == sd.acc_dtype == sd.src_dtype):
        return False
    held = frozenset(ctx.group.names) | ctx.held
    bounds = k.bounds()

    def text(p: Placed) -> str:
        return analysis.format_body(p.node.buf, ctx.inlined, at=(ctx.index(p), ctx.rindex(p)), held=held,
                                    simplify=lambda e: indexing.simplify(e, bounds))
    return text(s) == f"exp(sub({text(m)}, reg({m.name})))"


def hold_lane_max(k: TritonKernel, ctx: GroupContext, m: Placed, lanes: CSEVar) -> None:
    """Inside the loop: ``m``'s reads resolve to the running lane max (the sum's body is evaluated at it)."""
    canonical = canonical_index(k, ctx.index(m))
    storage = indexing.simplify(m.node.buf.layout.index(canonical), k.bounds())
    k.set_register(m.name, lanes, canonical, storage)


def combine(k: TritonKernel, acc_max: str, acc_sum: str, lane_max: CSEVar, term: CSEVar) -> None:
    """One loop step: rescale the lane sums to the new lane max and add ``term`` = exp(h - lane_max)."""
    dt = lane_max.dtype
    scale = k.newvar(f"tl.exp({acc_max} - {lane_max.name})", dt)
    k.emit(f"{acc_sum} = tl.where({lane_max.name} == float('-inf'), 0.0, {acc_sum} * {scale.name} + {term.name})")
    k.emit(f"{acc_max} = {lane_max.name}")


def fold(k: TritonKernel, acc_max: str, acc_sum: str, row_max: CSEVar) -> CSEVar:
    """After the loop: the row's sum of exp(h - row_max) from the lanes ([XBLOCK, 1])."""
    dt = row_max.dtype
    w = k.newvar(f"tl.where({acc_max} == float('-inf'), 0.0, {acc_sum} * tl.exp({acc_max} - {row_max.name}))", dt)
    total = k.newvar(f"tl.sum({w.name}, 1)[:, None]", dt)
    nan = k.newvar(k.full(k.scalar_shape, float("nan"), dt), dt)
    return k.newvar(f"tl.where({row_max.name} == float('-inf'), {nan.name}, {total.name})", dt)
