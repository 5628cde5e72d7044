"""Graph fuzzer: random small programs of pointwise, reduction, cast and view ops.

``programs()`` is a Hypothesis strategy for ``Program``: a few input shapes and a list of
steps, each an op applied to earlier values with parameters valid for their shapes and
dtypes (shapes and dtypes are tracked on meta tensors while drawing).  Programs are
dtype-agnostic: they run in whatever floating dtype their inputs have (the subject draws
float32 / float16 / bfloat16), and ``codegen_knobs()`` draws the reduction strategy
(auto / persistent / looped / split, with a small forced RBLOCK so short axes loop) and the
pointwise tiling (auto / 1d / 2d / unrolled).  A ``Program`` is callable (``program(*xs)``
runs it with torch ops, so ``compiler.compile(program)`` compiles it) and its ``repr`` is
Python source a regression test can paste.

``check_program`` compiles one program, runs it on seeded inputs and judges the result
with the harness oracle against float64 (a wrong one is placed in lowering, fusion or
codegen by ``tritondiff.harness.triage``); ``tests/compiler/test_fuzz.py`` drives it and
``tritondiff.harness.subjects.compiler`` registers it as a harness subject.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tritondiff.compiler.codegen.reduction import FORCIBLE

SIZES = (1, 2, 3, 5, 9, 16, 41, 341, 4231)
#: config.reduction_strategy values a drawn program is compiled under: "auto" and every forcible strategy.
STRATEGIES = ("auto",) + FORCIBLE
#: RBLOCKs forced on looped / split reductions (None: the heuristic's), so that a short axis
#: still takes several loop iterations and partials.
FORCED_RBLOCKS = (None, 16, 128)
CAST_DTYPES = ("float32", "float16", "bfloat16")
TILINGS = ("auto", "1d", "2d", "unrolled")


@dataclasses.dataclass(frozen=True)
class Step:
    """``v{n} = OPS[op](*[v{i} for i in args], **params)``."""

    op: str
    args: tuple[int, ...]
    params: tuple = ()

    def kwargs(self) -> dict:
        return dict(self.params)


def _pos(x):
    return x.abs() + 0.5


def _weight(rows: int, cols: int, salt: int, like: torch.Tensor) -> torch.Tensor:
    """A fixed (rows, cols) weight in ``like``'s dtype: eighths in [-1, 1] (exact in float16 and bfloat16, so a
    float64 run holds the values a low-precision one does) scaled by a power of two near 1/sqrt(rows)."""
    k = torch.arange(rows * cols, device=like.device)
    values = ((k * 37 + salt * 11) % 17 - 8).to(like.dtype) / 8
    return values.reshape(rows, cols) * 2.0 ** -math.ceil(math.log2(rows) / 2)


def _layer_norm(x: torch.Tensor) -> torch.Tensor:
    c = x.shape[-1]
    return F.layer_norm(x, (c,), 1 + _weight(1, c, 1, x)[0] / 4, _weight(1, c, 2, x)[0] / 4)


OPS: dict[str, Callable[..., torch.Tensor]] = {
    # pointwise
    "exp": lambda x: torch.exp(x.clamp(-20, 20)),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "neg": torch.neg,
    "abs": torch.abs,
    "relu": torch.relu,
    "sqrt": lambda x: torch.sqrt(_pos(x)),
    "log": lambda x: torch.log(_pos(x)),
    "rsqrt": lambda x: torch.rsqrt(_pos(x)),
    "scale": lambda x, c: x * c,
    "shift": lambda x, c: x + c,
    "square": lambda x: x * x,
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": lambda a, b: a / _pos(b),
    "maximum": torch.maximum,
    "where": lambda a, b: torch.where(a > 0, a, b),
    # reductions
    "sum": lambda x, dim, keepdim: x.sum(dim, keepdim=keepdim),
    "amax": lambda x, dim, keepdim: x.amax(dim, keepdim=keepdim),
    "mean": lambda x, dim, keepdim: x.mean(dim, keepdim=keepdim),
    "var": lambda x, dim, keepdim: x.var(dim, keepdim=keepdim, correction=0),
    "prod": lambda x, dim, keepdim: x.prod(dim, keepdim=keepdim),
    "argmax": lambda x, dim, keepdim: x.argmax(dim, keepdim=keepdim),
    "argmin": lambda x, dim, keepdim: x.argmin(dim, keepdim=keepdim),
    "any": lambda x, dim, keepdim: x.any(dim, keepdim=keepdim),
    "all": lambda x, dim, keepdim: x.all(dim, keepdim=keepdim),
    "softmax": lambda x, dim: torch.softmax(x, dim),
    "cumsum": lambda x, dim: torch.cumsum(x, dim),
    # model-shaped: attention over a (batch, sequence, feature) value, the activations of gated MLPs
    "attention": lambda x, causal: torch.nn.functional.scaled_dot_product_attention(x, x.flip(-2), x,
                                                                                      is_causal=causal),
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "norm_rows": lambda x, dim: x * torch.rsqrt((x * x).mean(dim, keepdim=True) + 1e-5),
    "linear": lambda x, out, salt: x @ _weight(x.shape[-1], out, salt, x),
    "gated": lambda x, out: F.silu(x @ _weight(x.shape[-1], out, 1, x)) * (x @ _weight(x.shape[-1], out, 2, x)),
    "layer_norm": _layer_norm,
    "embedding": lambda ids, table: F.embedding(ids.clamp(0, table.shape[0] - 1), table),
    "take_rows": lambda ids, table: table[ids.clamp(0, table.shape[0] - 1) - table.shape[0]],  # negative ids wrap
    "pick_label": lambda x, ids: x.gather(-1, ids.clamp(0, x.shape[-1] - 1).unsqueeze(-1)).squeeze(-1),
    "scatter_row": lambda x, ids, add: (x.scatter_add if add else x.scatter)(
        -1, ids.clamp(0, x.shape[-1] - 1).unsqueeze(-1), x[..., :1] * 0.5),
    "cross_entropy": lambda x, ids: F.cross_entropy(x.reshape(-1, x.shape[-1]),
                                                    ids.clamp(0, x.shape[-1] - 1).reshape(-1),
                                                    label_smoothing=0.1, reduction="none").reshape(ids.shape),
    # views
    "transpose": lambda x, a, b: x.transpose(a, b),
    "flatten": lambda x: x.reshape(-1),
    "unsqueeze_expand": lambda x, dim, n: x.unsqueeze(dim).expand(*x.shape[:dim], n, *x.shape[dim:]),
    "slice": lambda x, dim, start, step: x.narrow(dim, 0, x.shape[dim])[(slice(None),) * dim + (slice(start, None, step),)],
    "permute": lambda x, perm: x.permute(*perm),
    "contiguous_t": lambda x, a, b: x.transpose(a, b).contiguous(),
    # casts
    "cast": lambda x, dtype: x.to(getattr(torch, dtype)),
    "to_float": lambda x: x.float(),
}
UNARY = ("exp", "tanh", "sigmoid", "neg", "abs", "relu", "sqrt", "log", "rsqrt", "square", "silu", "gelu", "flatten")
BINARY = ("add", "sub", "mul", "div", "maximum", "where")
REDUCTIONS = ("sum", "amax", "mean", "var", "prod")
BOOL_REDUCTIONS = ("any", "all")
#: Integer results must match eager exactly, so argmax / argmin only see values every
#: execution computes bit-identically: inputs, their views, and these ops of them.
ARG_REDUCTIONS = ("argmax", "argmin")
#: The ops that round their value to another dtype: in a float64 run they round, and the value stays float64.
ROUNDING_OPS = frozenset({"cast", "to_float"})
EXACT_OPS = frozenset({"neg", "abs", "relu", "transpose", "flatten", "unsqueeze_expand", "slice", "permute",
                       "contiguous_t", "cast"})  # a cast rounds to nearest-even everywhere


@dataclasses.dataclass(frozen=True)
class Program:
    """Inputs of ``input_shapes``; ``steps`` make values v{len(inputs)}...; ``outputs`` are value ids."""

    input_shapes: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    def __call__(self, *inputs: torch.Tensor):
        """The program's outputs, each op in its operands' dtypes (what eager runs and dynamo traces)."""
        return self._run(inputs, exact=False)

    def exact(self, *inputs: torch.Tensor):
        """The program's exact value, for the oracle's float64 truth (``inputs`` float64): a cast rounds its
        value to the cast's dtype, and the arithmetic after it goes on in float64.  Run as it is, the
        program would compute on in the cast's dtype, and the truth would repeat CPU eager's roundings
        there (fp16 sigmoid_backward rounds each step to half): eager's error would be 0 by construction,
        and a candidate computing in float32 after the cast, as CUDA eager and Inductor do, would fail."""
        return self._run(inputs, exact=True)

    def _run(self, inputs: Sequence[torch.Tensor], exact: bool):
        values = list(inputs)
        for step in self.steps:
            value = OPS[step.op](*[values[i] for i in step.args], **step.kwargs())
            if exact and step.op in ROUNDING_OPS:
                value = _rounded_straight_through(values[step.args[0]], value)
            values.append(value)
        return tuple(values[i] for i in self.outputs)

    def __repr__(self) -> str:
        lines = [f"def program({', '.join(f'v{i}' for i in range(len(self.input_shapes)))}):  "
                 f"# inputs {list(self.input_shapes)}"]
        n = len(self.input_shapes)
        for k, step in enumerate(self.steps):
            args = ", ".join(f"v{i}" for i in step.args)
            params = "".join(f", {key}={value!r}" for key, value in step.params)
            lines.append(f"    v{n + k} = OPS[{step.op!r}]({args}{params})")
        lines.append(f"    return ({', '.join(f'v{i}' for i in self.outputs)},)")
        return "\n".join(lines)

    def to_json(self) -> list:
        """Plain lists and numbers (what a harness case can carry to a worker process)."""
        steps = [[s.op, list(s.args), [[k, list(v) if isinstance(v, tuple) else v] for k, v in s.params]]
                 for s in self.steps]
        return [[list(shape) for shape in self.input_shapes], steps, list(self.outputs)]

    @staticmethod
    def from_json(data: Sequence) -> "Program":
        shapes, steps, outputs = data
        return Program(tuple(tuple(int(d) for d in s) for s in shapes),
                       tuple(Step(str(op), tuple(int(a) for a in args),
                                  tuple((str(k), tuple(v) if isinstance(v, list) else v) for k, v in params))
                             for op, args, params in steps),
                       tuple(int(o) for o in outputs))

    def to_source(self) -> str:
        """A ``Program(...)`` expression (``from tritondiff.harness.graph_fuzz import Program, Step``)."""
        steps = ", ".join(f"Step({s.op!r}, {s.args!r}, {s.params!r})" for s in self.steps)
        return f"Program({self.input_shapes!r}, ({steps},), {self.outputs!r})"


def _rounded_straight_through(arg: torch.Tensor, cast: torch.Tensor) -> torch.Tensor:
    """``cast``'s value (``arg`` rounded to the cast's dtype) as float64, with ``arg``'s gradient passing
    through unrounded.  Differentiated as it stands, the cast would round the gradient to its dtype on the
    way back, so eager's gradient would land on the truth wherever it computed in that dtype, and a
    gradient computed in float32 would fail by an fp16 ulp (a session-23 review's finding: a softmax after
    a cast to half).  A negative value that rounds to zero comes out +0, which no fuzz op tells from -0."""
    rounded = cast.to(torch.float64)
    if not arg.dtype.is_floating_point:
        return rounded
    return arg + (rounded - arg).detach()


def _meta(shape) -> torch.Tensor:
    return torch.empty(shape, device="meta")


@st.composite
def _step(draw, values: list[torch.Tensor], exact: list[bool]) -> tuple[Step, torch.Tensor]:
    float_ids = [i for i, v in enumerate(values) if v.dtype.is_floating_point]
    other_ids = [i for i, v in enumerate(values) if not v.dtype.is_floating_point]
    i = draw(st.sampled_from(float_ids))
    x = values[i]
    kinds = ["unary", "binary", "scalar", "reduce", "softmax", "view", "cast"]
    exact_ids = [j for j in float_ids if exact[j] and values[j].dim()]
    if exact_ids:
        kinds.append("arg_reduce")
    if x.dim() == 3 and x.shape[-1] > 1:
        kinds.append("attention")
    kind = draw(st.sampled_from(kinds))
    if kind == "unary" or (kind in ("reduce", "softmax", "view") and x.dim() == 0):
        step = Step(draw(st.sampled_from(UNARY if x.dim() else UNARY[:-1])), (i,))
    elif kind == "scalar":
        step = Step(draw(st.sampled_from(("scale", "shift"))), (i,),
                    (("c", draw(st.sampled_from((0.5, -2.0, 3.0, 1e-3)))),))
    elif kind == "binary":
        partners = [j for j in float_ids if _broadcasts(values[j].shape, x.shape)]  # mixed dtypes promote
        j = draw(st.sampled_from(partners))
        step = Step(draw(st.sampled_from(BINARY)), (i, j) if draw(st.booleans()) else (j, i))
    elif kind == "reduce":
        dim = draw(st.integers(0, x.dim() - 1))
        step = Step(draw(st.sampled_from(REDUCTIONS + BOOL_REDUCTIONS)), (i,),
                    (("dim", dim), ("keepdim", draw(st.booleans()))))
    elif kind == "arg_reduce":
        i = draw(st.sampled_from(exact_ids))
        step = Step(draw(st.sampled_from(ARG_REDUCTIONS)), (i,),
                    (("dim", draw(st.integers(0, values[i].dim() - 1))), ("keepdim", draw(st.booleans()))))
    elif kind == "softmax":
        dim = draw(st.integers(0, x.dim() - 1))
        # no norm over one element: x * rsqrt(x * x + eps) has the gradient eps / (x * x + eps)^1.5, the remainder
        # of two O(1) terms that cancel, rounding noise at 1e-3 of it that eager's own error over a few elements
        # cannot bound
        ops_ = ("softmax", "norm_rows", "cumsum") if x.shape[dim] > 1 else ("softmax", "cumsum")
        step = Step(draw(st.sampled_from(ops_)), (i,), (("dim", dim),))
    elif kind == "attention":
        step = Step("attention", (i,), (("causal", draw(st.booleans())),))
    elif kind == "cast":
        if other_ids and draw(st.booleans()):  # an argmax / any result back into the float chain
            step = Step("to_float", (draw(st.sampled_from(other_ids)),))
        else:
            step = Step("cast", (i,), (("dtype", draw(st.sampled_from(CAST_DTYPES))),))
    else:
        step = _view_step(draw, i, x)
    out = OPS[step.op](*[values[a] for a in step.args], **step.kwargs())
    return step, out


def _view_step(draw, i: int, x: torch.Tensor) -> Step:
    options = ["flatten", "unsqueeze_expand", "slice"]
    if x.dim() >= 2:
        options += ["transpose", "permute", "contiguous_t"]
    op = draw(st.sampled_from(options))
    if op in ("transpose", "contiguous_t"):
        a, b = draw(st.permutations(range(x.dim())))[:2]
        return Step(op, (i,), (("a", a), ("b", b)))
    if op == "permute":
        return Step(op, (i,), (("perm", tuple(draw(st.permutations(range(x.dim()))))),))
    if op == "unsqueeze_expand":
        return Step(op, (i,), (("dim", draw(st.integers(0, x.dim()))), ("n", draw(st.sampled_from((1, 3, 4))))))
    if op == "slice":
        dim = draw(st.integers(0, x.dim() - 1))
        return Step(op, (i,), (("dim", dim), ("start", draw(st.integers(0, max(0, x.shape[dim] - 1)))),
                               ("step", draw(st.sampled_from((1, 2, 3))))))
    return Step(op, (i,))


def _broadcasts(a: Sequence[int], b: Sequence[int]) -> bool:
    try:
        return tuple(torch.broadcast_shapes(tuple(a), tuple(b))) == tuple(b) or \
            tuple(torch.broadcast_shapes(tuple(a), tuple(b))) == tuple(a)
    except RuntimeError:
        return False


@st.composite
def programs(draw, max_steps: int = 6, max_numel: int = 20_000) -> Program:
    """Random programs over 1-2 inputs of one random shape (rank 1-3, sizes in ``SIZES``, at most
    ``max_numel`` elements an input)."""
    rank = draw(st.integers(1, 3))
    shape: tuple[int, ...] = ()
    for _ in range(rank):
        room = max_numel // max(1, _numel(shape))
        shape += (draw(st.sampled_from([s for s in SIZES if s <= room])),)
    shapes = [shape]
    if draw(st.booleans()):
        shapes.append(shape if draw(st.booleans()) else tuple(1 if k == 0 else s for k, s in enumerate(shape)))
    values = [_meta(s) for s in shapes]
    exact = [True] * len(values)
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        step, out = draw(_step(values, exact))
        if out.numel() > max_numel:
            continue
        steps.append(step)
        values.append(out)
        exact.append(_exact(step, exact))
    if not steps:      # every drawn step grew past max_numel: one pointwise op, so the program has a graph to compile
        step = Step(draw(st.sampled_from(("exp", "tanh", "sigmoid", "neg", "sqrt"))), (0,))
        steps.append(step)
        values.append(OPS[step.op](values[0]))
    n = len(shapes)
    outputs = (len(values) - 1,)
    if len(values) - n > 1 and draw(st.booleans()):
        outputs = (draw(st.integers(n, len(values) - 2)),) + outputs
    return Program(tuple(shapes), tuple(steps), outputs)


#: Ops only model-shaped programs draw (:func:`model_programs`; tests/harness/test_graph_fuzz.py checks both
#: strategies reach their ops).
MODEL_ONLY_OPS = frozenset({"linear", "gated", "layer_norm", "embedding", "take_rows", "pick_label", "scatter_row",
                            "cross_entropy"})
#: Widths of model-shaped programs' features, and of their linear layers' outputs.
MODEL_WIDTHS = (1, 2, 3, 5, 8, 16, 41)
#: Norms over fewer values than this make every gradient a cancellation of O(1) terms, an error set by where
#: an implementation stores low-precision values (two values: x_hat = +-1): not drawn.
MODEL_MIN_NORM = 8


@st.composite
def _model_step(draw, values: list[torch.Tensor], exact: list[bool]) -> Step:
    float_ids = [i for i, v in enumerate(values) if v.dtype.is_floating_point and v.dim()]
    i = draw(st.sampled_from(float_ids[-3:]))                  # mostly a chain: the latest values
    x = values[i]
    kinds = ["linear", "gated", "activation", "softmax"]
    if x.shape[-1] >= MODEL_MIN_NORM:
        kinds += ["layer_norm", "rms_norm"]
    if x.dim() == 3 and x.shape[-1] > 1:
        kinds.append("attention")
    residuals = [j for j in float_ids if j != i and values[j].shape == x.shape]
    if residuals:
        kinds.append("residual")
    routes = [j for j in float_ids if exact[j]]
    if routes:
        kinds.append("route")
    ids = [j for j, v in enumerate(values) if v.dtype == torch.int64 and v.dim()]
    tables = [j for j in float_ids if values[j].dim() == 2]
    if ids and tables:
        kinds += ["embedding", "take_rows"]
    labels = [j for j in ids if values[j].shape == x.shape[:-1]]     # one id per row of x: targets
    if labels:
        kinds += ["scatter_row", "cross_entropy", "pick_label"]
    kind = draw(st.sampled_from(kinds))
    if kind == "linear":
        return Step("linear", (i,), (("out", draw(st.sampled_from(MODEL_WIDTHS))), ("salt", draw(st.integers(0, 3)))))
    if kind == "gated":
        return Step("gated", (i,), (("out", draw(st.sampled_from(MODEL_WIDTHS))),))
    if kind == "activation":
        return Step(draw(st.sampled_from(("silu", "gelu", "relu", "tanh"))), (i,))
    if kind == "softmax":
        return Step("softmax", (i,), (("dim", x.dim() - 1),))
    if kind == "layer_norm":
        return Step("layer_norm", (i,))
    if kind == "rms_norm":
        return Step("norm_rows", (i,), (("dim", x.dim() - 1),))
    if kind == "attention":
        return Step("attention", (i,), (("causal", draw(st.booleans())),))
    if kind == "residual":
        return Step("add", (i, draw(st.sampled_from(residuals))))
    if kind == "route":
        j = draw(st.sampled_from(routes))
        return Step("argmax", (j,), (("dim", values[j].dim() - 1), ("keepdim", False)))
    if kind == "scatter_row":
        return Step("scatter_row", (i, draw(st.sampled_from(labels))), (("add", draw(st.booleans())),))
    if kind in ("cross_entropy", "pick_label"):
        return Step(kind, (i, draw(st.sampled_from(labels))))
    return Step(kind, (draw(st.sampled_from(ids)), draw(st.sampled_from(tables))))


@st.composite
def model_programs(draw, max_steps: int = 6, max_numel: int = 20_000) -> Program:
    """Model-shaped programs over one (tokens, features) or (batch, sequence, features) input: linear and gated
    (SwiGLU) layers with fixed weights, layer and RMS norms, attention, residual adds, activations, softmax,
    top-1 routing into an embedding lookup or a row gather (negative ids), and per-row targets (scatter /
    scatter_add at a routed column, the target's logit gathered, label-smoothed cross entropy) -- the steps model blocks are made of, chained."""
    lead = tuple(draw(st.sampled_from((1, 2, 3, 5, 9))) for _ in range(draw(st.integers(1, 2))))
    shape = lead + (draw(st.sampled_from(MODEL_WIDTHS + (64,))),)
    values, exact, steps = [_meta(shape)], [True], []
    for _ in range(draw(st.integers(1, max_steps))):
        step = draw(_model_step(values, exact))
        out = OPS[step.op](*[values[a] for a in step.args], **step.kwargs())
        if out.numel() > max_numel:
            continue
        steps.append(step)
        values.append(out)
        exact.append(_exact(step, exact))
    if not steps:
        steps.append(Step("layer_norm" if shape[-1] >= MODEL_MIN_NORM else "silu", (0,)))
        values.append(OPS[steps[-1].op](values[0]))
    floats = [k for k in range(1, len(values)) if values[k].dtype.is_floating_point]
    outputs = (floats[-1],) if floats else (len(values) - 1,)
    return Program((shape,), tuple(steps), outputs)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _exact(step: Step, exact: list[bool]) -> bool:
    """Is the step's value computed bit-identically by eager and every compiled execution?"""
    return step.op in EXACT_OPS and all(exact[a] for a in step.args)


@st.composite
def reduction_knobs(draw) -> dict:
    """``compiler.config`` knobs forcing the reduction strategy (``{}`` is the automatic choice).

    Looped and split may also get a small forced RBLOCK, so that the short axes of fuzzed
    programs take several loop iterations / partials instead of one; a split, its final pass as a
    kernel of its own (``split_last_program_final`` off) instead of in its last partial program, or in its last
    partial program through tagged partials or the fence (``split_last_program_sync``, either drawn).
    """
    strategy = draw(st.sampled_from(STRATEGIES))
    if strategy == "auto":
        return {}
    knobs = {"reduction_strategy": strategy}
    rblock = draw(st.sampled_from(FORCED_RBLOCKS)) if strategy in ("looped", "split") else None
    if rblock:
        knobs["rblock"] = rblock
    if strategy == "split" and not draw(st.booleans()):
        knobs["split_last_program_final"] = False      # the final pass as its own kernel, not the last program
    elif strategy == "split":                          # the last program polls flagged partials, or a fence
        knobs["split_last_program_sync"] = draw(st.sampled_from(("tagged", "fence")))
    return knobs


@st.composite
def codegen_knobs(draw) -> dict:
    """``reduction_knobs()`` and a forced pointwise tiling (``{}`` is every automatic choice)."""
    knobs = draw(reduction_knobs())
    tiling = draw(st.sampled_from(TILINGS))
    if tiling != "auto":
        knobs["pointwise_tiling"] = tiling
    return knobs


@st.composite
def training_knobs(draw) -> dict:
    """``codegen_knobs()`` and the runtime around a training graph: compiler.lean's (the default) or
    AOTAutograd's (``lean_runtime=False``)."""
    knobs = draw(codegen_knobs())
    if not draw(st.booleans()):
        knobs["lean_runtime"] = False
    return knobs


def make_inputs(program: Program, seed: int, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """Seeded normal inputs (drawn on CPU, so a seed means one thing everywhere) on the kernel device."""
    from tritondiff.base import device
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, device="cpu").to(dtype).to(device.torch_device())
            for s in program.input_shapes]


