"""What one example comes to: the :class:`Verdict` (plain, picklable data, so it can come back from a
worker process) and the :class:`CallResult` of each call of the candidate it is built from."""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Verdict:
    status: str                      # "pass" | "fail" | "skip" | "budget" (cut short, not judged)
    failure_class: str | None = None
    message: str = ""
    location: str = "none"           # coarse, part of the signature
    call: str = ""                   # which call diverged
    details: dict = dataclasses.field(default_factory=dict)
    launches: list = dataclasses.field(default_factory=list)
    traceback: str | None = None
    seconds: float = 0.0
    dump: str | None = None
    counters: dict = dataclasses.field(default_factory=dict)   # this example's debug counts (full names)
    compiler: list = dataclasses.field(default_factory=list)   # failing only: artifacts of the graphs that ran

    def signature(self, subject_name: str) -> str:
        return f"{subject_name}|{self.failure_class}|{self.location}"


@dataclasses.dataclass
class CallResult:
    output: Any = None
    error: str | None = None
    violations: list = dataclasses.field(default_factory=list)
    canary: dict = dataclasses.field(default_factory=dict)
    mutated: dict = dataclasses.field(default_factory=dict)
    launches: list = dataclasses.field(default_factory=list)
    tuned: list = dataclasses.field(default_factory=list)      # autotuners that benchmarked during the call
    tuners: list = dataclasses.field(default_factory=list)     # autotuners called during the call
    # why the call could not run at this shape at all -- more than 2^31 - 1 programs along grid axis 0, or
    # out of GPU memory at a huge example: outside what the kernel's launch (or the GPU) reaches, not a
    # wrong answer; None otherwise
    beyond: str | None = None


def fail(klass: str, message: str, call: str, res: CallResult, location: str = "none", **details) -> Verdict:
    """A failing verdict of class ``klass`` about call ``call`` (its launches and traceback kept)."""
    return Verdict("fail", klass, message, location, call, details, res.launches, res.error)


def first_label(first: CallResult) -> str:
    """How a verdict names the first call: the tuning call when autotuners benchmarked in it."""
    return "tuning call" if first.tuned else "first call"


def second_label(first: CallResult) -> str:
    """How a verdict names the second call: the cached call when autotuners were called in the first."""
    return "cached call" if first.tuners else "second call"


def last_line(tb: str) -> str:
    lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else tb
