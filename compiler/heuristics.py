"""Is it a good idea?  Choices that change speed, never correctness.

The scheduler asks these questions only about options its legality checks already allowed
(``scheduler.build_group`` returns a reason when a fusion is illegal).  Autotuning and
cost models belong here later; nothing in this module may be needed for a correct result.
"""
from __future__ import annotations

import dataclasses
import triton

from .config import config
from .exc import ConfigError


def should_inline(op_count: int, n_users: int) -> bool:
    """Recompute a pointwise producer inside its consumers instead of storing it?"""
    return config.inline_pointwise and n_users <= config.max_inline_users and op_count <= config.max_inline_ops


def fusion_priority(relation: str, shared_reads: int, distance: int) -> tuple:
    """Order in which candidate fusions are tried (higher first).

    ``relation`` is "producer" (one group reads the other's output) or "sibling" (they read
    a common buffer).  Producer-consumer fusions save a store and a load; siblings save a read.
    """
    return (2 if relation == "producer" else 1, shared_reads, -distance)


@dataclasses.dataclass(frozen=True)
class ReductionChoice:
    """Strategy and blocks for one fused reduction kernel."""

    strategy: str
    xblock: int
    rblock: int
    splits: int = 1


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


def choose_reduction(xnumel: int, rnumel: int, split_ok: bool) -> ReductionChoice:
    """Pick persistent / looped / split and block sizes from the extents (``config`` may force).

    Forced values are returned as asked, even when too large: the code generator's numel
    guard then raises ``ReductionTooLarge`` with the fix, instead of a silent clamp.
    """
    strategy = config.reduction_strategy
    if strategy == "auto":
        if split_ok and xnumel <= config.split_max_xnumel and rnumel >= config.split_min_rnumel:
            strategy = "split"
        elif next_pow2(rnumel) <= min(config.persistent_max_rnumel, config.max_triton_tensor_numel):
            strategy = "persistent"
        else:
            strategy = "looped"
    budget = min(config.max_reduction_block_numel, config.max_triton_tensor_numel)
    if strategy == "persistent":
        rblock = config.rblock or next_pow2(rnumel)
        if rblock < rnumel:
            raise ConfigError(f"reduction_strategy='persistent' holds the whole axis in one block, but rblock={rblock} "
                              f"< {rnumel} elements: drop the forced rblock or use 'looped'", knob="rblock")
    else:
        rblock = config.rblock or min(next_pow2(rnumel), config.looped_rblock, budget)
    xblock = config.xblock or max(1, min(next_pow2(xnumel), budget // rblock if rblock <= budget else 1))
    splits = 1
    if strategy == "split":
        chunks = -(-rnumel // rblock)
        if config.split_count:
            splits = config.split_count
        else:
            xprograms = max(1, -(-xnumel // xblock))
            splits = max(2, min(chunks, max(1, config.split_target_programs // xprograms)))
        splits = max(1, min(splits, chunks))
    return ReductionChoice(strategy, xblock, rblock, splits)


def choose_pointwise_block(numel: int) -> int:
    """Elements per program of a 1-D pointwise kernel."""
    return config.xblock or min(next_pow2(numel), config.pointwise_block)


def choose_tile(ynumel: int, xnumel: int) -> tuple[int, int]:
    """(YBLOCK, XBLOCK) of a 2-D pointwise kernel."""
    budget = config.pointwise_tile_numel
    xblock = min(next_pow2(xnumel), max(16, int(budget ** 0.5)))
    yblock = min(next_pow2(ynumel), max(1, budget // xblock))
    return yblock, xblock


def want_2d_tiling(transposed_loads: int, total_loads: int) -> bool:
    """Use 2-D tiles when some load walks memory across the output's fast dim."""
    if config.pointwise_tiling != "auto":
        return config.pointwise_tiling == "2d"
    return transposed_loads > 0


def num_warps(block_numel: int) -> int:
    if config.num_warps:
        return config.num_warps
    return 8 if block_numel >= 2048 else 4


__all__ = ["should_inline", "fusion_priority", "choose_reduction", "choose_pointwise_block", "choose_tile",
           "want_2d_tiling", "num_warps", "ReductionChoice", "next_pow2"]
