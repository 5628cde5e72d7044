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
protocol and ``RowFacts``, what the choice reads), one module per strategy, ``choice`` (which strategy a group
gets: the forced one, or the first whose ``applies`` says yes).  ``register_strategies`` imports every module of
the package and registers each strategy class that names itself, so a new strategy is its module alone.
"""
from __future__ import annotations

import importlib
import pkgutil

from ...config import add_choice
from ...heuristics import ReductionChoice
from ..kernel import KernelSpec
from ..nodes import GroupContext
from . import choice as _choice
from .choice import facts_of
from .algebra import ReductionOp, reduction_op
from .base import ReductionStrategy, RowFacts, rows_prologue
from .looped import LoopedReduction
from .mixed_order import MixedOrderReduction
from .orientation import reads_along_kept_axis, reads_along_reduced_axis, reread_row_reads
from .persistent import PersistentReduction
from .split import SplitReduction, tagged_partials
from .tiles import held_tiles_are_loads, live_row_tiles

def _strategies(cls: type = ReductionStrategy) -> list[ReductionStrategy]:
    """One of each strategy class (any that names itself), the auto choice's in precedence order first."""
    found = []
    for sub in cls.__subclasses__():
        if "name" in vars(sub):
            found.append(sub())
        found += _strategies(sub)
    return sorted(found, key=lambda s: (s.precedence is None, s.precedence or 0, s.name))


#: Every strategy by name.  Those with ``forcible`` set are what ``config.reduction_strategy`` may force.
STRATEGIES: dict[str, ReductionStrategy] = {}
#: The names ``config.reduction_strategy`` takes besides "auto".
FORCIBLE: tuple[str, ...] = ()


def register_strategies() -> None:
    """Import every module of this package and register the strategies they define (a strategy's module is all
    a new strategy adds); run at import, and again by whoever adds a folder to ``__path__``."""
    global FORCIBLE
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    STRATEGIES.clear()
    STRATEGIES.update((s.name, s) for s in _strategies())
    FORCIBLE = tuple(name for name, s in STRATEGIES.items() if s.forcible)
    for name in FORCIBLE:
        add_choice("reduction_strategy", name)


register_strategies()


def decide(facts: RowFacts) -> ReductionChoice:
    """The strategy and blocks of a (not mixed-order) group described by ``facts`` (``choice.decide``)."""
    return _choice.decide(facts, STRATEGIES.values())


def choose(ctx: GroupContext) -> ReductionChoice:
    """The strategy and blocks of ``ctx``'s (not mixed-order) group."""
    return decide(facts_of(ctx))


def kernels(strategy: str, name: str, ctx: GroupContext, choice: ReductionChoice) -> list[KernelSpec]:
    """The kernels of ``ctx``'s group under ``strategy``.  A mixed-order group (one with a column part) is the
    mixed-order strategy's whatever is asked (an autotune variant of another strategy keeps its XBLOCK)."""
    if ctx.group.columns is not None and strategy != MixedOrderReduction.name:
        base = ctx.group.mixed_order_choice()
        strategy, choice = MixedOrderReduction.name, ReductionChoice(MixedOrderReduction.name, choice.xblock,
                                                                     base.rblock, base.splits, choice.stages)
    return STRATEGIES[strategy].kernels(name, ctx, choice)


__all__ = ["STRATEGIES", "FORCIBLE", "register_strategies", "kernels", "choose", "decide", "facts_of", "RowFacts",
           "rows_prologue", "reread_row_reads", "live_row_tiles", "held_tiles_are_loads", "reads_along_kept_axis",
           "reads_along_reduced_axis", "tagged_partials", "ReductionStrategy", "PersistentReduction",
           "LoopedReduction", "SplitReduction", "MixedOrderReduction", "ReductionOp", "reduction_op"]
