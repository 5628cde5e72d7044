"""The compiler, top to bottom: one function, one line per step.

Each step's name is also its key in the dump (``compiler.dump``) and, with
``config.verify_ir``, the point after which the IR is checked (``compiler.verify``).
"""
from __future__ import annotations

import collections
import time
from typing import Any, Callable, Sequence

import torch.fx

from . import dump, verify
from .codegen import generate
from .config import config
from .counters import counters
from .lowering import lower_graph
from .runtime import Executable
from .scheduler import describe as describe_schedule
from .scheduler import schedule
from .templates import fuse_templates


def compile_graph(gm: torch.fx.GraphModule, args: Sequence[Any], name: str) -> Executable:
    """Compile ``gm`` for the concrete ``args`` it is about to be called with."""
    run = _Steps(name, args)
    run.record("graph", gm.code)                              # the ATen graph as AOTAutograd handed it over
    lowered = run("lowered", lower_graph, gm, args, name)     # FX nodes -> Pointwise / Reduction / Extern IR
    sched = run("scheduled", schedule, lowered, fuse_templates)  # inline, fuse kernel groups and GEMM epilogues, order
    generated = run("triton", generate, sched, lowered, name)  # Triton source: tiles and reduction strategies
    executable = run("plan", Executable, lowered, sched, generated)  # buffers, launches, extern calls
    run("compiling", Executable.start_compiling, executable)  # its kernels compiled on threads, at once
    return run.finish(executable)


#: Seconds spent in each step, over every graph this process compiled (a timing, so not among the debug counters,
#: which say what a graph did): ``bench.compile_time`` reads it.
STEP_SECONDS: collections.Counter = collections.Counter()


class _Steps:
    """Runs one named step: the call, its artifact, the IR check when enabled, errors recorded."""

    def __init__(self, name: str, args: Sequence[Any]):
        self.args = args
        self.artifacts = dump.begin(name)
        self.results: dict[str, Any] = {}
        counters["graphs_compiled"] += 1

    def record(self, step: str, text: str) -> None:
        self.artifacts.record(step, text)

    def __call__(self, step: str, fn: Callable, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            result = fn(*args)
            STEP_SECONDS[step] += time.perf_counter() - start
            self.results[step] = result
            self.artifacts.record(step, _RENDER[step](result))
            if config.verify_ir and step in _VERIFY:
                _VERIFY[step](self)
        except BaseException as e:
            self.artifacts.finish(e)
            raise
        return result

    def finish(self, executable: Executable) -> Executable:
        self.artifacts.finish()
        executable.artifacts = self.artifacts                 # each later run is noted in the dump
        return executable


def _render_lowered(graph) -> str:
    from .analysis import describe
    from .ir import ComputedBuffer, ExternKernel
    lines = [f"inputs: {[repr(b) for b in graph.inputs]}"]
    for node in graph.nodes:
        if isinstance(node, ComputedBuffer):
            lines.append(describe(node))
        elif isinstance(node, ExternKernel):
            lines.append(f"{node.name} = extern {node.origin} -> {[repr(o) for o in node.outputs]}")
    lines.append(f"outputs: {graph.outputs}")
    return "\n".join(lines)


_RENDER = {
    "lowered": _render_lowered,
    "scheduled": describe_schedule,
    "triton": lambda generated: generated.source,
    "plan": lambda executable: executable.describe_plan(),
    "compiling": lambda jobs: (f"{len(jobs.futures)} kernel(s) compiling on {config.compile_workers} threads"
                               if jobs is not None else "kernels compile at their first launch"),
}
_VERIFY = {
    "lowered": lambda s: verify.check_lowered(s.results["lowered"], s.args),
    "scheduled": lambda s: verify.check_scheduled(s.results["lowered"], s.results["scheduled"], s.args),
}
