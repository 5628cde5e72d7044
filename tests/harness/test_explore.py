"""explore: which failure is reported (the shrunk one, over every class), exceptions and skips."""
from __future__ import annotations

import json
import os

import torch

from tritondiff.harness import subject, tensor
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.explore import Failures, explore
from tritondiff.harness.runner import Verdict
from tritondiff.harness.strategies import example_cost
from tritondiff.harness.tiers import tier_of

NORM_VALUES = ("normal", "uniform_pos", "large_offset", "zeros", "integer")


@subject(reference=lambda x: torch.linalg.vector_norm(x), dims={"N": (0, 3_000_000)},
         inputs={"x": tensor(("N",), dtypes=("float32", "float16"), values=NORM_VALUES)})
def blockwise_norm_model(x):
    raise AssertionError("judged by BlockwiseModel, never run")


class BlockwiseModel:
    """An executor that judges seed 001's per-block ``tl.sum`` norm from the case alone (no kernel runs).

    Past one block of 1024 the kernel returns the last block's norm: a ``mismatch``; where the reference
    overflows or a non-finite value sits in an earlier block, the output is finite where the truth is not:
    ``nonfinite`` (a float16 ``large_offset`` norm overflows, as the real one does).
    """

    def __init__(self):
        self.runs: list[tuple[Case, Verdict]] = []

    def prepare(self, subject_ref: dict) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self, subject_ref: dict, case: Case, hazards: frozenset, timeout_s: float | None = None) -> Verdict:
        x = case.tensors["x"]
        if x.numel <= 1024 or (x.values == "zeros" and not x.nonfinite):
            verdict = Verdict("pass")
        elif x.nonfinite or (x.dtype == "float16" and x.values == "large_offset"):
            verdict = Verdict("fail", "nonfinite", "finite where the truth is not", "scalar", "first call")
        else:
            verdict = Verdict("fail", "mismatch", "one block's norm", "scalar", "first call")
        self.runs.append((case, verdict))
        return verdict


def test_the_reported_failure_is_the_shrunk_one_even_when_another_class_came_first(tmp_path):
    # Hypothesis shrinks the first failure and may slip into another class on the way (nonfinite ->
    # mismatch); the finding must be where the shrink ended, not the first class's unshrunk case.
    slipped = 0
    for seed in range(12):
        model = BlockwiseModel()
        res = explore(blockwise_norm_model, budget_s=600, max_examples=500, seed=seed, database=False,
                      out_dir=str(tmp_path / str(seed)), executor=model)
        first = next(v.failure_class for _, v in model.runs if v.status == "fail")
        slipped += first == "nonfinite"
        x = res.case.tensors["x"]
        assert (res.failure_class, x.shape, x.dtype, x.values, x.nonfinite) == \
            ("mismatch", (1025,), "float32", "normal", ""), f"seed {seed}: {res.case.describe()}"
        assert res.verdict.failure_class == "mismatch" and res.signature.split("|")[1] == "mismatch"
        if slipped >= 2:
            break
    assert slipped >= 2, "no seed saw the nonfinite class first: the test no longer exercises a slip"


def _case(n: int, dtype: str = "float32") -> Case:
    return Case({"N": n}, {"x": TensorCase((n,), dtype, "contiguous", 0, "normal", 0, "")}, {})


def _fail(klass: str) -> Verdict:
    return Verdict("fail", klass, klass, "scalar", "first call")


def test_failures_keep_the_smallest_case_of_every_class_and_report_the_smallest_overall():
    f = Failures()
    assert f.report() is None
    f.add(_case(3897, "float16"), _fail("nonfinite"))      # first seen: the large one
    f.add(_case(5000), _fail("mismatch"))
    f.add(_case(1025), _fail("mismatch"))
    f.add(_case(2000), _fail("mismatch"))                  # larger than the mismatch kept
    assert f.count == {"nonfinite": 1, "mismatch": 3}
    assert {k: c.dims["N"] for k, (_, c, _) in f.smallest_by_class.items()} == {"nonfinite": 3897, "mismatch": 1025}
    case, verdict = f.report()                             # the budget ran out: smallest by example_cost
    assert (verdict.failure_class, case.dims["N"]) == ("mismatch", 1025)
    assert example_cost(case) == min(example_cost(_case(n)) for n in (1025, 2000, 3897))


