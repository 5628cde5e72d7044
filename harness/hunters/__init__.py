"""The hazard hunters, one module each, behind one protocol (:class:`base.Hunter`).

:data:`HUNTERS` is the registry, in the order the runner consults them at each hook (so the first
finding of a call is a bounds violation before a broken canary before a mutated input, and a
wrong output is put down to poisoned allocations before a canary read before autotuning).  Every
list of hunter names -- ``api.HAZARDS``, the knobs' checks, the CLI's ``--disable``, the overhead
benchmark -- is read from it.
"""
from __future__ import annotations

from .autotune import Autotune
from .base import Call, Example, Hunter
from .bounds import Bounds
from .canary import Canary
from .idempotence import Idempotence
from .isolation import Isolation
from .mutation import Mutation
from .poison import Poison

#: name -> hunter, in the order the runner consults them.
HUNTERS: dict[str, Hunter] = {h.name: h for h in (Poison(), Bounds(), Canary(), Mutation(), Idempotence(),
                                                  Autotune(), Isolation())}

#: Every hunter's name.
NAMES: tuple[str, ...] = tuple(HUNTERS)


def armed(hazards: frozenset) -> list[Hunter]:
    """The hunters named in ``hazards``, in registry order."""
    return [h for name, h in HUNTERS.items() if name in hazards]


def isolated(hazards: frozenset) -> bool:
    """Whether examples with these hunters armed run in a worker process."""
    return any(h.isolates() for h in armed(hazards))


__all__ = ["Call", "Example", "Hunter", "HUNTERS", "NAMES", "armed", "isolated"]