@dataclasses.dataclass
class FuzzResult:
    passed: bool
    message: str
    program: Program
    stage: Optional[str] = None  # when it failed: "lowering" / "fusion" / "codegen" / "unknown" (tritondiff.harness.triage)


def check_program(program: Program, seed: int = 0, dtype: torch.dtype = torch.float32,
                  strategy: Optional[str] = None, knobs: Optional[dict] = None) -> FuzzResult:
    """Compile ``program`` (with ``reduction_strategy=strategy`` and config ``knobs``), run it on
    seeded inputs of ``dtype``, judge it against eager / float64.

    A wrong result is re-run as unfused and fused IR to name the stage at fault.
    """
    from tritondiff import compiler
    from tritondiff.harness import triage
    inputs = make_inputs(program, seed, dtype)
    eager, truth = triage.references(program, inputs, program.exact)
    torch._dynamo.reset()
    knobs = dict(knobs or {}, **({"reduction_strategy": strategy} if strategy else {}))
    before = compiler.counters["graphs_compiled"]
    with compiler.config.patch(**knobs):
        compiled = compiler.compile(program, dynamic=False)
        got = compiled(*triage.copies(inputs))
        found = triage.diagnose(got, lambda: compiled(*triage.copies(inputs)),
                                lambda out: triage.judge(out, eager, truth), triage.compiled_since(before))
    if found is None:
        return FuzzResult(True, "", program)
    return FuzzResult(False, found.describe(), program, found.stage)


__all__ = ["Program", "Step", "OPS", "programs", "model_programs", "reduction_knobs", "codegen_knobs", "training_knobs", "check_program", "make_inputs", "FuzzResult",
           "STRATEGIES", "FORCED_RBLOCKS", "TILINGS"]
