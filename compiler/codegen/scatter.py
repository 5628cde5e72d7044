"""A scatter node's kernels (``ir.Scatter``): its initial value written over the output, then one atomic add per
element of the source domain at the destination its body names.

Two launches in order on one stream: every add lands after the initial value is written.  The adds are relaxed
atomics -- only their sums are kept -- so adds to one element sum in an unspecified order (as ATen's CUDA
``index_put_(accumulate=True)`` does); a destination out of range adds nothing.
"""
from __future__ import annotations

import triton

from .. import heuristics, indexing
from ..exc import CodegenError
from ..ir import Scatter, use_resolver
from ..ops import use_handler
from ..scheduler import XSYM
from .kernel import KernelSpec, TritonKernel
from .nodes import GroupContext, KernelResolver, evaluate, needs_int64
from .pointwise import flat_prologue
from .triton_ops import TritonOps


def scatter_kernels(name: str, ctx: GroupContext) -> list[KernelSpec]:
    [p] = ctx.group.placed
    data = p.node.buf.data
    if not isinstance(data, Scatter):
        raise CodegenError(f"{name}: {p.name} is not a scatter")
    layout = p.node.buf.layout

    def init(k: TritonKernel) -> None:
        index = indexing.delinearize(XSYM, data.size)
        k.store(p.name, layout.index(index), evaluate(k, ctx, p, lambda: data.init(index)))

    def add(k: TritonKernel) -> None:
        index = ctx.index(p)
        with use_handler(TritonOps(k)), use_resolver(KernelResolver(k, ctx)):
            dest = data.dest(index)
        k.atomic_add(p.name, layout.index(dest), evaluate(k, ctx, p))
    return [_kernel(f"{name}_init", ctx, layout.numel, init, f"initial value of the scatter {p.name}"),
            _kernel(name, ctx, data.numel, add, f"atomic adds of the scatter {p.name} over {list(data.ranges)}")]


def _kernel(name: str, ctx: GroupContext, numel: int, emit, comment: str) -> KernelSpec:
    block = heuristics.choose_pointwise_block(numel)
    k = TritonKernel(name, ctx.buffers, what=f"scatter kernel {name}", int64=needs_int64(ctx))
    k.meta.update(kind="scatter", tiling="1d", xblock=block, numel=numel)
    flat_prologue(k, numel, block)
    emit(k)
    k.meta["comments"] = [comment]
    return KernelSpec(name, k.source(), (triton.cdiv(max(numel, 1), block),), list(k.args.values()),
                      heuristics.num_warps(block), dict(k.meta))
