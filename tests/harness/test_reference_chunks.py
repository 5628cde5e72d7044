"""The float64 truth of a huge case a slice of its size dim at a time: which references separate, that the
sliced truth is the whole truth, and that the runner judges with it (thresholds lowered to reach it on the CPU)."""
from __future__ import annotations

import functools

import pytest
import torch

from tritondiff.harness import huge, loader, reference_chunks, subject, tensor
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.runner import float64_reference, float64_truth_of, reference_inputs, run_case


def _layer_norm_fwd_bwd(x, w, b, dy):
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    with torch.enable_grad():
        y = torch.nn.functional.layer_norm(leaves[0], leaves[0].shape[-1:], leaves[1], leaves[2])
        grads = torch.autograd.grad(y, leaves, dy)
    return (y.detach(),) + tuple(grads)


def _declare(reference, fn=None, **extra):
    inputs = {"x": tensor(("M", "N"), dtypes=("float32",)), "w": tensor(("N",), dtype_like="x"),
              "b": tensor(("N",), dtype_like="x"), "dy": tensor(("M", "N"), dtype_like="x")}
    return subject(reference=reference, inputs=inputs, dims={"M": (1, 4096), "N": (1, 64)}, **extra)(
        fn or reference)


def _kwargs(m=97, n=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(m, n, generator=g), "w": torch.randn(n, generator=g),
            "b": torch.randn(n, generator=g), "dy": torch.randn(m, n, generator=g)}


def _split(subj, kwargs, m):
    return reference_chunks.find_split(subj, kwargs, "M", m, functools.partial(float64_truth_of, subj))


def test_layer_norm_forward_and_backward_separate_rows_side_by_side_and_weight_grads_summed():
    subj = _declare(_layer_norm_fwd_bwd)
    kwargs = _kwargs()
    split = _split(subj, kwargs, 97)
    assert split == reference_chunks.Split("M", (("cat", 0), ("cat", 0), ("sum", -1), ("sum", -1)))
    whole = float64_truth_of(subj, kwargs)
    sliced = reference_chunks.truth(subj, kwargs, split, 97, functools.partial(float64_truth_of, subj),
                                    chunk_elements=10 * 24)            # 10 rows a slice, a short last one
    assert [t.dtype for t in sliced] == [torch.float64] * 4
    assert torch.equal(sliced[0], whole[0]) and torch.equal(sliced[1], whole[1])    # rows: the same arithmetic
    for got, want in zip(sliced[2:], whole[2:]):                        # sums: float64 reordered
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reference", [
    lambda x, w, b, dy: torch.softmax(x, dim=0),                          # normalised over the sized dim
    lambda x, w, b, dy: x.mean(0),                                         # a mean, not a sum
    lambda x, w, b, dy: x.amax(0),                                         # a max
    lambda x, w, b, dy: (x * w).sum(-1).cumsum(0),                         # a scan along it
    lambda x, w, b, dy: (x, x.shape[0]),                                   # a value that follows the length
], ids=["softmax_over_rows", "mean_over_rows", "max_over_rows", "cumsum_over_rows", "length"])
def test_a_reference_that_does_not_separate_along_the_dim_runs_whole(reference):
    subj = _declare(reference)
    assert _split(subj, _kwargs(), 97) is None


def test_mutating_or_square_subjects_are_never_sliced():
    mutating = _declare(_layer_norm_fwd_bwd, mutates=("dy",))
    assert _split(mutating, _kwargs(), 97) is None
    square = subject(reference=lambda a: a @ a, inputs={"a": tensor(("M", "M"), dtypes=("float32",))},
                     dims={"M": (1, 64)})(lambda a: a @ a)
    assert not reference_chunks.separable_inputs(square, "M")


def test_a_dim_value_input_follows_the_slice():
    def scaled_rows(x, m):
        return x * m / m                      # uses the length, but separates: each slice is told its own
    subj = subject(reference=scaled_rows, inputs={"x": tensor(("M", "N"), dtypes=("float32",)),
                                                   "m": huge.DimValue("M")},
                   dims={"M": (1, 4096), "N": (1, 8)})(scaled_rows)
    kwargs = {"x": torch.randn(50, 8), "m": 50}
    assert reference_chunks.slice_inputs(subj, kwargs, "M", 10, 30)["m"] == 20
    assert _split(subj, kwargs, 50) == reference_chunks.Split("M", (("cat", 0),))


