"""Pointwise kernels: 1-D (one flat index per lane), 2-D tiles (rows x columns), or unrolled.

A fused pointwise group iterates ``xindex`` over its elements.  The other tilings only
change which elements a lane computes, never what it computes there:

- 2-D: the flat index is rewritten ``xindex -> yindex * X + xindex`` (X the last dim), so a
  transposed load walks a tile instead of striding across the whole tensor;
- unrolled: a short dim of J indices (J <= ``config.pointwise_unroll_max_extent``) with I
  elements after it leaves the lane index; the body is emitted once per index j with
  ``xindex -> (xindex // I) * J * I + j * I + xindex % I``, and a load that does not depend
  on j is the same expression every time -- the kernel's CSE issues it once for all J
  outputs (mHC post_res mixes 4 streams of x_streams into 4 outputs: each stream row is read
  once, not 4 times).
"""
from __future__ import annotations

from typing import Optional

import sympy
import triton

from tritondiff.base.limits import GRID_LIMITS

from .. import heuristics, indexing
from ..config import config
from ..scheduler import XSYM, KernelGroup
from .kernel import KernelSpec, TritonKernel
from .nodes import GroupContext, emit_pointwise, needs_int64

YSYM = indexing.index_symbol("yindex")
GRID_Y_LIMIT = GRID_LIMITS[1]
_ROW, _COL = indexing.index_symbol("urow"), indexing.index_symbol("ucol")  # only for telling loads apart


def _transposed_accesses(group: KernelGroup, stored: frozenset) -> int:
    """Loads and stores that walk memory across the output's fast dim."""
    count = 0
    for p in group.placed:
        index = p.node.info.index
        syms = [s for s in index if isinstance(s, sympy.Symbol)]
        if len(syms) < 2:
            continue
        for read in p.node.info.reads:
            offset = read.offset if read.offset is not None else read.buffer.layout.index(read.index)
            count += indexing.walks_across(offset, syms)
        if p.name in stored:
            count += indexing.walks_across(p.node.buf.layout.index(index), syms)
    return count


def _tile_split(group: KernelGroup) -> Optional[tuple[int, int]]:
    """(Y, X) for 2-D tiles: X the last dim of the first multi-dim node, when it divides evenly."""
    for p in group.placed:
        ranges = [r for r in p.node.buf.data.ranges if r != 1]
        if len(ranges) >= 2:
            x = ranges[-1]
            if x > 1 and group.xnumel % x == 0 and group.xnumel // x > 1:
                return group.xnumel // x, x
    return None


def _suffix_products(ranges) -> set[int]:
    out, n = {1}, 1
    for r in reversed([int(r) for r in ranges]):
        n *= r
        out.add(n)
    return out


def _unroll_dims(group: KernelGroup) -> list[tuple[int, int]]:
    """(J, I) of each dim the unrolled tiling could take: a dim of the first multi-dim node with
    2 <= J <= ``config.pointwise_unroll_max_extent`` indices and I > 1 elements after it, which is a
    dim of every node of the group too (I and J * I are products of trailing dims of each): a node
    read from another's register must see the unrolled index as a constant of its own index."""
    for p in group.placed:
        ranges = [int(r) for r in p.node.buf.data.ranges]
        if sum(r != 1 for r in ranges) < 2:
            continue
        every = [_suffix_products(q.node.buf.data.ranges) for q in group.placed]
        dims = []
        for d, extent in enumerate(ranges):
            inner = 1
            for r in ranges[d + 1:]:
                inner *= r
            if 2 <= extent <= config.pointwise_unroll_max_extent and inner > 1 and \
                    all(inner in s and extent * inner in s for s in every):
                dims.append((extent, inner))
        return dims
    return []


