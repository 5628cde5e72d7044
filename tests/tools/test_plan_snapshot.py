"""tools.plan_snapshot: a workload's kernels hashed without a GPU, and the comparison of two snapshots."""
import json

import pytest

from tools import plan_snapshot


def test_a_snapshot_hashes_each_kernel_and_is_stable(tmp_path):
    name = "nrm2 2^20"
    a, b = plan_snapshot.snapshot([name]), plan_snapshot.snapshot([name])
    assert list(a) == [name] and a[name] and a == b
    warps, grid, digest = next(iter(a[name].values()))
    assert isinstance(warps, int) and grid and len(digest) == 16
    out = tmp_path / "a.json"
    assert plan_snapshot.main([str(out), "--only", name]) == 0
    assert json.loads(out.read_text()) == a


def test_diff_names_what_moved_and_the_exit_code_says_so(tmp_path, capsys):
    a = {"w": {"k0": [4, [8], "aaaa"], "k1": [8, [1], "bbbb"]}, "gone": {}}
    b = {"w": {"k0": [4, [8], "aaaa"], "k1": [8, [1], "cccc"]}, "new": {}}
    assert plan_snapshot.diff(a, b) == ["gone: only in A", "new: only in B",
                                        "w k1: [8, [1], 'bbbb'] -> [8, [1], 'cccc']"]
    assert plan_snapshot.diff(a, a) == []
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    assert plan_snapshot.main(["--diff", str(pa), str(pa)]) == 0
    assert plan_snapshot.main(["--diff", str(pa), str(pb)]) == 1
    assert "w k1" in capsys.readouterr().out


def test_the_models_suite_is_snapshotted_by_its_benchmark_names():
    """A models-suite row (bench.compiler's name) captured on the CPU, forward and backward: the same hashes twice,
    kernels of both graphs; a name of neither suite is refused with the known ones."""
    name = "nanogpt_block fwd+bwd float32"
    a = plan_snapshot.snapshot([name], suite="models")
    assert list(a) == [name] and a == plan_snapshot.snapshot([name], suite="models")
    assert any(k.startswith("g0_") for k in a[name]) and any(k.startswith("g1_") for k in a[name])
    with pytest.raises(SystemExit, match="no such row") as refused:
        plan_snapshot.snapshot(["no such row"], suite="all")
    assert name in str(refused.value) and "nrm2 2^20" in str(refused.value)
