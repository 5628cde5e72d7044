"""The bundled subjects of the hand-written kernels: every entry point, diffed against eager PyTorch.

These are what ``tritondiff fuzz`` runs by default (with the compiler's), and
what the pre-merge gate fuzzes at the ``ci`` profile.  Reductions reach past
1,048,576 rows.
"""
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tritondiff import kernels
from tritondiff.harness import subject, tensor
from tritondiff.harness.api import VALUE_FAMILIES
from tritondiff.kernels.config import config as kernel_config

FLOATS = ("float32", "float16", "bfloat16")


# ----------------------------------------------------------------------------- nrm2

@subject(name="kernels.nrm2", reference=lambda x: torch.linalg.vector_norm(x),
         inputs={"x": tensor(("N",), dtypes=FLOATS)}, dims={"N": (0, 3_000_000)})
def nrm2_1d(x):
    return kernels.nrm2(x)


@subject(name="kernels.nrm2_2d", reference=lambda x: torch.linalg.vector_norm(x),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS)}, dims={"M": (0, 1_500_000), "N": (0, 4096)})
def nrm2_2d(x):
    return kernels.nrm2(x)


def _nrm2_grad(x, g, norm):
    x = x.detach().requires_grad_(True)
    norm(x).backward(g)
    return x.grad


@subject(name="kernels.nrm2_backward",
         reference=lambda x, g: _nrm2_grad(x, g, torch.linalg.vector_norm),
         inputs={"x": tensor(("N",), dtypes=FLOATS, nonfinite=False), "g": tensor((), dtype_like="x")},
         dims={"N": (0, 1_500_000)})
def nrm2_backward(x, g):
    return _nrm2_grad(x, g, kernels.nrm2)


# ----------------------------------------------------------------------------- layer norm

# Every value family, including the ones of issue #4 (fixed): "large" and "near_max" rows, whose
# squares overflow float32, and subnormal "tiny" rows, whose squares underflow.  The kernels scale
# each row by a power of two before any sum (kernels/layer_norm.py, "Range"); the regression
# tests/regressions/layer_norm_near_max keeps the original near_max finding.
_LN_VALUES = ("normal", "uniform_pos", "large_offset", "large", "near_max", "tiny", "zeros", "integer")
# Weight and bias near the dtype's max are left out: y = xhat * w + b overflows at xhat * w
# (|xhat| up to sqrt(N)) where the exact sum would fit, and CPU eager's different association
# (x * (rstd * w) + (b - mean * rstd * w)) does not -- the contract's formula, not a kernel bug.
_AFFINE_VALUES = tuple(v for v in _LN_VALUES if v != "near_max")
_LN_INPUTS = {"x": tensor(("M", "N"), dtypes=FLOATS, values=_LN_VALUES),
              "weight": tensor(("N",), dtype_like="x", values=_AFFINE_VALUES),
              "bias": tensor(("N",), dtype_like="x", values=_AFFINE_VALUES), "eps": st.sampled_from([1e-5, 1e-6, 1e-3])}
_LN_DIMS = {"M": (0, 1_500_000), "N": (1, 65_536)}


@subject(name="kernels.layer_norm",
         reference=lambda x, weight, bias, eps: F.layer_norm(x, (x.shape[-1],), weight, bias, eps),
         inputs=_LN_INPUTS, dims=_LN_DIMS)
def layer_norm_forward(x, weight, bias, eps):
    return kernels.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@subject(name="kernels.layer_norm_no_affine",
         reference=lambda x: F.layer_norm(x, (x.shape[-1],)),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS, values=_LN_VALUES)}, dims=_LN_DIMS)
def layer_norm_no_affine(x):
    return kernels.layer_norm(x, (x.shape[-1],))


def _ln_grads(x, weight, bias, dy, layer_norm):
    x, weight, bias = (t.detach().requires_grad_(True) for t in (x, weight, bias))
    layer_norm(x, (x.shape[-1],), weight, bias, 1e-5).backward(dy)
    return x.grad, weight.grad, bias.grad


