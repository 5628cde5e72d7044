"""The scheduler's pass for GEMM templates (``scheduler.schedule``'s ``passes``, from the pipeline)."""
from __future__ import annotations

import dataclasses

from ..ir import LoweredGraph
from ..scheduler import Schedule
from .epilogue import fuse_epilogues
from .gemm import GemmTemplate
from .row_reductions import fuse_row_reductions


def fuse_templates(sched: Schedule, graph: LoweredGraph) -> Schedule:
    """Each GEMM template absorbs its pointwise consumers as an epilogue, then the reductions over
    A's rows that the epilogue reads; folded row reductions stay in the template's registers and
    are no longer stored.  Refusals are appended to ``sched.refused``."""
    output_names = {o.name for o in graph.outputs if o.kind == "buffer"}
    inputs = {b.name for b in graph.inputs if b is not None} | {c.name for c in graph.constants}
    steps = fuse_epilogues(sched.steps, inputs, output_names, sched.refused)
    steps = fuse_row_reductions(steps, output_names, sched.refused)
    folded = {p.name for s in steps if isinstance(s, GemmTemplate) for p in s.row_reduction_nodes}
    return dataclasses.replace(sched, steps=steps, stored=frozenset(sched.stored - folded))
