"""harness.lanes: what a lane counts of the examples it runs (the end-to-end lane behaviour is in test_campaign.py)."""
from __future__ import annotations

from harness.case import Case, TensorCase
from harness.lanes import CoverageTally


def test_coverage_tally_counts_per_axis():
    tally = CoverageTally()
    t = TensorCase((0,), "float16", "contiguous", 0, "zeros", 1, "")
    u = TensorCase((5000,), "float32", "strided", 2, "normal", 1, "nan")
    tally.observe(Case({"N": 0}, {"x": t, "y": u}, {}))
    examples, skipped, cov = tally.take()
    assert (examples, skipped) == (1, 0)
    assert cov == {"shape": {"empty": 1, "<2^16": 1}, "values": {"zeros": 1, "normal": 1},
                   "nonfinite": {"none": 1, "nan": 1}, "dtype": {"float16": 1, "float32": 1},
                   "layout": {"contiguous": 1, "strided": 1}}
    assert tally.take() == (0, 0, {})
