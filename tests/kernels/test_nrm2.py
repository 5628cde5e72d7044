"""kernels.nrm2: values against a float64 reference, edge sizes, extreme magnitudes, layouts,
determinism, the custom-op contract (opcheck, autograd, torch.compile) and input errors."""
import math

import pytest
import torch

from tritondiff import kernels
from tritondiff.base import device
from tritondiff.kernels.config import config
from tritondiff.kernels.exc import KernelError, LaunchConfigError, UnsupportedInput
from tritondiff.kernels.nrm2 import nrm2_reference

DEV = device.torch_device()
# Max relative error of the result against the float64 norm: float32 sums, then one
# rounding to the output dtype (half an ulp: 2**-11 for float16, 2**-8 for bfloat16).
RTOL = {torch.float32: 2e-6, torch.float16: 2**-11 + 2e-6, torch.bfloat16: 2**-8 + 2e-6}


def _assert_norm(got: torch.Tensor, x: torch.Tensor) -> None:
    ref = torch.linalg.vector_norm(x.double().reshape(-1)).item()
    assert got.shape == () and got.dtype == x.dtype and got.device == x.device
    value = got.item()
    if math.isnan(ref) or math.isinf(ref):
        assert (math.isnan(value) and math.isnan(ref)) or value == ref, (value, ref)
        return
    limit = torch.finfo(x.dtype).max
    if ref > limit:  # torch rounds such a norm to inf in x's dtype; so must we
        assert value == math.inf, (value, ref)
        return
    finfo = torch.finfo(x.dtype)
    subnormal_ulp = finfo.smallest_normal * finfo.eps  # results below smallest_normal round on this grid
    assert abs(value - ref) <= RTOL[x.dtype] * ref + subnormal_ulp, (value, ref, (value - ref) / max(ref, 1e-300))


def _randn(n, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g, dtype=torch.float64) * scale).to(dtype).to(DEV)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 2, 9, 41, 341, 4231, 65536])
def test_matches_float64_reference(n, dtype):
    x = _randn(n, dtype, seed=n)
    _assert_norm(kernels.nrm2(x), x)


@pytest.mark.parametrize("n", [2**20 - 1, 2**20, 2**20 + 1, 3_000_017])
def test_large_sizes(n):
    x = _randn(n, seed=n)
    _assert_norm(kernels.nrm2(x), x)


def test_float16_many_elements():
    x = _randn(2**20 + 1, torch.float16, seed=3)
    _assert_norm(kernels.nrm2(x), x)


def test_empty_is_zero():
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for shape in ((0,), (3, 0, 2)):
            out = kernels.nrm2(torch.empty(shape, dtype=dtype, device=DEV))
            assert out.shape == () and out.dtype == dtype and out.item() == 0.0


@pytest.mark.parametrize("shape", [(41, 9), (3, 5, 7), (1, 1, 1), (4231, 1), ()])
def test_any_shape_is_flattened(shape):
    x = _randn(math.prod(shape), seed=7).reshape(shape)
    _assert_norm(kernels.nrm2(x), x)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter's numpy, at inf
@pytest.mark.parametrize("scale", [1e20, 1e30, 3e37, 1e-20, 1e-30, 1e-40])
def test_extreme_magnitudes_float32(scale):
    # x**2 overflows float32 from |x| ~ 1.8e19 and underflows below ~1e-19; the
    # scaled sums must give the float64 answer wherever it is a finite float32.
    x = _randn(4231, seed=11, scale=scale)
    _assert_norm(kernels.nrm2(x), x)


def test_1e20_constant_is_finite():
    x = torch.full((1000,), 1e20, dtype=torch.float32, device=DEV)
    got = kernels.nrm2(x).item()
    assert math.isfinite(got) and abs(got - 1e20 * math.sqrt(1000)) <= 2e-6 * 1e20 * math.sqrt(1000)


