"""Reduction kernels: the strategies over one fused group, and the registry that names them.

Every strategy gives each program XBLOCK rows (``xindex``, shape [XBLOCK, 1]) and walks the
inner axis pass by pass (a group holding softmax has three passes: max, sum of exp, output).
Between passes run the nodes that need a finished reduction.  The strategies differ only
in how one pass covers the inner axis.  A persistent pass reduces its one block; a loop
keeps one accumulator lane per tile element ([XBLOCK, RBLOCK]) and folds the lanes to
[XBLOCK, 1] once after the loop, so no loop step pays a cross-lane reduction (seed 000's
per-chunk reduce + combine moved the shared-memory tree into every step).

One module per concern: ``algebra`` (one reduction's identity, combine and block reduce),
``orientation`` and ``tiles`` (the group analysis the heuristics read), ``base`` (the strategy
protocol), one module per strategy, ``choice`` (which strategy a group gets).
"""
from __future__ import annotations

from ...heuristics import ReductionChoice
from ..kernel import KernelSpec
from ..nodes import GroupContext
from .algebra import ReductionOp, reduction_op
from .base import ReductionStrategy, rows_prologue
from .choice import choose
from .looped import LoopedReduction
from .mixed_order import MixedOrderReduction
from .orientation import reads_along_kept_axis, reads_along_reduced_axis, reread_row_reads
from .persistent import PersistentReduction
from .split import SplitReduction, tagged_partials
from .tiles import held_tiles_are_loads, live_row_tiles


#: Every strategy by name.  Those with ``forcible`` set are what ``config.reduction_strategy`` may force.
STRATEGIES: dict[str, ReductionStrategy] = {s.name: s for s in (PersistentReduction(), LoopedReduction(),
                                                                 SplitReduction(), MixedOrderReduction())}
#: The names ``config.reduction_strategy`` takes besides "auto".
FORCIBLE = tuple(name for name, s in STRATEGIES.items() if s.forcible)


def kernels(strategy: str, name: str, ctx: GroupContext, choice: ReductionChoice) -> list[KernelSpec]:
    """The kernels of ``ctx``'s group under ``strategy``.  A mixed-order group (one with a column part) is the
    mixed-order strategy's whatever is asked (an autotune variant of another strategy keeps its XBLOCK)."""
    if ctx.group.columns is not None and strategy != MixedOrderReduction.name:
        base = ctx.group.mixed_order_choice()
        strategy, choice = MixedOrderReduction.name, ReductionChoice(MixedOrderReduction.name, choice.xblock,
                                                                     base.rblock, base.splits, choice.stages)
    return STRATEGIES[strategy].kernels(name, ctx, choice)


__all__ = ["STRATEGIES", "FORCIBLE", "kernels", "choose", "rows_prologue", "reread_row_reads", "live_row_tiles",
           "held_tiles_are_loads", "reads_along_kept_axis", "reads_along_reduced_axis", "tagged_partials",
           "ReductionStrategy", "PersistentReduction", "LoopedReduction", "SplitReduction", "MixedOrderReduction",
           "ReductionOp", "reduction_op"]
