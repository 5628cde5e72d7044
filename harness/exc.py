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


class ConfigError(UsageError):
    """A config knob got a value it cannot take (from the environment or ``config.patch``).

    ``knob`` names the knob or environment variable; the message says what is wrong and what it takes.
    """

    def __init__(self, message: str, *, knob: str):
        super().__init__(message)
        self.knob = knob


class HugeShapesUnavailable(UsageError):
    """Huge-shape mode (inputs past 2^31 elements) cannot run here: no CUDA device, no dim to draw
    past 2^31, or not enough free memory.  ``reason`` is the short why (a pytest skip reason)."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


class GridLimitExceeded(HarnessError):
    """A kernel launch asks for more programs along a grid axis than CUDA allows (2^31 - 1 along axis 0,
    65,535 along axes 1 and 2).  Raised before the launch runs, in both modes: on a GPU such a launch
    fails, and in the interpreter it would run where the GPU cannot (or take hours)."""

    def __init__(self, kernel: str, grid: tuple, axis: int, limit: int):
        super().__init__(f"kernel {kernel} launched with grid {tuple(grid)}: {grid[axis]:,} programs along axis "
                         f"{axis}, CUDA allows at most {limit:,} there; fold the excess into axis 0 or loop "
                         "inside the kernel")
        self.kernel, self.grid, self.axis, self.limit = kernel, tuple(grid), axis, limit
