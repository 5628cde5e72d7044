"""A scan node's kernel (``ir.Scan``): inclusive prefix sums along each row, rows side by side in a tile.

A row that fits one block (``config.persistent.max_rnumel``) is loaded and scanned whole by ``tl.cumsum``; a
longer one is walked in blocks of ``config.looped.rblock``, each block's scan offset by the sum of the blocks
before it (a carry per row).  Lanes past the row's end hold whatever their masked loads give: a prefix sum
never reads to its right, so they change no stored element.
"""
from __future__ import annotations

import triton

from .. import heuristics, indexing
from ..config import config
from ..exc import CodegenError
from ..ir import Scan
from ..scheduler import RSYM, XSYM
from .kernel import KernelSpec, TritonKernel
from .nodes import GroupContext, evaluate, needs_int64
from .prelude import tl_dtype
from .reduction import rows_prologue


def scan_kernel(name: str, ctx: GroupContext) -> KernelSpec:
    [p] = ctx.group.placed
    data = p.node.buf.data
    if not isinstance(data, Scan) or not data.ranges:
        raise CodegenError(f"{name}: {p.name} is not a scan over a dim")
    n = data.ranges[-1]
    rows = data.numel // max(n, 1)
    looped = n > config.persistent.max_rnumel
    rblock = config.looped.rblock if looped else heuristics.next_pow2(n)
    budget = config.max_reduction_block_numel
    xblock = max(1, min(heuristics.next_pow2(rows), budget // rblock if rblock <= budget else 1))
    k = TritonKernel(name, ctx.buffers, what=f"scan kernel {name}", int64=needs_int64(ctx))
    k.meta.update(kind="scan", xblock=xblock, rblock=rblock, looped=looped, numel=data.numel)
    rows_prologue(k, rows, n, xblock, rblock)
    layout = p.node.buf.layout
    index = indexing.delinearize(XSYM, data.ranges[:-1]) + (RSYM,)
    acc = tl_dtype(data.dtype)

    def scanned_block(carry: str = "") -> None:
        if k.axes[RSYM].mask:
            k.emit(f"rmask = rindex < {n}")
        k.active = [XSYM, RSYM]
        src = evaluate(k, ctx, p, lambda: data.inner_fn(index)).name
        total = k.newvar(f"tl.cumsum(tl.broadcast_to({src}, {[xblock, rblock]}), 1)", data.dtype)
        if carry:
            total = k.newvar(f"{carry} + {total.name}", data.dtype)
            k.emit(f"{carry} = {carry} + tl.sum(tl.broadcast_to({src}, {[xblock, rblock]}), 1)[:, None]")
        k.store(p.name, layout.index(index), total)
        k.active = [XSYM]

    if not looped:
        k.emit("rindex = rbase")
        scanned_block()
    else:
        k.emit(f"carry = tl.zeros([{xblock}, 1], {acc})")
        with k.loop("roffset", 0, n, rblock, over_reduction=True):
            k.emit("rindex = roffset + rbase")
            scanned_block("carry")
    k.meta["comments"] = [f"scan: {rows} rows x {n}, XBLOCK={xblock} RBLOCK={rblock}" + (", looped" if looped else "")]
    return KernelSpec(name, k.source(), (triton.cdiv(max(rows, 1), xblock),), list(k.args.values()),
                      heuristics.num_warps(xblock * rblock), dict(k.meta))
