"""harness.runner's references: the inputs the reference runs on, and the float64 truth's spread under one-ulp
input moves (the oracle's floor for eager's error at ill-conditioned elements)."""
import torch
import triton
import triton.language as tl

from tritondiff.harness import subject, tensor
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.oracle import compare
from tritondiff.harness.runner import _noise, _spread, _upcast, build_inputs, reference_inputs, run_case


def _case(name, shape, dtype="float32", values="normal", layout="contiguous"):
    return Case({"N": shape[-1]}, {name: TensorCase(tuple(shape), dtype, layout, 0, values, 7, "")}, {})


def _spread_of(subj, case):
    up = _upcast(build_inputs(subj, case, guard=False))
    truth = subj.reference(**up)
    return _spread(subj, case, up, truth)[0]


def test_the_reference_sees_the_candidates_values_and_strides_at_an_aligned_data_pointer():
    @subject(reference=lambda x: x, inputs={"x": tensor(("M", "N"))}, dims={"M": (1, 8), "N": (1, 8)})
    def ident(x):
        return x

    for layout in ("offset", "strided", "transposed", "expanded"):
        case = Case({"M": 5, "N": 7}, {"x": TensorCase((5, 7), "float32", layout, 3, "normal", 7, "")}, {})
        candidate, reference = build_inputs(ident, case)["x"], reference_inputs(ident, case)["x"]
        assert torch.equal(candidate, reference) and candidate.stride() == reference.stride(), layout
        assert reference.storage_offset() == 0, layout
        if layout == "offset":
            assert candidate.storage_offset() > 256        # the candidate keeps its guards and its odd offset


def test_under_memcheck_an_input_ends_where_its_allocation_ends():
    from tritondiff.harness.config import config

    @subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": (1, 64)})
    def ident(x):
        return x

    case = _case("x", (37,))
    guarded = build_inputs(ident, case)["x"]
    assert guarded.untyped_storage().nbytes() > 37 * 4                 # canary guards around it
    with config.patch(under_memcheck=True):
        bare = build_inputs(ident, case)["x"]
    assert bare.untyped_storage().nbytes() == 37 * 4 and torch.equal(bare, guarded)


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
    ratio = spread / up["x"].abs().cpu()
    assert torch.allclose(ratio, torch.full_like(ratio, 2.0 ** -23))


def test_a_sum_over_steps_gets_no_spread_so_a_dropped_tail_still_fails():
    @subject(reference=lambda x: torch.floor(x * 0.5).sum(-1), inputs={"x": tensor(("M", "N"))},
             dims={"M": (1, 8), "N": (1, 2048)})
    def floor_sums(x):
        return x

    case = Case({"M": 4, "N": 1024}, {"x": TensorCase((4, 1024), "float32", "contiguous", 0, "integer", 5, "")}, {})
    assert float(_spread_of(floor_sums, case).abs().max()) == 0.0     # steps both ways: not a conditioning


def test_the_move_direction_is_random_for_half_precision_and_integer_values():
    from tritondiff.harness.runner import _value_signs
    g = torch.Generator().manual_seed(0)
    for values in (torch.randn(4096, generator=g).to(torch.bfloat16).double(),
                   torch.randn(4096, generator=g).to(torch.float16).double(),
                   torch.randint(-100, 100, (4096,), generator=g).double()):
        signs = _value_signs(values)
        assert 0.4 < float((signs > 0).double().mean()) < 0.6
        assert torch.equal(_value_signs(-values), signs)              # x and -x move alike


