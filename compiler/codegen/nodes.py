"""Evaluating a kernel group's nodes inside a TritonKernel: the load resolver and node emission.

The resolver is where the scheduler's decisions take effect while a body runs: an inlined
producer is recomputed at the consumer's index; a producer of the same kernel hands over
its register, after checking (again, at codegen) that the consumer reads exactly the
element the register holds; anything else is a load from memory.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import sympy

from .. import indexing
from ..exc import CodegenError
from ..ir import Buffer, Reduction, use_resolver
from ..ops import ops, use_handler
from ..scheduler import KernelGroup, Placed
from .kernel import CSEVar, TritonKernel
from .triton_ops import TritonOps

INT32_SAFE = 2**31 - 1 - 2**22


@dataclasses.dataclass
class GroupContext:
    """What emitting one group needs to know about the rest of the schedule."""

    group: KernelGroup
    inlined: frozenset
    stored: frozenset
    buffers: dict[str, Buffer]
    subst: dict = dataclasses.field(default_factory=dict)  # kernel-symbol rewrite (2-D tiles)
    # Nodes of the same kernel outside ``group`` whose registers its nodes read (a mixed-order kernel's
    # column reductions reading the row pass's per-row values).
    held: frozenset = frozenset()

    def index(self, p: Placed) -> tuple:
        return tuple(sympy.sympify(e).xreplace(self.subst) for e in p.index)

    def rindex(self, p: Placed) -> tuple:
        return tuple(sympy.sympify(e).xreplace(self.subst) for e in p.rindex)


class KernelResolver:
    """Resolves buffer reads while a body is evaluated inside ``kernel``."""

    def __init__(self, kernel: TritonKernel, ctx: GroupContext):
        self.k = kernel
        self.ctx = ctx
        self.names = set(ctx.group.names) | ctx.held

    def load(self, buffer: Buffer, index: tuple):
        if buffer.name in self.ctx.inlined:
            return buffer.data.inner_fn(index)
        if buffer.name in self.names:
            return self._register(buffer, canonical_index(self.k, index), storage=False)
        return ops.load(buffer.name, buffer.layout.index(index))

    def load_storage(self, buffer: Buffer, offset: sympy.Expr):
        if buffer.name in self.ctx.inlined:
            return buffer.data.inner_fn(indexing.delinearize(offset, buffer.layout.size))
        if buffer.name in self.names:
            return self._register(buffer, indexing.simplify(offset, self.k.bounds()), storage=True)
        return ops.load(buffer.name, offset)

    def _register(self, buffer: Buffer, got: Any, storage: bool) -> CSEVar:
        held = self.k.register(buffer.name)
        if held is None:
            raise CodegenError(f"{self.k.name}: {buffer.name} is read where this kernel does not hold it "
                               f"(a fusion legality bug)")
        var, canonical, canonical_storage = held
        want = canonical_storage if storage else canonical
        if got != want:
            raise CodegenError(f"{self.k.name}: {buffer.name} read at {got}, the register holds {want} "
                               f"(a fusion legality bug)")
        return var


def canonical_index(kernel: TritonKernel, index: tuple) -> tuple:
    bounds = kernel.bounds()
    return tuple(indexing.simplify(sympy.sympify(e), bounds) for e in index)


def evaluate(kernel: TritonKernel, ctx: GroupContext, p: Placed, body: Optional[Callable[[], Any]] = None) -> CSEVar:
    """The node's body value at the kernel's current position (a reduction's per-element value); ``body``: another
    of the node's functions evaluated there instead (a scatter's initial value, a scan at its own index)."""
    data = p.node.buf.data
    with use_handler(TritonOps(kernel)), use_resolver(KernelResolver(kernel, ctx)):
        if body is not None:
            value = body()
        elif isinstance(data, Reduction):
            value = data.inner_fn(ctx.index(p), ctx.rindex(p))
        else:
            value = data.inner_fn(ctx.index(p))
    if not isinstance(value, CSEVar):
        raise CodegenError(f"{p.name}: body returned {value!r}, not a Triton value")
    want = data.src_dtype if isinstance(data, Reduction) else data.dtype
    if value.dtype != want:
        raise CodegenError(f"{p.name}: body returns {value.dtype}, node declares {want}")
    return value


def publish(kernel: TritonKernel, ctx: GroupContext, p: Placed, value: CSEVar) -> None:
    """Make a node's final value available to later nodes, and store it if anyone outside needs it."""
    index = ctx.index(p)
    canonical = canonical_index(kernel, index)
    layout = p.node.buf.layout
    kernel.set_register(p.name, value, canonical, indexing.simplify(layout.index(canonical), kernel.bounds()))
    if p.name in ctx.stored:
        kernel.store(p.name, layout.index(index), value)


def emit_pointwise(kernel: TritonKernel, ctx: GroupContext, p: Placed) -> None:
    publish(kernel, ctx, p, evaluate(kernel, ctx, p))


def needs_int64(ctx: GroupContext) -> bool:
    """Can any index or extent of this group pass 2**31 - 1?"""
    group = ctx.group
    if group.xnumel * max(group.rnumel, 1) >= INT32_SAFE:
        return True
    names = set(group.names)
    for p in group.placed:
        names.update(r.buffer.name for r in p.node.info.reads)
    return any(ctx.buffers[n].layout.storage_span >= INT32_SAFE for n in names if n in ctx.buffers)