def test_mixed_magnitudes_and_rescaling_across_tiles():
    # Small tiles and three programs: magnitudes rise tile after tile (every tile
    # rescales the running sum) and fall again (tiny terms under a large scale).
    parts = [_randn(300, seed=i, scale=10.0 ** e) for i, e in enumerate((-30, -10, 0, 5, 19, 25, 2, -25))]
    x = torch.cat(parts)
    with config.patch(launch_overrides={"nrm2": {"block_bytes": 256, "values_per_thread": 64, "warps_per_sm": 3}}):
        _assert_norm(kernels.nrm2(x), x)
        _assert_norm(kernels.nrm2(x.flip(0)), x)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_result_overflowing_the_dtype_is_inf():
    x = torch.full((4,), 40000.0, dtype=torch.float16, device=DEV)  # norm 80000 > float16 max
    assert kernels.nrm2(x).item() == math.inf
    x = torch.full((4,), 3e38, dtype=torch.float32, device=DEV)
    assert kernels.nrm2(x).item() == math.inf


@pytest.mark.parametrize("values, expected", [
    ([1.0, math.inf, 2.0], math.inf),
    ([-math.inf, 1.0], math.inf),
    ([1.0, math.nan], math.nan),
    ([math.inf, math.nan], math.nan),
    ([0.0, 0.0, 0.0], 0.0),
])
def test_inf_nan_zero(values, expected):
    x = torch.tensor(values, dtype=torch.float32, device=DEV)
    got = kernels.nrm2(x).item()
    assert (math.isnan(got) and math.isnan(expected)) or got == expected
    assert math.isnan(torch.linalg.vector_norm(x).item()) == math.isnan(expected)


def test_subnormal_inputs():
    x = torch.tensor([1e-45, 3e-45, 0.0, 1e-44], dtype=torch.float32, device=DEV)
    _assert_norm(kernels.nrm2(x), x)


def test_non_contiguous_layouts():
    base = _randn(41 * 4231, seed=5).reshape(41, 4231)
    for x in (base.t(), base[:, ::3], base[::2, 5:900], base[:, :1].expand(41, 300), base.t()[7]):
        assert not x.is_contiguous()
        _assert_norm(kernels.nrm2(x), x)
    y = _randn(2 * 3 * 5 * 7, seed=6).reshape(2, 3, 5, 7).permute(3, 1, 0, 2)  # dense, read without a copy
    _assert_norm(kernels.nrm2(y), y)


def test_bitwise_deterministic():
    x = _randn(2**20 + 1, seed=9, scale=1e3)
    a, b = kernels.nrm2(x), kernels.nrm2(x)
    assert torch.equal(a, b) and a.view(torch.int32).item() == b.view(torch.int32).item()


def test_one_launch_leaves_its_arrival_counter_zero_and_the_next_call_right():
    """The last program to arrive combines the partials and zeroes the counter the next call counts on: calls of
    every grid size in a row each get their own norm (a counter left non-zero would skip a combine)."""
    import importlib
    module = importlib.import_module("tritondiff.kernels.nrm2")
    tiny = {"block_bytes": 256, "values_per_thread": 64, "warps_per_sm": 3}
    with config.patch(launch_overrides={"nrm2": tiny}):                 # many programs, even in the interpreter
        for n in (1, 64, 65, 4096, 3 * 4096 + 7, 64):
            x = _randn(n, seed=n)
            _assert_norm(kernels.nrm2(x), x)
            ws, count = module._scratch(x.device)
            assert count.item() == 0
    assert module._plan(3 * 4096 + 7, 4, module.Nrm2Launch(256, 64, 3), 1, True)[0] > 1


def test_same_as_torch_ops_entry_and_close_to_the_reference():
    x = _randn(341, seed=2)
    assert torch.equal(torch.ops.tritondiff.nrm2(x), kernels.nrm2(x))
    torch.testing.assert_close(kernels.nrm2(x), nrm2_reference(x), rtol=2e-6, atol=0)


