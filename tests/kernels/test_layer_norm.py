"""kernels.layer_norm: forward and backward against float64 F.layer_norm on every launch path
(row-resident, persistent with fused dweight/dbias, looped over N with the M-split reduction),
stability, large M, layouts, determinism, the custom-op contract and input errors."""
import importlib

import pytest
import torch
import torch.nn.functional as F

from tritondiff import kernels
from tritondiff.base import device
from tritondiff.kernels.config import config
from tritondiff.kernels.exc import UnsupportedInput
from tritondiff.kernels.layer_norm import layer_norm_reference

DEV = device.torch_device()
# Relative tolerance against the float64 reference, scaled by the largest
# reference magnitude: float32 sums, one rounding to the output dtype.
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
# Force the looped kernels (rows wider than 64 loop in chunks of 64) and the
# column-block x M-split dweight/dbias kernel, with several splits, on small inputs.
LOOPED = {"layer_norm": {"max_row_fwd": 64, "max_row_bwd": 64, "max_row_wide": 1, "loop_block": 64, "col_block": 64,
                         "bwd_tile_bytes": 1024, "programs_per_sm": 16}}
# Force the wide kernels (rows past 64 columns in two power-of-two pieces) with several persistent programs.
WIDE = {"layer_norm": {"max_row_fwd": 64, "max_row_bwd": 64, "max_row_wide": 1024, "wide_programs_per_sm": 3,
                       "wide_fwd_programs_per_sm": 2}}
# Force many row blocks per persistent backward program and multi-row forward tiles.
SMALL_TILES = {"layer_norm": {"fwd_tile_bytes": 2048, "bwd_tile_bytes": 1024, "programs_per_sm": 3}}


def _make(shape, dtype, *, weight=True, bias=True, seed=0, mean=0.0, std=1.0, param_dtype=None):
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    pd = param_dtype or dtype

    def rnd(*s, scale=1.0, shift=0.0):
        return (torch.randn(*s, generator=g, dtype=torch.float64) * scale + shift)

    x = rnd(*shape, scale=std, shift=mean).to(dtype).to(DEV)
    w = rnd(n, scale=0.5, shift=1.0).to(pd).to(DEV) if weight else None
    b = rnd(n).to(pd).to(DEV) if bias else None
    dy = rnd(*shape).to(dtype).to(DEV)
    return x, w, b, dy


def _run(fn, x, w, b, dy, eps=1e-5):
    """y and the gradients (dx, dweight, dbias; None where a parameter is absent) of fn."""
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in (x, w, b)]
    y = fn(leaves[0], (x.shape[-1],), leaves[1], leaves[2], eps)
    grads = torch.autograd.grad(y, [t for t in leaves if t is not None], dy)
    it = iter(grads)
    return y.detach(), [next(it) if t is not None else None for t in leaves]


def _reference(x, w, b, dy, eps=1e-5):
    d = [t.double() if t is not None else None for t in (x, w, b)]
    return _run(F.layer_norm, d[0], d[1], d[2], dy.double(), eps)


def _check(x, w, b, dy, *, eps=1e-5, tol=None, grad_tol=None):
    y, grads = _run(kernels.layer_norm, x, w, b, dy, eps)
    y_ref, grads_ref = _reference(x, w, b, dy, eps)
    tol = tol or TOL[x.dtype]
    tols = (tol, grad_tol or tol, grad_tol or tol, grad_tol or tol)
    assert y.dtype == x.dtype and y.shape == x.shape
    for name, got, ref, like, tol in zip(("y", "dx", "dweight", "dbias"), [y] + grads, [y_ref] + grads_ref,
                                         (x, x, w, b), tols):
        if ref is None:
            assert got is None, name
            continue
        assert got.dtype == like.dtype and got.shape == like.shape, name
        scale = max(ref.abs().max().item(), 1.0) if ref.numel() else 1.0
        torch.testing.assert_close(got.double(), ref, rtol=0, atol=tol * scale, msg=lambda m: f"{name}: {m}")
    return y, grads


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(41, 9), (9, 341), (4231, 16), (3, 4231), (2, 3, 41), (341,), (7, 1), (1, 1),
                                   (5, 2)])
def test_matches_float64_reference(shape, dtype):
    _check(*_make(shape, dtype, seed=sum(shape)))


