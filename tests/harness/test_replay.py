"""`tritondiff replay DUMP`: exit 1 while the finding reproduces, 0 once it is fixed, 2 for what is not a dump."""
from __future__ import annotations

import json
import os

from tritondiff.harness.cli import main
from tritondiff.harness.executor import InProcess
from tritondiff.harness.explore import explore
from tritondiff.harness.loader import load_file, subjects_in

SUBJECTS = '''
import os

from tritondiff.harness import subject, tensor

BUG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bug_on")


@subject(reference=lambda x: x * 2, dims={"N": (1, 64)},
         inputs={"x": tensor(("N",), dtypes=("float32",), values=("normal",), nonfinite=False)})
def doubles_until_fixed(x):
    out = x * 2
    if os.path.exists(BUG) and x.numel() > 8:
        out[0] = 0.0                       # the bug: a wrong head element from length 9 on
    return out
'''


def test_replay_exit_codes_follow_the_fix(tmp_path, capsys):
    (tmp_path / "replay_subjects.py").write_text(SUBJECTS)
    (tmp_path / "bug_on").write_text("")
    (subj,) = subjects_in(load_file(str(tmp_path / "replay_subjects.py")))
    result = explore(subj, budget_s=60, max_examples=200, seed=3, out_dir=str(tmp_path / "out"),
                     executor=InProcess(), database=False)
    assert result.status == "fail" and result.case.dims["N"] == 9          # shrunk to the first bad length
    summary = json.load(open(os.path.join(result.dump, "summary.json")))
    assert summary["failure_class"] == "mismatch"

    assert main(["replay", result.dump, "--in-process"]) == 1
    assert "still fails: mismatch (same class)" in capsys.readouterr().out
    os.unlink(tmp_path / "bug_on")                                         # the fix
    assert main(["replay", result.dump, "--in-process"]) == 0
    assert "no longer reproduces (doubles_until_fixed: was mismatch; now pass)" in capsys.readouterr().out


def test_replay_of_something_that_is_not_a_dump_exits_2_with_one_line(tmp_path, capsys):
    assert main(["replay", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a tritondiff dump (summary.json and case.json expected)" in err
    assert len(err.strip().splitlines()) == 1
