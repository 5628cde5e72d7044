"""kernels.mhc: the three mHC-lite ops and their 7 kernels against the eager references (values and
gradients, odd C, T and C past tile boundaries), the custom-op contract (opcheck, gradcheck,
torch.compile without graph breaks), input errors, MHCLiteBlock against its eager path, the
launch-config table, and the benchmark / trace-report helpers that run without a GPU."""
import json
import math

import pytest
import torch
from torch import nn

from tritondiff import kernels
from tritondiff.base import device
from bench import mhc as bench
from bench import mhc_gridsearch, mhc_trace
from tritondiff.kernels.config import config as kernel_config
from tritondiff.kernels.exc import LaunchConfigError, UnsupportedInput
from tritondiff.kernels.mhc import MHCLiteBlock, configs, reference, rmsnorm_project
from tritondiff.kernels.mhc.configs import LaunchConfig

DEV = device.torch_device()
mhc = kernels.mhc

# |ours - reference| <= ATOL + RTOL * |reference|, both from the same inputs.  Both sides
# accumulate in float32 and round once to the output dtype, so a bf16 / fp16 result may
# differ by one ulp of the output (2**-7 / 2**-10 relative) where the fp32 sums round apart.
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2**-10, 2e-3), torch.bfloat16: (2**-7, 2e-2),
       torch.float64: (1e-12, 1e-12)}
SMALL_TILES = {configs.override_name(k): {"block_t": 16, "block_c": 16} for k in configs.KERNELS}


def _close(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> None:
    rtol, atol = TOL[dtype]
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape, got.dtype, ref.dtype)
    torch.testing.assert_close(got.double(), ref.double(), rtol=rtol, atol=atol * scale)


