"""Replay a dump: rebuild the case, run it with the same hazard hunters, say whether it still fails."""
from __future__ import annotations

import json
import os
import sys

from tritondiff.base import exc as base_exc

from . import hunters
from .case import Case
from .exc import UsageError
from .executor import InProcess, Isolated
from .loader import resolve


def load_dump(path: str) -> tuple[dict, Case]:
    summary_path, case_path = os.path.join(path, "summary.json"), os.path.join(path, "case.json")
    if not (os.path.isfile(summary_path) and os.path.isfile(case_path)):
        raise UsageError(f"{path}: not a tritondiff dump (summary.json and case.json expected)")
    try:
        with open(summary_path) as f:
            summary = json.load(f)
        with open(case_path) as f:
            case = Case.from_json(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: unreadable dump: {e}") from e
    return summary, case


def replay(path: str, *, isolate: bool = True):
    """Re-run a dump's case; returns (summary, verdict)."""
    summary, case = load_dump(path)
    subject_ref = summary["subject_ref"]
    resolve(subject_ref)                      # fail early, in this process, if the subject is gone
    hazards = frozenset(summary.get("hazards", []))
    executor = Isolated() if isolate and hunters.isolated(hazards) else InProcess()
    try:
        verdict = executor.run(subject_ref, case, hazards)
    finally:
        executor.close()
    return summary, verdict


def replay_dump(path: str, *, isolate: bool = True) -> int:
    """Print the verdict of replaying ``path``; 1 while it still fails, 0 once fixed, 2 on usage errors."""
    try:
        summary, verdict = replay(path, isolate=isolate)
    except base_exc.UsageError as e:
        print(f"tritondiff replay: {str(e).splitlines()[0] if str(e) else 'usage error'}", file=sys.stderr)
        return 2
    was = summary.get("failure_class")
    if verdict.status != "fail":
        from .memcheck import replay_under_memcheck

        code = replay_under_memcheck(path)       # a finding memcheck made shows only under memcheck
        if code is not None:
            return code
    if verdict.status == "fail":
        same = "same class" if verdict.failure_class == was else f"was {was}"
        print(f"still fails: {verdict.failure_class} ({same}): {verdict.message}")
        if verdict.failure_class in ("mismatch", "nonfinite", "degenerate"):
            _print_worst_elements(path)
        return 1
    print(f"no longer reproduces ({summary.get('subject')}: was {was}; now {verdict.status})")
    return 0


def _print_worst_elements(path: str) -> None:
    """The worst elements of the case's outputs: index, candidate, eager, float64 truth, inputs there
    (:func:`harness.standalone.worst_elements`), from one more in-process run of the subject and its reference."""
    from .runner import _detach, build_inputs, eager_reference, float64_reference
    from .standalone import worst_elements

    summary, case = load_dump(path)
    subj = resolve(summary["subject_ref"])
    inputs = build_inputs(subj, case, guard=False)
    try:
        candidate = _detach(subj.fn(**inputs))
        eager = eager_reference(subj, case)
        try:
            _, truth = float64_reference(subj, case)
        except Exception:  # noqa: BLE001 - no float64 path: eager is the best arbiter
            truth = eager
    except Exception as e:  # noqa: BLE001 - the verdict above stands; the table is a help
        print(f"      (no table of the worst elements: {type(e).__name__}: {e})")
        return
    lines, _ = worst_elements(candidate, eager, truth, inputs, multiplier=subj.tolerance.multiplier)
    print("\n".join("      " + line for line in lines))
