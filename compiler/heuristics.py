"""Is it a good idea?  Choices that change speed, never correctness.

The scheduler asks these questions only about options its legality checks already allowed
(``scheduler.build_group`` and ``scheduler.build_mixed_group`` return a reason when a fusion
is illegal).  Nothing in this module may be needed for a correct result: every function
here picks among correct options (which fusion first, which block shape, how many
partial reductions), so a bad answer costs time, never a wrong value.

- fusion order: ``fusion_score`` ranks legal candidate fusions by the HBM bytes they save
  (seed 002, section 4.3), ties broken by proximity in the graph order;
- mixed-order reductions: ``mixed_order_saving`` weighs the shared read against the
  workspace a row-and-column kernel pays for its column partials;
- reductions: ``persistent_wide`` (a long row held whole), ``split_count`` (how many partial programs fill
  the machine), ``looped_warps``, ``choose_mixed_order``; which strategy a group gets is the strategies'
  own call (``codegen.reduction``);
- pointwise tiles: ``choose_tile`` keeps the stride-1 axis fastest inside a block and
  gives transposed reads and writes a tile that keeps both sides coalesced; ``want_unrolled``
  unrolls a short output dim when its outputs share streamed reads.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import triton

from tritondiff.base import device as _device
from tritondiff.base.limits import GRID_LIMITS

from .config import config


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


def _cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


# ------------------------------------------------------------------------------- fusion

def should_inline(op_count: int, n_users: int, *, widening_load: bool = False) -> bool:
    """Recompute a pointwise producer inside its consumers instead of storing it?

    ``widening_load``: the producer is one load and casts only, to a dtype at least as wide
    (layer norm's ``x.float()`` of a half input).  Storing it writes and rereads more bytes than
    its consumers reading the source do, however many they are, so it is recomputed whatever its users."""
    if not config.inline_pointwise:
        return False
    return widening_load or (n_users <= config.max_inline_users and op_count <= config.max_inline_ops)


@dataclasses.dataclass(frozen=True)
class FusionTraffic:
    """HBM bytes a candidate fusion of two kernel groups avoids (the scheduler measures them).

    ``shared_read``: buffers both groups read, read once instead of twice.
    ``handoff_load``: buffers one group writes and the other reads, now taken from registers.
    ``dropped_store``: of those, the ones nobody else needs, which are no longer written at all.
    ``extra``: bytes the fused kernel adds (a mixed-order kernel's workspace of column partials).
    """

    shared_read: int = 0
    handoff_load: int = 0
    dropped_store: int = 0
    extra: int = 0

    @property
    def saved(self) -> int:
        return self.shared_read + self.handoff_load + self.dropped_store - self.extra


def fusion_score(traffic: FusionTraffic, distance: int) -> tuple:
    """Order in which legal candidate fusions are tried (higher first).

    Fusion is not associative -- fusing A with B may make fusing B with C illegal -- so the
    candidate that saves the most memory traffic goes first; among equal savings the pair
    closer in the graph order (fewer buffers live in between) wins.
    """
    return (traffic.saved, -abs(int(distance)))


def mixed_order_saving(shared_read: int, *, programs: int, columns: int, column_reductions: int,
                       acc_bytes: int) -> FusionTraffic:
    """Traffic of a mixed-order kernel: the shared input read once, against the partials workspace.

    The kernel stores ``programs x columns`` partials per column reduction and a final pass
    reads them back; that is the only memory the fusion adds.
    """
    workspace = 2 * programs * columns * column_reductions * acc_bytes
    return FusionTraffic(shared_read=shared_read, extra=workspace)


# --------------------------------------------------------------------------- the machine

def sm_count() -> int:
    """Streaming multiprocessors the split heuristics fill.

    ``config.sm_count`` when set; else the GPU's ``multi_processor_count``; under Triton's
    interpreter (programs run one after the other on the CPU) ``config.nominal_sm_count``.
    """
    if config.sm_count:
        return config.sm_count
    if _device.is_interpreter():
        return config.nominal_sm_count
    return _gpu_sm_count()


@functools.lru_cache(maxsize=None)
def _gpu_sm_count() -> int:
    import torch
    return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)


def target_programs() -> int:
    """Programs that fill the machine once: SMs x ``config.programs_per_sm``."""
    return max(1, sm_count() * config.programs_per_sm)


#: The fewest warps a generated launch takes (``num_warps``).
MIN_WARPS = 4


# ---------------------------------------------------------------------------- reductions

@dataclasses.dataclass(frozen=True)
class ReductionChoice:
    """Strategy and blocks for one fused reduction kernel.

    ``splits``: partial programs per row block (split), or programs over the rows
    (mixed_order).  ``stages``: software-pipelining depth of the kernel's loop (the chunk loop
    of looped and split kernels, the row loop of a mixed-order kernel), emitted as
    ``tl.range(..., num_stages=stages)``; None: a plain ``range``, which Triton does not pipeline.
    ``warps``: the launch's warps where the choice sets them (a wide persistent row,
    ``persistent_wide``; a loop that rereads several row values, ``looped_warps``); None: ``num_warps``
    of the tile.
    """

    strategy: str
    xblock: int
    rblock: int
    splits: int = 1
    stages: Optional[int] = None
    warps: Optional[int] = None


def split_count(xprograms: int, rnumel: int, rblock: int, tagged: bool = False) -> int:
    """Partial reductions per row block of a split reduction.

    Enough programs to fill the machine (``target_programs`` over the row blocks there
    already are), but each partial at least ``config.split.min_chunk`` elements long so
    its loop amortises the workspace store and the final pass; at least 2 (a split of one
    is a looped reduction) and at most one partial per RBLOCK chunk.  Where that fill leaves each partial one
    RBLOCK step or less (a launch-bound split: nrm2 2^20), it aims at ``config.split.short_programs_per_sm``
    programs per SM instead -- ``config.split.short_tagged_programs_per_sm`` where ``tagged``, the last program
    finishing through tagged partials (``codegen.reduction.tagged_partials``), which no fence slows per program.
    """
    if config.split.count:
        return max(1, min(config.split.count, _cdiv(rnumel, rblock)))
    chunks = _cdiv(rnumel, rblock)
    fill = max(1, target_programs() // max(1, xprograms))
    if chunks <= fill:
        per_sm = config.split.short_tagged_programs_per_sm if tagged else config.split.short_programs_per_sm
        fill = max(1, min(fill, _cdiv(sm_count() * per_sm, max(1, xprograms))))
    long_enough = max(1, rnumel // config.split.min_chunk)
    # the partials run along grid axis 1: CUDA launches at most 65,535 there (a large sm_count x programs_per_sm)
    return _tiling_split(max(1, min(chunks, max(2, min(fill, long_enough)), GRID_LIMITS[1])), rnumel, rblock)


def _tiling_split(count: int, rnumel: int, rblock: int) -> int:
    """The largest split count at most 10% below ``count`` whose chunks (whole RBLOCKs) tile the axis
    exactly, so the partial kernel's loads need no mask; else ``count`` (reports/performance-log.md, split
    tiling)."""
    if rnumel % rblock:
        return count
    blocks = rnumel // rblock
    return next((c for c in range(count, max(2, count - count // 10) - 1, -1) if blocks % c == 0), count)


def persistent_wide(rnumel: int, held: int) -> bool:
    """Run a row of ``rnumel`` past ``config.persistent.max_rnumel`` persistent all the same?

    ``held``: row tiles the persistent kernel would keep in registers from one pass to a later one
    (``codegen.reduction.live_row_tiles``).  A looped kernel reads its row again in every pass that needs
    it; a persistent one holds what it needs, which pays while that fits the registers of one row's program:
    the padded row at most ``config.persistent.wide_max_rnumel``, and ``held`` tiles at most
    ``config.persistent.wide_held_numel`` elements together.  The row fills at least
    ``config.persistent.wide_min_fill`` of its block (a padded lane is a thread that loads nothing).  A kernel
    that holds nothing (one pass) has nothing to reread and keeps its loop (unmeasured persistent).  A forced
    RBLOCK or XBLOCK keeps the loop."""
    whole = next_pow2(rnumel)
    return (config.reduction_strategy == "auto" and not config.rblock and not config.xblock and held >= 1
            and whole <= min(config.persistent.wide_max_rnumel, config.max_triton_tensor_numel)
            and rnumel >= config.persistent.wide_min_fill * whole
            and held * whole <= config.persistent.wide_held_numel)


def looped_warps(block_numel: int, rereads: int) -> Optional[int]:
    """Warps of an auto-chosen looped kernel over rows (None: ``num_warps`` of its block).  One that makes
    ``rereads`` >= ``config.looped.reread_min_held`` reads along the row again in a later pass takes at least
    ``config.looped.reread_warps`` (past ``max_num_warps``, which caps ``num_warps`` alone): its rows' passes
    end sooner, so the second read finds the row in L2."""
    if config.num_warps or config.reduction_strategy != "auto" or rereads < config.looped.reread_min_held:
        return None
    return max(num_warps(block_numel), config.looped.reread_warps)


def choose_mixed_order(xnumel: int, rnumel: int, accumulator_bytes: int = 4) -> ReductionChoice:
    """Blocks and program count of a mixed-order kernel: ``xnumel`` rows of ``rnumel``, column
    accumulators of ``accumulator_bytes`` per tile element (all its column reductions together).

    RBLOCK holds a whole row (the row reductions run persistent); XBLOCK rows fill the
    block budget.  Each program walks a contiguous range of row blocks and keeps one
    column partial per column reduction.  The row work needs the whole machine, so there
    are as many programs as fill it (never more than row blocks) -- one per SM where the
    kernel is wide (``mixed_order_wide``); the price, one partial row per program, is
    weighed by ``mixed_order_saving``.
    """
    rblock = next_pow2(rnumel)
    budget = min(config.max_reduction_block_numel, config.max_triton_tensor_numel)
    xblock = config.xblock or max(1, min(next_pow2(xnumel), budget // rblock if rblock <= budget else 1,
                                         config.mixed_order.max_xblock))
    # Fewer row blocks than SMs leave SMs idle while each program runs its rows' reductions one after the other:
    # blocks halve until they cover the SMs, down to the fewest lanes that keep a program's least warps busy
    # (measured: reports/performance-log.md).  More programs keep more partials, which mixed_order_saving weighs.
    least_tile = MIN_WARPS * config.one_wave_elements_per_warp
    while not config.xblock and _cdiv(xnumel, xblock) < sm_count() and xblock * rblock >= 2 * least_tile:
        xblock //= 2
    row_blocks = _cdiv(max(xnumel, 1), xblock)
    fill = sm_count() if mixed_order_wide(xblock * rblock, accumulator_bytes) else target_programs()
    programs = max(1, min(row_blocks, fill))
    return ReductionChoice("mixed_order", xblock, rblock, programs, loop_stages("mixed_order"))


def mixed_order_row_chunk(rnumel: int, rblock: int) -> int:
    """Columns per static chunk of a mixed-order kernel's ``rnumel``-column row, whose padded block is ``rblock``:
    ``rblock`` itself (one block) unless at most ``config.mixed_order.row_chunks`` chunks of a power of two
    columns, each at least ``config.mixed_order.min_chunk``, cover the row in fewer lanes (10240 columns: 5 x 2048
    lanes instead of 16384).  Only the last chunk can be partial."""
    if config.mixed_order.row_chunks <= 1 or rnumel >= rblock:
        return rblock
    chunk = max(config.mixed_order.min_chunk, next_pow2(_cdiv(rnumel, config.mixed_order.row_chunks)))
    return chunk if _cdiv(rnumel, chunk) * chunk < rblock else rblock


def mixed_order_prefetch(tile: int, accumulator_bytes: int, row_bytes: int = 0) -> bool:
    """Does a mixed-order kernel load its next row block ahead (``config.mixed_order.prefetch``)?  "wide" kernels
    do while their registers hold it: ``tile`` lanes of column accumulators (``accumulator_bytes`` a lane) and of
    row values loaded twice over (``row_bytes`` a lane, the current rows and the next) within
    ``config.mixed_order.prefetch_max_bytes``.  A float32 layer-norm backward over rows of 10240 held 240 KiB a
    program so and spilled: 1.8 ms against eager's 0.42 ms (float16's 160 KiB: 68 us)."""
    if config.mixed_order.prefetch == "off" or loop_stages("mixed_order") is not None:
        return False
    if config.mixed_order.prefetch == "all":
        return True
    return (mixed_order_wide(tile, accumulator_bytes)
            and tile * (accumulator_bytes + 2 * row_bytes) <= config.mixed_order.prefetch_max_bytes)


def mixed_order_wide(tile: int, accumulator_bytes: int) -> bool:
    """Do a mixed-order kernel's column accumulators (``tile`` lanes of ``accumulator_bytes``) take more than
    ``config.mixed_order.wide_bytes`` per program?  Such a kernel keeps most of an SM's registers for one
    program: it runs one program per SM, with ``config.mixed_order.wide_warps`` warps."""
    return tile * accumulator_bytes > config.mixed_order.wide_bytes


def mixed_order_warps(tile: int, accumulator_bytes: int) -> int:
    """Warps of a mixed-order kernel's partial pass: one wave's (``num_warps``), at most
    ``config.mixed_order.wide_warps`` for a wide kernel (``mixed_order_wide``)."""
    warps = num_warps(tile, one_wave=True)
    if config.num_warps or not mixed_order_wide(tile, accumulator_bytes):
        return warps
    return min(warps, config.mixed_order.wide_warps)


def split_partial_warps(block_numel: int, steps: int, reductions: int = 1) -> int:
    """Warps of a split reduction's partial pass, whose programs each loop ``steps`` RBLOCK steps over
    ``reductions`` fused reductions: one wave's (``num_warps``), raised to at least
    ``config.split.streaming_warps`` where a single reduction loops at least
    ``config.split.streaming_min_steps`` steps and so streams its chunk (see the knob)."""
    warps = num_warps(block_numel, one_wave=True)
    if config.num_warps or steps < config.split.streaming_min_steps or reductions != 1:
        return warps
    return max(warps, config.split.streaming_warps)


def tagged_split_warps(warps: int, steps: int, poll_words: int) -> int:
    """Warps of a split partial pass whose last program polls ``poll_words`` tagged slots
    (``codegen.reduction.SplitReduction._tagged_last_program``), from the ``warps`` it would take otherwise.
    Where each partial takes one RBLOCK step (a launch-bound split: nrm2 2^20), at most one warp per 32 words
    and at least 4, so the poll needs no padding to give each thread its own words.  A longer split, or forced
    warps (``config.num_warps``), keeps its warps and pads the poll (measured: reports/performance-log.md,
    split_short_tagged_programs_per_sm)."""
    if config.num_warps or steps > 1:
        return warps
    return max(4, min(warps, poll_words // 32))


def split_last_program_final(xblock: int, splits: int) -> bool:
    """Does a split reduction of ``splits`` partials per ``xblock`` rows reduce them in its last partial program
    (``config.split.last_program_final``) rather than in a final kernel?"""
    return (config.split.last_program_final and splits > 1
            and xblock * next_pow2(splits) <= min(config.split.last_program_max_numel, config.max_triton_tensor_numel))


def loop_stages(strategy: str) -> Optional[int]:
    """Pipelining depth of a ``strategy`` kernel's loop (None: none asked; a persistent kernel has no loop);
    a mixed-order kernel's row loop takes ``config.mixed_order.loop_stages`` where that is set."""
    stages = config.loop_stages
    if strategy == "mixed_order" and config.mixed_order.loop_stages is not None:
        stages = config.mixed_order.loop_stages
    if strategy == "persistent" or stages == 1:
        return None
    return stages