def _inputs(T, C, dtype=torch.float32, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    cdt = torch.float64 if dtype == torch.float64 else torch.float32

    def mk(*shape, dt=dtype, scale=1.0, rand=False):
        v = torch.rand(*shape, generator=g, dtype=torch.float64) if rand else \
            torch.randn(*shape, generator=g, dtype=torch.float64) * scale
        return v.to(dt).to(DEV).requires_grad_(grad)

    return dict(x=mk(T, 4, C), W=mk(32, 4 * C, scale=(4 * C) ** -0.5), h=mk(T, 4, dt=cdt, rand=True),
                H=mk(T, 4, 4, dt=cdt, rand=True), hp=mk(T, 4, dt=cdt, rand=True), lo=mk(T, C))


def _run(op, t):
    """(ours, reference, differentiable inputs) of one op on the inputs t."""
    if op == "rmsnorm_project":
        xf = t["x"].reshape(t["x"].shape[0], -1)
        return mhc.fused_rmsnorm_project(xf, t["W"]), reference.fused_rmsnorm_project(xf, t["W"]), ("x", "W")
    if op == "pre_map":
        return mhc.fused_pre_map(t["x"], t["h"]), reference.fused_pre_map(t["x"], t["h"]), ("x", "h")
    return (mhc.fused_post_res(t["x"], t["lo"], t["H"], t["hp"]),
            reference.fused_post_res(t["x"], t["lo"], t["H"], t["hp"]), ("x", "lo", "H", "hp"))


OPS = ("rmsnorm_project", "pre_map", "post_res")


# ---------------------------------------------------------------------------- forward values

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("T,C", [(1, 9), (9, 41), (130, 341), (5, 4231), (64, 256)])
@pytest.mark.parametrize("op", OPS)
def test_forward_matches_reference(op, T, C, dtype):
    t = _inputs(T, C, dtype, seed=T * 7 + C)
    ours, ref, _ = _run(op, t)
    _close(ours, ref, dtype, scale=4.0 if op == "post_res" else 1.0)


@pytest.mark.parametrize("op", OPS)
def test_small_tiles_loop_over_c_and_t_tails(op):
    """16 x 16 tiles: T = 37 ends mid-tile, C = 41 takes three C tiles (two loop trips + a tail)."""
    t = _inputs(37, 41, torch.float32, seed=3, grad=True)
    with kernel_config.patch(launch_overrides=SMALL_TILES):
        ours, ref, names = _run(op, t)
        gy = torch.randn_like(ours)
        grads = torch.autograd.grad(ours, [t[n] for n in names], gy)
    ref_grads = torch.autograd.grad(ref, [t[n] for n in names], gy)
    _close(ours, ref, torch.float32)
    for a, b in zip(grads, ref_grads):
        _close(a, b, torch.float32, scale=10.0)


def test_forward_past_a_million_elements():
    """x_streams of 1,179,684 elements: T crosses the interpreter's large row tiles."""
    t = _inputs(32769, 9, torch.float32, seed=5)
    ours = mhc.fused_pre_map(t["x"], t["h"])
    _close(ours, reference.fused_pre_map(t["x"], t["h"]), torch.float32)
    assert t["x"].numel() > 2**20


def test_rmsnorm_project_many_heads_and_one_head():
    """D = 80 spans two head tiles (a second grid axis forward, an inner loop backward); D = 1 is one column."""
    for D in (80, 1):
        x = torch.randn(21, 44, dtype=torch.float64, device=DEV, requires_grad=True)
        W = torch.randn(D, 44, dtype=torch.float64, device=DEV, requires_grad=True)
        y = mhc.fused_rmsnorm_project(x, W)
        ref = reference.fused_rmsnorm_project(x, W)
        _close(y, ref, torch.float64)
        gy = torch.randn_like(y)
        for a, b in zip(torch.autograd.grad(y, (x, W), gy), torch.autograd.grad(ref, (x, W), gy)):
            _close(a, b, torch.float64, scale=100.0)


def test_non_contiguous_inputs():
    base = torch.randn(13, 41, 4, device=DEV)
    x = base.transpose(1, 2)  # [13, 4, 41], not contiguous
    h = torch.rand(4, 13, device=DEV).T
    H = torch.rand(13, 4, 4, device=DEV).transpose(1, 2)
    lo = torch.randn(41, 13, device=DEV).T
    _close(mhc.fused_pre_map(x, h), reference.fused_pre_map(x, h), torch.float32)
    _close(mhc.fused_post_res(x, lo, H, h), reference.fused_post_res(x, lo, H, h), torch.float32)
    xf = torch.randn(164, 9, device=DEV).T
    W = torch.randn(32, 164, device=DEV)
    _close(mhc.fused_rmsnorm_project(xf, W), reference.fused_rmsnorm_project(xf, W), torch.float32)


def test_empty_inputs():
    t = _inputs(0, 9)
    assert mhc.fused_pre_map(t["x"], t["h"]).shape == (0, 9)
    assert mhc.fused_post_res(t["x"], t["lo"], t["H"], t["hp"]).shape == (0, 4, 9)
    assert mhc.fused_rmsnorm_project(t["x"].reshape(0, 36), t["W"]).shape == (0, 32)
    x = torch.randn(5, 4, 0, device=DEV, requires_grad=True)
    h = torch.rand(5, 4, device=DEV, requires_grad=True)
    out = mhc.fused_pre_map(x, h)
    assert out.shape == (5, 0)
    (dh,) = torch.autograd.grad(out.sum(), h)
    assert torch.equal(dh, torch.zeros_like(h))


def _k1_grads(fn, x, W, g):
    x, W = x.detach().requires_grad_(), W.detach().requires_grad_()
    fn(x, W).backward(g)
    return x.grad, W.grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("T,K,D", [(1, 1, 1), (5, 1, 3), (4, 2, 1), (3, 7, 2)])
def test_rmsnorm_project_backward_tiny_k_is_as_accurate_as_eager(T, K, D, dtype):
    """Regression (issue #5): bf16 dx at T = K = D = 1 was 1177 ulps off the float64 truth.

    At K = 1 the two terms of dx = r (g @ W) - x coef cancel to r g W eps r^2 (1e-6 of
    either term), so any rounding in coef is amplified a million-fold.  coef came from
    the forward's y rounded to bf16 (and truncated, in the interpreter): dx was wrong in
    its leading digits.  Now dx must be within eager's error of the truth, per element,
    plus one ulp of the output (the final rounding).  K = 2 with x parallel to W makes
    the same cancellation; K = 7 is a plain small row."""
    gen = torch.Generator().manual_seed(T * 100 + K * 10 + D)
    x = torch.randn(T, K, generator=gen, dtype=torch.float64)
    W = torch.randn(D, K, generator=gen, dtype=torch.float64)
    g = torch.randn(T, D, generator=gen, dtype=torch.float64)
    if K == 2:
        # Every row of W parallel to x[0]: dx[0] cancels like K = 1.  Values with 8-bit mantissas
        # keep g * W exact in fp32, so what is checked is the cancellation, not the fp32 rounding
        # of g @ W (which eager shares, and which then decides the comparison at random).
        x, g = x.bfloat16().double(), g.bfloat16().double()
        W = torch.tensor([[0.5], [-2.0]], dtype=torch.float64)[:D] * x[:1]
    x, W, g = (v.to(dtype).to(DEV) for v in (x, W, g))
    ours = _k1_grads(mhc.fused_rmsnorm_project, x, W, g)
    eager = _k1_grads(reference.fused_rmsnorm_project, x, W, g)
    truth = _k1_grads(reference.fused_rmsnorm_project, x.double(), W.double(), g.double())
    # dW: a few ulps, the GEMM's summation order against eager's.  Ulps of the row's largest |dx|: an element of a longer row that happens to cancel (K = 7) is off
    # by many of its own ulps in eager too, by luck more or less than ours; at K = 1 the row is the
    # element, so the cancellation this test is for is judged on its own ulp.
    for name, o, e, t, ulps in zip(("dx", "dW"), ours, eager, truth, (1, 4)):
        scale = t.abs().amax(-1, keepdim=True) if name == "dx" else t.abs()
        ulp = torch.finfo(dtype).eps * scale.clamp_min(torch.finfo(dtype).tiny)
        err, eager_err = (o.double() - t).abs(), (e.double() - t).abs()
        assert (err <= eager_err + ulps * ulp).all(), (name, err.max().item(), eager_err.max().item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rmsnorm_project_weight_grad_keeps_float32_precision_and_range(dtype):
    """dW = (g r)^T @ x is a sum over T that cancels for integer x: with g r rounded to x's dtype before the
    GEMM, fp16 x and g near 2e4 gave dW an RMS error 25x eager's.  Now as accurate
    as eager, and g r past fp16's range (1e6), tiny (1e-30), inf and NaN come through as in float32."""
    gen = torch.Generator().manual_seed(12)
    T, K, D = 700, 96, 4
    half = torch.randint(-8, 9, (T // 2, K), generator=gen)
    x = torch.cat([half, -half]).to(dtype).to(DEV)              # rows t and t + T/2 cancel but for g
    W = torch.zeros(D, K, dtype=dtype, device=DEV)
    g = (2e4 + 128 * torch.randint(0, 8, (T, D), generator=gen)).to(dtype).to(DEV)   # exact in both dtypes
    ours = _k1_grads(mhc.fused_rmsnorm_project, x, W, g)[1]
    eager = _k1_grads(reference.fused_rmsnorm_project, x, W, g)[1]
    truth = _k1_grads(reference.fused_rmsnorm_project, x.double(), W.double(), g.double())[1]
    rms = lambda e: float(e.double().pow(2).mean().sqrt())                # noqa: E731
    assert rms(ours.double() - truth) <= 1.5 * rms(eager.double() - truth) + 1e-3, \
        (rms(ours.double() - truth), rms(eager.double() - truth))

    scaled = torch.randn(T, D, generator=gen, dtype=torch.float64)
    scaled[:, 1] *= 1e6
    scaled[:, 2] *= 1e-39                                                     # float32 subnormals
    scaled[5, 3] = float("inf")
    scaled[7, 0] = float("nan")
    xs = torch.randn(T, K, generator=gen).to(dtype)
    want = scaled.T @ xs.double()
    got = rmsnorm_project.weight_grad(scaled.float().to(DEV), torch.ones(T, device=DEV), xs.to(DEV)).cpu().double()
    assert got.dtype == torch.float64 and torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got[got.isinf()], want[want.isinf()])
    bound = (scaled.abs().T @ xs.double().abs()) * 2.0 ** -20                # float32 accumulation's own level
    finite = torch.isfinite(want)
    assert ((got - want).abs()[finite] <= bound[finite] + 1e-44).all()
    # an infinite x: float32's inf, not the NaN of the lower parts' zeros times inf; a bf16 x near 1e36 stays finite
    inf_x = torch.tensor([[float("inf")], [1.0]]).to(dtype).to(DEV)
    one = lambda n: torch.ones(n, device=DEV)                                # noqa: E731  (inv_rms = 1)
    wide = rmsnorm_project.weight_grad(torch.tensor([[1.0], [0.3]], device=DEV), one(2), inf_x)
    assert wide.item() == float("inf")
    if dtype == torch.bfloat16:
        big = rmsnorm_project.weight_grad(torch.tensor([[1.0]], device=DEV), one(1),
                                          torch.tensor([[1e36]]).to(dtype).to(DEV))
        assert math.isclose(big.item(), torch.tensor(1e36).to(dtype).item(), rel_tol=1e-6)
    empty = rmsnorm_project.weight_grad(torch.empty(0, D, device=DEV), one(0),
                                        torch.empty(0, K, dtype=dtype, device=DEV))
    assert empty.shape == (D, K) and not empty.any()                         # T = 0 (the campaign's example)
    # dW in W's dtype, as the backward asks: float32's answer rounded to nearest-even, in the same kernel
    # (on a GPU the kernel's conversion, not torch's), and within one ulp of the float64 truth
    # (seeded: an unseeded draw once put a column's sum near 0, where float32's own error exceeds an ulp of dtype)
    gy, r = torch.randn(T, D, generator=gen).to(DEV), (torch.rand(T, generator=gen) + 0.5).to(DEV)
    in_w = rmsnorm_project.weight_grad(gy, r, xs.to(DEV), dtype)
    assert in_w.dtype == dtype and torch.equal(in_w, rmsnorm_project.weight_grad(gy, r, xs.to(DEV)).to(dtype))
    gr = gy.double() * r.double()[:, None]
    want = gr.T @ xs.to(DEV).double()
    level = (gr.abs().T @ xs.to(DEV).double().abs()) * 2.0 ** -20              # float32 accumulation, as above
    tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps          # dtype's subnormal spacing
    assert ((in_w.double() - want).abs() <= torch.finfo(dtype).eps * want.abs() + level + tiny).all()


def test_rmsnorm_project_weight_grad_merges_column_maxima_across_programs():
    """fp16 dW: each column's shift comes from its largest |g r| over all T, merged across programs.  The
    largest values sit in the first program's rows; a shift from a later program's (1000x smaller) maxima
    would push them past fp16's range (inf).  T = 1000 rows are 8 programs of 128 at D = 32."""
    gen = torch.Generator().manual_seed(21)
    T, K, D = 1000, 24, 32
    gy = torch.rand(T, D, generator=gen) + 0.5
    gy[:100] *= 1000
    x = torch.randn(T, K, generator=gen).to(torch.float16)
    got = rmsnorm_project.weight_grad(gy.to(DEV), torch.ones(T, device=DEV), x.to(DEV)).double().cpu()
    want = gy.double().T @ x.double()
    assert torch.isfinite(got).all()
    assert ((got - want).abs() <= 2.0 ** -20 * (gy.double().T @ x.double().abs())).all()


def test_rmsnorm_project_forward_keeps_y_unrounded_for_the_backward():
    """The (y, inv_rms) op returns y in fp32 for 16-bit x; the public op rounds it to nearest-even."""
    x = torch.randn(9, 41, device=DEV).bfloat16()
    W = torch.randn(5, 41, device=DEV).bfloat16()
    y, rinv = torch.ops.mhc.fused_rmsnorm_project_fwd(x, W, 1e-6)
    assert y.dtype == rinv.dtype == torch.float32
    exact = reference.fused_rmsnorm_project(x.double(), W.double())
    assert ((y.double() - exact).abs() <= 1e-5 * exact.abs().max()).all()
    assert torch.equal(mhc.fused_rmsnorm_project(x, W), y.bfloat16())  # RTNE, not the interpreter's truncation


def test_rmsnorm_project_float32_forward_sums_k_tiles_without_losing_the_small_ones():
    """float32 x @ W^T and sum(x^2) over 16 K tiles: the first tile's dot and squares are 2**24 each and every
    later tile's 1, so a float32 running sum stays at 2**24 (2**24 + 1 rounds back), on a GPU's one FMA chain
    and per tile alike.  Summed in float64 they are 2**24 + 15, and y and rinv come out correctly rounded
   ."""
    tile, tiles, T, D = 16, 16, 16, 16
    x = torch.zeros(T, tile * tiles, device=DEV)
    W = torch.zeros(D, tile * tiles, device=DEV)
    x[:, :tile] = W[:, :tile] = 2.0 ** 10           # the first tile: 16 x 2**20 = 2**24
    x[:, tile::tile] = W[:, tile::tile] = 1.0       # one 1 in each later tile
    y, rinv = rmsnorm_project.rmsnorm_project_fwd(x, W, 0.0, config=LaunchConfig(16, tile))
    total = 2.0 ** 24 + tiles - 1
    r64 = torch.tensor((tile * tiles / total) ** 0.5, dtype=torch.float64)
    assert torch.equal(rinv, torch.full_like(rinv, r64.float().item())), rinv[0].item()
    assert torch.equal(y, torch.full_like(y, (total * r64).float().item())), y[0, :4]
    x[1, 3 * tile] = float("inf")
    x[2, 3 * tile] = float("nan")
    y, rinv = rmsnorm_project.rmsnorm_project_fwd(x, W, 0.0, config=LaunchConfig(16, tile))
    torch.testing.assert_close(y[1:3], reference.fused_rmsnorm_project(x, W, 0.0)[1:3], equal_nan=True)
    assert rinv[1] == 0 and rinv[2].isnan()


@pytest.mark.parametrize("same_heads", [False, True])
def test_rmsnorm_project_float32_dx_at_a_large_offset_is_far_better_than_eager(same_heads):
    """dx = r (g @ W - x s / (ssq + K eps)) cancels ~1000x at x, W ~ 1000 +- 1.  Formed from the forward's
    rounded y and r, each rounding came back 1000x: up to 6x eager's error per row (H100 campaigns, session
    12; with every head's W row the same, on the CPU too).  Summed from the same g @ W tiles in float64, over
    16-column tiles so the two-pass path runs, dx is within 1e-6 of its size (eager's: 1e-4)."""
    gen = torch.Generator().manual_seed(3)
    T, K, D = 24, 333, 4
    x = (1000 + torch.randn(T, K, generator=gen)).to(DEV)
    W = (1000 + torch.randn(1 if same_heads else D, K, generator=gen)).expand(D, K).contiguous().to(DEV)
    g = (torch.rand(T, D, generator=gen) * 2 + 1e-3).to(DEV)

    def dx_of(fn, *args):
        xl = args[0].detach().requires_grad_()
        fn(xl, *args[1:]).backward(g.to(xl.dtype))
        return xl.grad.double()

    truth = dx_of(reference.fused_rmsnorm_project, x.double(), W.double())
    with kernel_config.patch(launch_overrides=SMALL_TILES):
        ours = dx_of(mhc.fused_rmsnorm_project, x, W)
    eager = dx_of(reference.fused_rmsnorm_project, x, W)
    size = truth.abs().max()
    assert (eager - truth).abs().max() > 1e-5 * size                # the cancellation is real: eager errs
    assert (ours - truth).abs().max() <= 1e-6 * size, (ours - truth).abs().max() / size


# ---------------------------------------------------------------------------- tl.dot tile sizes (static)

_DOT_SIZES = (1, 2, 3, 7, 15, 16, 17)


def _k1_configs():
    """The launch configs K1 can run with: this device's table entry (None) and every GPU table entry."""
    out = [("device", None)]
    for arch, entries in configs.TABLE.items():
        if arch != "interpreter":
            out += [(f"{arch}:{k}", entries[k]) for k in ("k1_fwd", "k1_bwd_dx")]
    return out + [("16x16", LaunchConfig(16, 16)), ("tall", LaunchConfig(128, 16, 8, 3))]


@pytest.mark.parametrize("kernel", ["k1_fwd", "k1_bwd_dx"])
def test_k1_dot_operand_tiles_are_at_least_16_for_every_size(kernel):
    """tl.dot needs K >= 16 for 16-bit operands on NVIDIA GPUs (and M, N >= 16 before triton 3.2); the
    interpreter accepts anything, so CPU runs cannot show a violation: check every launch's tiles."""
    from tritondiff.kernels.mhc.rmsnorm_project import MIN_DOT_DIM, k1_blocks
    assert MIN_DOT_DIM == 16
    sizes = _DOT_SIZES + (64, 341, 4231)
    checked = 0
    for name, cfg in _k1_configs():
        for T in sizes:
            for K in sizes:
                for D in _DOT_SIZES + (32, 80):
                    b = k1_blocks(kernel, T=T, K=K, D=D, device=DEV, config=cfg)
                    for lhs, rhs in b.dot_shapes():
                        assert lhs[1] == rhs[0] and min(*lhs, *rhs) >= MIN_DOT_DIM, (name, T, K, D, lhs, rhs)
                    assert b.block_t <= max(16, 1 << (T - 1).bit_length()) or name != "device"
                    checked += 1
    assert checked == len(_k1_configs()) * len(sizes) ** 2 * (len(_DOT_SIZES) + 2)


def test_k1_tiles_below_16_are_refused_before_launch():
    """An override so wide that the 2**20-element tile limit halves BLOCK_T below 16 is a LaunchConfigError."""
    from tritondiff.kernels.mhc.rmsnorm_project import k1_blocks
    with pytest.raises(LaunchConfigError, match="every dot dimension must be >= 16"):
        k1_blocks("k1_fwd", T=64, K=1 << 17, D=32, device=DEV, config=LaunchConfig(16, 1 << 17))
    with pytest.raises(LaunchConfigError, match="k1_fwd' or 'k1_bwd_dx"):
        k1_blocks("k3_fwd", T=64, K=64, D=32, device=DEV)


def test_rmsnorm_project_zero_row_and_eps():
    x = torch.randn(4, 36, device=DEV)
    x[1] = 0.0
    W = torch.randn(32, 36, device=DEV)
    y = mhc.fused_rmsnorm_project(x, W, eps=1e-3)
    _close(y, reference.fused_rmsnorm_project(x, W, eps=1e-3), torch.float32)
    assert torch.equal(y[1], torch.zeros(32, device=DEV))


# ---------------------------------------------------------------------------- gradients

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", OPS)
def test_backward_matches_reference_autograd(op, dtype):
    t = _inputs(70, 341, dtype, seed=11, grad=True)
    ours, ref, names = _run(op, t)
    gy = torch.randn_like(ours)
    grads = torch.autograd.grad(ours, [t[n] for n in names], gy)
    ref_grads = torch.autograd.grad(ref, [t[n] for n in names], gy)
    for a, b in zip(grads, ref_grads):
        # dh / dH / dW sum 341 (W: 70) products: allow the sum's length in ulps.
        _close(a, b, dtype, scale=30.0)


@pytest.mark.parametrize("op", OPS)
def test_gradcheck_float64(op):
    t = _inputs(3, 5, torch.float64, seed=2, grad=True)
    _, _, names = _run(op, t)
    if op == "rmsnorm_project":
        fn = lambda x, W: mhc.fused_rmsnorm_project(x.reshape(3, -1), W)  # noqa: E731
    elif op == "pre_map":
        fn = mhc.fused_pre_map
    else:
        fn = mhc.fused_post_res
    assert torch.autograd.gradcheck(fn, tuple(t[n] for n in names), fast_mode=True)


@pytest.mark.parametrize("K,tiles", [(12, None), (40, SMALL_TILES)])
def test_gradcheck_inv_rms_output(K, tiles):
    """The internal (y, inv_rms) op: a loss that uses inv_rms takes the g_r branch of the dx kernel, in one K
    tile and, with 16-column tiles, in the two-pass form."""
    x = torch.randn(5, K, dtype=torch.float64, device=DEV, requires_grad=True)
    W = torch.randn(3, K, dtype=torch.float64, device=DEV, requires_grad=True)
    with kernel_config.patch(launch_overrides=tiles or {}):
        assert torch.autograd.gradcheck(lambda a, b: torch.ops.mhc.fused_rmsnorm_project_fwd(a, b, 1e-6), (x, W),
                                        fast_mode=True)


def test_float32_inv_rms_gradient_in_the_two_pass_form():
    """float32 dx with a loss on y and on inv_rms (the g_r term), over 16-column tiles, against float64."""
    gen = torch.Generator().manual_seed(5)
    x, W = torch.randn(7, 45, generator=gen).to(DEV), torch.randn(3, 45, generator=gen).to(DEV)
    g, gr = torch.randn(7, 3, generator=gen).to(DEV), torch.randn(7, generator=gen).to(DEV)

    def dx_of(a, b):
        a = a.detach().requires_grad_()
        y, rinv = torch.ops.mhc.fused_rmsnorm_project_fwd(a, b, 1e-6)
        ((y * g.to(y.dtype)).sum() + (rinv * gr.to(rinv.dtype)).sum()).backward()
        return a.grad.double()

    with kernel_config.patch(launch_overrides=SMALL_TILES):
        ours = dx_of(x, W)
    truth = dx_of(x.double(), W.double())
    assert (ours - truth).abs().max() <= 1e-6 * truth.abs().max()


def test_backward_kernels_match_their_references():
    """Each backward launcher against the closed-form reference of that kernel (bf16, odd C)."""
    from tritondiff.kernels.mhc import post_res, pre_map, rmsnorm_project
    t = _inputs(45, 41, torch.bfloat16, seed=9)
    x, T, C = t["x"], 45, 41
    g_plane, g_streams = torch.randn(T, C, device=DEV).bfloat16(), torch.randn(T, 4, C, device=DEV).bfloat16()
    _close(pre_map.pre_map_bwd_dx(g_plane, t["h"]), reference.pre_map_bwd_dx(g_plane, t["h"]), torch.bfloat16)
    _close(pre_map.pre_map_bwd_hpre(g_plane, x), reference.pre_map_bwd_hpre(g_plane, x), torch.float32, 10.0)
    for a, b, dt in zip(post_res.post_res_bwd(g_streams, x, t["lo"], t["H"], t["hp"]),
                        reference.post_res_bwd(g_streams, x, t["lo"], t["H"], t["hp"]),
                        (torch.bfloat16, torch.bfloat16, torch.float32, torch.float32)):
        _close(a, b, dt, 10.0 if dt == torch.float32 else 4.0)
    xf = x.reshape(T, -1)
    y, rinv = rmsnorm_project.rmsnorm_project_fwd(xf, t["W"], 1e-6)
    gy = torch.randn(T, 32, device=DEV).bfloat16()
    assert y.dtype == torch.float32  # kept unrounded for the backward's coef
    _close(rmsnorm_project.rmsnorm_project_bwd_dx(xf, t["W"], gy, y, rinv, None, 1e-6),
           reference.rmsnorm_project_bwd_dx(xf, t["W"], gy, y, rinv), torch.bfloat16)


# ---------------------------------------------------------------------------- custom-op contract

def _opcheck_cases():
    t = _inputs(9, 41, torch.float32, seed=4, grad=True)
    xf = t["x"].detach().reshape(9, -1).requires_grad_()
    g_plane, g_streams = torch.randn(9, 41, device=DEV), torch.randn(9, 4, 41, device=DEV)
    xd = t["x"].detach()
    y, rinv = torch.ops.mhc.fused_rmsnorm_project_fwd(xf.detach(), t["W"].detach(), 1e-6)
    return {
        "fused_rmsnorm_project": (xf, t["W"], 1e-6),
        "fused_rmsnorm_project_fwd": (xf, t["W"], 1e-6),
        "fused_rmsnorm_project_bwd_dx": (xf.detach(), t["W"].detach(), torch.randn_like(y), y, rinv, None, 1e-6),
        "fused_pre_map": (t["x"], t["h"]),
        "fused_pre_map_bwd_dx": (g_plane, t["h"].detach()),
        "fused_pre_map_bwd_hpre": (g_plane, xd),
        "fused_post_res": (t["x"], t["lo"], t["H"], t["hp"]),
        "fused_post_res_bwd": (g_streams, xd, t["lo"].detach(), t["H"].detach(), t["hp"].detach()),
    }


@pytest.mark.parametrize("name", [
    "fused_rmsnorm_project", "fused_rmsnorm_project_fwd", "fused_rmsnorm_project_bwd_dx", "fused_pre_map",
    "fused_pre_map_bwd_dx", "fused_pre_map_bwd_hpre", "fused_post_res", "fused_post_res_bwd"])
def test_opcheck(name):
    args = _opcheck_cases()[name]
    result = torch.library.opcheck(getattr(torch.ops.mhc, name).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


# ---------------------------------------------------------------------------- input errors

def test_n_other_than_4_is_rejected():
    for n in (2, 3, 5):
        x = torch.randn(6, n, 8, device=DEV)
        with pytest.raises(UnsupportedInput, match="support n=4 only"):
            mhc.fused_pre_map(x, torch.rand(6, n, device=DEV))
        with pytest.raises(UnsupportedInput, match="support n=4 only"):
            mhc.fused_post_res(x, torch.randn(6, 8, device=DEV), torch.rand(6, n, n, device=DEV),
                               torch.rand(6, n, device=DEV))
    with pytest.raises(UnsupportedInput, match="n=4 only"):
        MHCLiteBlock(nn.Identity(), 8, n_streams=3)


def test_dtype_errors_name_the_supported_dtypes():
    t = _inputs(6, 8)
    with pytest.raises(UnsupportedInput, match="supported dtypes are bfloat16, float16, float32"):
        mhc.fused_pre_map(t["x"].to(torch.int32), t["h"])
    with pytest.raises(UnsupportedInput, match="coefficients must be torch.float32"):
        mhc.fused_pre_map(t["x"], t["h"].bfloat16())
    with pytest.raises(UnsupportedInput, match="coefficients must be torch.float32"):
        mhc.fused_post_res(t["x"].bfloat16(), t["lo"].bfloat16(), t["H"].double(), t["hp"])
    with pytest.raises(UnsupportedInput, match="layer_output has dtype torch.float32 but x_streams has"):
        mhc.fused_post_res(t["x"].bfloat16(), t["lo"], t["H"], t["hp"])
    with pytest.raises(UnsupportedInput, match="W has dtype"):
        mhc.fused_rmsnorm_project(t["x"].reshape(6, -1).half(), t["W"])
    # it is a ValueError for callers that do not know the kernels' hierarchy
    with pytest.raises(ValueError):
        mhc.fused_pre_map(t["x"].to(torch.int64), t["h"])


def test_shape_errors():
    t = _inputs(6, 8)
    with pytest.raises(UnsupportedInput, match=r"h_pre has shape \(5, 4\), expected \(6, 4\)"):
        mhc.fused_pre_map(t["x"], t["h"][:5])
    with pytest.raises(UnsupportedInput, match="x_streams must be 3-D"):
        mhc.fused_pre_map(t["x"].reshape(6, 32), t["h"])
    with pytest.raises(UnsupportedInput, match=r"layer_output has shape \(6, 7\), expected \(6, 8\)"):
        mhc.fused_post_res(t["x"], t["lo"][:, :7], t["H"], t["hp"])
    with pytest.raises(UnsupportedInput, match=r"H_merged has shape \(6, 16\)"):
        mhc.fused_post_res(t["x"], t["lo"], t["H"].reshape(6, 16), t["hp"])
    with pytest.raises(UnsupportedInput, match="W must be"):
        mhc.fused_rmsnorm_project(t["x"].reshape(6, -1), t["W"][:, :31])
    with pytest.raises(UnsupportedInput, match="RMSNorm needs n\\*C >= 1"):
        mhc.fused_rmsnorm_project(torch.randn(3, 0, device=DEV), torch.randn(2, 0, device=DEV))
    with pytest.raises(UnsupportedInput, match="eps must be a finite number"):
        mhc.fused_rmsnorm_project(t["x"].reshape(6, -1), t["W"], eps=-1.0)


def test_device_mismatch_is_rejected():
    t = _inputs(6, 8)
    with pytest.raises(UnsupportedInput, match="h_pre is on meta but x_streams is on"):
        mhc.fused_pre_map(t["x"], t["h"].to("meta"))
    with pytest.raises(UnsupportedInput, match="is on meta"):
        mhc.fused_post_res(t["x"], t["lo"].to("meta"), t["H"], t["hp"])


# The internal backward ops validate like the forward ops, in the real and in the fake implementation:
# one valid argument set per op (T = 6, C = 8, D = 32), then one argument replaced at a time.

def _backward_op_args():
    t = _inputs(6, 8)
    xf = t["x"].reshape(6, -1)
    y, rinv = torch.ops.mhc.fused_rmsnorm_project_fwd(xf, t["W"], 1e-6)
    g = torch.Generator().manual_seed(1)
    return {
        "fused_pre_map_bwd_dx": dict(grad_out=torch.randn(6, 8, generator=g).to(DEV), h_pre=t["h"]),
        "fused_pre_map_bwd_hpre": dict(grad_out=torch.randn(6, 8, generator=g).to(DEV), x_streams=t["x"]),
        "fused_post_res_bwd": dict(grad_out=torch.randn(6, 4, 8, generator=g).to(DEV), x_streams=t["x"],
                                   layer_output=t["lo"], H_merged=t["H"], h_post=t["hp"]),
        "fused_rmsnorm_project_bwd_dx": dict(x_flat=xf, W=t["W"], gy=torch.randn(6, 32, generator=g).to(DEV), y=y,
                                             inv_rms=rinv, g_inv_rms=torch.randn(6, generator=g).to(DEV), eps=1e-6),
    }


BAD_BACKWARD_ARGS = [  # (op, argument, its bad value from the valid arguments, message pattern)
    ("fused_pre_map_bwd_dx", "h_pre", lambda a: a["h_pre"][:2], r"h_pre has shape \(2, 4\), expected \(6, 4\)"),
    ("fused_pre_map_bwd_dx", "h_pre", lambda a: a["h_pre"][:, :3], r"n=4 only \(got n=3 streams in h_pre\)"),
    ("fused_pre_map_bwd_dx", "h_pre", lambda a: a["h_pre"].bfloat16(), "h_pre has dtype torch.bfloat16; coeff"),
    ("fused_pre_map_bwd_dx", "h_pre", lambda a: a["h_pre"].to("meta"), "h_pre is on meta but grad_out is on"),
    ("fused_pre_map_bwd_dx", "grad_out", lambda a: a["grad_out"].int(), "grad_out has dtype torch.int32"),
    ("fused_pre_map_bwd_dx", "grad_out", lambda a: a["grad_out"][None], "grad_out must be 2-D"),
    ("fused_pre_map_bwd_hpre", "x_streams", lambda a: a["x_streams"][:, :3], "n=4 only .*pre_map_bwd_hpre"),
    ("fused_pre_map_bwd_hpre", "x_streams", lambda a: a["x_streams"][0], "x_streams must be 3-D"),
    ("fused_pre_map_bwd_hpre", "grad_out", lambda a: a["grad_out"][:, :7], r"grad_out has shape \(6, 7\), exp"),
    ("fused_pre_map_bwd_hpre", "grad_out", lambda a: a["grad_out"][:5], r"grad_out has shape \(5, 8\), exp"),
    ("fused_pre_map_bwd_hpre", "grad_out", lambda a: a["grad_out"].bfloat16(), "grad_out has dtype torch.bfloat16 "
     "but x_streams has torch.float32"),
    ("fused_pre_map_bwd_hpre", "grad_out", lambda a: a["grad_out"].to("meta"), "grad_out is on meta but x_streams"),
    ("fused_post_res_bwd", "grad_out", lambda a: a["grad_out"][:, :, :7], r"grad_out has shape \(6, 4, 7\), ex"),
    ("fused_post_res_bwd", "grad_out", lambda a: a["grad_out"][:, 0], "grad_out must be 3-D"),
    ("fused_post_res_bwd", "grad_out", lambda a: a["grad_out"].half(), "grad_out has dtype torch.float16 but"),
    ("fused_post_res_bwd", "grad_out", lambda a: a["grad_out"].to("meta"), "grad_out is on meta but x_streams"),
    ("fused_post_res_bwd", "x_streams", lambda a: a["x_streams"][:, :3], "n=4 only .*reference.post_res_bwd"),
    ("fused_post_res_bwd", "layer_output", lambda a: a["layer_output"][:5], r"layer_output has shape \(5, 8\)"),
    ("fused_post_res_bwd", "H_merged", lambda a: a["H_merged"].double(), "H_merged has dtype torch.float64"),
    ("fused_post_res_bwd", "h_post", lambda a: a["h_post"][:, :2], r"h_post has shape \(6, 2\), expected"),
    ("fused_rmsnorm_project_bwd_dx", "x_flat", lambda a: a["x_flat"].int(), "x_flat has dtype torch.int32"),
    ("fused_rmsnorm_project_bwd_dx", "W", lambda a: a["W"][:, :31], r"W has shape \(32, 31\) but x_flat"),
    ("fused_rmsnorm_project_bwd_dx", "gy", lambda a: a["gy"][:, :31], r"gy has shape \(6, 31\), expected \(6, 32"),
    ("fused_rmsnorm_project_bwd_dx", "gy", lambda a: a["gy"][:5], r"gy has shape \(5, 32\), expected \(6, 32"),
    ("fused_rmsnorm_project_bwd_dx", "gy", lambda a: a["gy"].half(), "gy has dtype torch.float16; it must be y's"),
    ("fused_rmsnorm_project_bwd_dx", "gy", lambda a: a["gy"].to("meta"), "gy is on meta but x_flat is on"),
    ("fused_rmsnorm_project_bwd_dx", "y", lambda a: a["y"].bfloat16(), "y has dtype torch.bfloat16; the forward's"),
    ("fused_rmsnorm_project_bwd_dx", "y", lambda a: a["y"][:, :31], r"y has shape \(6, 31\), expected \(6, 32\)"),
    ("fused_rmsnorm_project_bwd_dx", "inv_rms", lambda a: a["inv_rms"][:, None], r"inv_rms has shape \(6, 1\)"),
    ("fused_rmsnorm_project_bwd_dx", "inv_rms", lambda a: a["inv_rms"].double(), "inv_rms has dtype torch.float64"),
    ("fused_rmsnorm_project_bwd_dx", "g_inv_rms", lambda a: a["g_inv_rms"][:5], r"g_inv_rms has shape \(5,\)"),
    ("fused_rmsnorm_project_bwd_dx", "g_inv_rms", lambda a: a["g_inv_rms"].half(), "g_inv_rms has dtype torch.fl"),
    ("fused_rmsnorm_project_bwd_dx", "g_inv_rms", lambda a: a["g_inv_rms"].to("meta"), "g_inv_rms is on meta"),
    ("fused_rmsnorm_project_bwd_dx", "eps", lambda a: -1.0, "eps must be a finite number >= 0, got -1.0"),
]


@pytest.mark.parametrize("impl", ["real", "fake"])
@pytest.mark.parametrize("op, argument, bad, needle", BAD_BACKWARD_ARGS,
                         ids=[f"{op[6:]}-{arg}-{i}" for i, (op, arg, _, _) in enumerate(BAD_BACKWARD_ARGS)])
def test_backward_ops_reject_bad_arguments(op, argument, bad, needle, impl):
    """Each argument of the internal backward ops is validated by the real kernel launch and by the fake
    implementation (torch.compile's trace); the error names the argument (message and .argument)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    args = _backward_op_args()[op]
    assert set(torch.library.opcheck(getattr(torch.ops.mhc, op).default, tuple(args.values())).values()) \
        == {"SUCCESS"}  # the valid set is valid
    args[argument] = bad(args)
    fn = getattr(torch.ops.mhc, op)
    with pytest.raises(UnsupportedInput, match=needle) as info:
        if impl == "real":
            fn(**args)
        else:
            with FakeTensorMode(allow_non_fake_inputs=True) as mode:
                fn(**{k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in args.items()})
    assert info.value.argument == argument and argument in str(info.value) and str(info.value).startswith(op)


def test_pre_map_bwd_dx_no_longer_reads_past_h_pre():
    """The report that started the checks: a [64, 8] grad_out with a [2, 4] h_pre returned a [64, 4, 8] dx
    built from reads past h_pre's end."""
    with pytest.raises(UnsupportedInput, match=r"fused_pre_map_bwd_dx: h_pre has shape \(2, 4\), expected \(64, 4\)"):
        torch.ops.mhc.fused_pre_map_bwd_dx(torch.randn(64, 8, device=DEV), torch.rand(2, 4, device=DEV))


def test_block_input_errors():
    blk = MHCLiteBlock(nn.Identity(), 8).to(DEV)
    with pytest.raises(UnsupportedInput, match=r"expected \('T', 4, 8\)"):
        blk(torch.randn(5, 4, 9, device=DEV))
    bad = MHCLiteBlock(nn.Linear(8, 3), 8).to(DEV)
    with pytest.raises(UnsupportedInput, match="must map"):
        bad(torch.randn(5, 4, 8, device=DEV))


# ---------------------------------------------------------------------------- MHCLiteBlock

def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


BLOCK_REL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 3e-2}


def _block_pair(C, dtype, seed=0):
    torch.manual_seed(seed)
    layer = nn.Sequential(nn.Linear(C, C), nn.GELU(), nn.Linear(C, C))
    blk = MHCLiteBlock(layer, C).to(DEV, dtype)
    with torch.no_grad():  # move the heads away from their init so every coefficient matters
        blk.head_proj.normal_(0.0, 0.5 / math.sqrt(4 * C))
        blk.head_bias.add_(torch.randn_like(blk.head_bias) * 0.3)
    return blk


def _fwd_bwd(blk, x, eager):
    blk.eager = eager
    blk.zero_grad()
    x = x.detach().requires_grad_()
    out = blk(x)
    out.backward(torch.cos(torch.arange(out.numel(), device=DEV, dtype=torch.float64)).reshape(out.shape).to(out.dtype))
    return out.detach(), x.grad, {n: p.grad.clone() for n, p in blk.named_parameters()}


@pytest.mark.parametrize("dtype,T,C", [(torch.float32, 37, 41), (torch.bfloat16, 64, 96)])
def test_block_forward_and_backward_match_eager(dtype, T, C):
    blk = _block_pair(C, dtype)
    x = torch.randn(T, 4, C, device=DEV).to(dtype)
    out, dx, grads = _fwd_bwd(blk, x, eager=False)
    out_e, dx_e, grads_e = _fwd_bwd(blk, x, eager=True)
    _close(out, out_e, dtype, scale=4.0)
    assert _rel_err(dx, dx_e) < BLOCK_REL[dtype]
    for name in grads:
        assert grads[name].abs().max() > 0, name  # every parameter receives a gradient
        assert _rel_err(grads[name], grads_e[name]) < BLOCK_REL[dtype], name


def test_block_coefficients_are_well_formed():
    blk = _block_pair(16, torch.float32)
    h_pre, h_post, H = blk.coefficients(torch.randn(10, 4, 16, device=DEV))
    assert ((h_pre > 0) & (h_pre < 1)).all() and ((h_post > 0) & (h_post < 2)).all()
    ones = torch.ones(10, 4, device=DEV)
    torch.testing.assert_close(H.sum(-1), ones)  # rows and columns of a convex mix of
    torch.testing.assert_close(H.sum(-2), ones)  # permutation matrices sum to one
    P = mhc.permutation_matrices(4).reshape(24, 4, 4)
    assert torch.equal(P[0], torch.eye(4))
    assert len({tuple(p.flatten().tolist()) for p in P}) == 24
    assert torch.equal(P.sum(-1), torch.ones(24, 4)) and torch.equal(P.sum(-2), torch.ones(24, 4))


def test_block_init_is_near_residual():
    torch.manual_seed(0)
    blk = MHCLiteBlock(nn.Identity(), 32).to(DEV)
    h_pre, h_post, H = blk.coefficients(torch.randn(8, 4, 32, device=DEV))
    torch.testing.assert_close(h_pre, torch.full_like(h_pre, 0.25), atol=0.1, rtol=0)
    torch.testing.assert_close(h_post, torch.ones_like(h_post), atol=0.25, rtol=0)
    assert (torch.diagonal(H, dim1=-2, dim2=-1) > 0.85).all()


def test_block_compiles_without_graph_breaks():
    blk = _block_pair(24, torch.float32, seed=1)
    x = torch.randn(19, 4, 24, device=DEV)
    explained = torch._dynamo.explain(blk)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(blk, fullgraph=True, backend="aot_eager")
    xc = x.clone().requires_grad_()
    out_c = compiled(xc)
    out_c.square().sum().backward()
    blk.zero_grad()
    xe = x.clone().requires_grad_()
    out_e = blk(xe)
    out_e.square().sum().backward()
    torch.testing.assert_close(out_c, out_e, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_block_backward_traces_through_aot_autograd(dtype):
    """torch.compile(backend="aot_eager") traces the block's backward with fake tensors: every kernel it reaches
    must be an op with a fake (weight_grad's split launched Triton on fakes: "invalid python storage")."""
    blk = _block_pair(24, dtype, seed=3)
    x = torch.randn(40, 4, 24, generator=torch.Generator().manual_seed(3)).to(dtype).to(DEV)
    grads = []
    for module in (torch.compile(blk, backend="aot_eager", fullgraph=True), blk):
        blk.zero_grad()
        xl = x.detach().requires_grad_()
        module(xl).backward(torch.ones(x.shape, dtype=dtype, device=DEV))
        grads.append([xl.grad] + [p.grad.clone() for p in blk.parameters()])
    for got, want in zip(*grads):
        assert _rel_err(got, want) < BLOCK_REL[dtype]


@pytest.mark.gpu
@pytest.mark.skipif(device.is_interpreter(), reason="needs a GPU: Inductor generates CUDA kernels")
@pytest.mark.parametrize("dtype,T,C", [(torch.float32, 37, 41), (torch.bfloat16, 4231, 96)])
def test_block_compiles_with_inductor_gpu(dtype, T, C):
    """MHCLiteBlock under torch.compile(backend="inductor", fullgraph=True): one graph, no break, and the
    output, dx and every parameter's gradient as the same block computes them eagerly (Inductor compiles
    K2 and the wrapped layer around our ops, so they round apart: the block tolerances)."""
    blk = _block_pair(C, dtype, seed=2)
    x = torch.randn(T, 4, C, device=DEV).to(dtype)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(blk)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(blk, backend="inductor", fullgraph=True)
    g = torch.cos(torch.arange(x.numel(), device=DEV, dtype=torch.float64)).reshape(x.shape).to(dtype)

    def step(module):  # the same parameters (blk's) through the compiled or the eager module
        blk.zero_grad()
        xl = x.detach().requires_grad_()
        out = module(xl)
        out.backward(g)
        return out.detach(), xl.grad, {n: p.grad.clone() for n, p in blk.named_parameters()}

    out_c, dx_c, grads_c = step(compiled)
    out_e, dx_e, grads_e = step(blk)
    assert out_c.dtype == out_e.dtype and dx_c.dtype == dx_e.dtype
    assert _rel_err(out_c, out_e) < BLOCK_REL[dtype] and _rel_err(dx_c, dx_e) < BLOCK_REL[dtype]
    assert set(grads_c) == set(grads_e)
    for name in grads_e:
        assert grads_e[name].abs().max() > 0, name
        assert _rel_err(grads_c[name], grads_e[name]) < BLOCK_REL[dtype], name


# ---------------------------------------------------------------------------- launch configurations

def test_table_is_complete_and_within_triton_limits():
    assert {"sm90", "default", "interpreter"} <= set(configs.TABLE)
    for arch, entries in configs.TABLE.items():
        assert set(entries) == set(configs.KERNELS), arch
        for cfg in entries.values():
            assert cfg.block_c & (cfg.block_c - 1) == 0 and cfg.block_t & (cfg.block_t - 1) == 0
            if arch != "interpreter":
                assert cfg.block_t * cfg.block_c * 9 <= 2**20
    for T, C in [(1, 9), (4231, 41), (2**21, 9), (65536, 2560), (3, 40960)]:
        for k in configs.KERNELS:
            cfg = configs.lookup(k, T=T, C=C, device=DEV)
            assert 16 <= cfg.block_c and 16 <= cfg.block_t and cfg.block_t * cfg.block_c <= configs.MAX_TILE_ELEMENTS


def test_interpreter_tiles_are_large_and_fit_the_problem():
    cpu = torch.device("cpu")
    if not device.is_interpreter():
        pytest.skip("interpreter entry only")
    big = configs.lookup("k4_fwd", T=2**20, C=9, device=cpu)
    assert big.block_c == 16 and big.block_t * big.block_c == configs.INTERPRETER_TILE_ELEMENTS
    small = configs.lookup("k3_fwd", T=5, C=4231, device=cpu)
    assert small.block_t == 16 and small.block_c >= 512  # short T: spend the tile on C


def test_launch_override_reaches_the_launcher_and_is_validated():
    with kernel_config.patch(launch_overrides={"mhc_k3_fwd": {"block_t": 32, "block_c": 64}}):
        cfg = configs.lookup("k3_fwd", T=1000, C=1000, device=DEV)
    assert (cfg.block_t, cfg.block_c) == (32, 64)
    with kernel_config.patch(launch_overrides={"mhc_k3_fwd": {"block_c": 48}}):
        with pytest.raises(LaunchConfigError, match="not a power of two"):
            mhc.fused_pre_map(torch.randn(4, 4, 8, device=DEV), torch.rand(4, 4, device=DEV))
    with pytest.raises(LaunchConfigError, match="unknown mHC kernel"):
        configs.lookup("k9", T=1, C=1, device=DEV)


# ---------------------------------------------------------------------------- benchmark helpers (CPU)

def test_traffic_model_matches_seed_003():
    """Seed 003's H100 table (T=65536, C=2560, bf16): K1 fwd 1347 MB, K3 fwd 1679 MB, K4 fwd 3025 MB.

    Our K1 keeps y in fp32 (4.2 MB more written by the forward and read by the backward)."""
    y_fp32_extra = 65536 * 32 * 2 / 1e6
    assert abs(bench.traffic_bytes("k1_fwd", T=65536, C=2560, elem=2) / 1e6 - (1347 + y_fp32_extra)) < 2
    assert abs(bench.traffic_bytes("k3_fwd", T=65536, C=2560, elem=2) / 1e6 - 1679) < 2
    assert abs(bench.traffic_bytes("k4_fwd", T=65536, C=2560, elem=2) / 1e6 - 3025) < 2
    assert abs(bench.traffic_bytes("k1_bwd_dx", T=65536, C=2560, elem=2) / 1e6 - (2694 + y_fp32_extra)) < 4


def test_benchmark_calls_match_their_references():
    """The benchmark's per-kernel calls (also the grid search's) compute what their references compute."""
    case = bench.make_case(40, 9, torch.float32, DEV)
    ours, refs = bench.our_calls(case), bench.reference_calls(case)
    assert list(ours) == list(configs.KERNELS) == list(refs)
    for key in configs.KERNELS:
        assert bench.max_abs_error(ours[key](), refs[key]()) < 1e-4, key
    pinned = bench.our_calls(case, {"k4_fwd": LaunchConfig(16, 16, 4, 1)})["k4_fwd"]()
    assert bench.max_abs_error(pinned, refs["k4_fwd"]()) < 1e-5


def test_gridsearch_candidates_are_bounded_and_start_with_the_table_entry():
    cur = LaunchConfig(16, 128, 4, 2)
    cands = mhc_gridsearch.candidates("k4_bwd_fused", current=cur, elem=2, max_trials=10)
    assert cands[0] == cur and len(cands) == 10 and len(set(cands)) == 10
    assert all(mhc_gridsearch.plausible("k4_bwd_fused", c, 2) for c in cands[1:])
    flat = mhc_gridsearch.candidates("k3_fwd", current=LaunchConfig(32, 256, 8, 1), elem=2, max_trials=500)
    assert all(c.num_stages == 1 for c in flat) and len(flat) < 500


def test_gridsearch_dry_run_lists_a_bounded_plausible_grid(capsys):
    """--dry-run needs no GPU: per kernel the sm90 table entry (fitted to the shape), then plausible candidates."""
    assert mhc_gridsearch.main(["--dry-run", "--max-trials", "6"]) == 0
    out = capsys.readouterr().out
    assert "total: 42 candidates" in out  # 7 kernels x 6: the 8-minute budget holds ~170 timed trials
    lines = out.splitlines()
    k1 = lines[lines.index("k1_fwd: 6 candidates") + 1:][:6]
    cur = configs.TABLE["sm90"]["k1_fwd"]
    assert k1[0].split(".", 1)[1].strip() == (f"BT={cur.block_t} BC={cur.block_c} w={cur.num_warps} "
                                               f"s={cur.num_stages}  (table entry)")
    for line in k1[1:]:  # K1's dot needs BLOCK_T >= 16; every candidate passes the pruning rules
        bt, bc, w, st = (int(f.split("=")[1]) for f in line.split(".", 1)[1].split())
        assert bt >= 16 and mhc_gridsearch.plausible("k1_fwd", LaunchConfig(bt, bc, w, st), 2)


def test_gridsearch_overrides_adopt_only_real_winners():
    def result(kernel, table_ms, best_ms):
        cfg = {"block_t": 32, "block_c": 256, "num_warps": 4, "num_stages": 3}
        return {"kernel": kernel, "table_entry_ms": table_ms,
                "best": None if best_ms is None else {"config": cfg, "median_ms": best_ms}}

    text = mhc_gridsearch.launch_overrides([result("k1_bwd_dx", 1.19, 1.00), result("k3_fwd", 0.50, 0.495),
                                            result("k4_fwd", None, 0.4), result("k4_bwd_fused", 0.7, None)])
    assert text == ("mhc_k1_bwd_dx.block_t=32,mhc_k1_bwd_dx.block_c=256,mhc_k1_bwd_dx.num_warps=4,"
                    "mhc_k1_bwd_dx.num_stages=3")
    from tritondiff.kernels.config import _parse_launch
    assert _parse_launch(text) == {"mhc_k1_bwd_dx": {"block_t": 32, "block_c": 256, "num_warps": 4,
                                                     "num_stages": 3}}
    assert mhc_gridsearch.launch_overrides([result("k3_fwd", 0.5, 0.499)]) == ""


def test_gridsearch_report_has_environment_failures_and_table_block():
    ok = {"config": LaunchConfig(32, 256, 8, 1).as_dict(), "median_ms": 0.5, "min_ms": 0.49, "gbps": 3000.0,
          "is_table_entry": False}
    results = [{"kernel": "k3_fwd", "name": configs.KERNELS["k3_fwd"], "best": ok, "table_entry_ms": 0.55,
                "trials_run": 2, "top": [ok], "failed": [{"config": LaunchConfig(128, 512, 2, 1).as_dict(),
                                                          "error": "OutOfResources: shared memory"}]},
               {"kernel": "k1_fwd", "name": configs.KERNELS["k1_fwd"], "best": None, "table_entry_ms": None,
                "trials_run": 0, "top": [], "failed": []}]
    env = {"date": "2026-11-22", "device": "NVIDIA H100", "torch": "2.11", "triton": "3.6.0"}
    text = mhc_gridsearch.report_markdown(results, env=env, title="t", arch="sm90", elapsed=12.0, budget_s=420)
    assert "- device: NVIDIA H100" in text and "- triton: 3.6.0" in text and "- date: 2026-11-22" in text
    assert "1.100x the table entry" in text and "failed BT=128 BC=512 w=2 s=1: OutOfResources" in text
    assert "## k1_fwd: no successful trial" in text
    assert '"k3_fwd": _C(block_t=32, block_c=256, num_warps=8, num_stages=1),' in text
    assert '"k1_fwd"' not in text.split("```python")[1]  # no winner, no table line


def test_gpu_scripts_exit_cleanly_without_a_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    assert bench.main(["--T", "64", "--C", "16"]) == 0
    assert mhc_gridsearch.main(["--T", "64", "--C", "16"]) == 0
    assert "no CUDA device" in capsys.readouterr().out


# ---------------------------------------------------------------------------- trace report

def _synthetic_trace():
    def k(name, ts, dur, stream):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                "args": {"device": 0, "stream": stream}}
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5000}]
    ev += [k("_fused_pre_map_fwd_kernel", 1000 * i, 500.0, 7) for i in range(4)]          # t = 0, 1000, 2000, 3000
    ev += [k("_fused_post_res_bwd_fused_kernel_n4", 10000 + 2000 * i, 1500.0, 7) for i in range(3)]
    ev += [k("_fused_pre_map_bwd_dx_kernel", 20000 + 100 * i, 0, 7) for i in range(2)]   # dur 0: sub-us kernels
    ev += [k("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 2200, 600.0, 26),           # overlaps pre_map #3
           k("CROSS_DEVICE_reduce_1stage", 1100, 200.0, 30),                              # no nccl prefix: pre_map #2
           k("ncclDevKernel_AllGather", 12100, 100.0, 7),                                 # same stream: ignored
           k("ncclDevKernel_AllReduce", 13400, 300.0, 26),                                # overlaps post_res #2 tail
           k("ncclDevKernel_Broadcast", 14200, 0, 26),                                    # dur 0, inside post_res #3
           k("ampere_bf16_gemm", 0, 100.0, 7)]
    return {"traceEvents": ev}


def test_trace_report_on_a_synthetic_trace(tmp_path, capsys):
    stats = mhc_trace.analyse(_synthetic_trace()["traceEvents"])
    assert list(stats) == ["k3_fwd", "k3_bwd_dx", "k4_bwd_fused"]
    assert len(stats["k3_fwd"].events) == 4 and len(stats["k4_bwd_fused"].events) == 3
    assert len(stats["k3_bwd_dx"].events) == 2 and not stats["k3_bwd_dx"].overlapped
    # The default --comm-regex: a custom all-reduce kernel counts (case-insensitive), as does a 0-us nccl kernel.
    assert [(e.ts, c.name) for e, c in stats["k3_fwd"].overlapped] == [
        (1000.0, "CROSS_DEVICE_reduce_1stage"), (2000.0, "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL")]
    assert [(e.ts, c.name) for e, c in stats["k4_bwd_fused"].overlapped] == [
        (12000.0, "ncclDevKernel_AllReduce"), (14000.0, "ncclDevKernel_Broadcast")]
    only_nccl = mhc_trace.analyse(_synthetic_trace()["traceEvents"], comm_regex="^nccl")  # the old rule
    assert [e.ts for e, _ in only_nccl["k3_fwd"].overlapped] == [2000.0]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_synthetic_trace()))
    assert mhc_trace.main([str(path), "--peak-gbps", "3350", "--T", "65536", "--C", "2560",
                           "--out", str(tmp_path / "r.md")]) == 0
    text = capsys.readouterr().out
    table = text.split("### Invocations")[0]  # the roofline table, not the list of overlaps
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| `") or line.startswith("| **")}
    cells = rows["`_fused_pre_map_fwd_kernel`"]
    # calls, total ms, avg us, stream; LB = 1679 MB / 3350 GB/s = 501 us over a 500 us average: 100.2%;
    # two of the four calls overlap communication, the other two average 500 us as well
    assert cells[1:5] == ["4", "2.000", "500.000", "7"]
    assert cells[7] == "100.2%" and cells[8] == "2" and cells[10] == "100.2%"
    # zero-duration calls: counted, no efficiency or bandwidth (no division by zero)
    zero = rows["`_fused_pre_map_bwd_dx_kernel`"]
    assert zero[1:4] == ["2", "0.000", "0.000"] and zero[7] == "-" and zero[10] == "-" and zero[11] == "-"
    assert rows["**TOTAL (one call each)**"][8] == "4"
    assert "Invocations overlapping communication (4)" in text and "CROSS_DEVICE_reduce_1stage" in text
    assert "ReduceScatter" in text and (tmp_path / "r.md").read_text().strip() == text.strip()
    assert mhc_trace.main([str(path), "--peak-gbps", "3350", "--comm-regex", "^nccl"]) == 0
    text = capsys.readouterr().out
    assert "Invocations overlapping communication (3)" in text and "CROSS_DEVICE" not in text
    with pytest.raises(SystemExit):
        mhc_trace.main([str(path), "--peak-gbps", "3350", "--comm-regex", "all_(reduce"])
    assert "not a valid regular expression" in capsys.readouterr().err
    # a trace of zero-duration calls only: the TOTAL row has no efficiency either
    only_zero = mhc_trace.analyse([e for e in _synthetic_trace()["traceEvents"] if e["name"].endswith("bwd_dx_kernel")])
    total = next(line for line in mhc_trace.report(only_zero, T=8, C=8, elem=2, peak_gbps=1.0).splitlines()
                 if line.startswith("| **TOTAL"))
    assert [c.strip() for c in total.strip("|").split("|")][7] == "-"


def test_trace_report_without_our_kernels(tmp_path):
    assert "No mHC-lite kernel" in mhc_trace.report(mhc_trace.analyse([]), T=8, C=8, elem=2, peak_gbps=1.0)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit):
        mhc_trace.main([str(bad), "--peak-gbps", "1"])
