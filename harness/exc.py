"""The harness's exception hierarchy: every error it raises derives from HarnessError.

Usage errors also derive from the base layer's :class:`~tritondiff.base.exc.UsageError`, which
is what the CLI turns into exit code 2 (a bad config value, :class:`ConfigError`, is one too).
"""
from __future__ import annotations

from tritondiff.base import exc as _base
from tritondiff.base.exc import ConfigError, GridLimitExceeded  # noqa: F401  (re-exported)


class HarnessError(_base.TritondiffError):
    """Root of every error the harness raises on purpose."""


class UsageError(HarnessError, _base.UsageError):
    """A user gave the harness something it cannot use (bad flag, bad file, bad spec)."""


class InvalidSubject(UsageError):
    """A ``@subject`` declaration is malformed; the message names the argument and the fix."""

    def __init__(self, message: str, *, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


class CorruptStore(UsageError):
    """A findings store cannot be opened or read."""


class OutOfBoundsAccess(HarnessError):
    """An interpreted kernel tried to touch memory outside its launch's tensor arguments.

    Raised by the bounds sanitizer *before* the access happens; ``violation``
    (a ``harness.sanitizer.Violation``) says which kernel, which access, which
    tensor and how far out.
    """

    def __init__(self, violation):
        super().__init__(violation.message())
        self.violation = violation


class ReferenceFault(HarnessError):
    """The reference (eager PyTorch) faulted on the device for an example: a bug of eager's kernels,
    never the candidate's finding.  In a worker the example is skipped and the worker replaced; in
    process the run stops, as the CUDA context is unusable."""


class WorkerStartupError(HarnessError):
    """The isolation worker process could not start (bad ``startup`` hook, import error, died early)."""

    def __init__(self, message: str, *, log_tail: str = ""):
        super().__init__(message + (f"\n--- worker log tail ---\n{log_tail}" if log_tail else ""))
        self.log_tail = log_tail


class HugeShapesUnavailable(UsageError):
    """Huge-shape mode (inputs past 2^31 elements) cannot run here: no CUDA device, no dim to draw
    past 2^31, or not enough free memory.  ``reason`` is the short why (a pytest skip reason)."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


class SubjectFailed(HarnessError):
    """:func:`tritondiff.check` found a failure: ``result`` is the :class:`~harness.explore.SubjectResult`
    (failure class, message, the shrunk case and its dump folder with a standalone repro)."""

    def __init__(self, result):
        super().__init__(f"{result.subject}: {result.failure_class}: {result.message}\n"
                         f"case: {result.case.describe() if result.case else '?'}\ndump: {result.dump}")
        self.result = result