def _layer_norm_two_pass(x, normalized_shape, weight, bias, eps):
    """Layer norm as two passes, the mean and then the variance of x - mean: the float64 truth's form.  PyTorch's
    float64 kernel leaves x - mean a rounding off zero in a row of one element, which its backward multiplies by
    the gradient's scale: dx = -2.4e24 at dy = 2.1e38, where the exact dx is 0.  Here a one-element row centres to exactly 0."""
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    return xc * torch.rsqrt((xc * xc).mean(-1, keepdim=True) + eps) * weight + bias


def _ln_reference(x, weight, bias, dy):
    """The backward subjects' reference: eager PyTorch in the inputs' dtype, two passes for the float64 truth."""
    return _ln_grads(x, weight, bias, dy, _layer_norm_two_pass if x.dtype == torch.float64 else F.layer_norm)


_LN_BWD_INPUTS = {"x": tensor(("M", "N"), dtypes=FLOATS, nonfinite=False, values=_LN_VALUES),
                  "weight": tensor(("N",), dtype_like="x", nonfinite=False),
                  "bias": tensor(("N",), dtype_like="x", nonfinite=False),
                  "dy": tensor(("M", "N"), dtype_like="x", nonfinite=False)}


@subject(name="kernels.layer_norm_backward",
         reference=_ln_reference,
         inputs=_LN_BWD_INPUTS, dims=_LN_DIMS)
def layer_norm_backward(x, weight, bias, dy):
    """dx, dweight, dbias through autograd; dweight/dbias reduce over all M rows."""
    return _ln_grads(x, weight, bias, dy, kernels.layer_norm)


# The looped kernels (_layer_norm_fwd_looped_kernel, _layer_norm_bwd_dx_looped_kernel and the column-block x
# M-split _layer_norm_bwd_dwdb_kernel) serve rows wider than max_row_*: 16K / 8K elements on GPUs, but 2**18
# in the interpreter's launch table, so on CPU the subjects above never reach them.  These two force them
# on small shapes: rows wider than 64 loop in chunks of 1024 (a single chunk up to N = 1024, several past
# it, where the later chunks may rescale the running statistics), the dweight/dbias partials come from
# several M-splits (256 programs' worth, over 2-row tiles at N >= 1024 in float32) and the final reduce
# steps over them 4096 partials at a time.  M stays small and M * N at most ~2**18 (2 MiB of float32 x and
# dy: 64 x 4032, or 3 x 65536): the interpreter runs one program per row and ~5 ms per chunk, so an
# example takes a few seconds.
_LN_LOOPED = {"layer_norm": {"max_row_fwd": 64, "max_row_bwd": 64, "max_row_wide": 1, "loop_block": 1024,
                             "col_block": 1024, "bwd_tile_bytes": 8192, "programs_per_sm": 256,
                             "reduce_tile_numel": 4096}}
# The wide kernels (a row in two power-of-two pieces, persistent; the backward's partials float32) from 65
# columns on.
_LN_WIDE = {"layer_norm": {"max_row_fwd": 64, "max_row_bwd": 64, "max_row_wide": 12288, "wide_programs_per_sm": 4,
                           "wide_fwd_programs_per_sm": 4}}
_LN_WIDE_DIMS = {"M": (1, 256), "N": (2, 12_288)}
_LN_LOOPED_DIMS = {"M": (1, 64), "N": (1, 65_536)}
_LN_LOOPED_BYTES = 2 * 2 ** 20


def _looped_layer_norm(overrides: dict = _LN_LOOPED):
    """config.patch forcing the looped layer-norm kernels, or those ``overrides`` name (other kernels'
    overrides kept)."""
    return kernel_config.patch(launch_overrides={**kernel_config.launch_overrides, **overrides})


@subject(name="kernels.layer_norm_looped",
         reference=lambda x, weight, bias, eps: F.layer_norm(x, (x.shape[-1],), weight, bias, eps),
         inputs=_LN_INPUTS, dims=_LN_LOOPED_DIMS, max_example_bytes=_LN_LOOPED_BYTES)
def layer_norm_looped(x, weight, bias, eps):
    """The forward on its looped path (rows in chunks, Chan-merged statistics)."""
    with _looped_layer_norm():
        return kernels.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@subject(name="kernels.layer_norm_backward_looped",
         reference=_ln_reference,
         inputs=_LN_BWD_INPUTS, dims=_LN_LOOPED_DIMS, max_example_bytes=_LN_LOOPED_BYTES)
