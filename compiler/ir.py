"""Loop-level IR: buffers computed by Pointwise / Reduction bodies, extern ATen calls, views.

A ``Pointwise`` is ``(inner_fn, ranges, dtype)``: for every index ``i`` in the box
``ranges``, the output at ``i`` is ``inner_fn(i)``, an expression in the ``ops``
namespace.  A ``Reduction`` adds ``reduction_ranges`` and a ``reduction_type``: the output
at ``i`` combines ``inner_fn(i, r)`` over every ``r`` in the box ``reduction_ranges``; one
over a few elements (``config.unroll_reductions_max_rnumel``) is created as a Pointwise that
combines them, so its loads run along the output's axes and it fuses like any pointwise node.
Bodies read their inputs through loaders: ``x.make_loader()(index)``.

Two bodies run as kernels of their own: a ``Scatter`` adds values at data-dependent positions of a buffer it
initialises (``index_put`` with accumulate), a ``Scan`` takes prefix sums along its last dim (``cumsum``).
Bodies may index with data-dependent values (``ops.indirect_indexing``: gathers).

Views (reshape, permute, expand, slice, select, squeeze, unsqueeze, ...) are ``View``
nodes that rewrite the index and forward to the viewed node's loader: no copy.  A
buffer's loader does not call ``ops.load`` directly; it asks the active *load
resolver*, which is how fusion works without rewriting bodies: the scheduler's
resolver answers "recompute the producer here" (inlining) or "the value is in a
register of this kernel" instead of "load it from memory".
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import itertools
from typing import Any, Callable, ClassVar, Iterator, Optional, Sequence

import sympy
import torch

from . import indexing
from .config import config
from .counters import counters
from .exc import LoweringError
from .ops import accumulator_dtype, ops, reduction_combine, reduction_identity, reduction_result_dtype

Index = tuple  # tuple of sympy expressions, one per dim


# ------------------------------------------------------------------------------- layouts

@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a buffer's elements live: ``offset + sum(index[i] * stride[i])``, in elements."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    offset: int = 0

    @staticmethod
    def contiguous(size: Sequence[int], dtype: torch.dtype) -> "Layout":
        size = tuple(int(s) for s in size)
        return Layout(size, indexing.contiguous_strides(size), dtype)

    def index(self, index: Sequence[sympy.Expr]) -> sympy.Expr:
        return indexing.linearize(index, self.stride, self.offset)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.size:
            n *= s
        return n

    @property
    def storage_span(self) -> int:
        """Elements from the data pointer to one past the last element addressed."""
        if self.numel == 0:
            return 0
        return self.offset + sum((s - 1) * st for s, st in zip(self.size, self.stride)) + 1

    def is_contiguous(self) -> bool:
        return self.offset == 0 and all(
            st == c for s, st, c in zip(self.size, self.stride, indexing.contiguous_strides(self.size)) if s > 1)

    def meta(self) -> torch.Tensor:
        """An empty meta tensor with this layout (for replaying view ops)."""
        base = torch.empty(max(self.storage_span, 1), dtype=self.dtype, device="meta")
        return base.as_strided(self.size, self.stride, self.offset)


# ------------------------------------------------------------------------- load resolvers

class MemoryResolver:
    """Default resolver: every buffer read is a load from memory."""

    def load(self, buffer: "Buffer", index: Index):
        return ops.load(buffer.name, buffer.layout.index(index))

    def load_storage(self, buffer: "Buffer", offset: sympy.Expr):
        return ops.load(buffer.name, offset)


_resolver: contextvars.ContextVar[Any] = contextvars.ContextVar("tritondiff_load_resolver", default=MemoryResolver())


@contextlib.contextmanager
def use_resolver(resolver: Any) -> Iterator[Any]:
    """Install the object that decides how ``Buffer`` reads are evaluated."""
    token = _resolver.set(resolver)
    try:
        yield resolver
    finally:
        _resolver.reset(token)


# --------------------------------------------------------------------------------- nodes

class IRNode:
    """Anything with a size, a dtype and a loader."""

    def get_size(self) -> tuple[int, ...]:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def make_loader(self) -> Callable[[Index], Any]:
        raise NotImplementedError

    def get_numel(self) -> int:
        n = 1
        for s in self.get_size():
            n *= s
        return n

    @property
    def ndim(self) -> int:
        return len(self.get_size())


class Buffer(IRNode):
    """A named tensor in memory (or one the scheduler may keep in registers / recompute)."""

    def __init__(self, name: str, layout: Layout):
        self.name = name
        self.layout = layout

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype

    def make_loader(self):
        def loader(index: Index):
            index = tuple(index)
            if len(index) != len(self.layout.size):
                raise LoweringError(f"{self.name} is {len(self.layout.size)}-d, indexed with {len(index)} "
                                    f"indices")
            return _resolver.get().load(self, index)
        return loader

    def load_storage(self, offset: sympy.Expr):
        """Read the element at storage ``offset`` (as_strided views of this buffer)."""
        return _resolver.get().load_storage(self, offset)

    def __repr__(self):
        return f"{type(self).__name__}({self.name}, size={list(self.layout.size)}, {self.layout.dtype})"


class InputBuffer(Buffer):
    """A tensor the graph receives (placeholder ``position``) or holds as a constant."""

    def __init__(self, name: str, layout: Layout, position: Optional[int], constant: Optional[torch.Tensor] = None,
                 storage_offset: int = 0):
        super().__init__(name, layout)
        self.position = position
        self.constant = constant
        self.storage_offset = storage_offset  # of the tensor this was specialised for (as_strided needs it)


@dataclasses.dataclass
class Loops:
    """Common part of Pointwise and Reduction bodies."""

    inner_fn: Callable[..., Any]
    ranges: tuple[int, ...]
    dtype: torch.dtype
    #: A kernel group of its own (``scheduler.build_group``): a scatter's adds reach any element, a scan's
    #: elements depend on a whole row; nothing reads either in registers.
    runs_alone: ClassVar[bool] = False

    @property
    def numel(self) -> int:
        n = 1
        for s in self.ranges:
            n *= s
        return n

    @property
    def out_ranges(self) -> tuple[int, ...]:
        """The stored buffer's size (a scatter's differs from the domain it loops over)."""
        return self.ranges


@dataclasses.dataclass
class Pointwise(Loops):
    """``out[i] = inner_fn(i)`` for every ``i`` in ``ranges``."""

    @staticmethod
    def create(inner_fn: Callable[[Index], Any], ranges: Sequence[int], dtype: torch.dtype) -> "ComputedBuffer":
        return current_graph().register_computed(Pointwise(inner_fn, tuple(int(r) for r in ranges), dtype))


@dataclasses.dataclass
class Reduction(Loops):
    """``out[i] = reduce_{r in reduction_ranges} inner_fn(i, r)``, accumulated in ``acc_dtype``.

    ``dtype`` is the stored dtype (the accumulated value is cast to it after the loop);
    ``src_dtype`` is the dtype ``inner_fn`` returns.
    """

    reduction_ranges: tuple[int, ...] = ()
    reduction_type: str = "sum"
    src_dtype: torch.dtype = torch.float32
    acc_dtype: torch.dtype = torch.float32

    @property
    def reduction_numel(self) -> int:
        n = 1
        for s in self.reduction_ranges:
            n *= s
        return n

    @staticmethod
    def create(inner_fn: Callable[[Index, Index], Any], ranges: Sequence[int], reduction_ranges: Sequence[int],
               reduction_type: str, src_dtype: torch.dtype, dtype: Optional[torch.dtype] = None,
               acc_dtype: Optional[torch.dtype] = None) -> "ComputedBuffer":
        acc = acc_dtype or accumulator_dtype(reduction_type, src_dtype)
        out = dtype or reduction_result_dtype(reduction_type, acc)
        body = Reduction(inner_fn, tuple(int(r) for r in ranges), out, tuple(int(r) for r in reduction_ranges),
                         reduction_type, src_dtype, acc)
        if body.unrolls():
            counters["reductions_unrolled"] += 1
            return Pointwise.create(body.unrolled_fn(), body.ranges, body.dtype)
        return current_graph().register_computed(body)

    def unrolls(self) -> bool:
        """Whether ``create`` makes this a Pointwise (``config.unroll_reductions``): a reduced
        extent of at most ``unroll_reductions_max_rnumel`` under the auto strategy.  An empty
        extent unrolls only where the reduction has an identity torch returns (max/min raise)."""
        n = self.reduction_numel
        return (config.unroll_reductions and config.reduction_strategy == "auto"
                and n <= config.unroll_reductions_max_rnumel
                and (n > 0 or self.reduction_type in ("sum", "prod", "any", "all")))

    def unrolled_fn(self) -> Callable[[Index], Any]:
        """``out[i]``: the terms ``inner_fn(i, r)`` for every ``r`` (row-major, the reduction's
        flat order), each cast to ``acc_dtype``, combined left to right, cast to ``dtype``."""
        rindices = [tuple(sympy.Integer(v) for v in r) for r in itertools.product(*map(range, self.reduction_ranges))]
        rtype, acc, inner_fn = self.reduction_type, self.acc_dtype, self.inner_fn

        def body(index: Index):
            terms = [ops.to_dtype(inner_fn(index, r), acc) for r in rindices]
            if rtype in ("argmax", "argmin"):
                result = _first_extreme_index(terms, rtype, acc)
            elif not terms:
                result = ops.constant(reduction_identity(rtype, acc), acc)
            else:
                result = functools.reduce(reduction_combine(rtype, acc), terms)
            return ops.to_dtype(result, self.dtype)
        return body


@dataclasses.dataclass
class Scatter(Loops):
    """``out = init`` over ``size``, then ``out[dest(i)] += inner_fn(i)`` for every ``i`` in ``ranges`` (the source
    domain), by atomic adds: adds to one element land in an unspecified order.  ``dest(i)`` is an index of
    ``out`` (it may hold data-dependent symbols); an out-of-range one adds nothing.  A scatter runs as a kernel
    of its own (``scheduler.build_group``): its writes reach any element, so nothing reads them in registers."""

    size: tuple[int, ...] = ()
    dest: Callable[[Index], Index] = None
    init: Callable[[Index], Any] = None
    runs_alone: ClassVar[bool] = True

    @staticmethod
    def create(inner_fn: Callable[[Index], Any], ranges: Sequence[int], dest: Callable[[Index], Index],
               init: Callable[[Index], Any], size: Sequence[int], dtype: torch.dtype) -> "ComputedBuffer":
        return current_graph().register_computed(Scatter(inner_fn, tuple(int(r) for r in ranges), dtype,
                                                         tuple(int(s) for s in size), dest, init))

    @property
    def out_ranges(self) -> tuple[int, ...]:
        return self.size


@dataclasses.dataclass
class Scan(Loops):
    """``out[..., j] = sum_{k <= j} inner_fn(..., k)``: an inclusive prefix sum along the last of ``ranges``, in
    ``dtype`` (the lowering casts to the op's dtype after).  It runs as a kernel of its own: a row per tile lane
    row, scanned by ``tl.cumsum`` (a tree: its rounding differs from a sequential sum's, not its error bound)."""

    runs_alone: ClassVar[bool] = True

    @staticmethod
    def create(inner_fn: Callable[[Index], Any], ranges: Sequence[int], dtype: torch.dtype) -> "ComputedBuffer":
        return current_graph().register_computed(Scan(inner_fn, tuple(int(r) for r in ranges), dtype))


def _first_extreme_index(terms: list, rtype: str, dtype: torch.dtype) -> Any:
    """argmax / argmin of ``terms`` as ops: the first index of the extreme, a NaN beating any number."""
    better = ops.gt if rtype == "argmax" else ops.lt
    best, best_index = terms[0], ops.constant(0, torch.int64)
    for i, value in enumerate(terms[1:], start=1):
        wins = better(value, best)
        if dtype.is_floating_point:  # the first NaN wins and stays (nothing compares greater than it)
            wins = ops.logical_or(wins, ops.logical_and(ops.isnan(value), ops.logical_not(ops.isnan(best))))
        best = ops.where(wins, value, best)
        best_index = ops.where(wins, ops.constant(i, torch.int64), best_index)
    return best_index


class ComputedBuffer(Buffer):
    """A buffer whose elements a Pointwise or Reduction body defines."""

    def __init__(self, name: str, layout: Layout, data: Loops, origin: str):
        super().__init__(name, layout)
        self.data = data
        self.origin = origin
        self.fixed_layout = False  # True once a graph output pinned its strides

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.data, Reduction)

    def set_output_layout(self, layout: Layout) -> None:
        self.layout = layout
        self.fixed_layout = True


class ExternKernel:
    """A call of an ATen op (or any callable) the compiler does not lower: matmul, conv, ...

    ``template`` is the (args, kwargs) structure with each tensor replaced by ``TensorArg(i)``;
    ``inputs[i]`` is the realized IR for it (a Buffer, or a StridedView of one).  ``outputs`` are
    the ExternOutput buffers, ``structure`` how they nest in the op's return value.
    """

    def __init__(self, name: str, target: Any, template: tuple, inputs: list, outputs: list,
                 structure: Any, origin: str):
        self.name = name
        self.target = target
        self.template = template
        self.inputs = inputs
        self.outputs = outputs
        self.structure = structure
        self.origin = origin

    def __repr__(self):
        return f"ExternKernel({self.name}, {op_name(self.target)})"


@dataclasses.dataclass(frozen=True)
class TensorArg:
    """Placeholder for the i-th tensor input in an ExternKernel's argument template."""

    i: int


class ExternOutput(Buffer):
    """One tensor an ExternKernel returns; its layout is what the op is expected to produce."""

    def __init__(self, name: str, layout: Layout, kernel: ExternKernel):
        super().__init__(name, layout)
        self.kernel = kernel


# --------------------------------------------------------------------------------- views

class View(IRNode):
    """An index-rewriting view of ``data``: ``view[i] = data[reindex(i)]``, no copy.

    ``replay`` applies the same view to a meta tensor; it lets a view of a buffer be handed
    to an ATen op as a strided tensor (``as_strided_view``) instead of being copied.
    """

    def __init__(self, data: IRNode, size: Sequence[int], reindex: Callable[[Index], Index], desc: str,
                 replay: Optional[Callable[[torch.Tensor], torch.Tensor]] = None):
        self.data = data
        self.size = tuple(int(s) for s in size)
        self.reindex = reindex
        self.desc = desc
        self.replay = replay

    def get_size(self):
        return self.size

    def get_dtype(self):
        return self.data.get_dtype()

    def make_loader(self):
        inner = self.data.make_loader()
        reindex = self.reindex

        def loader(index: Index):
            return inner(tuple(reindex(tuple(index))))
        return loader

    def as_strided_view(self) -> Optional["StridedView"]:
        """This view as (buffer, size, stride, offset), when it is one; None otherwise."""
        if self.replay is None:
            return None
        base = self.data
        if isinstance(base, View):
            base = base.as_strided_view()
            if base is None:
                return None
        if isinstance(base, Buffer):
            buffer, layout = base, base.layout
            if isinstance(buffer, ComputedBuffer):
                buffer.fixed_layout = True  # strides are now baked into this view
        elif isinstance(base, StridedView):
            buffer, layout = base.buffer, base.layout
        else:
            return None
        try:
            out = self.replay(layout.meta())
        except RuntimeError:
            return None
        if tuple(out.shape) != self.size:
            return None
        return StridedView(buffer, Layout(tuple(out.shape), tuple(out.stride()), layout.dtype,
                                          int(out.storage_offset())))

    def __repr__(self):
        return f"View({self.desc}, {list(self.size)}, of={self.data!r})"


class StridedView(IRNode):
    """``buffer``'s storage read with an explicit layout (as_strided, or a resolved View)."""

    def __init__(self, buffer: Buffer, layout: Layout):
        self.buffer = buffer
        self.layout = layout

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype

    def make_loader(self):
        def loader(index: Index):
            return self.buffer.load_storage(self.layout.index(tuple(index)))
        return loader

    def __repr__(self):
        return f"StridedView({self.buffer.name}, size={list(self.layout.size)}, stride={list(self.layout.stride)}, " \
               f"offset={self.layout.offset})"


# ----------------------------------------------------------------------- graph registry

class _NoGraph:
    def register_computed(self, data):
        raise LoweringError("IR nodes can only be created while a graph is being lowered "
                            "(inside compiler.lowering.GraphLowering.run)")


_graph: contextvars.ContextVar[Any] = contextvars.ContextVar("tritondiff_graph", default=_NoGraph())


def current_graph():
    return _graph.get()


@contextlib.contextmanager
def use_graph(graph: Any) -> Iterator[Any]:
    token = _graph.set(graph)
    try:
        yield graph
    finally:
        _graph.reset(token)


def op_name(target: Any) -> str:
    """``aten.add.Tensor``-style name of an FX call target."""
    name = getattr(target, "name", None)
    if callable(name):
        try:
            full = name()  # OpOverload.name() -> "aten::add.Tensor"
            return full.replace("::", ".")
        except TypeError:
            pass
    return getattr(target, "__name__", str(target))


def realize(x: IRNode) -> IRNode:
    """A Buffer or StridedView holding ``x``: views of buffers stay views, the rest is copied."""
    if isinstance(x, (Buffer, StridedView)):
        return x
    if isinstance(x, View):
        strided = x.as_strided_view()
        if strided is not None:
            return strided
    return Pointwise.create(x.make_loader(), x.get_size(), x.get_dtype())


# --------------------------------------------------------------------------- a lowered graph

@dataclasses.dataclass
class OutputSpec:
    """One graph output: a buffer name (``view``: the output is that buffer's storage read with this layout), an
    input position, or a plain value."""

    kind: str  # "buffer" | "input" | "value"
    name: Optional[str] = None
    position: Optional[int] = None
    value: Any = None
    view: Optional[Layout] = None


@dataclasses.dataclass
class LoweredGraph:
    """What lowering hands to the scheduler."""

    name: str
    inputs: list  # per placeholder: InputBuffer, or None for a non-tensor argument
    constants: list[InputBuffer]
    nodes: list  # ComputedBuffer | ExternKernel, in a valid execution order
    buffers: dict[str, Buffer]
    outputs: list[OutputSpec]
    fx_code: str
    single_output: bool = False  # the graph returns one value, not a tuple (make_fx graphs)

    def computed(self) -> list[ComputedBuffer]:
        return [n for n in self.nodes if isinstance(n, ComputedBuffer)]


def fill_template(template: tuple, values: list) -> tuple:
    """An extern call's (args, kwargs) with each TensorArg replaced by ``values[i]``."""
    def fill(a):
        if isinstance(a, TensorArg):
            return values[a.i]
        if isinstance(a, (list, tuple)):
            return type(a)(fill(x) for x in a)
        if isinstance(a, dict):
            return {k: fill(v) for k, v in a.items()}
        return a
    args, kwargs = template
    return fill(args), fill(kwargs)
