"""What an exploration exercised: per-axis tallies of its examples, shared by campaigns, pytest and ``check``.

Five axes count the tensors drawn (an example with two inputs counts twice): shape bucket, value family,
non-finite sprinkle, dtype and layout.  The sixth, ``allowance``, counts the examples that passed, by the
oracle's allowances the verdict needed (:mod:`harness.oracle`):

* ``none`` -- every compared output was within ``multiplier`` x eager's error level at each element;
* ``spread`` -- some comparison passed only once the float64 truth's spread under one-ulp input moves (its
  conditioning) was measured;
* ``tail`` -- some output passed by the tail allowance: a few elements past the bound excused because the
  candidate's error over the whole output is eager's in RMS and in its largest value;
* ``spread+tail`` -- both.

Every comparison of the example counts -- the first (or tuning) call, the cached call and, where the
hazard hunters run them, each autotune config alone -- so a pass is tallied by the loosest allowance any of
them needed.  ``none`` includes passes within the subject's rtol / atol floors.  A passing verdict is only as
strong as what it needed: where a subject passes mostly on ``tail``, its outputs sit at the edge of eager's
accuracy, and a mild precision bug there would pass too.  The runner counts each allowance in the example's
counters (``harness.passed_on_spread``, ``harness.passed_on_tail``), which reach the parent process with the
verdict.

The seventh, ``skipped``, counts the examples not judged, by why (:func:`skip_reason`): the reference raised
(outside the subject's domain), eager faulted on the device, the call ran out of GPU memory or past grid axis
0 at a huge example.  A campaign whose examples are mostly skipped tested little, whatever it found.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from .case import Case, shape_bucket

if TYPE_CHECKING:
    from .runner import Verdict

#: Axes counting the tensors drawn; ``allowance`` counts passing examples, ``skipped`` skipped ones.
TENSOR_AXES = ("shape", "values", "nonfinite", "dtype", "layout")
COVERAGE_AXES = TENSOR_AXES + ("allowance", "skipped")
#: Keys of the ``allowance`` axis, loosest last.
ALLOWANCES = ("none", "spread", "tail", "spread+tail")
#: Counter names (as in a verdict's counters) the runner increments per comparison passed on an allowance.
SPREAD_COUNTER = "harness.passed_on_spread"
TAIL_COUNTER = "harness.passed_on_tail"


def allowance(verdict: "Verdict | None") -> str | None:
    """The ``allowance`` key of a passing verdict (see the module docstring); None for any other verdict."""
    if verdict is None or verdict.status != "pass":
        return None
    counts = verdict.counters or {}
    spread, tail = counts.get(SPREAD_COUNTER, 0) > 0, counts.get(TAIL_COUNTER, 0) > 0
    return "spread+tail" if spread and tail else "spread" if spread else "tail" if tail else "none"


def skip_reason(verdict: "Verdict | None") -> str | None:
    """The ``skipped`` key of a skipped verdict: the reason its source recorded (``details["skip"]``), else the
    message up to its first colon; None for any other verdict."""
    if verdict is None or verdict.status != "skip":
        return None
    why = (verdict.details or {}).get("skip") or (verdict.message or "no reason given").split(":", 1)[0]
    return str(why)[:80]


class CoverageTally:
    """Counts of what the examples exercised, per axis of :data:`COVERAGE_AXES`."""

    def __init__(self):
        self.examples = 0
        self.skipped = 0
        self.axes: dict[str, Counter] = {axis: Counter() for axis in COVERAGE_AXES}
        self.largest: dict[str, int] = {}          # dim name -> the largest value drawn

    def observe(self, case: Case, verdict: "Verdict | None" = None) -> None:
        self.examples += 1
        why = skip_reason(verdict)
        if why is not None:
            self.skipped += 1
            self.axes["skipped"][why] += 1
        for name, value in case.dims.items():
            self.largest[name] = max(value, self.largest.get(name, value))
        for t in case.tensors.values():
            self.axes["shape"][shape_bucket(t.numel)] += 1
            self.axes["values"][t.values] += 1
            self.axes["nonfinite"][t.nonfinite or "none"] += 1
            self.axes["dtype"][t.dtype] += 1
            self.axes["layout"][t.layout] += 1
        key = allowance(verdict)
        if key is not None:
            self.axes["allowance"][key] += 1

    def counts(self) -> dict[str, dict[str, int]]:
        """The non-empty axes as plain dicts."""
        return {k: dict(v) for k, v in self.axes.items() if v}

    def take(self) -> tuple[int, int, dict[str, dict[str, int]]]:
        """(examples, skipped, coverage) since the last take, and reset."""
        out = (self.examples, self.skipped, self.counts())
        self.__init__()
        return out


def summary(subject, tally: CoverageTally) -> tuple[str, list[str]]:
    """What an exploration exercised, in one line (the largest value of each dim, the dtypes), and what of
    the declared space it never drew: dtypes, layouts and value families not drawn, a dim that never came
    within half of its declared maximum (the example-size cap, or too short a budget)."""
    from .api import TensorSpec

    dims = ", ".join(f"{name} <= {value:,}" for name, value in sorted(tally.largest.items()))
    drawn = {axis: set(tally.axes[axis]) for axis in ("dtype", "layout", "values", "nonfinite")}
    covered = f"largest {dims or 'no dims'}; dtypes {', '.join(sorted(drawn['dtype'])) or 'none'}"
    untested = []
    specs = [s for s in subject.inputs.values() if isinstance(s, TensorSpec)]
    for axis, declared in (("dtype", {d for s in specs for d in s.dtypes}),
                           ("layout", {lay for s in specs for lay in s.layouts      # as the shapes allow
                                       if not (lay == "transposed" and len(s.shape) < 2)
                                       and not (lay == "expanded" and not s.shape)}),
                           ("values", {v for s in specs for v in s.values})):
        missing = sorted(declared - drawn[axis])
        if missing and tally.examples:
            untested.append(f"{axis} {', '.join(missing)}")
    if tally.examples and any(s.nonfinite for s in specs) and drawn["nonfinite"] <= {"none"}:
        untested.append("non-finite inputs")
    for name, (lo, hi) in sorted(subject.dims.items()):
        got = tally.largest.get(name)
        if got is not None and hi > 1 and got < max(lo, hi // 2):
            untested.append(f"{name} past {got:,} (declared up to {hi:,})")
    return covered, untested


__all__ = ["TENSOR_AXES", "COVERAGE_AXES", "ALLOWANCES", "SPREAD_COUNTER", "TAIL_COUNTER", "allowance", "skip_reason",
           "CoverageTally", "summary"]
