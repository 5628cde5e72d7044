"""harness.runner's references: the float64 truth's spread under one-ulp input moves (the oracle's floor for
eager's error at ill-conditioned elements)."""
import torch

from harness import subject, tensor
from harness.case import Case, TensorCase
from harness.runner import _spread, _upcast, build_inputs


def _case(name, shape, dtype="float32", values="normal", layout="contiguous"):
    return Case({"N": shape[-1]}, {name: TensorCase(tuple(shape), dtype, layout, 0, values, 7, "")}, {})


def _spread_of(subj, case):
    up = _upcast(build_inputs(subj, case, guard=False))
    truth = subj.reference(**up)
    return _spread(subj, case, up, truth)[0]


def test_a_cancelling_sum_has_a_large_spread_a_benign_one_a_small_one():
    @subject(reference=lambda x: x.sum() - 1000.0 * x.numel(), inputs={"x": tensor(("N",))}, dims={"N": (1, 5000)})
    def cancelling(x):                              # inputs ~1000 + N(0, 1): the offset cancels
        return x

    @subject(reference=lambda x: (x * x).sum(), inputs={"x": tensor(("N",))}, dims={"N": (1, 5000)})
    def benign(x):
        return x

    def relative(subj, values):
        case = _case("x", (4096,), values=values)
        truth = float(subj.reference(**_upcast(build_inputs(subj, case, guard=False))))
        return float(_spread_of(subj, case)) / abs(truth)

    assert relative(benign, "normal") <= 2.0 ** -23             # a sum of squares: at most one ulp
    assert relative(cancelling, "large_offset") > 50 * 2.0 ** -23    # the offset's ulps land in the result


def test_a_step_at_an_exact_input_has_no_spread_and_equal_values_stay_equal():
    @subject(reference=lambda x: torch.floor(x), inputs={"x": tensor(("N",))}, dims={"N": (1, 5000)})
    def floors(x):
        return x

    assert torch.equal(_spread_of(floors, _case("x", (257,), values="integer")), torch.zeros(257, dtype=torch.float64))

    @subject(reference=lambda x: x - x.mean(-1, keepdim=True), inputs={"x": tensor(("M", "N"))}, dims={"M": (1, 8), "N": (1, 64)})
    def centred(x):
        return x

    case = Case({"M": 5, "N": 33}, {"x": TensorCase((5, 33), "float32", "expanded", 1, "large_offset", 3, "")}, {})
    assert float(_spread_of(centred, case).abs().max()) == 0.0   # constant rows: every element moved alike


def test_half_precision_inputs_move_by_a_float32_ulp_not_their_own():
    @subject(reference=lambda x: x * 1.0, inputs={"x": tensor(("N",), dtypes=("float16",))}, dims={"N": (1, 64)})
    def ident(x):
        return x

    case = _case("x", (64,), dtype="float16", values="uniform_pos")
    up = _upcast(build_inputs(ident, case, guard=False))
    spread = _spread(ident, case, up, ident.reference(**up))[0]
    ratio = spread / up["x"].abs()
    assert torch.allclose(ratio, torch.full_like(ratio, 2.0 ** -23))
