"""Where examples execute: in this process, or isolated in a long-lived worker process.

Isolation (on by default) turns a segfault, an abort, a CUDA illegal-address
error or a hang into a finding with a dump instead of the end of the run: the
worker is replaced and fuzzing goes on.  The worker imports the subject once
and is reused for every example.
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

from tritondiff.base.device import device_fault

from . import hunters
from .case import Case
from .config import config
from .counters import counters
from .exc import HarnessError, ReferenceFault
from .runner import Verdict


def execute(subject_ref: dict, case_json: dict, hazards: list[str]) -> dict:
    """Worker entry point: run one example and return the verdict as a dict (with the example's debug
    counts and, when it fails, the compiler artifacts of the graphs that ran: see ``run_case``)."""
    from .loader import resolve
    from .runner import run_case

    subject = resolve(subject_ref)
    verdict = run_case(subject, Case.from_json(case_json), frozenset(hazards))
    return dataclasses.asdict(verdict)


def prepare(subject_ref: dict) -> None:
    """Worker entry point: import the subject and the instrumentation (so the budget measures examples)."""
    from .loader import resolve
    from .runner import _instrumentation

    resolve(subject_ref)
    _instrumentation()


class Executor(Protocol):
    def prepare(self, subject_ref: dict) -> None: ...

    def run(self, subject_ref: dict, case: Case, hazards: frozenset, timeout_s: float | None = None) -> Verdict: ...

    def close(self) -> None: ...


class InProcess:
    """Run examples in the calling process (fast, but a crash takes the caller down)."""

    def prepare(self, subject_ref: dict) -> None:
        prepare(subject_ref)

    def run(self, subject_ref: dict, case: Case, hazards: frozenset, timeout_s: float | None = None) -> Verdict:
        try:
            return Verdict(**execute(subject_ref, case.to_json(), sorted(hazards)))
        except Exception as e:  # noqa: BLE001 - only a device fault is a verdict; anything else is the harness's
            if not device_fault(e):
                raise
            # a sticky CUDA error surfaced in the harness's own steps: the context is gone, like a dead worker's
            return Verdict("fail", "crash", f"the device faulted ({type(e).__name__}: {str(e).splitlines()[0]}); "
                           "this process's CUDA context is unusable, so the exploration stops here.  The fault "
                           "came from a launch of this example or an earlier one: run isolated (the default "
                           "executor) to tell which", "device_fault", "first call")

    def close(self) -> None:
        pass


class Isolated:
    """Run examples in a long-lived worker; crashes and hangs become verdicts."""

    def __init__(self, timeout_s: float | None = None):
        from .worker import Worker

        self.timeout_s = timeout_s or config.example_timeout_s
        self.worker = Worker()

    def prepare(self, subject_ref: dict) -> None:
        """Start the worker and import the subject there, untimed by the example's hang timeout."""
        res = self.worker.call("tritondiff.harness.executor:prepare", subject_ref, timeout=max(300.0, self.timeout_s))
        if res.status != "ok":
            raise HarnessError(f"the worker could not load subject {subject_ref['name']!r}:\n{res.error}")
        self._prepared = (self.worker.pid, subject_ref["name"], subject_ref["file"])

    def run(self, subject_ref: dict, case: Case, hazards: frozenset, timeout_s: float | None = None) -> Verdict:
        """``timeout_s`` below the hang timeout cuts an example short for a budget: the verdict is then
        status "budget", not a hang finding."""
        limit = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        if getattr(self, "_prepared", None) != (self.worker.pid, subject_ref["name"], subject_ref["file"]):
            self.prepare(subject_ref)         # a fresh worker (first call, or after a crash) imports first
        res = self.worker.call("tritondiff.harness.executor:execute", subject_ref, case.to_json(), sorted(hazards),
                               timeout=limit)
        if res.status == "hang" and limit < self.timeout_s:
            return Verdict("budget", message="stopped at the end of the budget", seconds=res.seconds)
        if res.status == "ok":
            verdict = Verdict(**res.value)
            counters.merge(verdict.counters)  # counted in the worker: the parent's dumps report them
            return verdict
        if res.status in ("crash", "error") and _REFERENCE_FAULT in (res.error or ""):
            # eager PyTorch faulted, not the candidate: a fresh worker (and CUDA context) for the next example
            self.worker.close()
            return Verdict("skip", message=_first_line(res.error[res.error.index(_REFERENCE_FAULT):]),
                           details={"skip": "reference faulted on the device"}, seconds=res.seconds)
        if res.status == "crash":
            return Verdict("fail", "crash", f"the worker process died running the subject: "
                           f"{_first_line(res.error)}", "crash", "first call", traceback=res.error,
                           seconds=res.seconds)
        if res.status == "hang":
            return Verdict("fail", "hang", f"no answer within {self.timeout_s:.0f} s: the subject hangs "
                           f"(or is far too slow for this example)", "hang", "first call", traceback=res.error,
                           seconds=res.seconds)
        raise HarnessError(f"the harness failed inside the worker (not a subject finding):\n{res.error}")

    def close(self) -> None:
        self.worker.close()


def make_executor(hazards: frozenset, timeout_s: float | None = None) -> Executor:
    """A worker-isolated executor (hang timeout ``timeout_s``, default the config's) unless isolation is off."""
    return Isolated(timeout_s) if hunters.isolated(hazards) else InProcess()


_REFERENCE_FAULT = f"{ReferenceFault.__module__}.{ReferenceFault.__qualname__}:"


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return "no output"
