"""The lean runtime around compiled graphs: one ``torch.autograd.Function`` (or a plain call) where
the graph allows it.

AOTAutograd's runtime (``aot_module_simplified``) wraps the compiled forward and backward in layers
that handle input mutation, outputs aliasing inputs or each other, tensor subclasses, effect tokens,
tangent layouts and more -- on every call, whether the graph needs them or not.  Host-bound training
steps (layer norm fwd+bwd: several times its GPU time in host time) pay for it.
A graph with none of those needs only: run the forward graph, save what the backward graph reads,
run the backward graph -- or, for inference, run the graph.  ``runner(gm, example_inputs, ...)``
traces it with ``aot_export_joint_simple`` (which refuses input mutation and outputs that alias
anything) and partitions a training graph as ``aot_module_simplified`` does (``compiler.partition``);
``None`` means the graph needs the full runtime, and the backend uses ``aot_module_simplified``
(``compiler.counters``: ``lean_runtime.training`` / ``.inference`` / ``.refused``; the reason is in
this module's debug log).

What the lean runtime keeps of AOTAutograd's semantics, and how:

- outputs that do not require grad in eager do not here (``mark_non_differentiable``, from a fake
  run of the dynamo graph -- eager's own rule);
- an output the loss does not use gets a zero tangent (``autograd.Function`` materializes it);
- tangents are passed in the layout they arrive in (an expanded ``ones`` from ``.sum().backward()``
  too): the compiled backward specialises on strides, so no copy is made to the traced layout;
- gradients taken with ``create_graph=True`` carry a grad_fn, and differentiating them raises, as
  through AOTAutograd (never a silent zero);
- non-tensor values the backward reads (SymInts of a dynamic graph) are kept on the context;
- the user's saved-tensor hooks (checkpointing, offloading) see the compiled forward's saved values
  only, never the fake run that finds which outputs require grad.

The joint trace decomposes ops by ``torch.compile``'s rule, not export's (:func:`_decomposed_as_compile_does`):
a float16 / bfloat16 graph's backward takes the derivative ops eager takes (``silu_backward``, computed in
float32), not their composite formulas chained in the low dtype.

Refused (AOTAutograd's runtime does these): a float16 / bfloat16 training graph where that rule cannot be
applied (:func:`_why_not_exact_backward`), a grad-mode change
inside the graph, Python scalars read from tensors or passed as unspecialised floats, side-effecting ops
(effect tokens), input mutation, aliased outputs, tensor subclasses, compiled autograd.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import threading
import time
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
import torch.fx

from . import graph_cache
from .config import config
from .counters import counters
from .lowering import SAVED_FROM
from .partition import partition

log = logging.getLogger(__name__)

#: Seconds this process spent tracing graphs into joint ATen graphs (AOTAutograd's export) and partitioning them,
#: before the compiler's pipeline (``pipeline.STEP_SECONDS``): a timing ``bench.compile_time`` reads.
TRACE_SECONDS: collections.Counter = collections.Counter()


@dataclasses.dataclass
class Plan:
    """A partitioned training graph: ``forward(args) -> outputs + saved``, ``backward(saved + tangents)``
    (both ``CompiledGraph``s, which take any sequence of arguments)."""

    forward: Callable[[Sequence], list]
    backward: Callable[[Sequence], list]
    num_outputs: int
    non_differentiable: tuple[int, ...]           # outputs that do not require grad
    backward_inputs: tuple[tuple[str, int], ...]  # per backward input: ("saved", i) or ("tangent", output i)


def _why_not_plain(example_inputs: list) -> Optional[str]:
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    for i, a in enumerate(example_inputs):
        if isinstance(a, torch.Tensor) and is_traceable_wrapper_subclass(a):
            return f"input {i} is a tensor subclass ({type(a).__name__})"
        if not isinstance(a, (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
            return f"input {i} is a {type(a).__name__}"
    compiled_autograd = getattr(torch._dynamo, "compiled_autograd", None)
    if compiled_autograd is not None and getattr(compiled_autograd, "compiled_autograd_enabled", False):
        return "compiled autograd is on (it traces AOTAutograd's own backward)"
    return None


def _why_not_pure(gm: torch.fx.GraphModule) -> Optional[str]:
    """A grad-mode change inside the graph: AOTAutograd's runtime re-applies the mode the graph leaves
    behind, and a graph that turns grad on under a no_grad caller traces as a joint graph."""
    if any(gm.graph.find_nodes(op="call_function", target=torch._C._set_grad_enabled)):
        return "the graph changes grad mode"
    return None


_LOW_PRECISION = (torch.float16, torch.bfloat16)
_COMPILE_RULE = threading.local()          # .depth: this thread is inside _decomposed_as_compile_does; .applied


@functools.lru_cache(maxsize=1)
def _compile_rule_patchable() -> bool:
    """The functional mode takes ``export`` at construction (torch 2.11 and later do); asked once a process."""
    import inspect

    from torch._subclasses.functional_tensor import FunctionalTensorMode
    try:
        return "export" in inspect.signature(FunctionalTensorMode.__init__).parameters
    except (TypeError, ValueError):
        return False


def _install_compile_rule() -> None:
    """Wrap ``FunctionalTensorMode.__init__`` once: a mode made in export's mode inside
    :func:`_decomposed_as_compile_does`, on the thread that entered it, is made as a torch.compile trace's is
    (``export=False``); everywhere else (a ``torch.export`` on another thread) the wrapper changes nothing."""
    from torch._subclasses.functional_tensor import FunctionalTensorMode
    original = FunctionalTensorMode.__init__
    if getattr(original, "_tritondiff_compile_rule", False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if getattr(_COMPILE_RULE, "depth", 0) and getattr(self, "export", False):
            self.export = False
            _COMPILE_RULE.applied = getattr(_COMPILE_RULE, "applied", 0) + 1

    init._tritondiff_compile_rule = True
    FunctionalTensorMode.__init__ = init


@contextlib.contextmanager
def _decomposed_as_compile_does() -> Iterator[None]:
    """``aot_export_joint_simple`` traces in export's mode, where functionalization decomposes every op that has a
    CompositeImplicitAutograd kernel: silu's backward became ``math_silu_backward`` (sigmoid, mul, add, each
    rounding in the low dtype).  A ``torch.compile`` trace (``aot_module_simplified``) makes its functional mode
    without export, keeping the ops autograd keeps -- ``silu_backward`` -- for the decomposition table, whose
    formulas compute in float32 and round once, as eager's kernel does.  Inside this context the export trace's
    functional mode is made that way too, on this thread only; the trace's own checks (no mutation, no aliased
    outputs) stay.  Re-entrant: a trace that compiles another graph nests."""
    _install_compile_rule()
    _COMPILE_RULE.depth = getattr(_COMPILE_RULE, "depth", 0) + 1
    try:
        yield
    finally:
        _COMPILE_RULE.depth -= 1


def _why_not_exact_backward(gm: torch.fx.GraphModule, example_inputs: list, training: bool) -> Optional[str]:
    """A training graph with float16 / bfloat16 values, where the export trace cannot be given the compile
    decomposition rule (:func:`_decomposed_as_compile_does`, a functional mode that takes no ``export``):
    its joint trace would take the composite derivative formulas some ops have (silu's backward chained in the
    low dtype: twice eager's error, half the elements differing)."""
    if not training or _compile_rule_patchable():
        return None
    return _low_precision(gm, example_inputs)


def _low_precision(gm: torch.fx.GraphModule, example_inputs: list) -> Optional[str]:
    values = [a for a in example_inputs if isinstance(a, torch.Tensor)]
    values += [n.meta.get("example_value") for n in gm.graph.nodes]
    for v in values:
        if isinstance(v, torch.Tensor) and v.dtype in _LOW_PRECISION:
            return f"a {str(v.dtype).replace('torch.', '')} training graph (its backward is traced as eager runs it)"
    return None


def _outputs_requiring_grad(gm: torch.fx.GraphModule, example_inputs: list) -> list[bool]:
    """Which of the dynamo graph's outputs require grad in eager: run it on fake copies of its inputs."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    fake_mode = detect_fake_mode(example_inputs) or FakeTensorMode()
    fakes = [fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) and not isinstance(a, FakeTensor) else a
             for a in example_inputs]
    # innermost saved-tensor hooks win: the user's (checkpointing, offloading) never see the fake run
    with fake_mode, torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(_discard, _discard):
        outs = gm(*fakes)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [isinstance(o, torch.Tensor) and o.requires_grad for o in outs]


def _discard(value: Any) -> None:
    """Pack and unpack hook of the fake run: nothing is kept, nothing is unpacked."""
    return None


CompileGraph = Callable[[torch.fx.GraphModule, str], Callable[[Sequence], list]]


def runner(gm: torch.fx.GraphModule, example_inputs: list, compile_graph: CompileGraph,
           decompositions: dict) -> Optional[Callable]:
    """What dynamo runs for ``gm``: the lean runtime around the graph(s) ``compile_graph(graph, kind)``
    compiles, or None (reason logged) where the graph needs AOTAutograd's full runtime.  The traced graphs come
    from ``compiler.graph_cache`` where an earlier process (or call) traced the same graph."""
    training = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad
                                               for a in example_inputs)
    reason = (_why_not_plain(example_inputs) or _why_not_pure(gm)
              or _why_not_exact_backward(gm, example_inputs, training))
    if reason is not None:
        return _refused(reason)
    start = time.perf_counter()
    digest = graph_cache.key(gm, example_inputs, training, decompositions) if config.graph_cache else None
    traced = graph_cache.load(digest) if digest is not None else None
    TRACE_SECONDS["graph_cache"] += time.perf_counter() - start
    if traced is None:
        traced = _trace(gm, example_inputs, training, decompositions)
        if isinstance(traced, str):
            return _refused(traced)
        if digest is not None:
            start = time.perf_counter()
            graph_cache.store(digest, traced)
            TRACE_SECONDS["graph_cache"] += time.perf_counter() - start
    if not traced.training:
        counters["lean_runtime.inference"] += 1
        return _inference_runner(compile_graph(traced.graphs[0], "inference"))
    counters["lean_runtime.training"] += 1
    forward, backward = traced.graphs
    return _training_runner(Plan(compile_graph(forward, "forward"), compile_graph(backward, "backward"),
                                 traced.num_outputs, traced.non_differentiable, traced.backward_inputs))


def _trace(gm: torch.fx.GraphModule, example_inputs: list, training: bool,
           decompositions: dict) -> "graph_cache.Traced | str":
    """The graph(s) to compile: the joint trace of ``gm``, partitioned when training; or why the lean runtime
    cannot run it."""
    from torch._functorch.aot_autograd import aot_export_joint_simple
    try:
        start = time.perf_counter()
        patched = _compile_rule_patchable()
        applied = getattr(_COMPILE_RULE, "applied", 0)
        with _decomposed_as_compile_does() if patched else contextlib.nullcontext():
            graph = aot_export_joint_simple(gm, tuple(example_inputs), trace_joint=training,
                                            decompositions=decompositions)
        if patched and training and getattr(_COMPILE_RULE, "applied", 0) == applied:
            # no export-mode functional mode was made: this torch traces otherwise, and the rule did not apply
            reason = _low_precision(gm, example_inputs)
            if reason is not None:
                return f"{reason}; the compile decomposition rule did not apply (no functional mode was made)"
        wants_grad = _outputs_requiring_grad(gm, example_inputs) if training else None
        TRACE_SECONDS["trace"] += time.perf_counter() - start
    except Exception as e:        # mutation, aliasing, pytrees, ...: AOTAutograd's own path handles it
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    reason = _why_not_as_called(graph, example_inputs, training)
    if reason is not None:
        return reason
    _drop_metadata_asserts(graph)
    if not training:
        return graph_cache.Traced((graph,))
    return _partitioned(graph, wants_grad, example_inputs)


def _why_not_as_called(graph: torch.fx.GraphModule, example_inputs: list, training: bool) -> Optional[str]:
    """A traced graph the lean runtime cannot run as dynamo calls ``gm``: ops with side effects thread an
    effect token through extra inputs and outputs (``with_effects``), which AOTAutograd's runtime supplies;
    a Python scalar read from a tensor (an unspecialised float argument, ``.item()``), which only
    aot_module_simplified turns back into tensor ops."""
    if any(graph.graph.find_nodes(op="call_function", target=torch.ops.higher_order.with_effects)):
        return "the graph has ops with side effects (effect tokens)"
    if any(graph.graph.find_nodes(op="call_function", target=torch.ops.aten._local_scalar_dense.default)):
        return "the graph reads a Python scalar from a tensor (an unspecialised float argument or .item())"
    placeholders = graph.graph.find_nodes(op="placeholder")
    primals = [n for n in placeholders if not n.name.startswith("tangents_")]
    if len(primals) != len(example_inputs):
        return f"the traced graph takes {len(primals)} inputs where dynamo passes {len(example_inputs)}"
    if not training and len(primals) != len(placeholders):
        return "an inference graph traced as a joint graph (an output requires grad)"
    return None


def _drop_metadata_asserts(graph: torch.fx.GraphModule) -> None:
    """Export's tracing asserts each cast input's dtype and device (aten._assert_tensor_metadata); a compiled
    graph is specialised on both, so the asserts would only be extern calls on every run."""
    for node in graph.graph.find_nodes(op="call_function", target=torch.ops.aten._assert_tensor_metadata.default):
        if not node.users:
            graph.graph.erase_node(node)
    graph.recompile()


def _inference_runner(compiled: Callable[[Sequence], list]) -> Callable:
    @torch._disable_dynamo
    def run(*args: Any) -> list:
        return compiled(args)
    return run


def _partitioned(joint: torch.fx.GraphModule, wants_grad: list[bool],
                 example_inputs: list) -> "graph_cache.Traced | str":
    """Partition the joint graph; which backward input is which saved value or tangent."""
    num_outputs = len(wants_grad)
    start = time.perf_counter()
    fw, bw = partition(joint, list(example_inputs), num_fwd_outputs=num_outputs)
    TRACE_SECONDS["partition"] += time.perf_counter() - start
    fw_out = list(fw.graph.find_nodes(op="output"))[0].args[0]
    saved_index = {n.name: i for i, n in enumerate(fw_out[num_outputs:])}
    tangent_outputs = [i for i, w in enumerate(wants_grad) if w]
    backward_inputs, tangents = [], 0
    for node in bw.graph.find_nodes(op="placeholder"):
        if node.name.startswith("tangents_"):
            if tangents >= len(tangent_outputs):
                return f"the backward graph has more tangents than outputs that require grad ({node.name})"
            backward_inputs.append(("tangent", tangent_outputs[tangents]))
            tangents += 1
        elif node.name in saved_index:
            backward_inputs.append(("saved", saved_index[node.name]))
        else:
            return f"backward input {node.name} is neither a saved value nor a tangent"
    if tangents != len(tangent_outputs):
        return f"{len(tangent_outputs)} outputs require grad but the backward graph has {tangents} tangents"
    fw.meta[SAVED_FROM] = num_outputs          # the saved values keep the layouts the compiler gives them
    return graph_cache.Traced((fw, bw), num_outputs, tuple(i for i, w in enumerate(wants_grad) if not w),
                              tuple(backward_inputs))


def _refused(reason: str) -> None:
    counters["lean_runtime.refused"] += 1
    log.debug("lean runtime refused, AOTAutograd's full runtime runs this graph: %s", reason)
    return None


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, plan: Plan, *args: Any) -> tuple:
        outs = plan.forward(args)
        n = plan.num_outputs
        saved = outs[n:]
        ctx.plan = plan
        ctx.is_tensor = is_tensor = [isinstance(s, torch.Tensor) for s in saved]
        ctx.save_for_backward(*[s for s, t in zip(saved, is_tensor) if t])
        ctx.others = [s for s, t in zip(saved, is_tensor) if not t]
        user = tuple(outs[:n])
        if plan.non_differentiable:
            ctx.mark_non_differentiable(*[user[i] for i in plan.non_differentiable
                                          if isinstance(user[i], torch.Tensor)])
        return user

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        plan = ctx.plan
        tensors, others = iter(ctx.saved_tensors), iter(ctx.others)
        saved = [next(tensors) if t else next(others) for t in ctx.is_tensor]
        args = [saved[i] if kind == "saved" else grads[i] for kind, i in plan.backward_inputs]
        del saved
        if torch.is_grad_enabled():           # create_graph=True: gradients that refuse to be differentiated
            # saved values were made under no_grad; an empty leaf that requires grad connects the gradients
            # to the graph either way, so they carry _Backward's grad_fn
            anchor = torch.empty(0, requires_grad=True)
            return (None, *_Backward.apply(plan, anchor, *args))
        return (None, *plan.backward(args))


class _Backward(torch.autograd.Function):
    """The backward graph run with create_graph=True: its gradients carry a grad_fn (they depend on the
    inputs), and differentiating them raises -- the compiled backward has no backward of its own."""

    @staticmethod
    def forward(ctx: Any, plan: Plan, anchor: torch.Tensor, *args: Any) -> tuple:
        return tuple(plan.backward(args))

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        raise RuntimeError("tritondiff: a double backward through a compiled graph is not supported (its backward "
                           "graph has no backward); compute the higher-order gradient in eager mode, or compile "
                           "only the first-order part")


def _training_runner(plan: Plan) -> Callable:
    """The plan's forward and backward through one autograd.Function."""
    apply = _Function.apply

    @torch._disable_dynamo
    def run(*args: Any) -> list:
        return list(apply(plan, *args))
    return run
