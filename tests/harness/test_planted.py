"""The harness's power: planted bugs are found with the right class and shrunk; correct twins pass."""
import os

import pytest

from tritondiff.base import device
from tritondiff.harness import explore

from . import planted


def _explore(subj, tmp_path, executor, **kw):
    # Search power, not speed: max_examples bounds the work; the wall budget only guards against a
    # hang (a loaded 2-core CI machine took >60 s to reach the 1,152,000-element example).
    kw.setdefault("budget_s", 300)
    kw.setdefault("max_examples", 60)
    kw.setdefault("seed", 1234)
    return explore(subj, out_dir=str(tmp_path), database=False, executor=executor, **kw)


@pytest.mark.slow  # over 30 s on 2 cores: nightly tier
def test_truncated_reduction_past_2_20_is_found_and_shrunk_to_the_limit(tmp_path, in_process):
    res = _explore(planted.truncated_sum, tmp_path, in_process)
    assert res.status == "fail" and res.failure_class == "mismatch"
    # shrunk to just past the limit: the smallest length whose dropped tail exceeds fp32 rounding
    assert (1 << 20) < res.case.dims["N"] <= 1_500_007


def test_power_of_two_only_kernel_fails_on_small_odd_size(tmp_path, in_process):
    res = _explore(planted.pow2_only_sum, tmp_path, in_process)
    assert res.status == "fail" and res.failure_class == "mismatch"
    n = res.case.dims["N"]
    assert n & (n - 1) != 0 and n <= 5


@pytest.mark.slow  # over 20 s on 2 cores: nightly tier
def test_fp16_accumulation_over_long_axis(tmp_path, in_process):
    # A statistical bug: fp16 lane sums drift only on long axes of zero-mean values.  Shrinking a
    # multi-million-element case runs for whatever the wall budget leaves (the smallest failing case so
    # far is reported), so the budget is kept short.  Under pytest seed 5 draws a failing case at its 6th
    # example and seed 2 at its 29th (2 cores, measured; seed 1234 draws none in its 60); the budgets leave
    # room for a loaded machine, and the second seed is the fallback for draws that differ outside pytest.
    for seed, budget_s in ((5, 25), (2, 45)):
        res = _explore(planted.fp16_accumulating_mean, tmp_path, in_process, seed=seed, budget_s=budget_s)
        if res.status == "fail":
            break
    assert res.status == "fail" and res.failure_class == "mismatch"
    assert res.case.dims["N"] > 1024                     # needs a long axis to show


def test_cancellation_on_large_mean_inputs(tmp_path, in_process):
    res = _explore(planted.naive_variance, tmp_path, in_process)
    assert res.status == "fail" and res.failure_class in ("mismatch", "degenerate")
    if device.is_interpreter():
        # (on GPU, FMA contraction makes the naive formula inexact even for zero-mean values)
        assert res.case.tensors["x"].values == "large_offset"
    assert res.case.dims["N"] <= 16


def test_overflow_on_large_magnitudes(tmp_path, in_process):
    res = _explore(planted.naive_softmax, tmp_path, in_process)
    assert res.status == "fail" and res.failure_class == "nonfinite"
    assert res.case.tensors["x"].values in ("large_offset", "large", "near_max")
    assert res.case.dims["M"] == 1 and res.case.dims["N"] <= 2


def test_contiguity_assumed(tmp_path, in_process):
    res = _explore(planted.contiguous_assumed_row_sum, tmp_path, in_process)
    assert res.status == "fail" and res.failure_class == "mismatch"
    assert res.case.tensors["x"].layout in ("transposed", "strided")
    assert res.case.dims["M"] == 2 or res.case.dims["N"] <= 2


def test_nan_dropped_is_an_edge_finding_that_fails_only_when_strict(tmp_path, in_process):
    """NaN dropped where eager propagates it: a real divergence, seen only with non-finite inputs."""
    res = _explore(planted.nan_dropping_sum, tmp_path, in_process)
    (found,) = res.findings
    assert res.status == "pass" and (found.tier, found.failure_class) == ("edge", "nonfinite")
    assert found.case.tensors["x"].nonfinite and found.case.dims["N"] == 1 and os.path.isdir(found.dump)
    assert found.finding_line().startswith("warn  ") and found.dump in res.line()
    strict = _explore(planted.nan_dropping_sum, tmp_path, in_process, strict=True)
    assert strict.status == "fail" and (strict.tier, strict.failure_class) == ("edge", "nonfinite")


@pytest.mark.parametrize("subj", [planted.correct_sum, planted.correct_sumsq_norm], ids=lambda s: s.name)
def test_correct_kernels_pass_in_every_float_dtype_and_past_millions(subj, tmp_path, in_process):
    seen = set()
    big = []
    for seed in (1234, 2, 7):                 # until an example past 2^20 was drawn (any seed must pass)
        res = _explore(subj, tmp_path, in_process, max_examples=40, seed=seed,
                       on_example=lambda case, v: (seen.add(case.tensors["x"].dtype),
                                                   big.append(case.dims["N"] > 1 << 20)))
        assert res.status == "pass", res.message
        if any(big) and len(seen) == 3:
            break
    assert seen == {"float32", "float16", "bfloat16"}
    assert any(big), "no example past 2^20 elements was drawn"


@pytest.mark.slow  # over 30 s on 2 cores: nightly tier
def test_online_softmax_nan_on_a_masked_first_tile_is_wrong_and_its_guarded_twin_passes(tmp_path, in_process):
    """A row whose first 64-wide tile is all -inf (left padding): declared as attention scores
    (``values=("normal", "masked")``), the NaN is a `wrong` finding, not an edge one."""
    res = _explore(planted.online_softmax_masked_first_tile, tmp_path / "bug", in_process)
    assert (res.status, res.tier, res.failure_class) == ("fail", "wrong", "nonfinite")
    assert res.case.tensors["x"].values == "masked" and res.case.dims["N"] > 64
    ok = _explore(planted.online_softmax_guarded, tmp_path / "ok", in_process)
    assert ok.status == "pass" and ok.coverage["values"].get("masked", 0) > 0, ok.line()
