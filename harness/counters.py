"""Debug counters of the harness (examples run, kernels launched, tuning trials seen, ...).

``harness.counters`` is a process-wide :class:`collections.Counter`; dumps and
reports merge it with ``compiler.counters`` when compiled code ran.

Examples usually run in a worker process (:mod:`harness.executor`), whose
counts would die with it: each verdict carries the counts of its example
(:meth:`Counters.delta`), and the parent adds them here (:meth:`Counters.merge`),
so a dump's ``counters.json`` holds the same names isolated or not.
"""
from __future__ import annotations

import collections
import sys
import threading


class Counters(collections.Counter):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.merged: collections.Counter = collections.Counter()   # full names, counted in other processes
        self._lock = threading.Lock()

    def snapshot(self) -> dict:
        """A plain dict of full names (``harness.*``, ``compiler.*``): this process's counts, the
        compiler's when it is loaded, plus the counts merged from workers."""
        out = collections.Counter({f"harness.{k}": v for k, v in self.items()})
        comp = sys.modules.get("tritondiff.compiler.counters")
        snap = getattr(getattr(comp, "counters", None), "snapshot", None)
        if callable(snap):
            out.update({f"compiler.{k}": v for k, v in snap().items()})
        out.update(self.merged)
        return {k: v for k, v in sorted(out.items()) if v}

    def delta(self, before: dict) -> dict:
        """What :meth:`snapshot` gained since ``before`` (an earlier snapshot)."""
        return {k: v - before.get(k, 0) for k, v in self.snapshot().items() if v != before.get(k, 0)}

    def merge(self, counts: dict) -> None:
        """Add counts taken in another process (full names, as :meth:`delta` returns them)."""
        with self._lock:                      # campaign lanes merge from several threads
            for name, v in counts.items():
                if name.startswith("harness."):
                    self[name[len("harness."):]] += v
                else:
                    self.merged[name] += v

    def clear(self) -> None:
        super().clear()
        self.merged.clear()


counters = Counters()
