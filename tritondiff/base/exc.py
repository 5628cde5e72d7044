"""The root of every error tritondiff raises on purpose, and the errors of the base layer.

Each package has its own ``exc`` module whose root derives from :class:`TritondiffError`
(``harness.exc.HarnessError``, ``kernels.exc.KernelError``, ``compiler.exc.CompilerError``),
so ``except TritondiffError`` catches everything the project raises deliberately.
"""
from __future__ import annotations


class TritondiffError(Exception):
    """Root of every error tritondiff raises on purpose."""


class UsageError(TritondiffError):
    """A user gave tritondiff something it cannot use (bad flag, bad file, bad spec, bad setting)."""


class ConfigError(UsageError):
    """A config knob got a value it cannot take (from the environment or ``config.patch``).

    ``knob`` names the knob or environment variable; the message says what is wrong and what it takes.
    """

    def __init__(self, message: str, *, knob: str):
        super().__init__(message)
        self.knob = knob


class GridLimitExceeded(TritondiffError):
    """A kernel launch asks for more programs along a grid axis than CUDA allows (2^31 - 1 along axis 0,
    65,535 along axes 1 and 2).  Raised before the launch runs, in both modes: on a GPU such a launch
    fails, and in the interpreter it would run where the GPU cannot (or take hours)."""

    def __init__(self, kernel: str, grid: tuple, axis: int, limit: int):
        super().__init__(f"kernel {kernel} launched with grid {tuple(grid)}: {grid[axis]:,} programs along axis "
                         f"{axis}, CUDA allows at most {limit:,} there; fold the excess into axis 0 or loop "
                         "inside the kernel")
        self.kernel, self.grid, self.axis, self.limit = kernel, tuple(grid), axis, limit
