"""Crashes, hangs and state that outlives an example: examples run in a long-lived worker process
(``harness.worker``), restarted after a crash or a hang, so either is a finding and not the end of the
run.  It arms nothing inside a call; the executor reads :meth:`isolates`."""
from __future__ import annotations

from .base import Hunter


class Isolation(Hunter):
    name = "isolation"
    summary = "the worker process (one round trip per example)"

    def isolates(self) -> bool:
        return True
