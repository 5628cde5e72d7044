"""The oracle: fp64-arbitrated tolerance, non-finite patterns, degenerate candidates, locations."""
import math

import pytest
import torch

from tritondiff.harness.oracle import compare, locate, ulp_distance


def _ref(fn, *xs):
    return fn(*xs), fn(*(x.double() for x in xs))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_correct_rounding_passes(dtype):
    x = torch.randn(4231, generator=torch.Generator().manual_seed(0)).to(dtype)
    eager, truth = _ref(torch.exp, x)
    cand = torch.exp(x.float()).to(dtype)          # a different but correct computation
    assert compare(cand, eager, truth).passed


def test_one_ulp_off_in_every_element_of_fp32_passes_but_far_off_fails():
    x = torch.rand(1000, dtype=torch.float32) + 0.5
    eager, truth = _ref(torch.sqrt, x)
    assert compare(torch.nextafter(eager, torch.full_like(eager, 10)), eager, truth).passed
    bad = eager.clone()
    bad[-3:] *= 1.001
    res = compare(bad, eager, truth)
    assert not res.passed and res.failure_class == "mismatch"
    assert res.outputs[0].mismatches == 3
    assert res.outputs[0].location == "tail"


def test_multiplier_scales_with_eagers_own_error():
    # where eager itself is off by 0.01 against fp64, a candidate within 3x that passes, 5x fails
    truth = torch.linspace(1, 2, 100, dtype=torch.float64)
    eager = (truth + 0.01).float()
    assert compare((truth + 0.02).float(), eager, truth).passed
    res = compare((truth + 0.05).float(), eager, truth)
    assert not res.passed and res.outputs[0].mismatches == 100 and res.outputs[0].location == "all"


def test_nonfinite_positions_must_match():
    x = torch.tensor([1.0, float("nan"), 3.0])
    eager, truth = _ref(lambda t: t * 2, x)
    dropped = torch.tensor([2.0, 0.0, 6.0])       # NaN replaced by a number
    res = compare(dropped, eager, truth)
    assert not res.passed and res.failure_class == "nonfinite"
    assert res.outputs[0].first_indices == [(1,)]
    assert compare(eager.clone(), eager, truth).passed


def test_inf_that_eager_also_produces_is_accepted():
    # eager overflows in fp16 where fp64 would not: a candidate that matches eager is not blamed
    x = torch.tensor([300.0, 2.0], dtype=torch.float16)
    eager = (x * x) / 300            # x*x overflows fp16 for 300 -> inf
    truth = (x.double() * x.double()) / 300
    assert torch.isinf(eager[0])
    assert compare(eager.clone(), eager, truth).passed


def test_nan_or_the_wrong_infinity_where_the_truth_is_infinite_is_a_nonfinite_failure():
    """A sum that read the wrong elements returned NaN where eager and the truth were -inf: that is a
    divergence, as is +inf for -inf; only the same kind passes."""
    x = torch.tensor([[1.0, float("-inf"), 2.0], [3.0, 4.0, 5.0]])
    eager, truth = _ref(lambda t: t.sum(1), x)
    assert torch.isinf(eager[0]) and eager[0] < 0
    for wrong in (float("nan"), float("inf")):
        res = compare(torch.tensor([wrong, 12.0]), eager, truth)
        assert not res.passed and res.failure_class == "nonfinite" and res.outputs[0].first_indices == [(0,)]
    assert compare(eager.clone(), eager, truth).passed


def test_any_overflow_is_excused_where_eager_overflows_a_finite_truth():
    """Near the dtype's max another order of the same sums overflows differently (NaN from +inf + -inf
    partials where eager's order gave +inf): with a finite truth that eager missed too, not the candidate's bug."""
    big = torch.finfo(torch.float32).max
    x = torch.tensor([big, big, -big, -big])
    eager, truth = _ref(lambda t: t.sum(0, keepdim=True), x)
    assert torch.isinf(eager).all() and torch.isfinite(truth).all()
    assert compare(torch.tensor([float("nan")]), eager, truth).passed


