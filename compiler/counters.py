"""Debug counters: what the compiler decided, so tests and failure dumps can assert on it.

``compiler.counters`` is a ``collections.Counter`` keyed by dotted names:

- ``graphs_compiled``, ``kernels_generated``
- ``reduction_strategy.persistent`` / ``.looped`` / ``.split``: one per fused reduction kernel
- ``loop_local_iota``: index expressions over the reduction axis emitted inside a reduction
  loop from the loop-local ``rindex`` (never a ``tl.arange`` of the whole axis; seed 000)
- ``fused_nodes``: fusions made (two kernels became one); ``inlined_nodes``: producers
  recomputed inside their consumers instead of stored; ``dead_nodes``: lowered nodes nothing used
- ``extern.<op>``: nodes that fell back to calling the ATen op
- ``numel_guard_hits``: block tensors refused by ``max_triton_tensor_numel``
"""
from __future__ import annotations

import collections


class Counters(collections.Counter):
    """A Counter with ``snapshot()`` (a plain, sorted dict copy) for dumps and asserts."""

    def snapshot(self) -> dict[str, int]:
        """A copy of the current counts, sorted by name."""
        return {k: self[k] for k in sorted(self) if self[k]}

    def with_prefix(self, prefix: str) -> dict[str, int]:
        """The counts whose name starts with ``prefix`` (e.g. ``"extern."``)."""
        return {k: v for k, v in self.snapshot().items() if k.startswith(prefix)}


counters = Counters()
