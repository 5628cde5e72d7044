"""tools.fuzz_scaling: the scaling table from measured rows, and one real (tiny) measurement on the CPU."""
from tools import fuzz_scaling


def _row(lanes, rate, kinds, groups=None):
    return {"lanes": lanes, "seconds": 10.0, "examples": int(rate * 10), "rate": rate,
            "groups": groups or {"kernels.*": rate}, "kinds": kinds}


def test_the_table_gives_speedups_over_one_lane_and_compares_finding_kinds():
    kinds = [("kernels.x", "mismatch")]
    text = fuzz_scaling.table([_row(4, 14.0, kinds), _row(1, 4.0, kinds), _row(8, 20.0, [])], gpus=4)
    rows = [line.split(" | ") for line in text.splitlines()[2:]]
    assert [r[0].strip("| ") for r in rows] == ["1", "4", "8"]             # sorted by lanes
    assert [r[1] for r in rows] == ["1", "4", "4"]                         # GPUs used: at most those there are
    assert [r[5] for r in rows] == ["1.00x", "3.50x", "5.00x"]
    assert [r[-1].strip(" |") for r in rows] == ["yes", "yes", "no"]


def test_a_measurement_counts_examples_per_group(tmp_path):
    row = fuzz_scaling.measure(["kernels.nrm2"], 1, 4.0, 7, None)
    assert row["lanes"] == 1 and row["examples"] > 0 and row["rate"] > 0
    assert set(row["groups"]) == {"kernels.*"} and row["kinds"] == []


def test_the_store_rate_is_measured():
    assert fuzz_scaling.store_commits_per_s(0.3) > 100


def test_bad_arguments_exit_2_with_one_line(capsys):
    import pytest

    for args in (["--budget", "0"], ["--lanes", "0"], ["--warmup", "-1"]):
        with pytest.raises(SystemExit) as e:
            fuzz_scaling.main(args)
        assert e.value.code == 2 and "error:" in capsys.readouterr().err
