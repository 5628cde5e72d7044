"""Replay the regression corpus: every finding ever fixed, kept as a runnable repro, must pass now.

Each directory here with a ``regression.json`` is one finding (format in
README.md).  The fixed subject must pass on the recorded case; when the buggy
subject is kept too, it must still fail on that case with the recorded failure
class -- proof that the case still exercises the bug it was saved for.
"""
from __future__ import annotations

import importlib
import json
import os

import pytest

from tritondiff.base import device  # noqa: F401  (device decision before any kernel module is imported)
from tritondiff.harness.api import Subject, registry
from tritondiff.harness.case import Case
from tritondiff.harness.executor import Isolated
from tritondiff.harness.loader import load_file, ref, subjects_in
from tritondiff.harness.runner import Verdict, enabled_hazards, run_case

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIRED = ("title", "failure_class", "signature", "fixed")
CASES = sorted(d for d in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, d, "regression.json")))


def _load(name: str) -> tuple[dict, Case]:
    folder = os.path.join(HERE, name)
    with open(os.path.join(folder, "regression.json")) as f:
        spec = json.load(f)
    with open(os.path.join(folder, "case.json")) as f:
        case = Case.from_json(json.load(f))
    return spec, case


def _subject(name: str, spec: dict, which: str) -> Subject:
    if "file" in spec:
        subjects = {s.name: s for s in subjects_in(load_file(os.path.join(HERE, name, spec["file"])))}
    else:
        importlib.import_module(spec["module"])
        subjects = registry()
    wanted = spec[which]
    assert wanted in subjects, f"{name}: no subject {wanted!r} (have {sorted(subjects)})"
    return subjects[wanted]


def _replay(subject: Subject, case: Case, spec: dict) -> Verdict:
    hazards = frozenset(spec["hazards"]) if "hazards" in spec else enabled_hazards(subject)
    if spec["failure_class"] in ("crash", "hang"):     # the buggy side would take pytest down: isolate it
        executor = Isolated()
        try:
            return executor.run(ref(subject), case, hazards)
        finally:
            executor.close()
    return run_case(subject, case, hazards - {"isolation"})


@pytest.mark.parametrize("name", CASES)
def test_fixed_version_passes(name):
    spec, case = _load(name)
    verdict = _replay(_subject(name, spec, "fixed"), case, spec)
    assert verdict.status == "pass", f"{name} ({spec['title']}) reproduces again: {verdict.failure_class}: " \
                                     f"{verdict.message}"


@pytest.mark.parametrize("name", [c for c in CASES if "buggy" in _load(c)[0]])
def test_buggy_version_still_fails_the_same_way(name):
    spec, case = _load(name)
    verdict = _replay(_subject(name, spec, "buggy"), case, spec)
    assert (verdict.status, verdict.failure_class) == ("fail", spec["failure_class"]), verdict.message


def test_corpus_is_well_formed():
    assert len(CASES) >= 2
    for name in CASES:
        spec, case = _load(name)
        missing = [k for k in REQUIRED if k not in spec]
        assert not missing, f"{name}/regression.json lacks {missing}"
        assert ("file" in spec) != ("module" in spec), f"{name}: give exactly one of file / module"
        assert spec["signature"].split("|")[1] == spec["failure_class"]
        assert case.tensors or case.scalars
