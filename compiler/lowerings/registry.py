"""The lowering registry: ATen op -> the function that builds its IR.

Each module of this package registers its family with :func:`register_lowering`; importing the
package fills the table, which ``lowering.GraphLowering`` reads.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

Lowering = Callable[..., Any]
lowerings: dict[Any, Lowering] = {}


def register_lowering(*targets: Any) -> Callable[[Lowering], Lowering]:
    """Register ``fn`` for ops: an ``OpOverload`` or a packet (all its overloads)."""
    def decorator(fn: Lowering) -> Lowering:
        for target in targets:
            if isinstance(target, torch._ops.OpOverloadPacket):
                for overload in target.overloads():
                    lowerings.setdefault(getattr(target, overload), fn)
            else:
                lowerings[target] = fn
        return fn
    return decorator
