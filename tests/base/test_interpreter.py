"""base.interpreter: bf16 arithmetic in Triton's interpreter computes on values (the interpreter alone
applies numpy to the raw 16-bit patterns), so a kernel that computes in bf16 is judged on what it
computes -- a correct one passes and a wrong one still fails."""
import pytest
import torch
import triton
import triton.language as tl

from tritondiff.base import device
from tests.base.casts import cast
from tritondiff.harness import subject, tensor
from tritondiff.harness.executor import InProcess
from tritondiff.harness.explore import explore

pytestmark = pytest.mark.skipif(not device.is_interpreter(), reason="corrects Triton's interpreter")


@triton.jit
def _axpx_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, OFF_BY_ONE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = x * 1.5 + x                                   # computed in bf16 for bf16 inputs, no upcast
    if OFF_BY_ONE:
        y = tl.where(offs == n - 1, x, y)             # planted: the last element is not computed
    tl.store(y_ptr + offs, y, mask=offs < n)


def _axpx(x, off_by_one=False):
    x = x.contiguous()
    y = torch.empty_like(x)
    _axpx_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256, OFF_BY_ONE=off_by_one)
    return y


@triton.jit
def _dot_max_kernel(a_ptr, b_ptr, c_ptr, m_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b))
    tl.store(m_ptr + r, tl.max(a, axis=1))            # comparisons of negative bf16 values


def test_bf16_arithmetic_dot_and_comparisons_compute_on_values():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=g).bfloat16()
    assert torch.equal(_axpx(x), x * 1.5 + x)         # torch's CPU bf16 also rounds after each op
    a, b = (torch.randn(16, 16, generator=g).bfloat16() - 2 for _ in range(2))
    c, m = torch.empty(16, 16), torch.empty(16, dtype=torch.bfloat16)
    _dot_max_kernel[(1,)](a, b, c, m, B=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-4)
    assert torch.equal(m, a.max(dim=1).values)


def _subject(off_by_one: bool):
    @subject(reference=lambda x: x * 1.5 + x, inputs={"x": tensor(("N",), dtypes=("bfloat16",))},
             dims={"N": (1, 5000)}, name=f"interpreter_test.axpx_{off_by_one}")
    def axpx(x):
        return _axpx(x, off_by_one)
    return axpx


def test_a_kernel_computing_in_bf16_passes_and_its_planted_bug_is_found(tmp_path):
    opts = dict(budget_s=60, max_examples=25, seed=5, out_dir=str(tmp_path))
    assert explore(_subject(False), executor=InProcess(), **opts).status == "pass"
    found = explore(_subject(True), executor=InProcess(), **opts)
    assert found.status == "fail" and found.failure_class == "mismatch"


@triton.jit
def _column_sum_kernel(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, ROWS: tl.constexpr):
    r = tl.arange(0, ROWS)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=r[:, None] < R, other=0.0)
    tl.store(out_ptr + c, tl.sum(x, axis=0))


def test_sums_add_as_a_tree_not_row_after_row():
    """2188 equal rows of 0.1 summed in one block: row after row (numpy's axis-0 order) is about 260 ulp off,
    a tree (the GPU's order) a few."""
    x = torch.full((2188, 4), 0.1, dtype=torch.float32)
    out = torch.empty(4, dtype=torch.float32)
    _column_sum_kernel[(1,)](x, out, R=2188, C=4, ROWS=4096)
    truth = 2188 * float(torch.tensor(0.1, dtype=torch.float32))
    ulp = truth * 2.0 ** -23
    sequential = torch.zeros(4)
    for row in x:
        sequential += row
    assert float((sequential - truth).abs().max()) > 50 * ulp          # the order the interpreter used
    assert float((out.double() - truth).abs().max()) < 8 * ulp


def test_tree_sum_matches_numpy_on_every_axis_and_keepdims():
    import numpy as np

    from tritondiff.base.interpreter import tree_sum

    data = np.arange(2 * 3 * 5, dtype=np.float64).reshape(2, 3, 5)     # exact sums: any order agrees
    for axis in (None, 0, 1, 2, -1):
        for keepdims in (False, True):
            np.testing.assert_array_equal(tree_sum(data, axis, keepdims, np), np.sum(data, axis=axis, keepdims=keepdims))
    assert tree_sum(np.zeros((0, 3)), 0, False, np).shape == (3,)


@triton.jit
def _row_cumsum_kernel(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + c, mask=c < N, other=0.0)
    tl.store(y_ptr + c, tl.cumsum(x, axis=0), mask=c < N)