def test_an_overflowing_kind_is_excused_where_eager_shows_it_is_the_orders_and_not_where_eager_agrees():
    """A float64 truth of 3.6e38 rounds to +inf in float32.  Eager's order of the near-max products gave NaN,
    a GPU's sequential order -inf: the kind depends on the order, so -inf passes.  Where eager gave +inf
    (its order agrees with the rounded truth), a -inf is a sign error."""
    truth = torch.tensor([3.58e38, 5.0], dtype=torch.float64)
    candidate = torch.tensor([float("-inf"), 5.0])
    assert compare(candidate, torch.tensor([float("nan"), 5.0]), truth).passed
    res = compare(candidate, torch.tensor([float("inf"), 5.0]), truth)
    assert not res.passed and res.failure_class == "nonfinite"


def test_rounding_across_the_overflow_threshold_is_not_a_nonfinite_mismatch():
    """fp16 overflows past 65520 (65504 plus half its ulp).  A truth of 65520.9 rounds to inf, as eager did; a
    candidate that computed 65519 stores 65504, 2.6e-4 off -- the compiler's layer-norm dx."""
    truth = torch.tensor([65520.9, 1000.0, 65519.0], dtype=torch.float64)
    eager = torch.tensor([float("inf"), 1000.0, 65504.0], dtype=torch.float16)
    assert compare(torch.tensor([65504.0, 1000.0, 65504.0], dtype=torch.float16), eager, truth).passed
    assert compare(torch.tensor([65504.0, 1000.0, float("inf")], dtype=torch.float16), eager, truth).passed
    res = compare(torch.tensor([65504.0, 1000.0, float("-inf")], dtype=torch.float16), eager, truth)
    assert not res.passed and res.failure_class == "nonfinite"                  # the wrong sign is no rounding
    far = torch.tensor([1e6, 1000.0, 30000.0], dtype=torch.float64)              # far past / below the threshold
    far_eager = torch.tensor([float("inf"), 1000.0, 30000.0], dtype=torch.float16)
    res = compare(torch.tensor([65504.0, 1000.0, 30000.0], dtype=torch.float16), far_eager, far)
    assert not res.passed and res.failure_class == "nonfinite"
    res = compare(torch.tensor([float("inf"), 1000.0, float("inf")], dtype=torch.float16), far_eager, far)
    assert not res.passed and res.failure_class == "nonfinite" and res.outputs[0].first_indices == [(2,)]
    for dtype in (torch.bfloat16, torch.float32):                                # the threshold of each dtype
        info = torch.finfo(dtype)
        edge = info.max + 2.0 ** math.floor(math.log2(info.max)) * info.eps / 2
        t = torch.tensor([edge * (1 + 1e-6), 1.0], dtype=torch.float64)
        e = torch.tensor([float("inf"), 1.0], dtype=dtype)
        assert torch.isinf(t.to(dtype)[0]) and not torch.isinf(torch.tensor(edge * (1 - 1e-6)).to(dtype))
        assert compare(torch.tensor([info.max, 1.0], dtype=dtype), e, t).passed


def test_degenerate_all_zero_candidate_never_passes_on_tiny_values():
    x = torch.full((64,), 1e-30, dtype=torch.float32)
    eager, truth = _ref(lambda t: t * 3, x)
    res = compare(torch.zeros_like(eager), eager, truth)
    assert not res.passed and res.failure_class in ("mismatch", "degenerate")


def test_shape_and_dtype_must_match():
    e = torch.zeros(3)
    assert compare(torch.zeros(1, 3), e, e.double()).failure_class == "shape"
    assert compare(torch.zeros(3, dtype=torch.float16), e, e.double()).failure_class == "dtype"
    assert compare((e, e), (e,), (e.double(),)).failure_class == "structure"


