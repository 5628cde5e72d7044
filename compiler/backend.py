"""Front end: the ``tritondiff`` torch.compile backend.

``torch.compile(fn, backend="tritondiff")`` (registered through the ``torch_dynamo_backends``
entry point) or ``compiler.compile(fn)``.  AOTAutograd traces forward and backward with our
decomposition table and hands each ATen graph to ``CompiledGraph``, which compiles it per
concrete input signature on first call (a graph traced with dynamic shapes is specialised
per shape: recompiling is slower, never wrong) and caches the result.  The compiled graphs run in
``compiler.lean``'s runtime (one autograd.Function, or one call) where the graph needs none of
AOTAutograd's runtime wrappers, else in AOTAutograd's.
"""
from __future__ import annotations

import dataclasses
import itertools
import types
from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx
from torch._functorch.aot_autograd import aot_module_simplified

from . import attention, dump, lean
from .counters import counters
from .partition import partition
from .config import config
from .decompositions import decomposition_table
from .runtime import Executable

_graph_ids = itertools.count()


def _signature(args: list) -> tuple:
    """What a compiled executable is specialised on: each tensor's shape, strides, dtype, device and
    storage offset; each Python scalar's type and value (True and 1 differ; a float by its bits, so -0.0
    is not 0.0 and every NaN finds the same entry).  Runs on every call, so it keeps torch's own
    hashable objects (torch.Size, torch.device) rather than converting them."""
    tensor = torch.Tensor
    return tuple([(a.shape, a.stride(), a.dtype, a.device, a.storage_offset()) if isinstance(a, tensor)
                  else _scalar_signature(a) for a in args])


def _scalar_signature(a: Any) -> tuple:
    if isinstance(a, float):
        return (float, a.hex())
    return (type(a), a) if a is None or isinstance(a, (int, bool)) else (type(a),)


class CompiledGraph:
    """The callable AOTAutograd receives for one ATen graph (boxed calling convention)."""

    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, kind: str):
        self.gm = gm
        self.kind = kind
        self.name = f"g{next(_graph_ids)}_{kind}"
        self.cache: dict[tuple, Executable] = {}

    def executable(self, args: list) -> Executable:
        key = (_signature(args), config.cache_token())
        exe = self.cache.get(key)
        if exe is None:
            from .pipeline import compile_graph
            exe = compile_graph(self.gm, args, f"{self.name}_{len(self.cache)}")
            self.cache[key] = exe
        return exe

    @torch._disable_dynamo
    def __call__(self, args: Sequence) -> list:
        # Never traced by dynamo: a backward can reach here from a frame dynamo resumes after a
        # graph break (autograd.grad inside a compiled function), and our compiler is Python.
        args = list(args)
        exe = self.executable(args)
        dump.note_ran(getattr(exe, "artifacts", None))      # a cached graph's code belongs in a dump too
        return exe(args)


def _compiler(kind: str) -> Callable:
    def compile_fx(gm: torch.fx.GraphModule, example_inputs: Any) -> CompiledGraph:
        return CompiledGraph(gm, kind)
    return compile_fx


def tritondiff_backend(gm: torch.fx.GraphModule, example_inputs: list, **kwargs: Any) -> Callable:
    """The dynamo backend: AOTAutograd with our decompositions, both graphs compiled by us; a graph that
    needs none of AOTAutograd's runtime wrappers runs in ``compiler.lean``'s runtime instead.  Hand-written
    attention is rewritten into ``scaled_dot_product_attention`` first (``compiler.attention``)."""
    if config.fuse_attention:
        counters["attention_fused"] += attention.fuse(gm)
    if config.lean_runtime:
        run = lean.runner(gm, example_inputs, CompiledGraph, decomposition_table())
        if run is not None:
            return run
    return aot_module_simplified(gm, example_inputs, fw_compiler=_compiler("forward"),
                                 bw_compiler=_compiler("backward"), inference_compiler=_compiler("inference"),
                                 decompositions=decomposition_table(), partition_fn=partition)


def compile(fn: Optional[Callable] = None, **kwargs: Any) -> Any:
    """``torch.compile(fn, backend=tritondiff_backend, **kwargs)`` (usable as a decorator)."""
    if fn is None:
        return lambda f: torch.compile(f, backend=tritondiff_backend, **kwargs)
    return torch.compile(fn, backend=tritondiff_backend, **kwargs)


def compile_fresh(fn: Callable, **kwargs: Any) -> Callable:
    """``torch.compile`` a private copy of ``fn`` (a new code object, so a new dynamo cache).

    For callers that feed one function many dtypes and layouts (harness subjects): dynamo
    gives up after ``cache_size_limit`` recompiles of one code object and then runs it
    eagerly without a word, which would turn a compiler test into eager vs eager.
    """
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return torch.compile(copy, backend=tritondiff_backend, **kwargs)


@dataclasses.dataclass
class CapturedGraph:
    """An ATen graph AOTAutograd produced, with meta tensors standing for its inputs."""

    kind: str
    gm: torch.fx.GraphModule
    args: list


def capture_graphs(fn: Callable, *args: Any, backward: bool = False) -> list[CapturedGraph]:
    """Trace ``fn(*args)`` (and its backward, with ``backward=True``) without compiling.

    The graphs run eagerly once; the returned ``CapturedGraph.args`` are meta tensors, so
    ``compiler.pipeline.compile_graph(g.gm, g.args, name)`` produces IR, Triton source and a
    launch plan for any shape without running a kernel (tests of very large shapes use this).
    """
    from functorch.compile import make_boxed_func
    captured: list[CapturedGraph] = []

    def capture(kind: str) -> Callable:
        def compile_fx(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable:
            metas = [torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
                     if isinstance(t, torch.Tensor) else t for t in example_inputs]
            captured.append(CapturedGraph(kind, gm, metas))
            return make_boxed_func(gm.forward)
        return compile_fx

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return aot_module_simplified(gm, example_inputs, fw_compiler=capture("forward"),
                                     bw_compiler=capture("backward"), inference_compiler=capture("inference"),
                                     decompositions=decomposition_table(), partition_fn=partition)

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend, dynamic=False)(*args)
    if backward:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        tensors = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        torch.autograd.backward(tensors, [torch.ones_like(o) for o in tensors])
    torch._dynamo.reset()
    return captured
