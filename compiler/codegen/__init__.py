"""Triton source for a schedule: one module per compiled graph.

``generate`` walks the schedule's kernel groups: pointwise groups become 1-D or 2-D tiled
kernels (``pointwise``), reduction groups go to the strategy ``heuristics`` picks or
``config`` forces (``reduction``: persistent, looped, split).  The module starts with the
prelude of ``_td_*`` helpers.
"""
from __future__ import annotations

import dataclasses

from tritondiff.base import limits
from tritondiff.base.exc import GridLimitExceeded

from ..counters import counters
from ..exc import GridTooLarge
from ..ir import LoweredGraph, Scan, Scatter
from ..scheduler import Schedule
from .kernel import KernelArg, KernelSpec
from .nodes import GroupContext
from .pointwise import pointwise_kernel
from .prelude import HEADER, PRELUDE
from .reduction import choose as choose_reduction_for
from .reduction import kernels as reduction_kernels
from .scan import scan_kernel
from .scatter import scatter_kernels


@dataclasses.dataclass
class GeneratedModule:
    """The source of one compiled graph and, per kernel group, the kernels to launch in order."""

    name: str
    source: str
    kernels: dict[str, list[KernelSpec]]
    # step name -> autotune candidates (codegen.variants.Variant), when tuning is on
    variants: dict = dataclasses.field(default_factory=dict)


def generate(sched: Schedule, graph: LoweredGraph, name: str) -> GeneratedModule:
    parts = [HEADER.format(graph=name), PRELUDE]
    kernels: dict[str, list[KernelSpec]] = {}
    for group in sched.groups():
        ctx = GroupContext(group, sched.inlined, sched.stored, graph.buffers)
        kname = f"{name}_{group.name}"
        if group.columns is not None:  # row and column reductions in one pass (scheduler.build_mixed_group)
            choice = group.mixed_order_choice()
            counters[f"reduction_strategy.{choice.strategy}"] += _reductions(group)
            specs = reduction_kernels(choice.strategy, kname, ctx, choice)
        elif group.has_reduction:
            choice = choose_reduction_for(ctx)
            counters[f"reduction_strategy.{choice.strategy}"] += _reductions(group)
            specs = reduction_kernels(choice.strategy, kname, ctx, choice)
        elif isinstance(group.alone, Scatter):
            specs = scatter_kernels(kname, ctx)
        elif isinstance(group.alone, Scan):
            specs = [scan_kernel(kname, ctx)]
        else:
            specs = [pointwise_kernel(kname, ctx)]
        counters["kernels_generated"] += len(specs)
        kernels[group.name] = specs
        parts.extend("\n" + spec.source for spec in specs)
    # --- GEMM templates and autotune candidates (codegen.variants)
    from .variants import add_templates_and_variants
    variants = add_templates_and_variants(sched, graph, name, kernels, parts)
    # --- end GEMM templates
    for spec in [s for specs in kernels.values() for s in specs] + [s for vs in variants.values()
                                                                   for v in vs for s in v.specs]:
        check_grid(spec.name, spec.grid)
    return GeneratedModule(name, "\n".join(parts), kernels, variants)


def check_grid(kernel: str, grid: tuple) -> None:
    """Raise :class:`~compiler.exc.GridTooLarge` for a grid CUDA would refuse to launch (the harness's
    launch check, raised as the compiler's error: here it is a code generation bug)."""
    try:
        limits.check_grid(kernel, tuple(grid))
    except GridLimitExceeded as e:
        raise GridTooLarge(e.kernel, e.grid, e.axis, e.limit) from None


def _reductions(group) -> int:
    """Reduction nodes of a kernel group (a mixed-order group's column reductions included)."""
    return sum(1 for p in group.placed if p.kind == "reduction")


__all__ = ["generate", "GeneratedModule", "KernelSpec", "KernelArg"]