@pytest.mark.parametrize("weight, bias", [(False, False), (True, False), (False, True)])
def test_optional_affine(weight, bias):
    x, w, b, dy = _make((41, 341), torch.float32, weight=weight, bias=bias, seed=3)
    y, _ = _check(x, w, b, dy)
    torch.testing.assert_close(y, layer_norm_reference(x, (341,), w, b), rtol=0, atol=2e-5 * y.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float32_parameters_with_half_input(dtype):
    x, w, b, dy = _make((41, 72), dtype, seed=4, param_dtype=torch.float32)
    _, (_, dw, db) = _check(x, w, b, dy)
    assert dw.dtype == torch.float32 and db.dtype == torch.float32


@pytest.mark.parametrize("dtype, shape", [(torch.float32, (9, 341)), (torch.bfloat16, (9, 341)),
                                          (torch.float16, (3, 1000)), (torch.float32, (3, 64)),
                                          (torch.float32, (2, 65))])
def test_looped_path(shape, dtype):
    with config.patch(launch_overrides=LOOPED):
        _check(*_make(shape, dtype, seed=shape[1]))


@pytest.mark.parametrize("dtype, shape", [(torch.float32, (9, 341)), (torch.bfloat16, (9, 341)),
                                          (torch.float16, (2, 1000)), (torch.float32, (7, 128)),
                                          (torch.float32, (3, 65)), (torch.bfloat16, (40, 96))])
def test_wide_path(shape, dtype):
    """Forward and backward on rows in a [head] and a [tail] piece (341 = 256 + 128 with 43 masked,
    128 = 64 + 64, 65 = 64 + 1), fewer and more rows than programs."""
    with config.patch(launch_overrides=WIDE):
        _check(*_make(shape, dtype, seed=shape[1]))


@pytest.mark.parametrize("overrides", [None, LOOPED, WIDE], ids=["resident", "looped", "wide"])
def test_gradient_sums_past_float32_range(overrides):
    """dy near float32's max, its sign alternating by row: partial sums of dy * xhat and dy over the rows
    overflow float32 on the way where the true dweight / dbias are finite (the wide backward's float32 partials
    are redone scaled by 2**-64), and stay infinite where the truth is past float32's max."""
    x, w, b, _ = _make((9, 341), torch.float32, seed=26)
    sign = torch.tensor([1.0, -1.0]).repeat(5)[:9, None]
    dy = (torch.full((9, 341), 3e38) * sign).to(DEV)
    with config.patch(launch_overrides=overrides or {}):
        _, (dx, dw, db) = _run(kernels.layer_norm, x, w, b, dy)
    _, (_, dw_ref, db_ref) = _reference(x, w, b, dy)
    fmax = torch.finfo(torch.float32).max
    for got, ref in ((dw, dw_ref), (db, db_ref)):
        past = ref.abs() > fmax
        assert torch.equal(got[past], torch.sign(ref[past]).float() * float("inf"))
        assert torch.isfinite(got[~past]).all()
        finite = ref[~past]
        torch.testing.assert_close(got[~past].double(), finite, rtol=0, atol=TOL[torch.float32] * finite.abs().max())
    assert torch.isfinite(db).all() and db.abs().max() > 1e38


def test_wide_rows_take_the_wide_kernels_on_a_gpu():
    """The sm90 launch table sends 4096 x 10240 (and x 12288) to the wide kernels in two unpadded pieces, the
    backward one program per SM, and rows past its pieces to the looped kernels."""
    ln = importlib.import_module("tritondiff.kernels.layer_norm")  # the package exports the function by that name
    sm90 = ln._LAUNCH["sm90"]
    plan = ln._backward_plan(4096, 10240, 2, sm90, 132)
    assert plan["wide"] and plan["grid"] == (132,) and (plan["meta"]["HEAD"], plan["meta"]["TAIL"]) == (8192, 2048)
    assert plan["reduce_meta"]["SCALED"]
    assert ln._backward_plan(4096, 12288, 4, sm90, 132)["meta"]["TAIL"] == 4096
    assert ln._backward_plan(4096, 16384, 2, sm90, 132)["looped"]
    assert not ln._backward_plan(4096, 4096, 2, sm90, 132)["wide"]
    path, grid, meta = ln._forward_plan(4096, 10240, 2, sm90, 132)
    assert path == "wide" and grid == (528,) and (meta["HEAD"], meta["TAIL"]) == (8192, 2048)
    assert ln._forward_plan(4096, 16384, 2, sm90, 132)[0] == "looped"
    assert ln._forward_plan(4096, 4096, 2, sm90, 132)[0] == "resident"


@pytest.mark.parametrize("shape", [(341, 16), (1000, 9), (97, 41)])
def test_persistent_backward_many_row_blocks(shape):
    with config.patch(launch_overrides=SMALL_TILES):
        _check(*_make(shape, torch.float32, seed=shape[0]))


@pytest.mark.parametrize("tile_acc, stages", [(False, 1), (True, 3), (False, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_persistent_backward_column_sums_and_pipelining(tile_acc, stages, dtype):
    """The row-resident backward's other launch forms: dweight/dbias summed per column as each tile is done
    (``bwd_tile_acc=False``), the row-block loop pipelined (``bwd_stages``); each as right as the default."""
    tiles = {"layer_norm": {**SMALL_TILES["layer_norm"], "bwd_tile_acc": tile_acc, "bwd_stages": stages}}
    with config.patch(launch_overrides=tiles):
        _check(*_make((1000, 9), dtype, seed=11))


class _Launches:
    """Stands in for a @triton.jit kernel in kernels.layer_norm's namespace: records each launch's grid."""

    def __init__(self, kernel, grids: list):
        self.kernel, self.grids = kernel, grids

    def __getitem__(self, grid):
        self.grids.append(tuple(grid))
        return self.kernel[grid]


def test_looped_subjects_run_the_looped_kernels(monkeypatch):
    """The bundled subjects kernels.layer_norm_looped / layer_norm_backward_looped exist because the
    interpreter's launch table never picks the looped kernels: at 9 x 2000 their bodies must launch the
    looped forward and dx kernels (one program per row) and the dweight/dbias kernel over both 1024-wide
    column blocks and several M-splits, and still match float64."""
    import sys

    from tritondiff.harness.subjects import kernels as subjects
    module = sys.modules["tritondiff.kernels.layer_norm"]
    grids = {name: [] for name in ("_layer_norm_fwd_looped_kernel", "_layer_norm_bwd_dx_looped_kernel",
                                   "_layer_norm_bwd_dwdb_kernel", "_layer_norm_fwd_kernel", "_layer_norm_bwd_kernel")}
    for name, seen in grids.items():
        monkeypatch.setattr(module, name, _Launches(getattr(module, name), seen))
    x, w, b, dy = _make((9, 2000), torch.float32, seed=27)
    y = subjects.layer_norm_looped.fn(x, w, b, 1e-5)
    dx, dw, db = subjects.layer_norm_backward_looped.fn(x, w, b, dy)
    assert grids["_layer_norm_fwd_looped_kernel"] == [(9,), (9,)]  # one per subject
    assert grids["_layer_norm_bwd_dx_looped_kernel"] == [(9,)]
    (dwdb_grid,) = grids["_layer_norm_bwd_dwdb_kernel"]
    assert dwdb_grid[0] == 2 and dwdb_grid[1] > 1, dwdb_grid  # column blocks x M-splits
    assert grids["_layer_norm_fwd_kernel"] == [] and grids["_layer_norm_bwd_kernel"] == []
    y_ref, (dx_ref, dw_ref, db_ref) = _reference(x, w, b, dy)
    for got, ref in ((y, y_ref), (dx, dx_ref), (dw, dw_ref), (db, db_ref)):
        torch.testing.assert_close(got.double(), ref, rtol=0, atol=TOL[torch.float32] * ref.abs().max().item())


@pytest.mark.parametrize("overrides", [None, LOOPED, WIDE], ids=["resident", "looped", "wide"])
def test_stable_statistics_with_large_mean(overrides):
    # mean 1e4, std 1e-2: E[x**2] - E[x]**2 would lose every significant digit
    # in float32 (1e8 - 1e8 with an ulp of 8), and even a float32 mean is off by
    # up to half an ulp of 1e4 = 5% of std.  Centring twice (forward and
    # backward) keeps y and the gradients as exact as for well-scaled rows;
    # torch's own float32 layer_norm is off by ~0.1 in y here.
    x, w, b, dy = _make((9, 341), torch.float32, seed=5, mean=1e4, std=1e-2)
    with config.patch(launch_overrides=overrides or {}):
        y, _ = _check(x, w, b, dy, tol=2e-5, grad_tol=1e-4)
    y_torch = F.layer_norm(x, (341,), w, b)
    y_ref = _reference(x, w, b, dy)[0]
    assert (y.double() - y_ref).abs().max() < (y_torch.double() - y_ref).abs().max() / 100


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_eps_is_used():
    # (eps = 0: the padding rows of a tile divide by zero; they are never stored.)
    x, w, b, dy = _make((9, 41), torch.float32, seed=6, std=1e-3)
    _check(x, w, b, dy, eps=0.5)
    _check(x, w, b, dy, eps=0.0)


def test_m_just_past_2_pow_20_small_n():
    # The dweight/dbias reduction over 1,048,577 rows: split into per-program
    # partials, then a fixed-order reduce (never one block over all of M).
    _check(*_make((2**20 + 1, 3), torch.float32, seed=7), tol=5e-5)


def test_seed_case_backward_1152000_by_16():
    # The seed's layer-norm backward (m = 1,152,000, n = 16) through the backward
    # op; reference gradients from the closed form in float64.
    g = torch.Generator().manual_seed(8)
    m, n = 1_152_000, 16
    x, dy = torch.randn(m, n, generator=g).to(DEV), torch.randn(m, n, generator=g).to(DEV)
    w = torch.randn(n, generator=g).to(DEV)
    xd, dyd = x.double(), dy.double()
    rstd = (xd.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
    dx, dw, db = torch.ops.tritondiff.layer_norm_backward(dy, x, w, rstd.squeeze(-1).float(),
                                                          torch.float32, torch.float32)
    xhat = (xd - xd.mean(-1, keepdim=True)) * rstd
    gw = dyd * w.double()
    dx_ref = rstd * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))
    for got, ref in ((dx, dx_ref), (dw, (dyd * xhat).sum(0)), (db, dyd.sum(0))):
        torch.testing.assert_close(got.double(), ref, rtol=0, atol=5e-5 * ref.abs().max().item())


def test_bitwise_deterministic():
    # Several persistent backward programs, each over several row blocks: the
    # dweight/dbias partials and their final reduce must not depend on timing.
    x, w, b, dy = _make((2000, 16), torch.float32, seed=9)
    with config.patch(launch_overrides={"layer_norm": {"bwd_tile_bytes": 4096, "programs_per_sm": 3}}):
        first = _run(kernels.layer_norm, x, w, b, dy)
        second = _run(kernels.layer_norm, x, w, b, dy)
    for a, c in zip([first[0]] + first[1], [second[0]] + second[1]):
        assert torch.equal(a, c)


def test_non_contiguous_inputs():
    x, w, b, dy = _make((64, 341), torch.float32, seed=10)
    for xv, dyv in ((x[:, :41], dy[:, :41]),  # rows strided (a view, no copy)
                    (x.t()[:, :64], dy.t()[:, :64]),  # columns strided (copied)
                    (x[::3], dy[::3])):
        n = xv.shape[-1]
        _check(xv, w[:n], b[:n], dyv)


def test_strided_parameters():
    x, w, b, dy = _make((41, 9), torch.float32, seed=19)
    w2 = torch.stack([w, -w], dim=1).reshape(-1)[::2]  # stride 2
    b2 = torch.stack([b, -b], dim=1).reshape(-1)[::2]
    assert w2.stride() == (2,) and torch.equal(w2, w)
    _check(x, w2, b2, dy)


def test_broadcast_upstream_gradient():
    # y.sum().backward() hands the backward an expanded dy with zero strides.
    x, w, b, _ = _make((41, 9), torch.float32, seed=11)
    _check(x, w, b, torch.ones(1, 1, device=DEV).expand(41, 9))


@pytest.mark.parametrize("shape", [(0, 16), (4, 0), (2, 0, 5)])
def test_empty(shape):
    x, w, b, dy = _make(shape, torch.float32, seed=12)
    y, (dx, dw, db) = _run(kernels.layer_norm, x, w, b, dy)
    assert y.shape == x.shape and dx.shape == x.shape
    assert dw.shape == (shape[-1],) and torch.all(dw == 0) and torch.all(db == 0)


def test_returns_y_and_the_op_returns_statistics():
    x, w, b, _ = _make((9, 41), torch.float32, seed=13)
    y, mean, rstd = torch.ops.tritondiff.layer_norm(x, [41], w, b, 1e-5)
    assert torch.equal(y, kernels.layer_norm(x, 41, w, b))
    torch.testing.assert_close(mean, x.mean(-1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(rstd, (x.var(-1, unbiased=False) + 1e-5).rsqrt(), rtol=1e-5, atol=0)


def test_opcheck():
    x, w, b, dy = _make((9, 41), torch.float32, seed=14)
    torch.library.opcheck(torch.ops.tritondiff.layer_norm.default,
                          (x.requires_grad_(), [41], w.requires_grad_(), b.requires_grad_(), 1e-5))
    x16, _, _, _ = _make((5, 9), torch.float16, seed=15)
    torch.library.opcheck(torch.ops.tritondiff.layer_norm.default, (x16, [9], None, None, 1e-5))
    _, _, rstd = torch.ops.tritondiff.layer_norm(x.detach(), [41], w.detach(), b.detach(), 1e-5)
    torch.library.opcheck(torch.ops.tritondiff.layer_norm_backward.default,
                          (dy, x.detach(), w.detach(), rstd, torch.float32, torch.float32))
    torch.library.opcheck(torch.ops.tritondiff.layer_norm_backward.default,
                          (dy.half(), x.detach().half(), None, rstd, torch.float16, torch.bfloat16))


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_no_graph_break(dynamic):
    def f(x, w, b):
        return kernels.layer_norm(x * 2.0, (x.shape[-1],), w, b).sum(-1)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=dynamic)
    for shape in ((41, 9), (13, 9), (6, 17)):  # with dynamic=True the later shapes reuse one graph
        x, w, b, _ = _make(shape, torch.float32, seed=16)
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        out = compiled(*leaves)
        grads = torch.autograd.grad(out.square().sum(), leaves)
        eager_leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        out_e = f(*eager_leaves)
        grads_e = torch.autograd.grad(out_e.square().sum(), eager_leaves)
        assert torch.equal(out.detach(), out_e.detach())
        for g, ge in zip(grads, grads_e):
            assert torch.equal(g, ge)


@pytest.mark.parametrize("args, argument, needle", [
    (lambda x, w: (x, (3, 16), None, None), "normalized_shape", "last dimension only"),
    (lambda x, w: (x, (8,), None, None), "normalized_shape", "does not match"),
    (lambda x, w: (x, "16", None, None), "normalized_shape", "int or a sequence"),
    (lambda x, w: (x, (16,), w[:8], None), "weight", "must be \\(16,\\)"),
    (lambda x, w: (x, (16,), None, w.double()), "bias", "dtype torch.float64"),
    (lambda x, w: (x.double(), (16,), None, None), "x", "float32, float16 and bfloat16"),
    (lambda x, w: (x.int(), (16,), None, None), "x", "dtype torch.int32"),
    (lambda x, w: (x[0, 0], (1,), None, None), "x", "0-d"),
])
def test_bad_arguments_raise_clear_errors(args, argument, needle):
    x, w, _, _ = _make((3, 16), torch.float32, seed=17)
    with pytest.raises(UnsupportedInput, match=needle) as info:
        kernels.layer_norm(*args(x, w))
    assert info.value.argument == argument and isinstance(info.value, ValueError)


@pytest.mark.parametrize("eps", [-1e-5, float("nan"), float("inf"), "1e-5"])
def test_bad_eps(eps):
    x, _, _, _ = _make((3, 16), torch.float32, seed=18)
    with pytest.raises(UnsupportedInput, match="eps"):
        kernels.layer_norm(x, (16,), eps=eps)


def _backward_args():
    """Valid arguments of tritondiff::layer_norm_backward (M = 3, N = 16), as the forward leaves them."""
    x, w, b, dy = _make((3, 16), torch.float32, seed=26)
    _, _, rstd = torch.ops.tritondiff.layer_norm(x, [16], w, b, 1e-5)
    return dict(dy=dy, x=x, weight=w, rstd=rstd, dweight_dtype=torch.float32, dbias_dtype=torch.float32)


BAD_BACKWARD_ARGS = [  # (argument, its bad value from the valid arguments, message pattern)
    ("weight", lambda a: a["weight"][:8], r"weight has shape \(8,\); it must be \(16,\)"),
    ("weight", lambda a: a["weight"][None], r"weight has shape \(1, 16\); it must be \(16,\)"),
    ("weight", lambda a: a["weight"].double(), "weight has dtype torch.float64; it must be x's dtype"),
    ("weight", lambda a: a["weight"].int(), "weight has dtype torch.int32"),
    ("weight", lambda a: a["weight"].to("meta"), "weight is on meta but kernels run on"),
    ("rstd", lambda a: a["rstd"].to("meta"), "rstd is on meta but kernels run on"),
    ("rstd", lambda a: a["rstd"][:2], r"rstd must be float32 of shape \(3,\)"),
    ("rstd", lambda a: a["rstd"].half(), "rstd must be float32 .* got torch.float16"),
    ("dy", lambda a: a["dy"][:, :8], r"dy has shape \(3, 8\), x \(3, 16\)"),
    ("dy", lambda a: a["dy"].double(), "dy has dtype torch.float64"),
    ("x", lambda a: a["x"][0, 0], "x is 0-d"),
    ("dweight_dtype", lambda a: torch.float64, "dweight_dtype=torch.float64 is not float32"),
]


@pytest.mark.parametrize("impl", ["real", "fake"])
@pytest.mark.parametrize("argument, bad, needle", BAD_BACKWARD_ARGS,
                         ids=[f"{arg}-{i}" for i, (arg, _, _) in enumerate(BAD_BACKWARD_ARGS)])
def test_backward_op_rejects_bad_arguments(argument, bad, needle, impl):
    """Every argument of the backward op is validated, by the kernel launch and by the fake implementation
    (what torch.compile traces): a mismatched weight used to be read out of bounds."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    args = _backward_args()
    args[argument] = bad(args)
    with pytest.raises(UnsupportedInput, match=needle) as info:
        if impl == "real":
            torch.ops.tritondiff.layer_norm_backward(**args)
        else:
            with FakeTensorMode(allow_non_fake_inputs=True) as mode:
                torch.ops.tritondiff.layer_norm_backward(
                    **{k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in args.items()})
    assert info.value.argument == argument and argument in str(info.value)


def test_backward_op_accepts_float32_weight_with_half_input_and_no_weight():
    """The two weight forms the forward takes beside x's dtype pass the check (and opcheck)."""
    a = _backward_args()
    for weight in (a["weight"], None):
        args = (a["dy"].half(), a["x"].half(), weight, a["rstd"], torch.float32, torch.float16)
        assert set(torch.library.opcheck(torch.ops.tritondiff.layer_norm_backward.default, args).values()) \
            == {"SUCCESS"}


def test_wrong_device_raises():
    other = "meta" if device.is_interpreter() else "cpu"
    with pytest.raises(UnsupportedInput, match="kernels run on"):
        kernels.layer_norm(torch.ones(3, 4, device=other), (4,))


# --------------------------------------------------------------------------- GPU only (skipped in the interpreter)


@pytest.mark.gpu
@pytest.mark.skipif(device.is_interpreter(), reason="needs a GPU: 2**28 elements, and the GPU launch table")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2**24, 16), (64, 65_536)], ids=["2pow24x16", "64x65536"])
def test_contract_extremes_gpu(shape, dtype):
    """Issue #4's extremes on the GPU's own launch table, forward and backward against float64:
    M = 2**24 rows of N = 16 (row-resident tiles; the persistent backward keeps dweight/dbias partials over
    16.7M rows, then the final reduce) and N = 65,536 at M = 64 (wider than max_row_fwd / max_row_bwd:
    the looped forward and dx kernels, the column-block x M-split dweight/dbias kernel)."""
    _check(*_make(shape, dtype, seed=shape[1]))


@pytest.mark.gpu
@pytest.mark.skipif(device.is_interpreter(), reason="needs a GPU: Inductor generates CUDA kernels")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compile_inductor_fullgraph_gpu(dtype):
    """kernels.layer_norm inside a function compiled by Inductor with fullgraph=True: one graph, no break,
    and y and the gradients (x, weight, bias) as eager computes them (Inductor fuses the ops around the
    custom op, so the sums may round apart: the file's tolerances)."""
    def f(x, w, b):
        return kernels.layer_norm(x * 2.0, (x.shape[-1],), w, b).sum(-1)

    x, w, b, _ = _make((4231, 341), dtype, seed=29)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(x, w, b)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="inductor", fullgraph=True)
    results = []
    for fn in (compiled, f):
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        out = fn(*leaves)
        results.append([out.detach()] + list(torch.autograd.grad(out.square().sum(), leaves)))
    for name, got, want in zip(("out", "dx", "dweight", "dbias"), *results):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        scale = max(want.double().abs().max().item(), 1.0)
        torch.testing.assert_close(got.double(), want.double(), rtol=0, atol=TOL[dtype] * scale,
                                   msg=lambda m: f"{name}: {m}")


