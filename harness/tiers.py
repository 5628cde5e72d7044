"""Two tiers of finding: ``wrong`` -- wrong on normal-range inputs -- and ``edge`` -- wrong only with
inputs near the dtype's overflow threshold, subnormal, or non-finite.

A kernel that is wrong on ordinary values is wrong; one that differs from eager only where eager
itself sits at the edge of the dtype (an overflow in another order, a NaN it does not propagate) is a
real divergence, but one a team may accept.  ``check``, ``fuzz``, the pytest plugin and the gate fail
on ``wrong`` and, under ``strict`` (``--strict``, ``TRITONDIFF_STRICT=1``, ``strict = true`` in
``[tool.tritondiff]``), on ``edge`` too; every edge finding is still shrunk, dumped and reported.
"""
from __future__ import annotations

import dataclasses

from .case import Case

#: Value families at the edge of a dtype: squares past its max, values near its max, subnormals.
EDGE_FAMILIES = frozenset(("large", "near_max", "tiny"))

#: Failure classes that are wrong whatever the inputs: memory safety, crashes, hangs, leaked state.
ALWAYS_WRONG = frozenset(("out_of_bounds", "crash", "hang", "uninitialized", "tuning_trial", "autotune_config",
                          "input_mutation"))

TIERS = ("wrong", "edge")


def is_edge_case(case: Case) -> bool:
    """Whether some input of ``case`` is drawn from an edge family or carries non-finite values, or its
    scalars describe tensors at the edge (``Case.ordinary_scalars``)."""
    return (case.ordinary_scalars is not None
            or any(tc.values in EDGE_FAMILIES or tc.nonfinite for tc in case.tensors.values()))


def tier_of(case: Case, failure_class: str | None) -> str:
    """The tier of a finding: its failing (shrunk) case at the edge of the dtype makes it ``edge``,
    unless its class is wrong on any input."""
    if failure_class in ALWAYS_WRONG:
        return "wrong"
    return "edge" if is_edge_case(case) else "wrong"


def normal_families(families: tuple[str, ...]) -> tuple[str, ...]:
    """The declared families that are not at the edge (all of them, when every one is)."""
    return tuple(f for f in families if f not in EDGE_FAMILIES) or families


def normalized(case: Case) -> Case | None:
    """``case`` with its edge inputs made ordinary -- the non-finite sprinkle dropped, an edge family
    drawn as ``normal`` instead, described scalars replaced by their ordinary counterpart, all else (shapes,
    layouts, seeds) kept -- or None when nothing is at the edge.  A finding that fails this way too is
    ``wrong``: the edge values only happened to be there."""
    if not is_edge_case(case):
        return None
    tensors = {k: dataclasses.replace(tc, nonfinite="", values="normal" if tc.values in EDGE_FAMILIES else tc.values)
               for k, tc in case.tensors.items()}
    scalars = case.ordinary_scalars if case.ordinary_scalars is not None else case.scalars
    return dataclasses.replace(case, tensors=tensors, scalars=dict(scalars), ordinary_scalars=None)
