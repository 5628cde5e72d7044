"""The strategy and blocks of a (not mixed-order) reduction group."""
from __future__ import annotations

from ...config import config
from ...heuristics import ReductionChoice, choose_reduction, may_read_again, persistent_wide
from ..nodes import GroupContext
from .algebra import reduction_op
from .orientation import reads_along_kept_axis, reread_row_reads
from .split import tagged_partials
from .tiles import held_tiles_are_loads, live_row_tiles


def choose(ctx: GroupContext) -> ReductionChoice:
    """The strategy and blocks of a (not mixed-order) reduction group.

    A row in the wide persistent range (``heuristics.persistent_wide``) is emitted persistent once on trial to
    count the row tiles it would keep (``live_row_tiles``); other groups pay nothing for it."""
    group = ctx.group
    outer = reads_along_kept_axis(group)
    held, reread = 0, False
    if not outer and group.rnumel > config.persistent_max_rnumel and persistent_wide(group.rnumel, 1):
        held = live_row_tiles(ctx)
    elif may_read_again(group.xnumel, group.rnumel, group.split_ok(), outer):
        reread = held_tiles_are_loads(ctx)
    tagged = config.split_last_program_final and tagged_partials(
        reduction_op(p) for p in group.placed if p.kind == "reduction")
    return choose_reduction(group.xnumel, group.rnumel, group.split_ok(), outer=outer, held=held,
                            rereads=reread_row_reads(group), reread=reread, tagged=tagged)