def test_integer_outputs_are_exact():
    e = torch.tensor([1, 2, 3])
    assert compare(e.clone(), e, e).passed
    res = compare(torch.tensor([1, 2, 4]), e, e)
    assert not res.passed and res.failure_class == "mismatch"


def test_an_integer_at_a_rounding_boundary_may_take_any_value_the_rounding_noise_reaches():
    from tritondiff.harness.rounding import Bounds, Noise

    e = torch.tensor([1, 2, 3], dtype=torch.int8)
    reached = Noise([None], [None], [Bounds.of(e).widen(torch.tensor([1, 3, 3]))])
    assert compare(torch.tensor([1, 3, 3], dtype=torch.int8), e, e, noise=reached).passed   # element 1 flips
    for wrong in ([1, 4, 3], [2, 2, 3], [1, 2, 2]):      # past the reached values, or where nothing flips
        assert compare(torch.tensor(wrong, dtype=torch.int8), e, e, noise=reached).failure_class == "mismatch"
    flags = torch.tensor([True, False])
    either = Noise([None], [None], [Bounds.of(flags).widen(torch.tensor([True, True]))])
    assert compare(torch.tensor([True, True]), flags, flags, noise=either).passed
    assert not compare(torch.tensor([False, False]), flags, flags, noise=either).passed


def test_an_integer_the_float64_path_computes_is_right_whatever_eager_says():
    eager, truth = torch.tensor([1, 2, 3]), torch.tensor([1, 3, 3])
    assert compare(torch.tensor([1, 3, 3]), eager, truth).passed
    assert not compare(torch.tensor([1, 4, 3]), eager, truth).passed


def test_tuples_compared_elementwise_and_first_failure_reported():
    a, b = torch.ones(4), torch.arange(4.0)
    res = compare((a, b + 1), (a, b), (a.double(), b.double()))
    assert not res.passed and res.location.startswith("out1:")


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_a_float8_output_is_judged_on_its_own_rounding(fp8):
    """Quantised outputs (an absmax-scaled cast): the truth rounded to float8 passes, a scale off by a factor of
    two fails (the allowance is counted in the format's own ulps, as float16's is: a few of e4m3's 12.5% steps);
    distances in float8 ulps count its 8-bit patterns."""
    x = torch.randn(3001, generator=torch.Generator().manual_seed(2)) * 3
    eager, truth = _ref(lambda t: (t * 16).to(fp8), x)
    assert compare((x.double() * 16).to(fp8), eager, truth).passed
    res = compare((x * 32).to(fp8), eager, truth)
    assert not res.passed and res.failure_class == "mismatch"
    one = torch.tensor([1.0]).to(fp8)
    assert int(ulp_distance(one, torch.tensor([1.0 + torch.finfo(fp8).eps]).to(fp8))) == 1


def test_ulp_distance():
    one = torch.tensor([1.0], dtype=torch.float32)
    nxt = torch.nextafter(one, torch.tensor([2.0]))
    assert int(ulp_distance(nxt, one)) == 1
    assert int(ulp_distance(torch.tensor([-0.0]), torch.tensor([0.0]))) == 0
    h = torch.tensor([1.0], dtype=torch.float16)
    assert int(ulp_distance(h, torch.nextafter(h, torch.tensor([0.0], dtype=torch.float16)))) == 1


def test_locate_descriptions():
    w = torch.zeros(3_000_000, dtype=torch.bool)
    w[1_048_576:] = True
    assert locate(w)[0] == "beyond_2^20"
    w = torch.zeros(1000, dtype=torch.bool)
    w[992:] = True
    kind, where = locate(w)
    assert kind == "tail" and "tail block" in where
    m = torch.zeros(64, 32, dtype=torch.bool)
    m[5, 3:9] = True
    assert locate(m)[0] == "rows"
    assert locate(torch.ones((), dtype=torch.bool))[0] == "scalar"
    assert math.isfinite(1.0)


