"""Pointwise kernels: 1-D (one flat index per lane) or 2-D tiles (rows x columns).

A fused pointwise group iterates ``xindex`` over its elements.  With 2-D tiling the flat
index is rewritten ``xindex -> yindex * X + xindex`` (X the last dim), so a transposed load
walks a tile instead of striding across the whole tensor; the rewrite only changes how
lanes are assigned, never which element a lane computes.
"""
from __future__ import annotations

from typing import Optional

import sympy
import triton

from harness.launches import GRID_LIMITS

from .. import heuristics, indexing
from ..scheduler import XSYM, KernelGroup
from .kernel import KernelSpec, TritonKernel
from .nodes import GroupContext, emit_pointwise, needs_int64

YSYM = indexing.index_symbol("yindex")
GRID_Y_LIMIT = GRID_LIMITS[1]


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


def pointwise_kernel(name: str, ctx: GroupContext) -> KernelSpec:
    group = ctx.group
    split = _tile_split(group)
    transposed = _transposed_accesses(group, ctx.stored)
    if split is not None and heuristics.want_2d_tiling(transposed, 0):
        ynumel, xnumel = split
        yblock, xblock = heuristics.choose_tile(ynumel, xnumel, transposed=transposed > 0)
        if triton.cdiv(ynumel, yblock) <= GRID_Y_LIMIT:
            return _kernel_2d(name, ctx, ynumel, xnumel, yblock, xblock)
    return _kernel_1d(name, ctx)


def _kernel_1d(name: str, ctx: GroupContext) -> KernelSpec:
    group = ctx.group
    numel = group.xnumel
    block = heuristics.choose_pointwise_block(numel)
    k = TritonKernel(name, ctx.buffers, what=f"pointwise kernel {name}", int64=needs_int64(ctx))
    k.meta.update(kind="pointwise", tiling="1d", xblock=block, numel=numel)
    k.tile = [block]
    k.add_axis(XSYM, numel, block, mask=numel % block != 0)
    pid = "tl.program_id(0).to(tl.int64)" if k.int64 else "tl.program_id(0)"
    k.emit(f"xoffset = {pid} * {block}")
    k.emit(f"xindex = xoffset + {k.arange(block, 'xindex')}")
    if numel % block:
        k.emit(f"xmask = xindex < {numel}")
    k.active = [XSYM]
    for p in group.placed:
        emit_pointwise(k, ctx, p)
    k.meta["comments"] = [f"pointwise over {numel} elements, XBLOCK={block}"]
    return KernelSpec(name, k.source(), (triton.cdiv(numel, block),), list(k.args.values()),
                      heuristics.num_warps(block), dict(k.meta))


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
