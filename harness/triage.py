"""Which stage broke a compiled program that disagrees with eager: lowering, fusion or codegen.

Every compiled graph can run three ways (``config.execution``, see ``runtime``): the IR as
lowering produced it (``"ir_unfused"``), the fused IR (``"ir"``), both by the eager evaluator,
and the generated Triton kernels (``"triton"``).  When the Triton result is wrong, the same
inputs run the other two ways place the bug:

- ``"lowering"``: the unfused IR is already wrong -- a lowering does not compute what its ATen
  op does (IR != eager graph);
- ``"fusion"``: the unfused IR is right and the fused IR wrong -- inlining or grouping changed
  a value;
- ``"codegen"``: both IRs are right and the Triton kernels wrong (Triton != IR);
- ``"unknown"``: an IR run raised, so nothing can be compared.

"Right" is the harness oracle's verdict (``harness.oracle.compare``: float64 truth, eager as
the error yardstick), the same judgement that found the Triton result wrong.

``diagnose`` is what the correctness tools call after a compiled run (``tritondiff.harness.subjects.compiler``,
the graph fuzzer's ``check_program``, ``tools.opinfo_sweep``): nothing when the result is
right, else the stage, recorded into the artifacts of the graphs that ran (their ``triage``
step, their ``stage``, a ``mismatch_stage.<stage>`` counter) -- which the harness copies into
its failure dumps.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import torch

from tritondiff.compiler import dump
from tritondiff.compiler.config import config
from tritondiff.compiler.counters import counters

STAGES = ("lowering", "fusion", "codegen", "unknown")

#: The executions re-run, in pipeline order, with the stage a wrong result there points at.
_REPLAYS = (("ir_unfused", "lowering"), ("ir", "fusion"))

Judge = Callable[[Any], tuple[bool, str]]


@dataclasses.dataclass
class Triage:
    """The stage a wrong compiled result comes from, and what each execution gave."""

    stage: str                                    # one of STAGES
    verdicts: dict[str, str] = dataclasses.field(default_factory=dict)  # execution -> "right" / "wrong: ..."

    def describe(self) -> str:
        lines = [f"mismatch stage: {self.stage} ({_MEANING[self.stage]})"]
        lines += [f"  execution={mode}: {verdict}" for mode, verdict in self.verdicts.items()]
        return "\n".join(lines)


_MEANING = {
    "lowering": "the IR straight out of lowering already disagrees with eager",
    "fusion": "the unfused IR agrees with eager, the fused IR does not",
    "codegen": "the IR agrees with eager, the generated Triton does not",
    "unknown": "an IR execution raised, so the stage could not be placed",
}


def judge(got: Any, eager: Any, truth: Any) -> tuple[bool, str]:
    """(right, message) by the harness oracle, float64 ``truth`` and ``eager`` as yardstick."""
    from tritondiff.harness import oracle_chunks
    from tritondiff.harness.oracle import compare
    result = compare(got, eager, truth, large=oracle_chunks.compare_large)   # large outputs: on their device
    return result.passed, "" if result.passed else f"{result.failure_class}: {result.message}"


def references(fn: Callable, args: Sequence[Any], exact: Optional[Callable] = None) -> tuple[Any, Any]:
    """(eager, truth): ``fn`` on copies of ``args`` as given, and ``exact`` (default ``fn``) on copies with
    floating tensors in float64 (``exact``: where the float64 run must differ, e.g. a fuzz program's casts
    rounding without computing on in the cast's dtype, ``tritondiff.harness.graph_fuzz.Program.exact``)."""
    eager = fn(*copies(args))
    try:
        truth = (exact or fn)(*copies(args, torch.float64))
    except Exception:  # noqa: BLE001  (no float64 kernel: eager is its own truth, as in the harness)
        truth = eager
    return eager, truth


def copies(args: Sequence[Any], dtype: Optional[torch.dtype] = None) -> list:
    """Fresh copies of the tensors in ``args``.

    Without ``dtype`` each copy keeps its original's sizes, strides and storage offset (a copy
    of the whole storage, viewed the same way), so a compiled program re-run on the copies
    hits the executable it already has instead of compiling one for another layout.  With
    ``dtype``, floating tensors are cast to it (a reference run; layout does not matter).
    """
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            if dtype is not None:
                c = a.detach().to(dtype) if a.dtype.is_floating_point else a.detach().clone()
            else:
                c = _same_layout_copy(a.detach())
            a = c.requires_grad_(a.requires_grad)
        out.append(a)
    return out


def _same_layout_copy(t: torch.Tensor) -> torch.Tensor:
    n = t.untyped_storage().nbytes() // t.element_size()
    storage = torch.as_strided(t, (n,), (1,), 0).clone()
    return storage.as_strided(t.size(), t.stride(), t.storage_offset())


def locate(run: Callable[[], Any], judge_fn: Judge) -> Triage:
    """Re-run a compiled program whose Triton result was wrong as unfused and fused IR.

    ``run()`` calls the already compiled program on fresh copies of its inputs; it must not
    recompile (``execution`` is not part of ``config.cache_key()``, so it does not).
    """
    verdicts: dict[str, str] = {}
    for mode, stage in _REPLAYS:
        try:
            with config.patch(execution=mode):
                out = run()
        except Exception as e:  # noqa: BLE001  (the evaluator's failure is reported, not raised)
            verdicts[mode] = f"raised {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            return Triage("unknown", verdicts)
        right, message = judge_fn(out)
        verdicts[mode] = "right" if right else f"wrong: {message}"
        if not right:
            return Triage(stage, verdicts)
    return Triage("codegen", verdicts)


def diagnose(got: Any, run: Callable[[], Any], judge_fn: Judge,
             artifacts: Sequence[dump.Artifacts] = ()) -> Optional[Triage]:
    """None when ``got`` (the Triton result) is right; else its stage, recorded in ``artifacts``."""
    right, message = judge_fn(got)
    if right:
        return None
    triage = locate(run, judge_fn)
    triage.verdicts = {"triton": f"wrong: {message}", **triage.verdicts}
    record(triage, artifacts)
    return triage


def record(triage: Triage, artifacts: Sequence[dump.Artifacts]) -> None:
    """Put the stage into each graph's artifacts (harness dumps copy them) and the counters."""
    counters[f"mismatch_stage.{triage.stage}"] += 1
    for art in artifacts:
        art.stage = triage.stage
        art.counters[f"mismatch_stage.{triage.stage}"] = 1
        art.record("triage", triage.describe())


def compiled_since(graphs_before: int) -> list[dump.Artifacts]:
    """The artifacts of the graphs compiled since ``counters["graphs_compiled"]`` was ``graphs_before``."""
    n = counters["graphs_compiled"] - graphs_before
    return dump.recent_artifacts()[-n:] if n > 0 else []


__all__ = ["STAGES", "Triage", "judge", "references", "copies", "locate", "diagnose", "record", "compiled_since"]