def test_complex_outputs_are_judged_as_real_and_imaginary_parts():
    z = torch.randn(341, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    eager, truth = torch.exp(z), torch.exp(z.to(torch.complex128))
    assert compare(torch.exp(z), eager, truth).passed
    assert compare(eager.conj().conj(), eager, truth).passed          # a lazy conj view judges by value
    bad = eager.clone()
    bad[7] = complex(bad[7].real, bad[7].imag + 0.5)
    res = compare(bad, eager, truth)
    assert not res.passed and res.failure_class == "mismatch"
    assert res.outputs[0].first_indices[0] == (7, 1)                 # element 7, imaginary part
    res = compare(eager.conj(), eager, truth)                         # the wrong sign on imag parts
    assert not res.passed


def test_eager_lucky_exact_elements_do_not_fail_an_equally_accurate_candidate():
    # eager is exact at every other element and off by ~1e-4 elsewhere; the candidate is off by ~3e-5
    # everywhere: as accurate as eager overall (row RMS), so it passes -- judging element by element
    # against eager's own error would fail it on eager's luck.
    g = torch.Generator().manual_seed(3)
    truth = torch.randn(16, 512, generator=g, dtype=torch.float64)
    noise = torch.randn(16, 512, generator=g, dtype=torch.float64)
    eager_err = 1e-4 * noise
    eager_err[:, ::2] = 0
    eager = (truth + eager_err).float()
    cand = (truth + 3e-5 * torch.randn(16, 512, generator=g, dtype=torch.float64)).float()
    assert compare(cand, eager, truth).passed


def test_a_wrong_block_above_eagers_error_level_still_fails_in_its_row():
    g = torch.Generator().manual_seed(4)
    truth = torch.randn(16, 512, generator=g, dtype=torch.float64)
    eager = (truth + 1e-4 * torch.randn(16, 512, generator=g, dtype=torch.float64)).float()
    cand = eager.clone()
    cand[5, -64:] += 2e-3                         # 20x eager's error level, one row's tail
    res = compare(cand, eager, truth)
    assert not res.passed and res.failure_class == "mismatch"
    assert res.outputs[0].mismatches == 64 and all(i[0] == 5 for i in res.outputs[0].first_indices)
    # a quiet row keeps its own (small) error level: the same shift in a row where eager is exact fails too
    eager[7] = truth[7].float()
    cand = eager.clone()
    cand[7, :8] += 1e-4
    assert not compare(cand, eager, truth).passed


def test_short_rows_take_eagers_error_level_from_their_neighbours():
    """Rows of 9 whose error is one shared rounded sum per row (layer-norm dx with dy at a large offset, a GPU
    campaign finding): eager got lucky on every other row, the candidate is off by the same amount on every
    row.  Judged row by row it would fail on eager's luck; over groups of rows (MIN_RMS_ELEMENTS) it passes.
    A wrong element, far above that level, still fails."""
    from tritondiff.harness.oracle import MIN_RMS_ELEMENTS
    g = torch.Generator().manual_seed(5)
    truth = 300 * torch.randn(733, 9, generator=g, dtype=torch.float64)
    luck = torch.randn(733, 1, generator=g, dtype=torch.float64).sign() * 0.04
    luck[::2] = 0                                     # eager exact on even rows
    eager = (truth + luck).float()
    cand = (truth + 0.04 * torch.randn(733, 1, generator=g, dtype=torch.float64).sign()).float()
    assert MIN_RMS_ELEMENTS > 9 and compare(cand, eager, truth).passed
    cand[100, 3] += 1.0                               # 25x the level: still caught, at its element
    res = compare(cand, eager, truth)
    assert not res.passed and res.outputs[0].mismatches == 1 and res.outputs[0].first_indices[0] == (100, 3)


def test_spread_is_a_floor_for_eagers_error_at_ill_conditioned_elements():
    # one element is a cancelling sum: any summation order errs by ~its spread; eager happened to be exact
    truth = torch.tensor([0.25, 0.5, 1e-3], dtype=torch.float64)
    eager = truth.float()
    cand = eager.clone()
    cand[2] += 4e-4
    assert not compare(cand, eager, truth).passed
    spread = torch.tensor([0.0, 0.0, 3e-4], dtype=torch.float64)
    assert compare(cand, eager, truth, spread=spread).passed
    cand[0] += 4e-4                                   # the well-conditioned elements keep their tight bound
    assert not compare(cand, eager, truth, spread=spread).passed


def _heavy_tailed(seed, outliers, sigma=1e-4, shape=(64, 128), at=6):
    """float64 errors: normal at ``sigma`` plus ``outliers`` elements at ``at`` sigma, at random places."""
    g = torch.Generator().manual_seed(seed)
    err = sigma * torch.randn(shape, generator=g, dtype=torch.float64)
    where = torch.randperm(err.numel(), generator=g)[:outliers]
    err.view(-1)[where] = at * sigma
    return err


def test_an_equally_accurate_candidate_with_its_own_heavy_tail_passes():
    """Layer-norm dx with dy at a large offset: eager and the compiled code err
    alike overall, each with a few elements 4-9x past their row's RMS -- at different elements.  Judged element
    by element against 3x eager's local level, 14 of 30 seeded GPU cases failed; the tail allowance passes them."""
    from tritondiff.harness.oracle import TAIL_MIN_ELEMENTS
    truth = torch.randn(64, 128, generator=torch.Generator().manual_seed(9), dtype=torch.float64) + 3
    eager = truth + _heavy_tailed(1, outliers=20)
    cand = truth + _heavy_tailed(2, outliers=5)
    assert truth.numel() >= TAIL_MIN_ELEMENTS
    res = compare(cand.float(), eager.float(), truth)
    assert res.passed, res.message
    assert res.outputs[0].tail_excused >= 1           # judged element by element it fails


@pytest.mark.parametrize("change", ["past_16x_its_level", "past_2x_eagers_largest", "more_outliers_than_eager",
                                    "worse_overall", "small_output"])
def test_the_tail_allowance_does_not_excuse_a_wrong_element_or_a_worse_candidate(change):
    """Each case breaks one condition of harness.oracle._tail_excused and keeps the others."""
    sigma = 1e-4
    truth = torch.randn(64, 128, generator=torch.Generator().manual_seed(9), dtype=torch.float64) + 3
    eager_err, cand_err = _heavy_tailed(1, outliers=20), _heavy_tailed(2, outliers=5)
    if change == "past_16x_its_level":
        eager_err[0, 0] = 100 * sigma                 # eager's largest error far away: 2x of it is no bound
        cand_err[40, 40] = 30 * sigma                 # ~21x its level (eager errs 1.4 sigma there)
    elif change == "past_2x_eagers_largest":
        cand_err[40, 40] = 14 * sigma                 # under 16x its level, past 2x eager's largest (6 sigma)
    elif change == "more_outliers_than_eager":
        # 150 at 4.5 sigma: overall RMS still within 1.25x eager's, but more than twice eager's own tail (its
        # 20 outliers and its normal errors past 3x their row's RMS)
        cand_err = _heavy_tailed(2, outliers=150, at=4.5)
    elif change == "worse_overall":
        cand_err = 1.5 * cand_err                     # RMS 1.5x eager's
    else:
        # 128 elements: one candidate element at 10 sigma would be excused by every other condition
        g = torch.Generator().manual_seed(3)
        truth = torch.randn(1, 128, generator=g, dtype=torch.float64) + 3
        eager_err = sigma * torch.randn(1, 128, generator=g, dtype=torch.float64)
        eager_err[0, :20] = 6 * sigma
        cand_err = sigma * torch.randn(1, 128, generator=g, dtype=torch.float64)
        cand_err[0, 100] = 10 * sigma
    res = compare((truth + cand_err).float(), (truth + eager_err).float(), truth)
    assert not res.passed and res.failure_class == "mismatch"
    assert res.outputs[0].tail_excused == 0
