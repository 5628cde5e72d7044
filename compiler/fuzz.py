"""Graph fuzzer: random small programs of pointwise, reduction and view ops.

``programs()`` is a Hypothesis strategy for ``Program``: a few input shapes and a list of
steps, each an op applied to earlier values with parameters valid for their shapes (shapes
are tracked on meta tensors while drawing).  A ``Program`` is callable (``program(*xs)``
runs it with torch ops, so ``compiler.compile(program)`` compiles it) and its ``repr`` is
Python source a regression test can paste.

``check_program`` compiles one program, runs it on seeded inputs and judges the result
with the harness oracle against float64 (a wrong one is placed in lowering, fusion or
codegen by ``compiler.triage``); ``tests/compiler/test_fuzz.py`` drives it and
``compiler.subjects`` registers it as a harness subject.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import torch
from hypothesis import strategies as st

SIZES = (1, 2, 3, 5, 9, 16, 41)


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
    "softmax": lambda x, dim: torch.softmax(x, dim),
    "norm_rows": lambda x, dim: x * torch.rsqrt((x * x).mean(dim, keepdim=True) + 1e-5),
    # views
    "transpose": lambda x, a, b: x.transpose(a, b),
    "flatten": lambda x: x.reshape(-1),
    "unsqueeze_expand": lambda x, dim, n: x.unsqueeze(dim).expand(*x.shape[:dim], n, *x.shape[dim:]),
    "slice": lambda x, dim, start, step: x.narrow(dim, 0, x.shape[dim])[(slice(None),) * dim + (slice(start, None, step),)],
    "permute": lambda x, perm: x.permute(*perm),
    "contiguous_t": lambda x, a, b: x.transpose(a, b).contiguous(),
}
UNARY = ("exp", "tanh", "sigmoid", "neg", "abs", "relu", "sqrt", "log", "rsqrt", "square", "flatten")
BINARY = ("add", "sub", "mul", "div", "maximum", "where")
REDUCTIONS = ("sum", "amax", "mean", "var")


@dataclasses.dataclass(frozen=True)
class Program:
    """Inputs of ``input_shapes``; ``steps`` make values v{len(inputs)}...; ``outputs`` are value ids."""

    input_shapes: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    def __call__(self, *inputs: torch.Tensor):
        values = list(inputs)
        for step in self.steps:
            values.append(OPS[step.op](*[values[i] for i in step.args], **step.kwargs()))
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
        """A ``Program(...)`` expression (``from compiler.fuzz import Program, Step``)."""
        steps = ", ".join(f"Step({s.op!r}, {s.args!r}, {s.params!r})" for s in self.steps)
        return f"Program({self.input_shapes!r}, ({steps},), {self.outputs!r})"


def _meta(shape) -> torch.Tensor:
    return torch.empty(shape, device="meta")


@st.composite
def _step(draw, values: list[torch.Tensor]) -> tuple[Step, torch.Tensor]:
    float_ids = [i for i, v in enumerate(values) if v.dtype.is_floating_point]
    i = draw(st.sampled_from(float_ids))
    x = values[i]
    kinds = ["unary", "binary", "scalar", "reduce", "softmax", "view"]
    kind = draw(st.sampled_from(kinds))
    if kind == "unary" or (kind in ("reduce", "softmax", "view") and x.dim() == 0):
        step = Step(draw(st.sampled_from(UNARY if x.dim() else UNARY[:-1])), (i,))
    elif kind == "scalar":
        step = Step(draw(st.sampled_from(("scale", "shift"))), (i,),
                    (("c", draw(st.sampled_from((0.5, -2.0, 3.0, 1e-3)))),))
    elif kind == "binary":
        partners = [j for j in float_ids if _broadcasts(values[j].shape, x.shape)]
        j = draw(st.sampled_from(partners))
        step = Step(draw(st.sampled_from(BINARY)), (i, j) if draw(st.booleans()) else (j, i))
    elif kind == "reduce":
        dim = draw(st.integers(0, x.dim() - 1))
        step = Step(draw(st.sampled_from(REDUCTIONS)), (i,), (("dim", dim), ("keepdim", draw(st.booleans()))))
    elif kind == "softmax":
        step = Step(draw(st.sampled_from(("softmax", "norm_rows"))), (i,), (("dim", draw(st.integers(0, x.dim() - 1))),))
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
    """Random programs over 1-2 inputs of one random shape (rank 1-3, sizes in ``SIZES``)."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from(SIZES)) for _ in range(rank))
    shapes = [shape]
    if draw(st.booleans()):
        shapes.append(shape if draw(st.booleans()) else tuple(1 if k == 0 else s for k, s in enumerate(shape)))
    values = [_meta(s) for s in shapes]
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        step, out = draw(_step(values))
        if out.numel() > max_numel:
            continue
        steps.append(step)
        values.append(out)
    n = len(shapes)
    outputs = (len(values) - 1,)
    if len(values) - n > 1 and draw(st.booleans()):
        outputs = (draw(st.integers(n, len(values) - 2)),) + outputs
    return Program(tuple(shapes), tuple(steps), outputs)


def make_inputs(program: Program, seed: int, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """Seeded normal inputs (drawn on CPU, so a seed means one thing everywhere) on the kernel device."""
    from harness import device
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, device="cpu").to(dtype).to(device.torch_device())
            for s in program.input_shapes]


@dataclasses.dataclass
class FuzzResult:
    passed: bool
    message: str
    program: Program
    stage: Optional[str] = None  # when it failed: "lowering" / "fusion" / "codegen" / "unknown" (compiler.triage)


def check_program(program: Program, seed: int = 0, dtype: torch.dtype = torch.float32,
                  strategy: Optional[str] = None) -> FuzzResult:
    """Compile ``program``, run it on seeded inputs, judge it against eager / float64.

    A wrong result is re-run as unfused and fused IR to name the stage at fault.
    """
    import compiler
    from compiler import triage
    inputs = make_inputs(program, seed, dtype)
    eager, truth = triage.references(program, inputs)
    torch._dynamo.reset()
    knobs = {"reduction_strategy": strategy} if strategy else {}
    before = compiler.counters["graphs_compiled"]
    with compiler.config.patch(**knobs):
        compiled = compiler.compile(program, dynamic=False)
        got = compiled(*triage.copies(inputs))
        found = triage.diagnose(got, lambda: compiled(*triage.copies(inputs)),
                                lambda out: triage.judge(out, eager, truth), triage.compiled_since(before))
    if found is None:
        return FuzzResult(True, "", program)
    return FuzzResult(False, found.describe(), program, found.stage)


__all__ = ["Program", "Step", "OPS", "programs", "check_program", "make_inputs", "FuzzResult"]