def layer_norm_backward_looped(x, weight, bias, dy):
    """dx by the looped dx kernel, dweight/dbias by the column-block x M-split kernel and the final reduce."""
    with _looped_layer_norm():
        return _ln_grads(x, weight, bias, dy, kernels.layer_norm)


@subject(name="kernels.layer_norm_wide",
         reference=lambda x, weight, bias, eps: F.layer_norm(x, (x.shape[-1],), weight, bias, eps),
         inputs=_LN_INPUTS, dims=_LN_WIDE_DIMS, max_example_bytes=_LN_LOOPED_BYTES)
def layer_norm_wide(x, weight, bias, eps):
    """The forward on its wide path (rows of two power-of-two pieces, persistent)."""
    with _looped_layer_norm(_LN_WIDE):
        return kernels.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@subject(name="kernels.layer_norm_backward_wide",
         reference=_ln_reference,
         inputs=_LN_BWD_INPUTS, dims=_LN_WIDE_DIMS, max_example_bytes=_LN_LOOPED_BYTES)
def layer_norm_backward_wide(x, weight, bias, dy):
    """dx, dweight and dbias by the wide backward (rows of two power-of-two pieces, float32 partials redone
    scaled where they overflow) and the final reduce."""
    with _looped_layer_norm(_LN_WIDE):
        return _ln_grads(x, weight, bias, dy, kernels.layer_norm)


# ----------------------------------------------------------------------------- mHC-lite (n = 4 streams)

from tritondiff.kernels import mhc  # noqa: E402
from tritondiff.kernels.mhc import reference as mhc_ref  # noqa: E402

_ACT = ("bfloat16", "float16", "float32")
# Activations near their dtype's max are left out: the contract accumulates in float32, and a sum of
# such products that cancels in float64 overflows float32 on the way or not depending on the order of
# the terms -- eager (einsum) and the kernels then differ in which elements come out inf / NaN, and
# neither is the float64 answer (seen: post_res, x near bf16's max, H in (0, 2]).  The same for the
# float32 coefficients.  Every other family, "large" included, stays.
_ACT_VALUES = tuple(v for v in VALUE_FAMILIES if v != "near_max")
_COEF = dict(dtypes=("float32",), nonfinite=False, values=_ACT_VALUES)   # they enter the same float32 sums
# K1 squares x and sums the squares in float32 (its contract, as Inductor's RMSNorm): past sqrt(FLT_MAX) ("large")
# the mean square overflows, r = rsqrt(inf) = 0, and y, dx and dW come out 0 where float64 is finite -- eager's
# backward gives NaN there, so the oracle has no error level to judge by.  The compiler subjects leave the family out for the same reason (NO_OVERFLOWING_SQUARES).
_SQUARED_VALUES = tuple(v for v in _ACT_VALUES if v != "large")
# T reaches past 2^20 tokens for small C (the memory budget keeps T * C in range); C includes odd sizes.
_MHC_DIMS = {"T": (0, 1_100_000), "C": (1, 4231)}


@subject(name="kernels.mhc.rmsnorm_project", reference=lambda x_flat, W: mhc_ref.fused_rmsnorm_project(x_flat, W),
         inputs={"x_flat": tensor(("T", "K"), dtypes=_ACT, values=_SQUARED_VALUES),
                 "W": tensor(("D", "K"), dtype_like="x_flat", values=_ACT_VALUES)},
         dims={"T": (0, 1_100_000), "K": (1, 16_924), "D": (1, 64)})
def mhc_rmsnorm_project(x_flat, W):
    return mhc.fused_rmsnorm_project(x_flat, W)


@subject(name="kernels.mhc.pre_map", reference=lambda x, h_pre: mhc_ref.fused_pre_map(x, h_pre),
         inputs={"x": tensor(("T", 4, "C"), dtypes=_ACT, values=_ACT_VALUES), "h_pre": tensor(("T", 4), **_COEF)},
         dims=_MHC_DIMS)
def mhc_pre_map(x, h_pre):
    return mhc.fused_pre_map(x, h_pre)


_POST_INPUTS = {"x": tensor(("T", 4, "C"), dtypes=_ACT, values=_ACT_VALUES),
                "lo": tensor(("T", "C"), dtype_like="x", values=_ACT_VALUES),
                "H": tensor(("T", 4, 4), **_COEF), "h_post": tensor(("T", 4), **_COEF)}


