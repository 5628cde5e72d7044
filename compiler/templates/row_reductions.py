"""Row reductions of a GEMM's A operand, computed inside the template's K loop.

mHC's K1 projects x and scales each output row by ``rsqrt(mean(x^2))``: a reduction over the
rows of x -- the template's A -- read by the template's epilogue.  As its own kernel that
reduction reads all of A once more; inside the template it folds each A tile the K loop has
already loaded, and the epilogue takes the row values from registers (the projection of a
[65536, 10240] bf16 x reads 1.3 GB once instead of twice).

A reduction group ``R`` may move into template ``T`` when (legality, each refusal with its
reason):

- ``T`` is not batched and has an epilogue (a tuned ``T`` then has no ATen candidate: that
  would need ``R`` as a kernel of its own, and the fold saves a whole read of A);
- ``R`` is a plain row reduction group (not mixed order, no pointwise nodes) of sums, maxima
  or minima, over ``T.m`` rows of ``T.k`` elements;
- every read of ``R`` is A's element (row, k) -- the tile the K loop holds;
- nothing but ``T``'s epilogue reads ``R``'s results, and none is a graph output.

The reductions accumulate per tile lane in the K loop and fold once after it (as a looped
reduction does); the code generator is ``gemm.template_kernel``.
"""
from __future__ import annotations

from typing import Union

from .. import indexing
from ..counters import counters
from ..scheduler import RSYM, XSYM, KernelGroup, WhyNoFuse, _extern_reads, _read_in_kernel
from .epilogue import _reads
from .gemm import GemmTemplate

REDUCTION_TYPES = ("sum", "max", "min")


def check_row_reductions(template: GemmTemplate, group: KernelGroup, readers: set[str],
                         outputs: set[str]) -> Union[bool, WhyNoFuse]:
    """True when ``group`` may run inside ``template``'s K loop; otherwise the reason it may not.

    ``readers``: names of the steps other than ``template`` that read one of ``group``'s results.
    """
    if template.batch != 1:
        return WhyNoFuse(f"{template.name} is batched; row reductions run in plain GEMM templates only")
    if template.epilogue is None:
        return WhyNoFuse(f"{template.name} has no epilogue to read {group.names}")
    if not group.has_reduction or group.columns is not None:
        return WhyNoFuse(f"{group.names} is not a plain row reduction group")
    if (group.xnumel, group.rnumel) != (template.m, template.k):
        return WhyNoFuse(f"{group.names} reduces {group.xnumel} rows of {group.rnumel}, A is "
                         f"{template.m} x {template.k}")
    own = set(_extern_reads(template))
    if set(group.names) & own:
        return WhyNoFuse(f"{template.name} takes {sorted(set(group.names) & own)} as an operand or bias: it must "
                         f"exist before the K loop")
    if readers:
        return WhyNoFuse(f"{sorted(readers)} read {group.names} outside {template.name}")
    if set(group.names) & outputs:
        return WhyNoFuse(f"{sorted(set(group.names) & outputs)} are graph outputs")
    why = _epilogue_reads_rows(template, group)
    if why is not None:
        return why
    a_name, _ = template.a_operand()
    bounds = group.bounds()
    want = indexing.simplify(template.a_element(XSYM, RSYM), bounds)
    for p in group.placed:
        data = p.node.buf.data
        if p.kind != "reduction":
            return WhyNoFuse(f"{p.name} is a pointwise node of {group.names}: only reductions run in the K loop")
        if data.reduction_type not in REDUCTION_TYPES or not data.acc_dtype.is_floating_point:
            return WhyNoFuse(f"{p.name} is a {data.reduction_type} over {data.acc_dtype}: the K loop folds floating "
                             f"{'/'.join(REDUCTION_TYPES)} only")
        for read in p.node.info.reads:
            got = _read_in_kernel(read, p, bounds)
            if read.offset is None:
                got = indexing.simplify(read.buffer.layout.index(got), bounds)
            if read.buffer.name != a_name or got != want:
                return WhyNoFuse(f"{p.name} reads {read.buffer.name} where the K loop holds {a_name}[row, k]")
    return True


def _epilogue_reads_rows(template: GemmTemplate, group: KernelGroup):
    """A refusal unless the epilogue reads each of ``group``'s results at the row its tile element is in
    (the register after the K loop holds one value per tile row)."""
    epilogue = template.epilogue
    bounds = epilogue.bounds()
    row = indexing.FloorDiv(XSYM, template.n)                # the epilogue's element -> its row of the product
    names = {p.name: p.node.buf.layout for p in group.placed}
    for p in epilogue.placed:
        for read in p.node.info.reads:
            layout = names.get(read.buffer.name)
            if layout is None:
                continue
            want = tuple(indexing.simplify(e, bounds) for e in indexing.delinearize(row, layout.size))
            got = _read_in_kernel(read, p, bounds)
            if read.offset is not None:
                want = indexing.simplify(layout.index(want), bounds)
            if got != want:
                return WhyNoFuse(f"{p.name} reads {read.buffer.name} at {got}, not at its own row of the product")
    return None


def fuse_row_reductions(steps: list, outputs: set[str], refused: list) -> list:
    """``steps`` with legal row reduction groups moved into the templates whose epilogues read them."""
    steps = list(steps)
    for template in [s for s in steps if isinstance(s, GemmTemplate) and s.epilogue is not None]:
        wanted = {r.buffer.name for p in template.epilogue_nodes for r in p.node.info.reads}
        for group in [s for s in steps if isinstance(s, KernelGroup) and set(s.names) & wanted]:
            names = set(group.names)
            readers = {getattr(s, "name", "?") for s in steps if s is not template and s is not group
                       and names & _reads(s)}
            verdict = check_row_reductions(template, group, readers, outputs)
            if not verdict:
                refused.append((group.names[0], template.name, verdict.reason))
                continue
            template.row_reductions = group
            counters["gemm_template.row_reductions"] += len(group.placed)
            steps.remove(group)
            break
    return steps


__all__ = ["check_row_reductions", "fuse_row_reductions", "REDUCTION_TYPES"]
