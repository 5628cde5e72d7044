"""tools/ab_trees.sh: a command run in two trees in interleaved rounds (A B B A ...), per-round outputs,
failing rounds reported, bad usage refused."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AB = os.path.join(ROOT, "tools", "ab_trees.sh")


def _ab(*args, cwd=None):
    return subprocess.run(["bash", AB, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_ab_trees_runs_the_command_in_each_tree_a_b_b_a(tmp_path):
    trees = {}
    for side in ("a", "b"):
        tree = tmp_path / f"tree_{side}"
        tree.mkdir()
        (tree / "which.txt").write_text(side.upper())
        trees[side] = tree
    out = tmp_path / "out"
    done = _ab(str(out), str(trees["a"]), str(trees["b"]), "--no-out", "--", "sh", "-c", 'cat which.txt; echo " $PYTHONPATH"')
    assert done.returncode == 0, done.stderr
    logs = sorted(os.listdir(out))
    assert logs == ["1-A.log", "2-B.log", "3-B.log", "4-A.log"]
    for log in logs:
        side = log[2]
        text = (out / log).read_text().split()
        assert text == [side, str(trees[side.lower()])]          # run inside its tree, its tree on PYTHONPATH


def test_ab_trees_passes_out_per_round_and_reports_a_failing_round(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    done = _ab(str(tmp_path / "out"), str(a), str(b), "--", "sh", "-c", 'echo "$@"; [ "$PWD" != "' + str(a) + '" ]', "sh")
    assert done.returncode == 0
    assert (tmp_path / "out" / "2-B.log").read_text().strip() == f"--out {tmp_path / 'out' / '2-B.md'}"
    assert "round 1 (A) exited 1" in done.stderr and "round 4 (A) exited 1" in done.stderr
    assert "(B) exited" not in done.stderr


@pytest.mark.parametrize("args", [[], ["out", "a"], ["out", "a", "b", "python"], ["out", "a", "b", "--no-out", "x"]])
def test_ab_trees_bad_usage_exits_2_with_the_usage(tmp_path, args):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    done = _ab(*args, cwd=tmp_path)
    assert done.returncode == 2 and ("usage:" in done.stderr or "expected -- before the command" in done.stderr)