@subject(name="kernels.mhc.post_res", reference=lambda x, lo, H, h_post: mhc_ref.fused_post_res(x, lo, H, h_post),
         inputs=_POST_INPUTS, dims=_MHC_DIMS)
def mhc_post_res(x, lo, H, h_post):
    return mhc.fused_post_res(x, lo, H, h_post)


def _grads(fn, inputs: dict, grad_out):
    """Gradients of ``fn`` w.r.t. ``inputs``, passed positionally in their order (the subjects' short input
    names are not the functions' parameter names: by keyword every pre_map / post_res backward example
    raised TypeError in the reference and was skipped, so those subjects checked nothing)."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in inputs.items()}
    fn(*leaves.values()).backward(grad_out)
    return tuple(v.grad for v in leaves.values())


@subject(name="kernels.mhc.rmsnorm_project_backward",
         reference=lambda x_flat, W, g: _grads(mhc_ref.fused_rmsnorm_project, {"x_flat": x_flat, "W": W}, g),
         inputs={"x_flat": tensor(("T", "K"), dtypes=_ACT, nonfinite=False, values=_SQUARED_VALUES),
                 "W": tensor(("D", "K"), dtype_like="x_flat", nonfinite=False, values=_ACT_VALUES),
                 "g": tensor(("T", "D"), dtype_like="x_flat", nonfinite=False, values=_ACT_VALUES)},
         dims={"T": (0, 1_100_000), "K": (1, 16_924), "D": (1, 64)})
def mhc_rmsnorm_project_backward(x_flat, W, g):
    return _grads(mhc.fused_rmsnorm_project, {"x_flat": x_flat, "W": W}, g)


@subject(name="kernels.mhc.pre_map_backward",
         reference=lambda x, h_pre, g: _grads(mhc_ref.fused_pre_map, {"x": x, "h_pre": h_pre}, g),
         inputs={"x": tensor(("T", 4, "C"), dtypes=_ACT, nonfinite=False, values=_ACT_VALUES),
                 "h_pre": tensor(("T", 4), **_COEF),
                 "g": tensor(("T", "C"), dtype_like="x", nonfinite=False, values=_ACT_VALUES)}, dims=_MHC_DIMS)
def mhc_pre_map_backward(x, h_pre, g):
    return _grads(mhc.fused_pre_map, {"x": x, "h_pre": h_pre}, g)


@subject(name="kernels.mhc.post_res_backward",
         reference=lambda x, lo, H, h_post, g: _grads(mhc_ref.fused_post_res,
                                                      {"x": x, "lo": lo, "H": H, "h_post": h_post}, g),
         inputs={**{k: tensor(v.shape, dtypes=v.dtypes, dtype_like=v.dtype_like, nonfinite=False,
                                  values=v.values)
                    for k, v in _POST_INPUTS.items()},
                 "g": tensor(("T", 4, "C"), dtype_like="x", nonfinite=False, values=_ACT_VALUES)}, dims=_MHC_DIMS)
def mhc_post_res_backward(x, lo, H, h_post, g):
    return _grads(mhc.fused_post_res, {"x": x, "lo": lo, "H": H, "h_post": h_post}, g)


def _block_step(x, g, eager):
    """Forward + backward of a seeded MHCLiteBlock around a Linear layer: (out, dx, dW_heads, dW_layer)."""
    C = x.shape[-1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = torch.nn.Linear(C, C, bias=False)
        block = mhc.MHCLiteBlock(layer, C, eager=eager)
    block = block.to(device=x.device, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)
    x = x.detach().requires_grad_(True)
    out = block(x)
    out.backward(g)
    return out, x.grad, block.head_proj.grad, layer.weight.grad


@subject(name="kernels.mhc.block", reference=lambda x, g: _block_step(x, g, eager=True),
         inputs={"x": tensor(("T", 4, "C"), dtypes=("float32",), nonfinite=False,
                             values=("normal", "uniform_pos", "integer")),
                 "g": tensor(("T", 4, "C"), dtype_like="x", nonfinite=False, values=("normal",))},
         dims={"T": (1, 4096), "C": (1, 300)}, multiplier=4.0)
def mhc_block(x, g):
    """The whole block, forward and backward, against the same parameters run through the references."""
    return _block_step(x, g, eager=False)