def test_an_integer_output_at_a_rounding_boundary_may_round_either_way_elsewhere_not():
    @subject(reference=lambda x: torch.round(x * 10).to(torch.int32), inputs={"x": tensor(("N",))},
             dims={"N": (1, 4)})
    def quantize(x):
        return torch.round(x * 10).to(torch.int32)

    case = _case("x", (3,))
    up = {"x": torch.tensor([0.25, 0.31, 0.3], dtype=torch.float64)}   # 2.5: a tie; 3.1: nowhere near one
    truth = quantize.reference(**up)
    noise = _noise(quantize, case, up, truth)
    (bounds,) = noise.discrete
    assert bounds.low.tolist() == [2, 3, 3] and bounds.high.tolist() == [3, 3, 3]
    judge = lambda c: compare(torch.tensor(c, dtype=torch.int32), truth, truth, noise=noise)  # noqa: E731
    assert judge([3, 3, 3]).passed                  # a kernel whose product rounds one ulp up at the tie
    assert not judge([4, 3, 3]).passed and not judge([2, 4, 3]).passed and not judge([2, 3, 2]).passed


def test_a_reference_that_mutates_its_input_does_not_widen_the_spread(tmp_path):
    from tritondiff.harness.runner import run_case

    def bump(x):
        return x.add_(1.0)                                            # mutates its (fresh) input

    @subject(reference=bump, inputs={"x": tensor(("N",))}, dims={"N": (1, 64)}, disable=("isolation",))
    def off_by_half(x):
        return x + 1.5                                                # wrong by 0.5 everywhere

    case = _case("x", (64,))
    verdict = run_case(off_by_half, case)
    assert verdict.status == "fail" and verdict.failure_class == "mismatch"


def test_a_spread_that_runs_out_of_memory_is_left_out_not_a_harness_error(monkeypatch):
    """Huge mode: the moved copies of a 2^31-element input may not fit on the GPU; the mismatch stands."""
    from tritondiff.harness import runner

    def no_memory(x):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")

    @subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",))}, dims={"N": (1, 64)}, disable=("isolation",))
    def off(x):
        return x * 2 + 0.5

    case = _case("x", (64,))
    monkeypatch.setattr(runner, "_value_signs", no_memory)
    up = _upcast(build_inputs(off, case, guard=False))
    assert _spread(off, case, up, off.reference(**up)) is None
    verdict = runner.run_case(off, case)
    assert verdict.status == "fail" and verdict.failure_class == "mismatch"


def test_the_oracle_counts_the_allowances_a_pass_needed():
    """runner._oracle counts a pass on the spread or the tail allowance (the example's ``allowance`` in
    harness.coverage); a plain pass and a failure count neither."""
    from tritondiff.harness.counters import counters
    from tritondiff.harness.runner import Reference, _oracle
    from tests.harness.test_oracle import _heavy_tailed

    @subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": (1, 5000)})
    def ident(x):
        return x

    def counted(out, ref):
        before = counters.snapshot()
        passed = _oracle(ident, out, ref).passed
        delta = counters.delta(before)
        return passed, delta.get("harness.passed_on_spread", 0), delta.get("harness.passed_on_tail", 0)

    truth = torch.tensor([0.25, 0.5, 1e-3], dtype=torch.float64)   # the last element is ill-conditioned
    spread = torch.tensor([0.0, 0.0, 3e-4], dtype=torch.float64)
    cand = truth.float().clone()
    assert counted(cand, Reference(truth.float(), truth, lambda: spread)) == (True, 0, 0)
    cand[2] += 4e-4
    assert counted(cand, Reference(truth.float(), truth, lambda: spread)) == (True, 1, 0)
    assert counted(cand, Reference(truth.float(), truth, lambda: None)) == (False, 0, 0)

    wide = torch.randn(64, 128, generator=torch.Generator().manual_seed(9), dtype=torch.float64) + 3
    eager = (wide + _heavy_tailed(1, outliers=20)).float()
    assert counted((wide + _heavy_tailed(2, outliers=5)).float(), Reference(eager, wide)) == (True, 0, 1)
    assert counted((wide + 50 * _heavy_tailed(2, outliers=5)).float(), Reference(eager, wide)) == (False, 0, 0)


# ---------------------------------------------------------------------------------------------- launch limits


