"""The kernels' exception hierarchy: every error a kernel raises on purpose derives from KernelError."""
from __future__ import annotations

from tritondiff.base.exc import TritondiffError


class KernelError(TritondiffError):
    """Root of every error the hand-written kernels raise on purpose."""


class UnsupportedInput(KernelError, ValueError):
    """An argument a kernel cannot take (dtype, device, shape, layout); the message says what is supported.

    ``argument`` names the offending parameter so callers can react without parsing the message.
    """

    def __init__(self, message: str, *, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


class LaunchConfigError(KernelError, ValueError):
    """A launch-parameter override names a kernel or parameter that does not exist, or an unusable value."""

    def __init__(self, message: str, *, kernel: str, parameter: str | None = None):
        super().__init__(message)
        self.kernel = kernel
        self.parameter = parameter