def test_equal_cost_prefers_the_later_failure_and_raised_or_stopping_failures_win():
    f = Failures()
    f.add(_case(8), _fail("nonfinite"))
    f.add(_case(8), _fail("mismatch"))                     # same size, later: the shrinker judged it simpler
    assert f.report()[1].failure_class == "mismatch"
    f.stopped_by = (_case(100), _fail("crash"))            # a crash ends the search: it is the finding
    assert f.report()[1].failure_class == "crash"
    f.raised = (_case(9), _fail("nonfinite"))              # Hypothesis's own final, shrunk failure wins
    assert f.report()[0].dims["N"] == 9


def test_a_failing_case_runs_once_though_hypothesis_replays_it(tmp_path):
    # Hypothesis replays a failure when shrinking starts and again at the end; at ~17 s per
    # multi-million-element example in the interpreter, those replays come from the verdicts already had.
    model = BlockwiseModel()
    res = explore(blockwise_norm_model, budget_s=600, max_examples=500, seed=0, database=False,
                  out_dir=str(tmp_path), executor=model)
    assert res.status == "fail"
    failing = [case.dumps() for case, v in model.runs if v.status == "fail"]
    assert failing and len(failing) == len(set(failing))
    assert res.case.dumps() in failing and res.examples == len(model.runs)


def test_a_run_without_a_seed_draws_one_records_it_and_replays_with_it(tmp_path):
    first = BlockwiseModel()
    res = explore(blockwise_norm_model, budget_s=600, max_examples=500, database=False,
                  out_dir=str(tmp_path / "a"), executor=first)
    assert isinstance(res.seed, int) and f"seed {res.seed}" in res.line()
    summary = json.load(open(os.path.join(res.dump, "summary.json")))
    assert summary["seed"] == res.seed
    x, drawn = summary["inputs"]["x"], res.case.tensors["x"]
    assert (x["seed"], x["values"], x["layout"], x["layout_param"], x["nonfinite"]) == \
        (drawn.seed, drawn.values, drawn.layout, drawn.layout_param, drawn.nonfinite)
    again = BlockwiseModel()                   # the recorded seed replays the very same examples
    replay = explore(blockwise_norm_model, budget_s=600, max_examples=500, seed=res.seed, database=False,
                     out_dir=str(tmp_path / "b"), executor=again)
    assert [c.dumps() for c, _ in again.runs] == [c.dumps() for c, _ in first.runs]
    assert replay.case == res.case
    other = explore(blockwise_norm_model, budget_s=600, max_examples=500, database=False,
                    out_dir=str(tmp_path / "c"), executor=BlockwiseModel())
    assert other.seed != res.seed              # drawn afresh (31 random bits) for every run


SMALL = dict(inputs={"x": tensor(("N",), dtypes=("float32",), values=("normal",), nonfinite=False)}, dims={"N": (1, 64)})


@subject(reference=lambda x: x * 2, **SMALL)
def raises_past_eight(x):
    if x.numel() > 8:
        raise RuntimeError("planted: the launch grid assumes N <= 8")
    return x * 2


def _reference_rejects_odd_lengths(x):
    if x.numel() % 2:
        raise ValueError("odd lengths are outside the domain")
    return x * 2


@subject(reference=_reference_rejects_odd_lengths, **SMALL)
def wrong_on_odd_lengths(x):
    return x * 2 if x.numel() % 2 == 0 else torch.zeros_like(x)     # judged only inside the domain


def test_a_subject_raising_where_the_reference_does_not_is_an_exception_finding_with_its_traceback(
        tmp_path, in_process):
    res = explore(raises_past_eight, budget_s=120, max_examples=200, seed=5, database=False,
                  out_dir=str(tmp_path), executor=in_process)
    assert (res.status, res.failure_class) == ("fail", "exception")
    assert res.case.dims["N"] == 9                                     # shrunk to the first length that raises
    assert "planted: the launch grid assumes N <= 8" in res.message
    with open(os.path.join(res.dump, "traceback.txt")) as f:
        tb = f.read()
    assert "RuntimeError: planted: the launch grid assumes N <= 8" in tb and "raises_past_eight" in tb
    assert json.load(open(os.path.join(res.dump, "summary.json")))["failure_class"] == "exception"


def test_inputs_the_reference_rejects_are_skipped_and_counted_not_failures(tmp_path, in_process):
    seen = []
    res = explore(wrong_on_odd_lengths, budget_s=120, max_examples=60, seed=5, database=False,
                  out_dir=str(tmp_path), executor=in_process,
                  on_example=lambda case, verdict: seen.append((case.dims["N"], verdict.status)))
    assert res.status == "pass" and res.dump is None
    odd = [n for n, status in seen if n % 2]
    assert odd and all(status == "skip" for n, status in seen if n % 2)   # garbage there was never judged
    assert all(status == "pass" for n, status in seen if n % 2 == 0)
    assert res.skipped == len(odd) and res.examples == len(seen)


