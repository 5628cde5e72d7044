"""IR checks between pipeline steps (``config.verify_ir``).

After lowering, the IR is run by the eager evaluator on the graph's actual inputs: every
body must return its declared dtype over its whole domain and every unmasked load must
stay inside its buffer.  After scheduling, the fused IR must give bit-identical results to
the unfused IR (inlining and grouping change where values are computed, never what they
are), and every read of a kernel-internal value must be register-compatible.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from .eager import nan_safe_equal
from .exc import VerificationError
from .ir import ComputedBuffer
from .ir import LoweredGraph
from .scheduler import Schedule


def _run(graph: LoweredGraph, sched: Schedule, args: Sequence[Any], mode: str) -> list:
    from .codegen import GeneratedModule
    from .config import config
    from .runtime import Executable
    exe = Executable(graph, sched, GeneratedModule("verify", "", {}))
    cloned = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with config.patch(execution=mode):
        return exe(cloned)


def check_lowered(graph: LoweredGraph, args: Sequence[Any]) -> None:
    names = set(graph.buffers)
    for node in graph.nodes:
        if isinstance(node, ComputedBuffer) and node.name not in names:
            raise VerificationError(f"{node.name} is not registered", step="lowered", node=node.name)
    _run(graph, Schedule([], frozenset(), frozenset(), {}, []), args, "ir_unfused")


def check_scheduled(graph: LoweredGraph, sched: Schedule, args: Sequence[Any]) -> None:
    unfused = _run(graph, sched, args, "ir_unfused")
    fused = _run(graph, sched, args, "ir")
    for i, (a, b) in enumerate(zip(unfused, fused)):
        if isinstance(a, torch.Tensor) and not nan_safe_equal(a, b):
            raise VerificationError(f"output {i} differs between the unfused and the fused IR", step="scheduled")