@triton.jit
def _copy_rows(x_ptr, y_ptr, N, ROW_AXIS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(ROW_AXIS)
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + row * N + offs, tl.load(x_ptr + row * N + offs, mask=offs < N), mask=offs < N)


def _rows_subject(programs, axis):
    """A row copy whose launch asks for ``programs`` programs along grid ``axis`` (a stand-in for one
    program per row of an input with that many rows: the limit is checked before the kernel runs)."""
    @subject(name=f"launch_limit_axis{axis}", reference=lambda x: x.clone(), inputs={"x": tensor(("M", "N"))},
             dims={"M": (1, 4), "N": (1, 4)})
    def copy_rows(x):
        y = torch.empty_like(x)
        grid = [1, 1, 1]
        grid[axis] = programs
        _copy_rows[tuple(grid)](x, y, x.shape[1], ROW_AXIS=axis, BLOCK=4)
        return y
    return copy_rows


def test_a_launch_past_cuda_s_grid_limits_at_ordinary_sizes_is_a_finding():
    """At ordinary sizes a launch CUDA refuses fails where eager works: past 2^31 - 1 programs along axis 0
    (a wrong grid, n * BLOCK for cdiv(n, BLOCK)) or past 65,535 along axis 1 (a grid over rows)."""
    case = Case({"M": 3, "N": 4}, {"x": TensorCase((3, 4), "float32", "contiguous", 0, "normal", 7, "")}, {})
    for programs, axis in ((2 ** 31, 0), (65_536, 1)):
        refused = run_case(_rows_subject(programs, axis), case)
        assert refused.status == "fail" and refused.failure_class == "exception", refused
        assert f"{programs:,} programs along axis {axis}" in refused.message
    within = run_case(_rows_subject(3, 0), case)
    assert within.status == "pass", within.message


def test_a_huge_example_past_grid_axis_0_with_a_program_per_row_is_skipped():
    """One program per row of an input past 2^31 rows is more than grid axis 0 takes: the kernel's launch does
    not reach that shape, which is not a wrong answer -- skipped.  More programs than the input has elements is
    a wrong grid, and the compiler's own refusal (raised from None) is the compiler's bug: findings."""
    from tritondiff.base.exc import GridLimitExceeded
    from tritondiff.harness.runner import _beyond

    rows = 2 ** 31 + 4097
    huge = Case({"M": rows, "N": 1}, {"x": TensorCase((rows, 1), "float32", "contiguous", 0, "normal", 7, "")}, {})
    per_row = GridLimitExceeded("rows", (rows,), 0, 2 ** 31 - 1)
    assert "programs along axis 0" in _beyond(per_row, huge)
    assert _beyond(GridLimitExceeded("rows", (rows * 1024,), 0, 2 ** 31 - 1), huge) is None
    try:
        try:
            raise per_row
        except GridLimitExceeded:
            raise RuntimeError("GridTooLarge: the compiler planned a grid CUDA refuses") from None
    except RuntimeError as e:
        refused = e
    assert _beyond(refused, huge) is None
    try:
        raise RuntimeError("launch failed") from per_row
    except RuntimeError as e:
        assert _beyond(e, huge) is not None                      # an explicit cause is followed


def test_out_of_memory_is_the_plan_s_miss_at_a_huge_example_and_a_finding_below():
    """Huge examples fill most of the GPU beside the harness's float64 copies: a candidate that then runs out
    of memory says the plan missed, not that the kernel is wrong.  At ordinary sizes it is a finding."""
    from tritondiff.harness.runner import _beyond

    def case(n):
        return Case({"N": n}, {"x": TensorCase((n,), "float32", "contiguous", 0, "normal", 7, "")}, {})

    try:
        raise RuntimeError("kernel failed") from torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8 GiB")
    except RuntimeError as e:
        wrapped = e
    assert "out of GPU memory" in _beyond(wrapped, case(2 ** 31 + 4097))
    assert _beyond(wrapped, case(4097)) is None
    assert _beyond(RuntimeError("index out of range"), case(2 ** 31 + 4097)) is None
