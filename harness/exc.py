"""The harness's exception hierarchy: every error it raises derives from HarnessError."""
from __future__ import annotations


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""


class UsageError(HarnessError):
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


class WorkerStartupError(HarnessError):
    """The isolation worker process could not start (bad ``startup`` hook, import error, died early)."""

    def __init__(self, message: str, *, log_tail: str = ""):
        super().__init__(message + (f"\n--- worker log tail ---\n{log_tail}" if log_tail else ""))
        self.log_tail = log_tail
