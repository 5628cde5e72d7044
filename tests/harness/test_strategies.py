"""Generators: boundary mass, the Triton-limit neighbourhood, memory budget, layouts, values, shrinking order."""
import math

import torch
from hypothesis import HealthCheck, find, given, seed, settings, strategies as st

from tritondiff.harness import subject, tensor
from tritondiff.harness.case import TensorCase
from tritondiff.harness.strategies import TRITON_LIMIT, boundary_values, cases, dim_strategy
from tritondiff.harness.tensors import guards_intact, materialize, nbytes

FAST = settings(max_examples=300, database=None, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@subject(reference=lambda x, w: x * w, inputs={"x": tensor(("M", "N"), dtypes=("float32", "bfloat16")),
                                               "w": tensor(("N",), dtype_like="x")},
         dims={"M": (0, 3_000_000), "N": (1, 4096)})
def _two_dim(x, w):
    return x * w


def test_boundaries_include_zero_primes_powers_and_the_limit_neighbourhood():
    small, medium, large = boundary_values(0, 3_000_000)
    for v in (0, 1, 2, 3, 5, 7, 127, 128, 129, 4093):
        assert v in small
    assert {TRITON_LIMIT - 1, TRITON_LIMIT, TRITON_LIMIT + 1, 2 * TRITON_LIMIT, 3_000_000} <= set(large)
    assert all(4096 < v < TRITON_LIMIT - 1 for v in medium)


def test_dims_draw_the_limit_neighbourhood_often():
    seen = []

    @FAST
    @given(dim_strategy(0, 3_000_000))
    def collect(v):
        seen.append(v)

    collect()
    assert all(0 <= v <= 3_000_000 for v in seen)
    assert sum(v > TRITON_LIMIT for v in seen) >= 8         # deliberate mass past the limit
    assert sum(v <= 1 for v in seen) >= 3                   # and on 0 / 1


def test_shrinks_to_smallest_failing_dim():
    assert find(dim_strategy(0, 3_000_000), lambda v: v > TRITON_LIMIT) == TRITON_LIMIT + 1
    assert find(dim_strategy(0, 3_000_000), lambda v: v > 5) <= 8


def test_shrinking_a_small_failure_never_tries_a_large_dim():
    # A failure at a few thousand elements shrinks among small ints: no candidate past 4096 (in the
    # interpreter a multi-million-element example costs ~17 s).  With the boundaries as the first branch,
    # the shrinker re-read a small int as an index into them and tried 2^21 or 3,000,000.
    small_starts = 0
    for s in range(30):
        tried = []

        @seed(s)
        @settings(database=None, deadline=None, max_examples=200, report_multiple_bugs=False,
                  suppress_health_check=list(HealthCheck))
        @given(dim_strategy(0, 3_000_000))
        def fails_past_one_block(v):
            tried.append(v)
            assert v <= 1024

        try:
            fails_past_one_block()
        except AssertionError:
            pass
        first = next(i for i, v in enumerate(tried) if v > 1024)
        assert tried[-1] == 1025                              # shrunk to just past the block
        if tried[first] <= 4096:
            small_starts += 1
            assert max(tried[first:]) <= 4096, f"seed {s}: {tried[first:]}"
        if small_starts >= 4:
            break
    assert small_starts >= 4


def test_memory_budget_caps_every_example():
    budget = 8 * 2 ** 20

    @FAST
    @given(cases(_two_dim, max_example_bytes=budget))
    def check(case):
        assert sum(nbytes(t) for t in case.tensors.values()) <= 3 * budget   # strided layouts may double
        assert case.tensors["w"].dtype == case.tensors["x"].dtype               # dtype_like
        assert case.tensors["x"].shape == (case.dims["M"], case.dims["N"])

    check()


def test_minimal_case_is_simplest():
    case = find(cases(_two_dim), lambda c: True)
    x = case.tensors["x"]
    assert x.dtype == "float32" and x.layout == "contiguous" and x.values == "normal" and not x.nonfinite
    assert case.dims["M"] == 0


def _tc(**kw):
    base = dict(shape=(5, 7), dtype="float32", layout="contiguous", layout_param=0, values="normal", seed=3,
                nonfinite="")
    base.update(kw)
    return TensorCase(**base)


def test_layouts_have_the_drawn_shape_and_values_and_are_deterministic():
    ref = materialize(_tc())
    assert ref.is_contiguous()
    for layout, param in [("transposed", 0), ("strided", 2), ("offset", 5), ("expanded", 1)]:
        t = materialize(_tc(layout=layout, layout_param=param))
        assert t.shape == (5, 7)
        if layout == "expanded":
            assert 0 in t.stride()
            assert torch.equal(t, t[:, :1].expand(5, 7))
        else:
            assert not t.is_contiguous() or t.storage_offset() > 256
            assert torch.equal(t, ref)                 # same values, different memory layout
    assert torch.equal(materialize(_tc(seed=9)), materialize(_tc(seed=9)))


def test_value_families():
    n = (1000,)
    assert (materialize(_tc(shape=n, values="zeros")) == 0).all()
    big = materialize(_tc(shape=n, values="large_offset")).double()
    assert big.mean() > 100 * big.std()
    near = materialize(_tc(shape=n, values="near_max")).abs()
    assert near.min() > torch.finfo(torch.float32).max / 8 and torch.isfinite(near).all()
    tiny = materialize(_tc(shape=n, values="tiny")).abs()
    assert tiny.max() <= torch.finfo(torch.float32).tiny and (tiny > 0).all()
    ints = materialize(_tc(shape=n, values="integer"))
    assert torch.equal(ints, ints.round())
    sq = materialize(_tc(shape=n, values="large", dtype="float16")).float()
    assert torch.isinf((sq * sq).half()).all()           # squares overflow the dtype
    nan = materialize(_tc(shape=n, nonfinite="nan"))
    assert 0 < int(torch.isnan(nan).sum()) < 10


def test_guards_catch_writes_past_the_end():
    t = materialize(_tc(shape=(100,)))
    assert guards_intact(t) is None
    full = torch.empty(0).set_(t.untyped_storage())
    full[t.storage_offset() + 100] = 1.0                  # one element past the end
    msg = guards_intact(t)
    assert msg and "after" in msg and "offset 100" in msg
    assert math.isnan(float(full[t.storage_offset() - 1]))   # reads before the start see NaN


def test_non_finite_sprinkles_stay_inside_declared_bounds():
    """``low=0.0`` (probabilities, a sqrt's domain) never gets -inf, ``high`` never +inf; NaN always may."""
    from tritondiff.harness.strategies import within_bounds
    kinds = ("", "nan", "inf", "-inf", "mixed")
    assert [within_bounds(k, 0.0, None) for k in kinds] == ["", "nan", "inf", "nan", "inf"]
    assert [within_bounds(k, None, 1.0) for k in ("inf", "-inf", "mixed")] == ["nan", "-inf", "-inf"]
    assert [within_bounds(k, 0.0, 1.0) for k in ("inf", "-inf", "mixed")] == ["nan", "nan", "nan"]
    assert [within_bounds(k, None, None) for k in ("inf", "-inf", "mixed")] == ["inf", "-inf", "mixed"]
