"""Debug counters: what the compiler decided, so tests and failure dumps can assert on it.

``compiler.counters`` is a ``collections.Counter`` keyed by dotted names:

- ``graphs_compiled``, ``kernels_generated``
- ``reduction_strategy.persistent`` / ``.looped`` / ``.split`` / ``.mixed_order``: the strategy
  chosen, counted once per reduction node (a kernel that fuses softmax's max and sum counts 2;
  every reduction of a mixed-order kernel, row or column, counts as ``mixed_order``)
- ``mixed_order_reductions``: row-reduction and column-reduction groups over the same rows
  joined into one kernel that reads their shared inputs once (layer-norm backward's dx + dW/dB)
- ``online_softmax``: sums of exp(h - max) a looped kernel computed in the pass that finds the max
  (``codegen.online``): one pass over the row less
- ``small_matmul_inlined``: mm / addmm / bmm with an inner size <= ``matmul_small_k_max``
  lowered as an unrolled pointwise node (fusable) instead of a library call
- ``reductions_unrolled``: reductions over at most ``unroll_reductions_max_rnumel`` elements
  lowered as a Pointwise that combines the terms (``ir.Reduction.create``) instead of a Reduction
- ``loop_local_iota``: index expressions over the reduction axis emitted inside a loop over
  that axis (looped and split chunks) from the loop-local ``rindex = roffset + rbase`` -- never
  a ``tl.arange`` of the whole axis (seed 000).  A mixed-order kernel's row loop is not one:
  its ``rindex`` is the whole row, defined before the loop
- ``fused_nodes``: fusions made (two kernels became one); ``inlined_nodes``: producers
  recomputed inside their consumers instead of stored; ``dead_nodes``: lowered nodes nothing used
- ``extern.<op>``: nodes that fell back to calling the ATen op
- ``numel_guard_hits``: block tensors refused by ``max_triton_tensor_numel``
- ``gemm_template.<mm|addmm|bmm>``: matmuls lowered to the GEMM template;
  ``gemm_template.epilogues``: pointwise groups fused into a template's kernel;
  ``gemm_template.hoisted_scale.rows`` / ``.columns``: factors of A constant along K (per row) or
  of B (per column) taken out of the K-sum and applied to the output instead (``.refused_infinite``:
  such a factor kept in the operand because it may be +-inf);
  ``gemm_template.cast_prologue``: operands up-cast from fp16 / bf16 that the template reads
  narrow and widens in its K loop (``compiler.lowerings.matmul_operands``)
- ``autotune.tuned`` / ``.benchmarks`` / ``.cache_hits`` / ``.cache_rebuilt``, ``autotune.winner.<name>``
- ``lean_runtime.training`` / ``.inference``: graphs run in ``compiler.lean``'s runtime (one
  autograd.Function, one call); ``lean_runtime.refused``: graphs that needed AOTAutograd's (the reason
  is in the ``compiler.lean`` debug log)
- ``graph_cache.hits`` / ``.misses`` / ``.stored`` / ``.uncacheable`` / ``.errors`` / ``.cache_rebuilt``: the
  lean runtime's traced graphs revived from, looked up in and written to ``compiler.graph_cache``
- ``attention_fused``: hand-written attentions rewritten into ``scaled_dot_product_attention``
  (``compiler.attention``)
- ``mismatch_stage.<lowering|fusion|codegen|unknown>``: compiled results a correctness tool found
  wrong, by the stage at fault (``tritondiff.harness.triage``)
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