# ----------------------------------------------------------------------------- pointwise

def choose_pointwise_block(numel: int) -> int:
    """Elements per program of a 1-D pointwise kernel."""
    return config.xblock or min(next_pow2(numel), config.pointwise_block)


def choose_tile(ynumel: int, xnumel: int, *, transposed: bool = True) -> tuple[int, int]:
    """(YBLOCK, XBLOCK) of a 2-D pointwise kernel; X is the output's stride-1 axis.

    X is the fastest-varying axis inside the block: lanes next to each other touch
    neighbouring addresses of the output and of every access that shares its layout.
    Without a transposed access X takes as much of the tile as it can use.  With a
    transposed read or write the other side walks memory along Y, so the tile is
    square (X gets the larger half when the budget is not a square): each side moves
    sqrt(budget) contiguous elements per row of the tile -- 32 fp32 values, one 128-byte
    transaction, for the GPU's 1024-element tile.  Whatever one axis cannot use (a short
    dim) goes to the other.
    """
    budget = config.pointwise_tile_numel
    px, py = next_pow2(xnumel), next_pow2(ynumel)
    if not transposed:
        xblock = min(px, budget)
        return min(py, max(1, budget // xblock)), xblock
    side = 1 << (budget.bit_length() // 2)
    xblock = min(px, side)
    yblock = min(py, max(1, budget // xblock))
    xblock = min(px, max(xblock, budget // yblock))  # a short Y hands its share back to X
    return yblock, xblock


def want_2d_tiling(transposed_accesses: int, total_accesses: int) -> bool:
    """Use 2-D tiles when some load or store walks memory across the output's fast dim."""
    if config.pointwise_tiling != "auto":
        return config.pointwise_tiling == "2d"
    return transposed_accesses > 0


def want_unrolled(streaming_unrolled: int, streaming_flat: int, extent: int) -> bool:
    """Unroll a short output dim of ``extent`` indices in a pointwise kernel (``config.pointwise_tiling``)?

    ``streaming_unrolled``: loads the unrolled kernel issues per block that stream along the
    output's rows, serving ``extent`` outputs each; ``streaming_flat``: those the 1-D kernel
    issues per output.  Worth it when a streamed read is shared by the unrolled indices (loads
    fixed along a row -- a per-row coefficient -- are cheap broadcasts either way).
    """
    if config.pointwise_tiling != "auto":
        return config.pointwise_tiling == "unrolled"
    return streaming_unrolled < extent * streaming_flat


def num_warps(block_numel: int, one_wave: bool = False) -> int:
    """Warps of a launch whose largest block tensor has ``block_numel`` elements.

    One warp per ``config.elements_per_warp`` elements (each thread holds a few values per
    block tensor), at least 4, at most ``config.max_num_warps`` (a streaming split partial may take
    more: ``split_partial_warps``).  ``one_wave``: the grid is
    one wave of programs that loop (split partials, mixed-order kernels), so the warps per
    program are the warps per SM: one per ``config.one_wave_elements_per_warp`` elements.
    """
    if config.num_warps:
        return config.num_warps
    per_warp = config.one_wave_elements_per_warp if one_wave else config.elements_per_warp
    return max(MIN_WARPS, min(config.max_num_warps, next_pow2(block_numel) // per_warp))


__all__ = ["should_inline", "FusionTraffic", "fusion_score", "mixed_order_saving", "sm_count", "target_programs",
           "split_count", "persistent_wide", "looped_warps", "choose_mixed_order", "mixed_order_wide",
           "mixed_order_warps", "split_partial_warps", "tagged_split_warps", "split_last_program_final", "loop_stages",
           "choose_pointwise_block", "choose_tile", "want_2d_tiling", "want_unrolled", "num_warps", "ReductionChoice",
           "next_pow2"]