def _split_of_a_draw(subj, dtype, others, n=200):
    from hypothesis import HealthCheck, find, settings

    from tritondiff.harness.strategies import cases

    dim = huge.candidates(subj)[0][1]
    plan = huge.HugePlan(subj.name, dim, ((dtype, n, others),), (), 0, 0)
    case = find(cases(subj, huge=plan), lambda c: True,
                settings=settings(database=None, max_examples=5, suppress_health_check=list(HealthCheck)))
    assert case.sized == dim
    return reference_chunks.split_for(subj, case, reference_inputs(subj, case),
                                      functools.partial(float64_truth_of, subj), at_any_size=True)


def test_the_bundled_norms_find_their_split_and_column_reductions_run_whole():
    subjects = loader.bundled()
    ln = _split_of_a_draw(subjects["compiler.layer_norm_fwd_bwd"], "float32", (("N", 64),))
    assert ln is not None and [r for r, _ in ln.rules] == ["cat", "cat", "sum", "sum"]
    assert _split_of_a_draw(subjects["compiler.rms_norm"], "float16", (("N", 3),)).rules == (("cat", 0),)
    assert _split_of_a_draw(subjects["compiler.reduce_columns_split"], "float32", (("N", 3),)) is None


def test_a_case_not_sized_by_huge_mode_is_never_sliced():
    subj = _declare(_layer_norm_fwd_bwd)
    kwargs = _kwargs()
    case = _case(m=97, n=24, sized=None)
    assert reference_chunks.split_for(subj, case, kwargs, functools.partial(float64_truth_of, subj),
                                      at_any_size=True) is None


# ---------------------------------------------------------------------------------------------- in the runner

def _wrong_last_row(x, w, b, dy):
    y, dx, dw, db = _layer_norm_fwd_bwd(x, w, b, dy)
    y = y.clone()
    y[-1] += 1e-3 * y[-1].abs().max()         # planted: the last row, in the last slice only
    return y, dx, dw, db


def _case(m=300, n=16, sized="M"):
    t = lambda seed: TensorCase((m, n), "float32", "contiguous", 0, "normal", seed, "")  # noqa: E731
    v = lambda seed: TensorCase((n,), "float32", "contiguous", 0, "normal", seed, "")  # noqa: E731
    return Case({"M": m, "N": n}, {"x": t(1), "w": v(2), "b": v(3), "dy": t(4)}, {}, sized=sized)


@pytest.fixture
def sliced_from_small(monkeypatch):
    """Cases of 4,096+ elements count as huge for the truth; slices of 256 elements (16 rows)."""
    monkeypatch.setattr(reference_chunks, "CHUNKED_FROM", 4096)
    monkeypatch.setattr(reference_chunks, "CHUNK_ELEMENTS", 256)
    reference_chunks._SPLITS.clear()
    yield
    reference_chunks._SPLITS.clear()


def test_the_runner_judges_a_huge_case_with_the_sliced_truth(sliced_from_small):
    correct = _declare(_layer_norm_fwd_bwd)
    case = _case()
    upcast, truth = float64_reference(correct, case)
    assert upcast is None                                     # sliced: the inputs were never upcast whole
    whole = float64_truth_of(correct, reference_inputs(correct, case))
    assert all(torch.allclose(a, b, rtol=1e-12, atol=1e-12) for a, b in zip(truth, whole))
    assert run_case(correct, case).status == "pass"
    bug = _declare(_layer_norm_fwd_bwd, fn=_wrong_last_row)
    verdict = run_case(bug, case)
    assert verdict.status == "fail" and verdict.failure_class == "mismatch", verdict.message


def test_a_small_case_keeps_the_whole_truth_and_its_upcast_inputs():
    correct = _declare(_layer_norm_fwd_bwd)
    upcast, _ = float64_reference(correct, _case(m=20))
    assert upcast is not None and upcast["x"].dtype == torch.float64


def test_the_plan_counts_one_slice_of_a_separable_truth_not_the_whole():
    """compiler.layer_norm_fwd_bwd past 2^31 (float16): its float64 forward and backward whole needs over
    130 GiB, more than an H200 has; in slices the phase holds the truth's outputs and one slice."""
    subj = loader.bundled()["compiler.layer_norm_fwd_bwd"]
    dims = {"M": 2 ** 31 // 64 + 1, "N": 64}
    whole, _ = huge.example_bytes(subj, "float16", dims, measured=huge.ReferenceCost(64.0, 10.0, chunked=False))
    sliced, _ = huge.example_bytes(subj, "float16", dims, measured=huge.ReferenceCost(64.0, 10.0, chunked=True))
    n = 2 * dims["M"] * 64
    assert whole >= 64 * n and sliced < 139 * 2 ** 30 < whole
    assert sliced >= 10 * n                               # eager's run on the whole stands
    assert sliced >= 2 * 8 * n                            # y and dx in float64