class SlowFirstExample:
    """An executor whose examples each outlast a short budget: cut short ("budget") whenever a limit is given."""

    def __init__(self):
        self.limits: list = []

    def prepare(self, subject_ref: dict) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self, subject_ref: dict, case: Case, hazards: frozenset, timeout_s: float | None = None) -> Verdict:
        self.limits.append(timeout_s)
        return Verdict("budget") if timeout_s is not None else Verdict("pass")


def test_the_first_example_runs_to_its_hang_limit_and_later_ones_to_the_budget(tmp_path):
    """A first example pays the subject's JIT compiles, which may outlast a short budget (a cold GPU cache):
    it runs under the hang limit alone, so the exploration judges at least one example; the next one is held
    to the budget and is cut short."""
    slow = SlowFirstExample()
    res = explore(blockwise_norm_model, budget_s=0.5, max_examples=20, seed=3, database=False,
                  out_dir=str(tmp_path), executor=slow)
    assert res.status == "pass" and res.examples == 1, res.line()
    assert slow.limits[0] is None and len(slow.limits) == 2 and 0 < slow.limits[1] <= 0.6, slow.limits


def test_a_subject_whose_every_draw_is_outside_its_domain_is_a_usage_error_naming_the_reference(tmp_path,
                                                                                                in_process):
    """Hypothesis gives up (Unsatisfiable) when every example is rejected: that is a declaration to fix, said
    in one line with the subject and the reference's error, never a traceback."""
    import pytest

    from tritondiff.harness.exc import UsageError

    def needs_even(x):
        raise ValueError("needs an even N")

    @subject(reference=needs_even, inputs={"x": tensor(("N",))}, dims={"N": (1, 64)}, name="explore_test.out")
    def out_of_domain(x):
        return x

    with pytest.raises(UsageError, match=r"explore_test.out: every example drawn was outside the subject's "
                                         r"domain \(\d+ drawn.*last: reference raised ValueError: needs an even N"):
        explore(out_of_domain, budget_s=60, seed=1, out_dir=str(tmp_path), executor=in_process)


def _two_bugs_subject():
    """NaN dropped (an edge divergence: seen only with NaN inputs) and, on ordinary values, a wrong sum
    for lengths 3 mod 7: the edge finding must not hide the wrong one."""
    def two_bugs(x):
        y = torch.nan_to_num(x, nan=0.0).sum()
        return y + 1.0 if x.numel() % 7 == 3 else y

    return subject(reference=lambda x: x.sum(), inputs={"x": tensor(("N",), dtypes=("float32",))},
                   dims={"N": (1, 200)}, name="explore_test.two_bugs")(two_bugs)


def test_the_search_goes_on_after_a_finding_and_an_edge_one_does_not_hide_a_wrong_one(tmp_path, in_process):
    res = explore(_two_bugs_subject(), budget_s=120, max_examples=200, seed=11, out_dir=str(tmp_path),
                  executor=in_process, max_findings=4)
    keys = {(f.tier, f.failure_class) for f in res.findings}
    assert ("wrong", "mismatch") in keys and ("edge", "nonfinite") in keys, keys
    assert res.status == "fail" and (res.tier, res.failure_class) == ("wrong", "mismatch")
    assert res.case.dims["N"] % 7 == 3 and not res.case.tensors["x"].nonfinite
    assert len({f.dump for f in res.findings}) == len(res.findings)            # each dumped on its own
    assert "warn  explore_test.two_bugs  edge nonfinite" in res.line()


class Recording:
    """Runs examples in process and records, in order, each example's verdict and each search's space."""

    def __init__(self, inner):
        self.inner, self.events = inner, []

    def prepare(self, subject_ref: dict) -> None:
        self.inner.prepare(subject_ref)

    def close(self) -> None:
        pass

    def run(self, subject_ref: dict, case: Case, hazards: frozenset, timeout_s: float | None = None) -> Verdict:
        verdict = self.inner.run(subject_ref, case, hazards, timeout_s=timeout_s)
        self.events.append(("example", tier_of(case, verdict.failure_class) if verdict.status == "fail" else None))
        return verdict


