"""Lowering: walk an ATen FX graph and build IR, one registered lowering per op.

``register_lowering(aten.x)`` maps an op to a Python function that receives IR nodes in
place of tensors and returns IR (``compiler/lowerings/`` holds them, by family).  Ops
without a lowering, ops in ``config.fallback_ops``, and calls a lowering declines
(``Unsupported``) become ``ExternKernel`` nodes that call the ATen op at run time.

Shapes are concrete: a graph traced with dynamic shapes is lowered once per concrete
input signature (the runtime caches per signature), with symbolic sizes in the FX
metadata resolved from the actual inputs.
"""
from __future__ import annotations

import operator
from typing import Any, Optional, Sequence

import sympy
import torch
import torch.fx

from tritondiff.base import device as _device

from .config import config
from .counters import counters
from .exc import LoweringError, Unsupported
from .ir import (Buffer, ComputedBuffer, ExternKernel, ExternOutput, InputBuffer, IRNode, Layout, LoweredGraph,
                 Loops, OutputSpec, Pointwise, StridedView, TensorArg, View, fill_template, op_name, realize,
                 use_graph)
from .lowerings.registry import Lowering, lowerings, register_lowering  # the package's import fills it


def _is_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


class GraphLowering:
    """Interprets one FX graph with concrete inputs, producing a LoweredGraph."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], name: str):
        self.gm = gm
        self.args = list(args)
        self.name = name
        self.nodes: list = []
        self.buffers: dict[str, Buffer] = {}
        self.constants: list[InputBuffer] = []
        self.inputs: list = []
        self.sym_env: dict[sympy.Symbol, int] = {}
        self.origin = ""
        self.single_output = False
        self._count = 0
        self.device_type = _device.torch_device().type
        # Buffers on another device than the kernels' (a CUDA graph's CPU scalars: the philox seed and offset
        # that flash and memory-efficient attention save for their backward); only ATen calls touch them.
        self.foreign: set[str] = set()

    # ---- naming / registration
    def _new_name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count - 1}"

    def register_computed(self, data: Loops) -> ComputedBuffer:
        buf = ComputedBuffer(self._new_name("buf"), Layout.contiguous(data.out_ranges, data.dtype), data, self.origin)
        self.nodes.append(buf)
        self.buffers[buf.name] = buf
        return buf

    # ---- driver
    def run(self) -> LoweredGraph:
        env: dict[torch.fx.Node, Any] = {}
        outputs: list[OutputSpec] = []
        placeholder = 0
        with use_graph(self):
            for node in self.gm.graph.nodes:
                if node.op == "placeholder":
                    env[node] = self._placeholder(node, placeholder)
                    placeholder += 1
                elif node.op == "get_attr":
                    env[node] = self._constant(node)
                elif node.op == "call_function":
                    args, kwargs = _map_args((node.args, node.kwargs), env)
                    self.origin = f"{op_name(node.target)}({node.name})"
                    env[node] = self._call(node, node.target, args, kwargs)
                elif node.op == "output":
                    self.origin = "output"
                    outputs = self._outputs(node, _map_args(node.args[0], env))
                else:
                    raise LoweringError(f"cannot lower FX node kind {node.op!r} ({node.name})")
        return LoweredGraph(self.name, self.inputs, self.constants, self.nodes, self.buffers, outputs,
                            self.gm.code, self.single_output)

    def _placeholder(self, node: torch.fx.Node, position: int) -> Any:
        value = self.args[position]
        meta = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            layout = Layout(tuple(value.shape), tuple(value.stride()), value.dtype, 0)
            buf = InputBuffer(f"arg{position}", layout, position, storage_offset=value.storage_offset())
            self.inputs.append(buf)
            self.buffers[buf.name] = buf
            self._note_device(buf.name, value)
            if isinstance(meta, torch.Tensor):
                for sym, real in zip(list(meta.shape) + list(meta.stride()), list(value.shape) + list(value.stride())):
                    self._bind(sym, real)
            return buf
        self.inputs.append(None)
        self._bind(meta, value)
        return value

    def _bind(self, sym: Any, real: Any) -> None:
        if isinstance(sym, torch.SymInt):
            expr = sym.node.expr
            if isinstance(expr, sympy.Symbol):
                self.sym_env[expr] = int(real)

    def concrete(self, value: Any) -> Optional[int]:
        """An int for a (possibly symbolic) meta size; None when it cannot be resolved."""
        if isinstance(value, int):
            return value
        if isinstance(value, torch.SymInt):
            expr = sympy.sympify(value.node.expr).subs(self.sym_env)
            return int(expr) if expr.is_Integer else None
        return None

    def _constant(self, node: torch.fx.Node) -> Any:
        value = getattr(self.gm, node.target)
        if not isinstance(value, torch.Tensor):
            return value
        layout = Layout(tuple(value.shape), tuple(value.stride()), value.dtype, 0)
        buf = InputBuffer(self._new_name("const"), layout, None, constant=value, storage_offset=value.storage_offset())
        self.constants.append(buf)
        self.buffers[buf.name] = buf
        return buf

    def _call(self, node: torch.fx.Node, target: Any, args: tuple, kwargs: dict) -> Any:
        if target is operator.getitem and isinstance(args[0], (tuple, list)):
            return args[0][args[1]]
        if not isinstance(target, torch._ops.OpOverload):
            if _has_ir(args, kwargs):
                return self.extern(target, args, kwargs, node)
            return target(*args, **kwargs)  # symbolic-int arithmetic, sym_size, ...
        if _is_sym_query(target):
            return _sym_query(target, args)
        lowering = lowerings.get(target)
        forced = op_name(target) in config.fallback_ops or str(target.overloadpacket).replace(
            "aten::", "aten.") in config.fallback_ops or op_name(target).rsplit(".", 1)[0] in config.fallback_ops
        if lowering is None or forced or self._touches_foreign((args, kwargs)):
            return self.extern(target, args, kwargs, node)
        mark = len(self.nodes)
        try:
            result = lowering(*args, **kwargs)
        except Unsupported:
            self._drop_after(mark)
            return self.extern(target, args, kwargs, node)
        self._check_meta(node, result)
        return result

    def _note_device(self, name: str, value: Any) -> None:
        """Record buffer ``name`` as foreign when ``value`` (a tensor or its fake) lives on another device than the
        kernels' (meta tensors stand for real ones when a graph is compiled only to inspect its code)."""
        if _is_tensor(value) and value.device.type not in (self.device_type, "meta"):
            self.foreign.add(name)

    def _touches_foreign(self, args: Any) -> bool:
        """Whether an argument reads a foreign buffer, directly or through views (computed values never do: a node
        that reads one is an ATen call, so its result is a buffer of its own)."""
        if not self.foreign:
            return False

        def base(a: IRNode) -> IRNode:
            while isinstance(a, (View, StridedView)):
                a = a.data if isinstance(a, View) else a.buffer
            return a
        return any(isinstance(b, Buffer) and b.name in self.foreign for b in map(base, _ir_leaves(args)))

    def _drop_after(self, mark: int) -> None:
        for dropped in self.nodes[mark:]:
            self.buffers.pop(getattr(dropped, "name", None), None)
        del self.nodes[mark:]

    def _check_meta(self, node: torch.fx.Node, result: Any) -> None:
        meta = node.meta.get("val")
        pairs = [(meta, result)]
        if isinstance(meta, (tuple, list)) and isinstance(result, (tuple, list)):
            pairs = list(zip(meta, result))
        for m, r in pairs:
            if not (isinstance(m, torch.Tensor) and isinstance(r, IRNode)):
                continue
            if m.dtype != r.get_dtype():
                raise LoweringError(f"lowering of {self.origin} produced {r.get_dtype()}, the graph says {m.dtype}",
                                    op=op_name(node.target))
            size = [self.concrete(s) for s in m.shape]
            if None not in size and tuple(size) != tuple(r.get_size()):
                raise LoweringError(f"lowering of {self.origin} produced shape {list(r.get_size())}, the graph "
                                    f"says {size}", op=op_name(node.target))

    # ---- extern fallback
    def extern(self, target: Any, args: tuple, kwargs: dict, node: Optional[torch.fx.Node]) -> Any:
        inputs: list[IRNode] = []

        def convert(a: Any) -> Any:
            if isinstance(a, IRNode):
                inputs.append(realize(a))
                return TensorArg(len(inputs) - 1)
            if isinstance(a, (list, tuple)):
                return type(a)(convert(x) for x in a)
            if isinstance(a, dict):
                return {k: convert(v) for k, v in a.items()}
            return a

        template = (convert(args), convert(kwargs))
        meta = self._extern_meta(target, template, inputs, node)
        kernel = ExternKernel(self._new_name("extern"), target, template, inputs, [], None, self.origin)
        kernel.structure = self._extern_outputs(kernel, meta)
        self.nodes.append(kernel)
        counters[f"extern.{op_name(target)}"] += 1
        return kernel.structure

    def _extern_meta(self, target: Any, template: tuple, inputs: list, node: Optional[torch.fx.Node]) -> Any:
        meta = node.meta.get("val") if node is not None else None
        if meta is not None and self._resolvable(meta):
            return meta
        metas = [x.layout.meta() if isinstance(x, (Buffer, StridedView)) else None for x in inputs]
        args, kwargs = fill_template(template, metas)
        try:
            return target(*args, **kwargs)
        except Exception as e:  # noqa: BLE001  (any failure means: no usable metadata)
            raise LoweringError(f"cannot infer the outputs of {op_name(target)} for a fallback call: {e}",
                                op=op_name(target)) from e

    def _resolvable(self, meta: Any) -> bool:
        if isinstance(meta, torch.Tensor):
            return all(self.concrete(s) is not None for s in list(meta.shape) + list(meta.stride()))
        if isinstance(meta, (tuple, list)):
            return all(self._resolvable(m) for m in meta)
        return True

    def _extern_outputs(self, kernel: ExternKernel, meta: Any) -> Any:
        if isinstance(meta, torch.Tensor):
            layout = Layout(tuple(self.concrete(s) for s in meta.shape), tuple(self.concrete(s) for s in meta.stride()),
                            meta.dtype, 0)
            out = ExternOutput(f"{kernel.name}_out{len(kernel.outputs)}", layout, kernel)
            kernel.outputs.append(out)
            self.buffers[out.name] = out
            self._note_device(out.name, meta)
            return out
        if isinstance(meta, (tuple, list)):
            return type(meta)(self._extern_outputs(kernel, m) for m in meta)
        if isinstance(meta, torch.SymInt):
            return None
        return meta

    # ---- outputs
    def _outputs(self, node: torch.fx.Node, values: Any) -> list[OutputSpec]:
        fx_args = node.args[0]
        self.single_output = not isinstance(fx_args, (tuple, list))
        if self.single_output:
            fx_args, values = [fx_args], [values]
        saved_from = self.gm.meta.get(SAVED_FROM, len(fx_args))
        specs = []
        for i, (fx_arg, value) in enumerate(zip(fx_args, values)):
            meta = fx_arg.meta.get("val") if isinstance(fx_arg, torch.fx.Node) else None
            passthrough = isinstance(fx_arg, torch.fx.Node) and fx_arg.op == "placeholder"
            specs.append(self._output(value, meta, passthrough, saved=i >= saved_from))
        return specs

    def _output(self, value: Any, meta: Any, passthrough: bool, saved: bool = False) -> OutputSpec:
        if not isinstance(value, IRNode):
            return OutputSpec("value", value=value)
        if passthrough and isinstance(value, InputBuffer) and value.position is not None:
            return OutputSpec("input", name=value.name, position=value.position)
        if saved and (isinstance(value, ExternOutput) or isinstance(value, ComputedBuffer) and value.fixed_layout):
            return OutputSpec("buffer", name=value.name)   # a layout the compiler chose; the backward reads it so
        want = self._meta_layout(meta, value)
        if isinstance(value, ExternOutput) and (meta is None or _same_strides(value.layout, want)):
            return OutputSpec("buffer", name=value.name)   # else (a layout the compiler chose): copied below
        if isinstance(value, View):     # a view of a computed buffer with the graph's strides: no copy
            strided = value.as_strided_view()
            # a value saved for the backward may be a view of an input too (a weight's transpose): the backward
            # reads it through the view, as eager's autograd saves the weight itself
            bases = (ComputedBuffer, ExternOutput, InputBuffer) if saved else (ComputedBuffer, ExternOutput)
            if strided is not None and isinstance(strided.buffer, bases) and \
                    (strided.layout.size, strided.layout.stride) == (want.size, want.stride):
                return OutputSpec("buffer", name=strided.buffer.name, view=strided.layout)
        if isinstance(value, ComputedBuffer) and (not value.fixed_layout or value.layout == want):
            value.set_output_layout(want)
            return OutputSpec("buffer", name=value.name)
        copy = Pointwise.create(value.make_loader(), value.get_size(), value.get_dtype())
        copy.set_output_layout(want)
        return OutputSpec("buffer", name=copy.name)

    def _meta_layout(self, meta: Any, value: IRNode) -> Layout:
        size = tuple(value.get_size())
        if isinstance(meta, torch.Tensor):
            stride = tuple(self.concrete(s) for s in meta.stride())
            if None not in stride and len(stride) == len(size):
                return Layout(size, stride, value.get_dtype(), 0)
        return Layout.contiguous(size, value.get_dtype())


