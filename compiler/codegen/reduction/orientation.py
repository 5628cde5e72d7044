"""Which way a group's loads walk memory in the reduction domain: along the kept axis (an outer tile), along
the reduced one (a pass that needs no spread loads), and what a looped kernel reads again."""
from __future__ import annotations

from typing import Optional

from ... import indexing
from ...scheduler import RSYM, XSYM, KernelGroup, Placed, domain_reads


def reads_along_kept_axis(group: KernelGroup) -> bool:
    """Do most of the bytes the group's reduction-domain loads read walk memory along the kept axis?

    A load whose storage offset has stride 1 in ``rindex`` reads contiguously along the
    reduced axis (a row sum); one with stride 1 in ``xindex`` and another stride in
    ``rindex`` reads along the kept axis (a column sum: layer-norm backward's dW over rows).
    The second kind wants an outer-reduction tile (``base.outer_tile``).  Each load weighs
    the elements it reads -- the extents of the axes its offset moves along -- times their size:
    layer norm's dW reads dy and x, [rows, columns], along the kept axis, and four per-row
    statistics along the reduced one; counted a load a vote, the statistics won and the
    column sums ran one column a program, a 4096-element stride apart (4x eager's time).
    """
    along_kept = along_reduced = 0
    extents = group.bounds()
    for _, read, offset in domain_reads(group):
        weight = read.buffer.get_dtype().itemsize
        for sym in offset.free_symbols & {XSYM, RSYM}:
            weight *= extents[sym]
        if indexing.affine_strides(offset, [RSYM]) == (1,):
            along_reduced += weight
        elif indexing.walks_across(offset, [XSYM, RSYM]):
            along_kept += weight
    return along_kept > along_reduced


def reads_along_reduced_axis(group: KernelGroup, nodes: list[Placed]) -> bool:
    """Does any load of ``nodes`` (one pass of the group) move with ``rindex`` in storage?  Reads of the
    group's own values come from registers, not memory, and do not count.

    Without one (every input broadcast along the reduced axis: stride 0, an expanded row) the
    pass's loads are all [XBLOCK, 1] blocks.  Triton lays such a block out with its threads
    along the rows, and with no [XBLOCK, RBLOCK] load to anchor another layout the tile broadcast
    from it keeps that one: each thread holds whole rows.  On an H100 (triton 3.6) a persistent
    sum of 4093 copies of one value then ran as one sequential chain, 266 ulp off, and a looped
    kernel over bf16 [2, 956086] spilled 2,582 registers and took 45 s to compile.  Such passes
    load over the whole tile instead (``TritonKernel.spread_loads``)."""
    return any(RSYM in offset.free_symbols
               for offset in _domain_offsets(group, nodes, skip=frozenset(group.names)))


def _domain_offsets(group: KernelGroup, nodes: Optional[list[Placed]] = None, skip: frozenset = frozenset()):
    """The storage offset of each read of ``nodes`` (default: the group's) in the reduction domain, in kernel
    symbols; reads of the buffers in ``skip`` left out."""
    return (offset for _, _, offset in domain_reads(group, nodes, skip))


def reread_row_reads(group: KernelGroup) -> int:
    """Reads along the reduced axis that ``group`` makes in more than one pass: what a looped kernel of it reads
    again from memory (layer norm's dx: x, dy and w, read for its row sums and again for dx; softmax: x).
    A read one pass makes (an RMSNorm's weight, read for the output alone) is not counted.  Reads of one buffer
    at two offsets (``x[:, 1:]`` and ``x[:, :-1]``) are two reads."""
    passes: dict = {}
    for p, read, offset in domain_reads(group, skip=frozenset(group.names)):
        if RSYM in offset.free_symbols:
            passes.setdefault((read.buffer.name, offset), set()).add(p.phase)
    return sum(1 for phases in passes.values() if len(phases) > 1)