# --------------------------------------------------------------------------- issue #4: extreme magnitudes
# Rows whose squares overflow float32 ("large": |x| ~ 1e19..1e21, "near_max": |x| in
# [0.25, 0.75] * float32 max) or are subnormal ("tiny", checked with eps = 0 so the variance,
# not eps, sets rstd).  Before the kernels scaled rows by a power of two these came out 0, NaN
# or inf.  Tolerances scale with the reference's own magnitude (dx of a near_max row is ~1e-39),
# never with a floor of 1, which would make such checks vacuous.


def _family(shape, dtype, family, seed):
    g = torch.Generator().manual_seed(seed)
    fi = torch.finfo(dtype)
    u = torch.rand(shape, generator=g, dtype=torch.float64)
    sign = torch.where(torch.rand(shape, generator=g, dtype=torch.float64) < 0.5, -1.0, 1.0)
    if family == "near_max":
        v = sign * fi.max * (0.25 + 0.5 * u)
    elif family == "large":
        v = (sign * fi.max ** 0.5 * 1.01 * (1 + 99 * u)).clamp(-fi.max, fi.max)
    else:  # tiny: subnormal float32
        v = sign * fi.tiny * u.clamp_min(1e-3)
    return v.to(dtype).to(DEV)


def _check_relative(x, w, b, dy, eps, tol):
    y, grads = _run(kernels.layer_norm, x, w, b, dy, eps)
    y_ref, grads_ref = _reference(x, w, b, dy, eps)
    for name, got, ref in zip(("y", "dx", "dweight", "dbias"), [y] + grads, [y_ref] + grads_ref):
        if ref is None:
            continue
        # dx of a subnormal row with eps = 0 is rstd * O(1) ~ 1e38: where the float64 value is
        # past float32's max, the float32 result must be that infinity; everywhere else finite.
        over = ref.abs() > torch.finfo(got.dtype).max
        assert torch.equal(~torch.isfinite(got), over), f"{name}: non-finite where float64 is finite"
        assert torch.equal(got[over].double().sign(), ref[over].sign()), name
        got, ref = got.double()[~over], ref[~over]
        scale = ref.abs().max().item()
        assert scale > 0, name
        torch.testing.assert_close(got, ref, rtol=0, atol=tol * scale, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("overrides", [None, LOOPED, WIDE], ids=["resident", "looped", "wide"])
@pytest.mark.parametrize("family, dtype, eps", [("near_max", torch.float32, 1e-5), ("large", torch.float32, 1e-5),
                                                ("tiny", torch.float32, 0.0), ("near_max", torch.bfloat16, 1e-5)])
def test_rows_beyond_float32_squares(family, dtype, eps, overrides):
    shape = (9, 341) if overrides else (41, 9)
    x = _family(shape, dtype, family, seed=20)
    _, w, b, dy = _make(shape, dtype, seed=21)
    with config.patch(launch_overrides=overrides or {}):
        _check_relative(x, w, b, dy, eps, 4 * TOL[dtype])
        _check_relative(x, None, None, dy, eps, 4 * TOL[dtype])


@pytest.mark.parametrize("overrides", [None, LOOPED, WIDE], ids=["resident", "looped", "wide"])
def test_statistics_of_near_max_and_subnormal_rows(overrides):
    # mean near float32 max and rstd ~5e-39 (below float32's normal range) for near_max rows;
    # rstd ~1e38 for subnormal rows with eps = 0: both within float32 rounding of float64.
    for family, eps in (("near_max", 1e-5), ("tiny", 0.0)):
        x = _family((5, 130), torch.float32, family, seed=22)
        with config.patch(launch_overrides=overrides or {}):
            _, mean, rstd = torch.ops.tritondiff.layer_norm(x, [130], None, None, eps)
        xd = x.double()
        rstd_ref = 1 / (xd.var(-1, unbiased=False) + eps).sqrt()
        torch.testing.assert_close(rstd.double(), rstd_ref, rtol=1e-5, atol=0)
        torch.testing.assert_close(mean.double(), xd.mean(-1), rtol=0, atol=1e-6 * xd.abs().max().item())


@pytest.mark.parametrize("overrides", [None, LOOPED, WIDE], ids=["resident", "looped", "wide"])
def test_constant_rows_at_the_extremes(overrides):
    # A constant row has var = 0: y = bias exactly and rstd = 1/sqrt(eps), also when the
    # value is near float32 max (where rounding noise in the mean, normalised by a scale-
    # relative variance, would otherwise come out O(1)) or subnormal.
    fmax, tiny = torch.finfo(torch.float32).max, torch.finfo(torch.float32).tiny
    x = torch.tensor([0.7 * fmax, -0.7 * fmax, 3e-39, 1e4, 0.0], dtype=torch.float32)[:, None].expand(5, 200)
    x = x.contiguous().to(DEV)
    _, w, b, dy = _make((5, 200), torch.float32, seed=23)
    with config.patch(launch_overrides=overrides or {}):
        y, mean, rstd = torch.ops.tritondiff.layer_norm(x, [200], w, b, 1e-5)
        _, (dx, dw, db) = _run(kernels.layer_norm, x, w, b, dy)
    assert torch.equal(y, b.expand(5, 200))
    assert torch.equal(mean, x[:, 0])
    torch.testing.assert_close(rstd, torch.full_like(rstd, 1e-5 ** -0.5), rtol=1e-6, atol=0)
    # Closed form (xhat = 0): dx = rstd * (g - mean(g)), dweight = 0, dbias = sum(dy).  (torch's own
    # float64 backward returns dx = 0 for the near-max rows, so it is no reference here.)
    gw = dy.double() * w.double()
    dx_ref = 1e-5 ** -0.5 * (gw - gw.mean(-1, keepdim=True))
    assert torch.equal(dw, torch.zeros_like(dw))
    torch.testing.assert_close(db.double(), dy.double().sum(0), rtol=0, atol=1e-5 * dy.abs().sum(0).max().item())
    torch.testing.assert_close(dx.double(), dx_ref, rtol=0, atol=2e-5 * dx_ref.abs().max().item())
    assert tiny > 3e-39  # the third row is subnormal


def test_looped_rescales_when_a_later_chunk_is_larger():
    # The looped kernels take the row scale from the first chunk and rescale their running
    # statistics when a later chunk's max |x| needs a smaller one: rows here grow from ~1 (or
    # subnormal) in the first chunks to near float32 max in the last, and the reverse.
    fmax = torch.finfo(torch.float32).max
    g = torch.Generator().manual_seed(24)
    base = torch.randn(4, 341, generator=g, dtype=torch.float64)
    ramp = torch.ones(4, 341, dtype=torch.float64)
    ramp[0, 300:] = 0.2 * fmax          # ~1, then near max in the last chunk
    ramp[1, :64] = 1e-40                # subnormal first chunk, ~1 after
    ramp[2, :64] = 0.2 * fmax           # near max first, ~1 after (no rescale needed)
    ramp[3, 128:192] = 1e20             # a "large" chunk in the middle
    x = (base * ramp).float().to(DEV)
    _, w, b, dy = _make((4, 341), torch.float32, seed=25)
    with config.patch(launch_overrides=LOOPED):
        _check_relative(x, w, b, dy, 1e-5, 4e-5)


@pytest.mark.parametrize("looped", [False, True])
def test_one_column_backward_gives_exactly_zero_dx(looped):
    """N = 1: xhat is 0 and g - mean(g) is 0, so dx is exactly 0 (eager's too).  On an H100 a contracted
    a * b + c (FMA) gave dx ~ -7.7e-7 for every such row until the kernels launched without contraction."""
    dev = device.torch_device()
    gen = torch.Generator().manual_seed(5)
    x, w, b, dy = (torch.randn(s, generator=gen).to(dev) for s in ((7, 1), (1,), (1,), (7, 1)))
    x.requires_grad_()
    with config.patch(launch_overrides=LOOPED if looped else {}):
        dx, = torch.autograd.grad(kernels.layer_norm(x, (1,), w, b), (x,), dy)
    assert torch.equal(dx, torch.zeros_like(dx)), dx.flatten().tolist()


def test_a_switch_in_the_launch_table_takes_true_or_false_and_an_int_no_bool():
    from tritondiff.kernels.config import _parse_launch
    from tritondiff.kernels.exc import LaunchConfigError

    assert _parse_launch("layer_norm.bwd_tile_acc=false,layer_norm.bwd_stages=3") == {
        "layer_norm": {"bwd_tile_acc": False, "bwd_stages": 3}}
    x, w, b, _ = _make((8, 16), torch.float32)
    for bad, needle in (({"bwd_tile_acc": 1}, "bwd_tile_acc=1: expected True or False"),
                        ({"bwd_stages": True}, "bwd_stages=True: expected a positive int")):
        with config.patch(launch_overrides={"layer_norm": bad}):
            with pytest.raises(LaunchConfigError, match=needle):
                kernels.layer_norm(x, (16,), w, b)
