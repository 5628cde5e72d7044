"""The strategy and blocks of a (not mixed-order) reduction group: a forced strategy's, or the first the auto
choice asks (``ReductionStrategy.precedence``) that applies."""
from __future__ import annotations

from typing import Iterable

from ...config import config
from ...heuristics import ReductionChoice
from ..nodes import GroupContext
from .algebra import reduction_op
from .base import ReductionStrategy, RowFacts
from .orientation import reads_along_kept_axis, reread_row_reads
from .split import tagged_partials
from .tiles import held_tiles_are_loads, live_row_tiles


def facts_of(ctx: GroupContext) -> RowFacts:
    """What the choice reads about ``ctx``'s group.  The tiles a persistent kernel would hold are counted on a
    trial kernel only when a strategy asks (a row in the wide persistent range, a row that may read its loads
    again)."""
    group = ctx.group
    tagged = config.split.last_program_final and tagged_partials(
        reduction_op(p) for p in group.placed if p.kind == "reduction")
    return RowFacts(group.xnumel, group.rnumel, group.split_ok(), outer=reads_along_kept_axis(group),
                    held=lambda: live_row_tiles(ctx), rereads=reread_row_reads(group),
                    reread=lambda: held_tiles_are_loads(ctx), tagged=tagged)


def decide(facts: RowFacts, strategies: Iterable[ReductionStrategy]) -> ReductionChoice:
    """The forced strategy's blocks (``config.reduction_strategy``), or those of the first of ``strategies`` (by
    precedence) whose ``applies`` says yes."""
    by_name = {s.name: s for s in strategies}
    if config.reduction_strategy != "auto":
        return by_name[config.reduction_strategy].choose(facts)
    for strategy in sorted((s for s in by_name.values() if s.precedence is not None), key=lambda s: s.precedence):
        if strategy.applies(facts):
            return strategy.choose(facts)
    raise AssertionError("the last strategy the auto choice asks takes every group")   # the registry test's