def test_an_edge_sighting_is_not_shrunk_before_the_normal_range_is_searched(tmp_path, in_process, monkeypatch):
    """Shrinking an edge sighting costs dozens of examples -- on a GPU the whole budget of a subject whose
    examples compile, leaving the normal range unsearched (three corpus bugs were missed so).  The first
    search stops at the sighting; after its control run the next example is the normal range's; the edge
    finding is still reported, shrunk by the later whole-space search."""
    import sys

    explore_module = sys.modules["tritondiff.harness.explore"]
    recording = Recording(in_process)
    real = explore_module._hypothesis_test

    def marking(*args, normal=False, **kwargs):
        recording.events.append(("search", "normal" if normal else "whole"))
        return real(*args, normal=normal, **kwargs)

    monkeypatch.setattr(explore_module, "_hypothesis_test", marking)
    res = explore(_two_bugs_subject(), budget_s=120, max_examples=200, seed=11, out_dir=str(tmp_path),
                  executor=recording, max_findings=4)
    events = recording.events
    first_edge = events.index(("example", "edge"))
    assert events[first_edge + 1][0] == "example"                          # the control run, ordinary values
    assert events[first_edge + 2] == ("search", "normal"), events[first_edge:first_edge + 5]
    keys = {(f.tier, f.failure_class) for f in res.findings}
    assert ("wrong", "mismatch") in keys and ("edge", "nonfinite") in keys, keys
    edge = next(f for f in res.findings if f.tier == "edge")
    assert edge.case.dims["N"] <= 2, edge.case.describe()               # shrunk, by the later search


def test_the_normal_range_after_a_sighting_leaves_half_the_budget_to_shrink_it(tmp_path, in_process):
    """An edge-only bug and a budget (not an example count) bounding the search: the normal range, which
    passes, takes at most half of what is left, and the edge finding is still shrunk after it."""
    import time

    def nan_dropped(x):
        return torch.nan_to_num(x, nan=0.0).sum()

    subj = subject(reference=lambda x: x.sum(), inputs={"x": tensor(("N",), dtypes=("float32",))},
                   dims={"N": (1, 4096)}, name="explore_test.nan_dropped_budget")(nan_dropped)
    start = time.monotonic()
    res = explore(subj, budget_s=6, max_examples=1_000_000, seed=3, out_dir=str(tmp_path), executor=in_process,
                  database=False)
    assert [(f.tier, f.failure_class) for f in res.findings] == [("edge", "nonfinite")]
    assert res.findings[0].case.dims["N"] == 1, res.findings[0].case.describe()      # shrunk
    assert time.monotonic() - start < 6 * 1.5


def test_a_deferred_edge_sighting_is_reported_when_the_budget_ends_first(tmp_path, in_process, monkeypatch):
    """The budget spent in the normal range: the edge sighting is reported as seen, not lost."""
    import sys
    import time
    import types

    explore_module = sys.modules["tritondiff.harness.explore"]
    real = explore_module._hypothesis_test
    shift = [0.0]
    monkeypatch.setattr(explore_module, "time", types.SimpleNamespace(monotonic=lambda: time.monotonic() + shift[0]))

    def no_time_after_the_sighting(*args, normal=False, **kwargs):
        test = real(*args, normal=normal, **kwargs)
        if not normal:
            return test

        def spent():                          # the normal range's search takes the rest of the budget
            shift[0] = 1e6
        return spent

    monkeypatch.setattr(explore_module, "_hypothesis_test", no_time_after_the_sighting)

    def nan_dropped(x):
        return torch.nan_to_num(x, nan=0.0).sum()

    subj = subject(reference=lambda x: x.sum(), inputs={"x": tensor(("N",), dtypes=("float32",))},
                   dims={"N": (1, 64)}, name="explore_test.nan_dropped")(nan_dropped)
    res = explore(subj, budget_s=120, max_examples=200, seed=11, out_dir=str(tmp_path), executor=in_process)
    assert [(f.tier, f.failure_class) for f in res.findings] == [("edge", "nonfinite")]
    assert res.findings[0].dump and res.findings[0].case.tensors["x"].nonfinite


def test_max_findings_stops_the_search(tmp_path, in_process):
    res = explore(_two_bugs_subject(), budget_s=120, max_examples=200, seed=11, out_dir=str(tmp_path),
                  executor=in_process, max_findings=1, strict=True)
    assert len(res.findings) == 1 and res.status == "fail"


