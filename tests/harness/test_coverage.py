"""harness.coverage: what an exploration's examples exercised, and which oracle allowances its passes needed."""
from __future__ import annotations

import pytest

from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.coverage import (ALLOWANCES, SPREAD_COUNTER, TAIL_COUNTER, CoverageTally, allowance,
                                         skip_reason)
from tritondiff.harness.explore import SubjectResult
from tritondiff.harness.runner import Verdict


def _case() -> Case:
    t = TensorCase((0,), "float16", "contiguous", 0, "zeros", 1, "")
    u = TensorCase((5000,), "float32", "strided", 2, "normal", 1, "nan")
    return Case({"N": 0}, {"x": t, "y": u}, {})


def test_coverage_tally_counts_per_axis():
    tally = CoverageTally()
    tally.observe(_case())
    examples, skipped, cov = tally.take()
    assert (examples, skipped) == (1, 0)
    assert cov == {"shape": {"empty": 1, "<2^16": 1}, "values": {"zeros": 1, "normal": 1},
                   "nonfinite": {"none": 1, "nan": 1}, "dtype": {"float16": 1, "float32": 1},
                   "layout": {"contiguous": 1, "strided": 1}}          # no verdict: no allowance counted
    assert tally.take() == (0, 0, {})


@pytest.mark.parametrize("counts, key", [({}, "none"), ({SPREAD_COUNTER: 1}, "spread"), ({TAIL_COUNTER: 2}, "tail"),
                                         ({SPREAD_COUNTER: 1, TAIL_COUNTER: 1}, "spread+tail"),
                                         ({"harness.kernels_launched": 3}, "none")])
def test_a_pass_is_tallied_by_the_allowances_it_needed(counts, key):
    verdict = Verdict("pass", counters=dict(counts))
    assert allowance(verdict) == key and key in ALLOWANCES
    tally = CoverageTally()
    tally.observe(_case(), verdict)
    assert tally.take()[2]["allowance"] == {key: 1}


@pytest.mark.parametrize("status", ["fail", "skip", "budget"])
def test_only_passes_are_tallied_by_allowance(status):
    verdict = Verdict(status, failure_class="mismatch" if status == "fail" else None,
                      counters={TAIL_COUNTER: 1, SPREAD_COUNTER: 1})
    assert allowance(verdict) is None and allowance(None) is None
    tally = CoverageTally()
    tally.observe(_case(), verdict)
    examples, skipped, cov = tally.take()
    assert "allowance" not in cov and examples == 1 and skipped == (status == "skip")


def test_skipped_examples_are_tallied_by_why():
    """A huge campaign whose examples are mostly skipped says why, per reason the runner recorded (else the
    message's head), so a skip cannot pass for coverage."""
    tally = CoverageTally()
    memory = Verdict("skip", message="first call does not run at this shape: out of GPU memory beside ...",
                     details={"skip": "out of GPU memory"})
    tally.observe(_case(), memory)
    tally.observe(_case(), memory)
    tally.observe(_case(), Verdict("skip", message="reference raised ValueError: bad shape"))
    tally.observe(_case(), Verdict("pass"))
    examples, skipped, cov = tally.take()
    assert (examples, skipped) == (4, 3)
    assert cov["skipped"] == {"out of GPU memory": 2, "reference raised ValueError": 1}
    assert skip_reason(Verdict("pass")) is None and skip_reason(None) is None


def test_a_check_line_says_when_passes_needed_an_allowance():
    plain = SubjectResult("k", "pass", 12, 0, 3.0, seed=5, coverage={"allowance": {"none": 12}})
    assert "passed on" not in plain.line()
    loose = SubjectResult("k", "pass", 12, 0, 3.0, seed=5, coverage={"allowance": {"none": 9, "tail": 2, "spread": 1}})
    assert loose.line().endswith("seed 5; passed on spread: 1, tail: 2)")


def test_the_summary_says_what_was_drawn_and_what_of_the_declared_space_was_not():
    from tritondiff.harness import subject, tensor
    from tritondiff.harness.case import Case, TensorCase
    from tritondiff.harness.coverage import CoverageTally, summary

    @subject(reference=lambda x, y: x, inputs={"x": tensor(("N",), dtypes=("float32", "bfloat16")),
                                               "y": tensor(("M", "N"), layouts=("contiguous", "transposed"))},
             dims={"N": (1, 1000), "M": (1, 4)}, name="coverage_test.summary")
    def two(x, y):
        return x

    tally = CoverageTally()
    for n in (3, 40):
        tally.observe(Case({"N": n, "M": 2}, {"x": TensorCase((n,), "float32", "contiguous", 0, "normal", 1, ""),
                                               "y": TensorCase((2, n), "float32", "contiguous", 0, "zeros", 1, "")}, {}))
    covered, untested = summary(two, tally)
    assert covered == "largest M <= 2, N <= 40; dtypes float32"
    assert "dtype bfloat16" in untested and "non-finite inputs" in untested
    assert "layout expanded, offset, strided, transposed" in untested
    assert "N past 40 (declared up to 1,000)" in untested and not any(u.startswith("M past") for u in untested)
    assert any(u.startswith("values ") and "near_max" in u for u in untested)
