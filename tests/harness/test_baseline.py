"""harness.baseline: accepted findings (by signature, with a reason) are reported, not failed; any other
finding still fails; a bad baseline file is a usage error naming it."""
import os
import subprocess
import sys

import pytest

from tritondiff.harness import explore
from tritondiff.harness.config import config
from tritondiff.harness.exc import UsageError
from tritondiff.harness.executor import InProcess
from tritondiff.harness.loader import load_file, subjects_in

KERNELS = '''
import torch

from tritondiff import subject, tensor


@subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",), dtypes=("float32",), nonfinite=False)},
         dims={"N": (1, 64)})
def tail_bug(x):
    y = x * 2
    y[-1] += 1.0                  # a known bug, accepted by the baseline
    return y


@subject(reference=lambda x: x + 1, inputs={"x": tensor(("N",), dtypes=("float32",), nonfinite=False)},
         dims={"N": (1, 64)})
def new_bug(x):
    return x + 1.5
'''


def _subjects(tmp_path):
    path = tmp_path / "known_issues.py"
    path.write_text(KERNELS)
    return {s.name: s for s in subjects_in(load_file(str(path)))}, path


def _explore(subj, tmp_path):
    return explore(subj, budget_s=30, seed=1, database=False, out_dir=str(tmp_path / "out"), executor=InProcess())


def test_an_accepted_finding_is_reported_not_failed_and_a_new_one_still_fails(tmp_path):
    subjects, _ = _subjects(tmp_path)
    before = _explore(subjects["tail_bug"], tmp_path)
    assert before.status == "fail"
    baseline = tmp_path / "baseline.toml"
    baseline.write_text(f'[[accepted]]\nsignature = "{before.signature}"\nreason = "known: tracked in #7"\n')
    with config.patch(baseline=str(baseline)):
        after = _explore(subjects["tail_bug"], tmp_path)
        assert after.status == "pass" and [f.accepted for f in after.findings] == ["known: tracked in #7"]
        assert "accepted  tail_bug  wrong mismatch (known: tracked in #7)" in after.line()
        assert after.to_json()["findings"][0]["accepted"] == "known: tracked in #7"
        assert _explore(subjects["new_bug"], tmp_path).status == "fail"        # not in the baseline


@pytest.mark.parametrize("text, fragment", [
    ("[[accepted]]\nsignature = 'a|mismatch|out0'\n", "non-empty reason"),
    ("[[accepted]]\nsignature = 'no-bars'\nreason = 'r'\n", 'signature = "subject|class|location"'),
    ("[other]\nx = 1\n", "holds [[accepted]] tables only"),
    ("not toml = = =", "not a readable baseline file"),
])
def test_a_bad_baseline_names_the_file_and_the_fix(tmp_path, text, fragment):
    from tritondiff.harness.baseline import load

    path = tmp_path / "baseline.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=None) as info:
        load(str(path))
    assert str(path) in str(info.value) and fragment in str(info.value)
    with pytest.raises(UsageError, match="no such baseline file"):
        load(str(tmp_path / "missing.toml"))


def test_check_takes_a_baseline_and_exits_0_on_accepted_findings(tmp_path):
    subjects, path = _subjects(tmp_path)
    signature = _explore(subjects["tail_bug"], tmp_path).signature
    baseline = tmp_path / "baseline.toml"
    baseline.write_text(f'[[accepted]]\nsignature = "{signature}"\nreason = "known"\n')
    run = subprocess.run([sys.executable, "-m", "tritondiff.harness", "check", str(path), "--subject", "tail_bug",
                          "--budget", "20", "--seed", "1", "--baseline", str(baseline), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=300, env=os.environ)
    assert run.returncode == 0 and "accepted  tail_bug" in run.stdout, run.stdout + run.stderr
