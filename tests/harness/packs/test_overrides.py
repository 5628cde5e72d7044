"""harness.packs.overrides: a library that overrides ATen ops becomes one subject per op, drawn from OpInfo
samples; a planted wrong override is found, a correct one passes (a stand-in library on the CPU)."""
import contextlib

import pytest
import torch

from tritondiff.harness.explore import explore
from tritondiff.harness.packs import overrides


def _library(bug: bool):
    """A stand-in for flag-gems: ``enabled(op)`` registers a CPU kernel for aten::sigmoid (planted: the sign
    of the exponent flipped) and aten::exp (correct), unregistered on exit."""
    @contextlib.contextmanager
    def enabled(op):
        lib = torch.library.Library("aten", "IMPL")
        try:
            if op == "sigmoid":
                def sigmoid(x):
                    with torch._C._AutoDispatchBelowAutograd():
                        e = torch.ops.aten.exp.default(x if bug else torch.ops.aten.neg.default(x))
                        return torch.ops.aten.reciprocal.default(torch.ops.aten.add.Scalar(e, 1))
                lib.impl("sigmoid", sigmoid, "CPU")
            elif op == "exp":
                def exp(x):
                    with torch._C._AutoDispatchBelowAutograd():
                        return torch.ops.aten.pow.Scalar(torch.e, x)
                lib.impl("exp", exp, "CPU")
            yield
        finally:
            lib._destroy()
    return enabled


@pytest.mark.parametrize("bug", [True, False])
def test_a_wrong_override_is_found_and_a_correct_one_passes(tmp_path, in_process, bug):
    made = overrides.declare(f"overrides_test{int(bug)}", ["sigmoid", "exp", "no_such_op"], _library(bug),
                             __name__, "cpu")
    assert sorted(made) == [f"overrides_test{int(bug)}.exp", f"overrides_test{int(bug)}.sigmoid"]
    sig = explore(made[f"overrides_test{int(bug)}.sigmoid"], budget_s=120, max_examples=40, seed=1,
                  out_dir=str(tmp_path), executor=in_process)
    assert sig.status == ("fail" if bug else "pass"), sig.message
    exp = explore(made[f"overrides_test{int(bug)}.exp"], budget_s=120, max_examples=40, seed=1,
                  out_dir=str(tmp_path), executor=in_process)
    assert exp.status == "pass", exp.message


def test_samples_are_widened_without_changing_values():
    t = torch.randn(3, 5)
    for layout in overrides.LAYOUTS:
        moved = overrides._relayout(t, layout)
        assert torch.equal(moved, t)
        assert moved.is_contiguous() == (layout == "as drawn")


def test_integer_only_ops_draw_integer_dtypes_and_random_ops_are_left_out(tmp_path, in_process):
    """An op with no floating dtype (bitwise_not) is drawn in its integer dtypes instead of having no input
    space (a harness error for every bitwise op of a pack); a random op (randn) has no reference and no
    subject."""
    made = overrides.declare("overrides_ints", ["bitwise_not", "randn"], lambda op: contextlib.nullcontext(),
                             __name__, "cpu")
    assert sorted(made) == ["overrides_ints.bitwise_not"]
    res = explore(made["overrides_ints.bitwise_not"], budget_s=60, max_examples=15, seed=2, out_dir=str(tmp_path),
                  executor=in_process)
    assert res.status == "pass" and res.examples >= 10 and res.skipped == 0, res.line()