def _streaming_loads(k: TritonKernel, inner: int) -> int:
    """Loads of ``k`` whose address moves along rows of ``inner`` lanes (not one value per row)."""
    bounds = {_ROW: max(1, k.axes[XSYM].numel // inner), _COL: inner}
    split = {XSYM: _ROW * inner + _COL}
    return sum(1 for e in k.load_indexes if _COL in indexing.simplify(e.xreplace(split), bounds).free_symbols)


def pointwise_kernel(name: str, ctx: GroupContext) -> KernelSpec:
    group = ctx.group
    split = _tile_split(group)
    transposed = _transposed_accesses(group, ctx.stored)
    if split is not None and heuristics.want_2d_tiling(transposed, 0):
        ynumel, xnumel = split
        yblock, xblock = heuristics.choose_tile(ynumel, xnumel, transposed=transposed > 0)
        if triton.cdiv(ynumel, yblock) <= GRID_Y_LIMIT:
            return _kernel_2d(name, ctx, ynumel, xnumel, yblock, xblock)
    flat, flat_kernel = _kernel_1d(name, ctx)
    if config.pointwise_tiling not in ("auto", "unrolled"):
        return flat
    best = None                           # (streaming loads per output, spec)
    for extent, inner in _unroll_dims(group):
        spec, k = _kernel_1d(name, ctx, unroll=(extent, inner))
        streaming = _streaming_loads(k, inner)
        if heuristics.want_unrolled(streaming, _streaming_loads(flat_kernel, inner), extent):
            if best is None or streaming / extent < best[0]:
                best = (streaming / extent, spec)
    return flat if best is None else best[1]


def _kernel_1d(name: str, ctx: GroupContext, unroll: Optional[tuple[int, int]] = None) \
        -> tuple[KernelSpec, TritonKernel]:
    """A 1-D kernel; ``unroll=(J, I)``: over the group's elements less a dim of J indices with I elements
    after it, the body emitted once per index of that dim (module docstring)."""
    group = ctx.group
    extent, inner = unroll or (1, 1)
    numel = group.xnumel // extent
    block = heuristics.choose_pointwise_block(numel)
    k = TritonKernel(name, ctx.buffers, what=f"pointwise kernel {name}", int64=needs_int64(ctx))
    k.meta.update(kind="pointwise", tiling="unrolled" if unroll else "1d", xblock=block, numel=group.xnumel)
    flat_prologue(k, numel, block)
    rows, cols = indexing.FloorDiv(XSYM, inner), indexing.Mod(XSYM, inner)
    try:
        for j in range(extent):
            if unroll:
                ctx.subst = {XSYM: rows * (extent * inner) + j * inner + cols}
            for p in group.placed:
                emit_pointwise(k, ctx, p)
    finally:
        ctx.subst = {}
    k.meta["comments"] = [f"pointwise over {group.xnumel} elements, XBLOCK={block}" + (
        f", {extent} outputs per lane (a dim of {extent} unrolled, {inner} elements after it)" if unroll else "")]
    spec = KernelSpec(name, k.source(), (triton.cdiv(numel, block),), list(k.args.values()),
                      heuristics.num_warps(block), dict(k.meta))
    return spec, k


def flat_prologue(k: TritonKernel, numel: int, block: int) -> None:
    """A 1-D kernel's index over ``numel`` elements, ``block`` per program: ``xindex``, ``xmask`` where ragged."""
    k.tile = [block]
    k.add_axis(XSYM, numel, block, mask=numel % block != 0)
    pid = "tl.program_id(0).to(tl.int64)" if k.int64 else "tl.program_id(0)"
    k.emit(f"xoffset = {pid} * {block}")
    k.emit(f"xindex = xoffset + {k.arange(block, 'xindex')}")
    if numel % block:
        k.emit(f"xmask = xindex < {numel}")
    k.active = [XSYM]


def _kernel_2d(name: str, ctx: GroupContext, ynumel: int, xnumel: int, yblock: int, xblock: int) -> KernelSpec:
    ctx.subst = {XSYM: YSYM * xnumel + XSYM}
    k = TritonKernel(name, ctx.buffers, what=f"pointwise kernel {name}", int64=needs_int64(ctx))
    k.meta.update(kind="pointwise", tiling="2d", yblock=yblock, xblock=xblock, numel=ynumel * xnumel)
    k.add_axis(YSYM, ynumel, yblock, mask=ynumel % yblock != 0)
    k.add_axis(XSYM, xnumel, xblock, mask=xnumel % xblock != 0)
    k.guard([yblock, xblock], "tile")
    k.tile = [yblock, xblock]
    cast = ".to(tl.int64)" if k.int64 else ""
    k.emit(f"yoffset = tl.program_id(1){cast} * {yblock}")
    k.emit(f"yindex = yoffset + {k.arange(yblock, 'yindex')}[:, None]")
    if ynumel % yblock:
        k.emit(f"ymask = yindex < {ynumel}")
    k.emit(f"xoffset = tl.program_id(0){cast} * {xblock}")
    k.emit(f"xindex = xoffset + {k.arange(xblock, 'xindex')}[None, :]")
    if xnumel % xblock:
        k.emit(f"xmask = xindex < {xnumel}")
    k.active = [YSYM, XSYM]
    for p in ctx.group.placed:
        emit_pointwise(k, ctx, p)
    k.meta["comments"] = [f"pointwise over {ynumel}x{xnumel} in {yblock}x{xblock} tiles"]
    return KernelSpec(name, k.source(), (triton.cdiv(xnumel, xblock), triton.cdiv(ynumel, yblock)),
                      list(k.args.values()), heuristics.num_warps(yblock * xblock), dict(k.meta))
