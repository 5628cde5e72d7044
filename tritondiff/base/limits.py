"""CUDA's launch limits, checked before a launch in both modes (a grid the GPU refuses must not
run in the interpreter either)."""
from __future__ import annotations

from .exc import GridLimitExceeded

#: CUDA's limits on the programs of one launch along grid axes 0, 1 and 2.
GRID_LIMITS = (2 ** 31 - 1, 65_535, 65_535)


def check_grid(kernel: str, grid: tuple) -> None:
    """Raise :class:`~tritondiff.base.exc.GridLimitExceeded` before a launch whose grid CUDA would refuse
    (entries that are not ints -- unresolved -- pass)."""
    for axis, (n, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if isinstance(n, int) and n > limit:
            raise GridLimitExceeded(kernel, grid, axis, limit)
