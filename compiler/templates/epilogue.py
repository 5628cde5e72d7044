"""Epilogue fusion: move a pointwise kernel that consumes a GEMM template's output into the template.

Called by the scheduler once kernel groups are fused and ordered.  A group may become the
epilogue of template ``T`` when (legality, each refusal with its reason):

- it is pointwise (no reduction) over exactly ``T``'s output domain (``batch * M * N`` rows);
- every read of ``T``'s output is at the element the kernel row computes (the value is in the
  accumulator tile's registers: the same symbolic test as the scheduler's register reuse);
- everything else it reads is ready before ``T`` runs (inputs, or produced by earlier steps),
  so running it at ``T``'s place in the order changes no dependency.

The first legal consumer group in schedule order is taken (one epilogue per template).  The
template keeps storing its raw output only when something besides the epilogue reads it.
"""
from __future__ import annotations

from typing import Union

from .. import indexing
from ..counters import counters
from ..ir import ExternKernel
from ..scheduler import XSYM, KernelGroup, WhyNoFuse, _extern_reads, _read_in_kernel
from .gemm import GemmTemplate


def _reads(step) -> set[str]:
    """Buffers a step reads: an extern call's inputs, a template's epilogue and row reductions too."""
    if isinstance(step, ExternKernel):
        names = set(_extern_reads(step))
        if isinstance(step, GemmTemplate):
            names |= {r.buffer.name for p in step.epilogue_nodes + step.row_reduction_nodes
                      for r in p.node.info.reads}
        return names
    return {r.buffer.name for p in step.placed for r in p.node.info.reads}


def _writes(step) -> set[str]:
    if isinstance(step, ExternKernel):
        return {o.name for o in step.outputs}
    return set(step.names)


def check_epilogue(template: GemmTemplate, group: KernelGroup, ready: set[str]) -> Union[bool, WhyNoFuse]:
    """True when ``group`` may run inside ``template``'s kernel; otherwise the reason it may not."""
    out = template.output
    if group.has_reduction:
        return WhyNoFuse(f"{group.names} holds a reduction; only pointwise epilogues run in a GEMM template")
    if group.alone is not None:
        return WhyNoFuse(f"{group.names} is a {type(group.alone).__name__.lower()}, a kernel of its own")
    if group.xnumel != out.layout.numel:
        return WhyNoFuse(f"{group.names} covers {group.xnumel} elements, the GEMM output has {out.layout.numel}")
    bounds = group.bounds()
    want_index = tuple(indexing.simplify(e, bounds) for e in indexing.delinearize(XSYM, out.layout.size))
    want_storage = indexing.simplify(out.layout.index(indexing.delinearize(XSYM, out.layout.size)), bounds)
    for p in group.placed:
        for read in p.node.info.reads:
            name = read.buffer.name
            if name == out.name:
                got = _read_in_kernel(read, p, bounds)
                want = want_storage if read.offset is not None else want_index
                if got != want:
                    return WhyNoFuse(f"{p.name} reads {out.name} at another element than the tile holds")
            elif name not in ready and name not in group.names:
                return WhyNoFuse(f"{p.name} reads {name}, which is produced after {template.name} runs")
    return True


def fuse_epilogues(steps: list, graph_inputs: set[str], outputs: set[str], refused: list) -> list:
    """``steps`` with legal epilogue groups moved into their templates (``refused`` gets the reasons).

    The merged step runs where the template was when the group's other inputs are ready by
    then; otherwise where the group was, when no step in between reads the GEMM output.
    """
    steps = list(steps)
    for template in [s for s in steps if isinstance(s, GemmTemplate)]:
        i = steps.index(template)
        out = template.output.name
        for j in range(i + 1, len(steps)):
            group = steps[j]
            if not isinstance(group, KernelGroup) or out not in _reads(group):
                continue
            ready_early = set(graph_inputs).union(*(_writes(s) for s in steps[:i]))
            verdict = check_epilogue(template, group, ready_early)
            late = not verdict and not any(out in _reads(s) for s in steps[i + 1:j])
            if late:  # run both at the group's place instead: everything it reads is ready there
                verdict = check_epilogue(template, group, set(graph_inputs).union(*(_writes(s) for s in steps[:j])))
            if not verdict:
                refused.append((template.name, group.names[0], verdict.reason))
                continue
            template.epilogue = group
            counters["gemm_template.epilogues"] += 1
            steps[j] = template if late else None
            if late:
                steps[i] = None
            steps = [s for s in steps if s is not None]
            others = [s for s in steps if s is not template and out in _reads(s)]
            template.store_output = bool(others) or out in outputs
            break
    return steps


__all__ = ["fuse_epilogues", "check_epilogue"]
