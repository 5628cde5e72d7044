"""harness.gate: the pre-merge gate runs every part, writes JUnit XML, prints time per part, fails if any part does."""
from __future__ import annotations

import os
import re

from tritondiff.harness import gate
from tritondiff.harness.gate import PARTS, Part, format_table, junit_counts, pytest_command, run_gate

# The inner runs need no tritondiff plugin (loading it imports torch through the harness package).
LIGHT = ["-p", "no:cacheprovider", "-p", "no:tritondiff"]


def _project(tmp_path):
    tests = tmp_path / "proj" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_ok.py").write_text("def test_one():\n    assert 1 + 1 == 2\n\n"
                                      "def test_two():\n    assert [1, 2] == [1, 2]\n")
    (tests / "test_bad.py").write_text("import pytest\n\ndef test_wrong():\n    assert 2 + 2 == 5\n\n"
                                       "@pytest.mark.skip(reason='not today')\ndef test_skipped():\n    pass\n")
    return str(tmp_path / "proj")


def test_every_part_runs_and_a_failing_part_fails_the_gate(tmp_path, capsys):
    proj = _project(tmp_path)
    parts = (Part("good", "good part", ("tests/test_ok.py",)), Part("bad", "bad part", ("tests/test_bad.py",)),
             Part("empty", "empty part", ("tests/test_ok.py", "-k", "nothing_matches")))
    junit = tmp_path / "junit"
    status, results = run_gate(parts, junit_dir=str(junit), cwd=proj, extra=LIGHT)
    assert status == 1
    good, bad, empty = results
    assert (good.passed, good.tests, good.failures) == (True, 2, 0)
    assert (bad.passed, bad.tests, bad.failures, bad.skipped) == (False, 2, 1, 1)
    assert (empty.passed, empty.verdict) == (False, "NO TESTS")          # collecting nothing is not a pass
    assert sorted(os.listdir(junit)) == ["bad.xml", "empty.xml", "good.xml"]
    out = capsys.readouterr().out
    table = out[out.index("=== gate: time per part"):]
    assert re.search(r"good part\s+passed\s+2\s+0\s+0\s+0\s+\d+\.\d", table)
    assert re.search(r"bad part\s+FAILED\s+2\s+1\s+0\s+1\s+\d+\.\d", table)
    assert re.search(r"^gate\s+FAILED\s+4\s+1", table, re.M)


def test_all_passing_parts_pass(tmp_path):
    proj = _project(tmp_path)
    status, (result,) = run_gate((Part("good", "good", ("tests/test_ok.py",)),), junit_dir=str(tmp_path / "j"),
                                 cwd=proj, extra=LIGHT)
    assert status == 0 and result.verdict == "passed" and result.seconds > 0


def test_the_three_parts_are_the_issue_s_gate():
    unit, subjects, regressions = PARTS
    cmd = pytest_command(unit, "/j/unit.xml")
    assert cmd[1:4] == ["-m", "pytest", "tests"]
    assert "--ignore=tests/test_bundled_subjects.py" in cmd and "--ignore=tests/regressions" in cmd
    assert cmd[cmd.index("-m", 3) + 1] == "not slow" and "--junitxml=/j/unit.xml" in cmd
    cmd = pytest_command(subjects, "/j/subjects.xml")
    assert "tests/test_bundled_subjects.py" in cmd and "--tritondiff-profile=ci" in cmd
    assert cmd[cmd.index("-n") + 1] == "2"                      # pytest-xdist is a test dependency
    assert pytest_command(regressions, "/j/r.xml")[3] == "tests/regressions"
    assert os.path.isfile(os.path.join(gate.ROOT, "tests", "test_bundled_subjects.py"))
    assert os.path.isdir(os.path.join(gate.ROOT, "tests", "regressions"))


def test_junit_counts_and_table(tmp_path):
    assert junit_counts(str(tmp_path / "missing.xml")) == {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    xml = tmp_path / "r.xml"
    xml.write_text('<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1"/>'
                   '<testsuite tests="2" failures="0" errors="1" skipped="0"/></testsuites>')
    assert junit_counts(str(xml)) == {"tests": 5, "failures": 1, "errors": 1, "skipped": 1}
    r = gate.PartResult(Part("x", "x part", ()), 0, 12.25, tests=5)
    assert "12.2" in format_table([r]) or "12.3" in format_table([r])