# ------------------------------------------------------------------------------ helpers

def _same_strides(a: Layout, b: Layout) -> bool:
    """Whether ``a`` and ``b`` place every element alike (a dim of size 1 may take any stride)."""
    return a.size == b.size and all(x == y or n == 1 for n, x, y in zip(a.size, a.stride, b.stride))


def _map_args(a: Any, env: dict) -> Any:
    if isinstance(a, torch.fx.Node):
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_map_args(x, env) for x in a)
    if isinstance(a, dict):
        return {k: _map_args(v, env) for k, v in a.items()}
    return a


def _ir_leaves(a: Any):
    """The IR nodes in a call's arguments (nested lists, tuples and dicts)."""
    if isinstance(a, IRNode):
        yield a
    elif isinstance(a, (list, tuple)):
        for x in a:
            yield from _ir_leaves(x)
    elif isinstance(a, dict):
        for x in a.values():
            yield from _ir_leaves(x)


def _has_ir(args: Any, kwargs: Any) -> bool:
    return next(_ir_leaves((args, kwargs)), None) is not None


_SYM_QUERIES = {"sym_size", "sym_stride", "sym_numel", "sym_storage_offset"}


def _is_sym_query(target: Any) -> bool:
    return target.namespace == "aten" and target.overloadpacket.__name__ in _SYM_QUERIES