def test_opcheck():
    for x in (_randn(341, seed=1).reshape(11, 31).requires_grad_(), _randn(9, torch.float16, seed=2)):
        torch.library.opcheck(torch.ops.tritondiff.nrm2.default, (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gradient_matches_torch(dtype):
    x = _randn(4231, dtype, seed=4).reshape(1, 4231).requires_grad_()
    (g,) = torch.autograd.grad(kernels.nrm2(x) * 3.0, x)
    ref = 3.0 * x.detach().double() / torch.linalg.vector_norm(x.detach().double())
    tol = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    assert g.dtype == dtype and g.shape == x.shape
    torch.testing.assert_close(g.double(), ref, rtol=tol, atol=tol * ref.abs().max().item())


def test_gradient_at_zero_is_zero_like_torch():
    x = torch.zeros(9, device=DEV, requires_grad=True)
    (g,) = torch.autograd.grad(kernels.nrm2(x), x)
    xt = torch.zeros(9, device=DEV, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.linalg.vector_norm(xt), xt)
    assert torch.equal(g, gt) and not g.isnan().any()


def test_double_backward_through_the_saved_norm():
    x = _randn(41, torch.float32, seed=8).requires_grad_()
    (g,) = torch.autograd.grad(kernels.nrm2(x), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    xt = x.detach().clone().requires_grad_()
    (gt,) = torch.autograd.grad(torch.linalg.vector_norm(xt), xt, create_graph=True)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    torch.testing.assert_close(h, ht, rtol=1e-5, atol=1e-6)


def test_compile_fullgraph_no_graph_break():
    def f(x):
        return kernels.nrm2(x * 2.0) + 1.0

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = _randn(4231, seed=3).requires_grad_()
    out = compiled(x)
    (g,) = torch.autograd.grad(out, x)
    xe = x.detach().clone().requires_grad_()
    oe = f(xe)
    (ge,) = torch.autograd.grad(oe, xe)
    assert torch.equal(out.detach(), oe.detach())
    torch.testing.assert_close(g, ge, rtol=0, atol=0)


@pytest.mark.parametrize("bad, needle", [
    (torch.arange(5), "dtype torch.int64"),
    (torch.ones(3, dtype=torch.float64), "float32, float16 and bfloat16"),
    (torch.ones(3, dtype=torch.complex64), "dtype torch.complex64"),
    ([1.0, 2.0], "must be a torch.Tensor"),
])
def test_bad_input_raises_a_clear_error(bad, needle):
    if isinstance(bad, torch.Tensor):
        bad = bad.to(DEV)
    with pytest.raises(UnsupportedInput, match=needle) as info:
        kernels.nrm2(bad)
    assert isinstance(info.value, (KernelError, ValueError)) and info.value.argument == "x"


def test_wrong_device_raises():
    other = "meta" if device.is_interpreter() else "cpu"
    with pytest.raises(UnsupportedInput, match="kernels run on"):
        kernels.nrm2(torch.ones(3, device=other))


def test_unknown_launch_override_raises():
    with config.patch(launch_overrides={"nrm2": {"block_size": 64}}):
        with pytest.raises(LaunchConfigError, match="has no parameter 'block_size'"):
            kernels.nrm2(_randn(9))
    # a kernel name no table reads (the mHC kernels' names start with mhc_): refused, not silently ignored
    with config.patch(launch_overrides={"k1_fwd": {"block_c": 64}}):
        with pytest.raises(LaunchConfigError, match="'k1_fwd': no kernel has that name; the names are .*mhc_k1_fwd"):
            kernels.nrm2(_randn(9))


@pytest.mark.gpu
@pytest.mark.skipif(device.is_interpreter(), reason="needs a GPU: 2**31 + 17 elements")
@pytest.mark.parametrize("n", [2**31 + 17, 2**31 - 1])  # 2**31 - 1: an int32 N whose N + BLOCK - 1 wrapped (H100)
def test_past_2_pow_31_elements_gpu(n):
    x = torch.empty(n, dtype=torch.float16, device="cuda").uniform_(-0.01, 0.01)
    # the tail, past 2**31, carries most of the norm (~2237, within float16's range; a norm
    # past 65504 is inf in float16, for torch and for us)
    x[-5:] = 1000.0
    got = kernels.nrm2(x).float().item()
    total = 0.0
    for chunk in x.split(2**28):
        total += chunk.double().square().sum().item()
    ref = math.sqrt(total)
    assert abs(got - ref) <= (2**-11 + 1e-5) * ref