def test_the_normal_range_is_searched_once_however_many_edge_findings(tmp_path, in_process, monkeypatch):
    """Two edge bugs (NaN dropped; 50% off on values past 1e15, the `large` family): after the first edge finding the
    normal-range values are searched, once; later edge findings do not search them again."""
    import sys

    explore_module = sys.modules["tritondiff.harness.explore"]      # (the package's `explore` is the function)
    spaces = []
    real = explore_module._hypothesis_test

    def recording(*args, normal=False, **kwargs):
        spaces.append(normal)
        return real(*args, normal=normal, **kwargs)

    monkeypatch.setattr(explore_module, "_hypothesis_test", recording)

    def two_edge_bugs(x):
        y = torch.nan_to_num(x, nan=0.0).sum()    # nonfinite: NaN dropped
        finite = x[torch.isfinite(x)]
        large = finite.numel() and float(finite.abs().max()) > 1e15
        return y * 1.5 if large else y            # mismatch, only on edge-sized values

    subj = subject(reference=lambda x: x.sum(), inputs={"x": tensor(("N",), dtypes=("float32",))},
                   dims={"N": (1, 64)}, name="explore_test.two_edge_bugs")(two_edge_bugs)
    res = explore(subj, budget_s=60, max_examples=100, seed=5, out_dir=str(tmp_path), executor=in_process,
                  max_findings=4)
    assert {(f.tier, f.failure_class) for f in res.findings} == {("edge", "nonfinite"), ("edge", "mismatch")}
    assert res.status == "pass" and spaces.count(True) == 1 and spaces[0] is False


def test_a_pass_on_mostly_skipped_examples_says_so(tmp_path, in_process):
    """A reference that raises on most draws (a seed passed the wrong way) leaves a pass judged on the few
    draws it accepted: the result must say how many were not judged, and why."""
    def picky(x):
        if x.numel() > 1:
            raise TypeError("planted: the reference wants a 1-element tensor")
        return x * 2

    subj = subject(reference=picky, inputs={"x": tensor(("N",), dtypes=("float32",))}, dims={"N": (1, 64)},
                   name="explore_test.picky_reference")(lambda x: x * 2)
    res = explore(subj, budget_s=60, max_examples=40, seed=3, database=False, out_dir=str(tmp_path),
                  executor=in_process)
    assert res.status == "pass" and res.skipped * 2 > res.examples
    assert res.untested and "the reference raised on" in res.untested[0] and "planted" in res.untested[0]
    assert "untested: the reference raised on" in res.line()
    roomy = subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",), dtypes=("float32",))},
                    dims={"N": (1, 64)}, name="explore_test.roomy_reference")(lambda x: x * 2)
    res = explore(roomy, budget_s=60, max_examples=40, seed=3, database=False, out_dir=str(tmp_path / "roomy"),
                  executor=in_process)
    assert res.status == "pass" and not any("reference raised" in u for u in res.untested)


def test_a_failure_saved_in_the_example_database_replays_first_in_the_next_run_whatever_its_seed(tmp_path):
    from tritondiff.harness.executor import InProcess

    @subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",), dtypes=("float32",), nonfinite=False)},
             dims={"N": (1, 4096)}, name="explore_test.wrong_past_3000")
    def wrong_past_3000(x):
        y = x * 2
        return y + (torch.arange(x.numel()) >= 3000).to(y.dtype)      # wrong only on long inputs

    first = explore(wrong_past_3000, budget_s=60, seed=1, out_dir=str(tmp_path), executor=InProcess())
    assert first.status == "fail" and os.listdir(tmp_path / ".hypothesis")     # where the README says
    again = explore(wrong_past_3000, budget_s=60, seed=2, out_dir=str(tmp_path), executor=InProcess())
    assert again.status == "fail" and again.examples == 1                      # the saved failure, first
    fresh = explore(wrong_past_3000, budget_s=60, seed=2, out_dir=str(tmp_path / "other"), executor=InProcess(),
                    database=False)
    assert fresh.examples > 1


def test_a_wrong_finding_sighted_again_through_an_edge_case_is_reported_once(tmp_path, in_process):
    """A float32 result where eager's is half precision fails on every such example: the search finds it on
    ordinary values, then sights it again on extreme ones, whose control run is that same wrong finding.  One finding,
    one dump (a campaign lane died installing the second copy into the same folder)."""
    @subject(reference=lambda x, y: (x * y).sum(), name="explore_test.widens",
             inputs={"x": tensor(("N", "V"), dtypes=("float32", "bfloat16")),
                     "y": tensor(("N", "V"), dtype_like="x", high=0.0)},
             dims={"N": (1, 64), "V": (1, 64)})
    def widens(x, y):
        return (x * y).float().sum()

    res = explore(widens, budget_s=60, max_examples=60, seed=1, out_dir=str(tmp_path), executor=in_process,
                  max_findings=4)
    classes = [(f.tier, f.failure_class) for f in res.findings]
    assert classes.count(("wrong", "dtype")) == 1, classes
    assert len({f.dump for f in res.findings}) == len(res.findings), [f.dump for f in res.findings]
