"""Debug counters of the harness (examples run, kernels launched, tuning trials seen, ...).

``harness.counters`` is a process-wide :class:`collections.Counter`; dumps and
reports merge it with ``compiler.counters`` when compiled code ran.
"""
from __future__ import annotations

import collections
import sys


class Counters(collections.Counter):
    def snapshot(self) -> dict:
        """A plain dict copy, merged with the compiler's counters when the compiler is loaded."""
        out = {f"harness.{k}": v for k, v in self.items()}
        comp = sys.modules.get("compiler.counters")
        snap = getattr(getattr(comp, "counters", None), "snapshot", None)
        if callable(snap):
            out.update({f"compiler.{k}": v for k, v in snap().items()})
        return out


counters = Counters()
