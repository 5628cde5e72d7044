"""harness.hunters: one protocol, one registry; the runner consults the registry at each hook, so a new
hunter needs no change outside its own module."""
from __future__ import annotations

import pytest
from tritondiff.harness import hunters, subject, tensor
from tritondiff.harness.api import HAZARDS
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.config import HarnessConfig
from tritondiff.harness.runner import enabled_hazards, run_case
from tritondiff.harness.verdict import CallResult, fail
from tritondiff.base.exc import ConfigError


@subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",))}, dims={"N": (1, 8)}, name="hunters_test.double")
def double(x):
    return x * 2


def _case(n: int = 5) -> Case:
    return Case({"N": n}, {"x": TensorCase((n,), "float32", "contiguous", 0, "normal", 7, "")}, {})


def test_every_name_list_is_the_registry():
    assert HAZARDS == hunters.NAMES == tuple(hunters.HUNTERS)
    assert all(isinstance(h, hunters.Hunter) and h.name == name and h.summary
               for name, h in hunters.HUNTERS.items())
    assert enabled_hazards(double) == frozenset(hunters.NAMES)
    with pytest.raises(ConfigError, match="known: " + ", ".join(hunters.NAMES)):
        with HarnessConfig().patch(disabled_hazards=frozenset({"gremlins"})):
            pass


class _Flags(hunters.Hunter):
    """A planted hunter: every call is a finding of its own."""

    name = "flags"
    summary = "flags every call"

    def call_finding(self, result: CallResult, label: str):
        return fail("flagged", "planted hunter", label, result, "planted")


def test_a_hunter_added_to_the_registry_is_armed_and_judges_without_runner_changes(monkeypatch):
    monkeypatch.setitem(hunters.HUNTERS, _Flags.name, _Flags())
    verdict = run_case(double, _case(), frozenset({"flags"}))
    assert (verdict.status, verdict.failure_class, verdict.location) == ("fail", "flagged", "planted")
    assert run_case(double, _case(), frozenset()).status == "pass"          # not armed: not asked


def test_a_call_finding_comes_from_the_armed_hunter_only():
    """An undeclared write to an input is the mutation hunter's finding, and nothing when it is off; the
    call findings are taken in registry order (a write out of bounds before a mutated input)."""
    @subject(reference=lambda x: x.clone(), inputs={"x": tensor(("N",))}, dims={"N": (1, 8)},
             name="hunters_test.writes_input")
    def writes_input(x):
        x.add_(1.0)
        return x - 1.0

    names = list(hunters.NAMES)
    assert names.index("bounds") < names.index("canary") < names.index("mutation")
    verdict = run_case(writes_input, _case(), frozenset({"mutation"}))
    assert (verdict.failure_class, verdict.location) == ("input_mutation", "x")
    assert run_case(writes_input, _case(), frozenset()).status == "pass"


def test_isolation_is_read_from_the_hunters():
    assert hunters.isolated(frozenset({"isolation"})) and not hunters.isolated(frozenset({"poison", "canary"}))
    assert [h.name for h in hunters.armed(frozenset({"canary", "poison"}))] == ["poison", "canary"]
