"""harness.tiers: which findings are wrong (normal-range inputs) and which edge (the dtype's edge), and
the control run that turns an edge finding wrong when the edge values were incidental."""
import time

from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.explore import _wrong_without_the_edge
from tritondiff.harness.runner import Verdict
from tritondiff.harness.tiers import is_edge_case, normal_families, normalized, tier_of


def _case(values="normal", nonfinite=""):
    return Case({"N": 9}, {"x": TensorCase((9,), "float32", "strided", 2, values, 5, nonfinite),
                           "w": TensorCase((9,), "float16", "contiguous", 0, "uniform_pos", 6, "")}, {})


def test_the_tier_follows_the_inputs_except_for_classes_wrong_on_any_input():
    assert tier_of(_case(), "mismatch") == "wrong"
    for edge in (_case(values="near_max"), _case(values="large"), _case(values="tiny"), _case(nonfinite="nan")):
        assert is_edge_case(edge) and tier_of(edge, "mismatch") == "edge" and tier_of(edge, "nonfinite") == "edge"
        assert tier_of(edge, "out_of_bounds") == tier_of(edge, "crash") == tier_of(edge, "hang") == "wrong"
    assert normal_families(("normal", "near_max", "tiny")) == ("normal",)
    assert normal_families(("near_max",)) == ("near_max",)          # nothing else declared: kept


def test_normalized_keeps_everything_but_the_edge_values():
    edge = _case(values="near_max", nonfinite="mixed")
    plain = normalized(edge)
    x = plain.tensors["x"]
    assert (x.values, x.nonfinite, x.layout, x.layout_param, x.seed) == ("normal", "", "strided", 2, 5)
    assert plain.tensors["w"] == edge.tensors["w"] and plain.dims == edge.dims
    assert normalized(_case()) is None


class _Control:
    def __init__(self, status):
        self.status, self.runs = status, []

    def run(self, subject_ref, case, hazards, timeout_s=None):
        self.runs.append(case)
        return Verdict(self.status, "mismatch" if self.status == "fail" else None, "off")


def test_an_edge_finding_that_fails_without_its_edge_values_is_the_wrong_one():
    edge = (_case(nonfinite="nan"), Verdict("fail", "nonfinite", "NaN moved"))
    deadline = time.monotonic() + 60
    fails = _Control("fail")
    case, verdict = _wrong_without_the_edge(edge, fails, {}, frozenset(), deadline, 60)
    assert fails.runs == [normalized(edge[0])] and case == normalized(edge[0]) and verdict.failure_class == "mismatch"
    assert tier_of(case, verdict.failure_class) == "wrong"
    passes = _Control("pass")
    assert _wrong_without_the_edge(edge, passes, {}, frozenset(), deadline, 60) == edge
    normal = (_case(), Verdict("fail", "mismatch", "off"))
    untouched = _Control("fail")
    assert _wrong_without_the_edge(normal, untouched, {}, frozenset(), deadline, 60) == normal and not untouched.runs
