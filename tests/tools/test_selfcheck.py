"""tools.selfcheck: one row per workload, compiled against eager and the float64 truth; a compiled result
that is wrong is a FAIL row, a forced persistent reduction past the block limit is refused as designed."""
from unittest import mock

import torch

from tests.compiler.conftest import fresh_compiler  # noqa: F401  (autouse: fresh dynamo caches, counters)
from tools import selfcheck


def _row_sums(x):
    return x.sum(-1)


def test_a_right_compiled_result_is_an_ok_row():
    row = selfcheck.run_case("row sums", _row_sums, [torch.randn(9, 41)], {})
    assert row["status"] == "ok" and row["kernels"] >= 1, row


def test_a_wrong_compiled_result_is_a_fail_row():
    real = selfcheck.compile_fresh

    def off_by_one(fn, **kwargs):
        compiled = real(fn, **kwargs)
        return lambda *args: compiled(*args) + 1.0
    with mock.patch.object(selfcheck, "compile_fresh", off_by_one):
        row = selfcheck.run_case("row sums", _row_sums, [torch.randn(9, 41)], {})
    assert row["status"] == "FAIL" and row["message"], row


def test_a_forced_persistent_reduction_past_the_limit_is_refused_as_designed():
    knobs = {"reduction_strategy": "persistent", "max_triton_tensor_numel": 64}
    row = selfcheck.run_case("long rows", _row_sums, [torch.randn(2, 1000)], knobs)
    assert row["status"] == "ok" and row["message"].startswith("refused as designed: ReductionTooLarge"), row