def _sym_query(target: Any, args: tuple) -> int:
    name = target.overloadpacket.__name__
    x = args[0]
    if name == "sym_size":
        return x.get_size()[args[1]] if len(args) > 1 else list(x.get_size())
    if name == "sym_numel":
        return x.get_numel()
    if isinstance(x, (Buffer, StridedView)):
        if name == "sym_stride":
            return x.layout.stride[args[1]]
        return x.layout.offset
    raise Unsupported(f"{name} of a view")


#: ``GraphModule.meta`` key: the graph's outputs from this index on are values saved for its backward graph, which
#: only that graph reads, compiled for the strides they come with (``compiler.lean``): such an output keeps the
#: layout the compiler chose for it (a convolution's channels-last activation) where a user-visible output gets
#: the traced graph's strides.
SAVED_FROM = "tritondiff.saved_outputs_from"


def lower_graph(gm: torch.fx.GraphModule, args: Sequence[Any], name: str) -> LoweredGraph:
    """Lower ``gm`` for the concrete ``args`` (tensors and ints, as the graph will be called)."""
    return GraphLowering(gm, args, name).run()


__all__ = ["SAVED_FROM", "register_lowering", "lowerings", "lower_graph", "LoweredGraph", "OutputSpec", "GraphLowering",
           "View", "fill_template"]
