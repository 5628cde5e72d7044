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