def test_scans_add_in_log_steps_and_match_numpy_where_exact():
    """4027 equal values scanned in one block: along the axis the last prefix is hundreds of ulp off, in
    log2(n) steps (a GPU's order) a few."""
    import numpy as np

    from tritondiff.base.interpreter import tree_cumsum

    x = torch.full((4027,), 1.3, dtype=torch.float32)
    y = torch.empty_like(x)
    _row_cumsum_kernel[(1,)](x, y, N=4027, BLOCK=4096)
    truth = torch.arange(1, 4028, dtype=torch.float64) * float(x[0])
    ulp = truth * 2.0 ** -23
    assert float(((torch.cumsum(x.double(), 0).float().double() - truth).abs() / ulp).max()) <= 1
    assert float(((torch.from_numpy(np.cumsum(x.numpy())).double() - truth).abs() / ulp).max()) > 50
    assert float(((y.double() - truth).abs() / ulp).max()) < 16
    exact = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    for axis in (0, 1, 2):
        np.testing.assert_array_equal(tree_cumsum(exact, axis, np), np.cumsum(exact, axis=axis))


def test_tree_sums_of_inf_and_nan_give_a_gpus_values_without_numpy_warnings():
    import warnings

    import numpy as np

    from tritondiff.base.interpreter import tree_cumsum, tree_sum

    data = np.array([np.inf, -np.inf, 1.0, np.float32(3e38), np.float32(3e38)], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # a RuntimeWarning would fail the test
        assert np.isnan(tree_sum(data, 0, False, np))
        scan = tree_cumsum(data[3:], 0, np)
    assert scan[0] == np.float32(3e38) and np.isinf(scan[1])


@triton.jit
def _exp_overflows(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < N, other=0.0)
    tl.store(y_ptr + offs, tl.exp(x) - tl.exp(x) + x / (x - x), mask=offs < N)


def test_a_kernel_that_overflows_runs_as_on_a_gpu_under_warnings_as_errors():
    import warnings

    if not device.is_interpreter():
        pytest.skip("the interpreter's numpy arithmetic only")
    x = torch.tensor([1000.0, 1.0, 0.0])
    y = torch.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # pytest's filterwarnings = error, python -W error
        _exp_overflows[(1,)](x, y, 3, BLOCK=4)
    assert torch.isnan(y[0]) and torch.isinf(y[1]) and torch.isnan(y[2])   # inf - inf, 1 / 0, 0 / 0


# ---------------------------------------------------------------------- float scalars and libdevice

from triton.language.extra import libdevice as _libdevice  # noqa: E402  (as public kernels import them)

_rsqrt, _tanh = _libdevice.rsqrt, _libdevice.tanh


@triton.jit
def _scaled_kernel(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    e = eps.to(tl.float32)                            # a float argument is a float32 scalar when compiled
    y = _rsqrt(x * x + e) + _tanh(x)                  # libdevice functions bound at import, as kernels do
    tl.store(y_ptr + offs, y, mask=offs < n)


def test_a_float_argument_is_a_float32_scalar_and_libdevice_functions_compute():
    """Kernels written for the GPU -- ``eps.to(tl.float32)`` on a float argument, ``rsqrt`` / ``tanh``
    imported from libdevice -- run under the interpreter with the compiled launch's semantics, instead of
    raising (``'float' object has no attribute 'to'``) or storing None."""
    from tritondiff.base import interpreter
    interpreter.install()
    x = torch.randn(37)
    y = torch.empty_like(x)
    _scaled_kernel[(1,)](x, y, 37, 1e-3, BLOCK=64)
    torch.testing.assert_close(y, torch.rsqrt(x * x + 1e-3) + torch.tanh(x), rtol=1e-5, atol=1e-5)


@triton.jit
def _bf16_dot_kernel(a_ptr, b_ptr, d_ptr, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    a = tl.load(a_ptr + offs, mask=offs < n, other=0.0)
    b = tl.load(b_ptr + offs, mask=offs < n, other=0.0)
    tl.store(d_ptr, tl.sum(a * b, axis=0))            # a bf16 reduction, as a softmax backward's dot


def test_a_bf16_sum_adds_values_not_bit_patterns():
    """The interpreter summed a bf16 block's 16-bit patterns as integers (public softmax backward kernels
    came out ~1e23 off on the CPU, right on a GPU); the sum is of the values, in float32, rounded once."""
    from tritondiff.base import interpreter
    interpreter.install()
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(215, generator=g).bfloat16(), torch.rand(215, generator=g).bfloat16()
    d = torch.empty(1, dtype=torch.bfloat16)
    _bf16_dot_kernel[(1,)](a, b, d, 215, B=256)
    want = (a * b).float().sum()                      # bf16 products, a float32 sum
    torch.testing.assert_close(d.float()[0], want.bfloat16().float(), rtol=2 ** -7, atol=0)


@pytest.mark.parametrize("source", [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64])
def test_conversions_to_bf16_round_to_nearest_even_as_a_gpu_does(source):
    """The interpreter truncated float32 to bf16 and turned float64, float16 and integers into garbage
    (their values read as bit patterns); a GPU rounds each value to nearest even once, as torch does.
    Halfway cases, values just past them, the largest finite values, subnormals, infinities and NaN."""
    g = torch.Generator().manual_seed(0)
    if source.is_floating_point:
        # float32-exact values: torch rounds float64 through float32, which is exact there (past them it
        # rounds twice, where a GPU rounds once: checked below)
        base = torch.randn(2000, generator=g) * torch.logspace(-30, 30, 2000)
        ties = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 3.3895e38, 1e-40, float("inf"),
                             -float("inf"), float("nan"), 0.0, -0.0])
        x = torch.cat([base, ties]).to(source)
    else:
        x = torch.cat([torch.randint(-2 ** 30, 2 ** 30, (2000,), generator=g), torch.tensor([257, 259, -257, 0])])
        x = x.to(source)
    got, want = cast(x, torch.bfloat16), x.to(torch.bfloat16)
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    assert bool(same.all()), (x[~same][:5], got[~same][:5], want[~same][:5])
    if source == torch.float64:     # just past a halfway case: rounded once, up (float32 first would make a tie)
        past = torch.tensor([1 + 2 ** -8 + 2 ** -30, -(1 + 2 ** -8 + 2 ** -30)], dtype=torch.float64)
        assert cast(past, torch.bfloat16).tolist() == [1 + 2 ** -7, -(1 + 2 ** -7)]


@pytest.mark.parametrize("target", [torch.float64, torch.float16, torch.int32])
def test_conversions_from_bf16_start_from_its_value(target):
    """bf16 to float64, float16 and integers read the bf16 value, not its bit pattern as a number."""
    x = torch.tensor([1.5, -2.25, 3.0e4, -7.0, 0.0, 100.5], dtype=torch.bfloat16)
    assert torch.equal(cast(x, target), x.to(target))


@pytest.mark.parametrize("source", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_conversions_to_float8_round_to_nearest_even_and_saturate_as_a_gpu_does(source, fp8):
    """The interpreter dropped the carry of a mantissa that rounds up (31.4 -> 16 in e4m3), flushed subnormals
    to zero and wrapped values past the largest finite one; a GPU (cvt.rn.satfinite) rounds to nearest even
    and saturates at the largest finite value, NaN staying NaN."""
    g = torch.Generator().manual_seed(1)
    top = torch.finfo(fp8).max
    base = torch.randn(3000, generator=g) * torch.logspace(-10, 6, 3000)
    edges = torch.tensor([31.4, 31.0, 7.9, -31.4, top, top * 1.06, -top * 3, 1e-3, 2.0 ** -10, 1e-9, 0.0, -0.0,
                          float("inf"), -float("inf"), float("nan")])
    x = torch.cat([base, edges]).to(source)
    got = cast(x, fp8)
    want = x.float().clamp(-top, top).to(fp8)
    same = (got.view(torch.uint8) == want.view(torch.uint8)) | (got.float().isnan() & want.float().isnan())
    assert bool(same.all()), (x[~same][:5], got[~same][:5].float(), want[~same][:5].float())
    assert cast(torch.tensor([31.4, 7.9]), fp8).float().tolist() == [32.0, 8.0]


@triton.jit
def _atomic_rows_kernel(x_ptr, out_ptr, old_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    old = tl.atomic_add(out_ptr + i % 2, tl.load(x_ptr + i, mask=i < n), mask=i < n)
    tl.store(old_ptr + i, old, mask=i < n)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_atomic_add_rounds_each_sum_once_and_overflows_to_inf(dtype):
    """Each lane in turn: old value returned, the sum rounded once to the cell's dtype, past its range inf
    (Triton's own interpreter raised OverflowError for float16 and refused bfloat16 cells)."""
    from tritondiff.base import interpreter
    interpreter.install()
    big = torch.finfo(dtype).max
    x = torch.tensor([big, 1.5, big, 7.0], dtype=dtype)
    out = torch.tensor([0.25, 2.0], dtype=dtype)
    old = torch.zeros(4, dtype=dtype)
    _atomic_rows_kernel[(1,)](x, out, old, 3, BLOCK=4)
    assert out[0].item() == float("inf") and out[1].item() == 3.5
    assert old.tolist() == [0.25, 2.0, (torch.tensor(0.25, dtype=dtype) + x[0]).item(), 0.0]
