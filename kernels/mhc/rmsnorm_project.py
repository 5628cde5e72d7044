"""K1 of mHC-lite: fused RMSNorm + projection onto the coefficient heads.

    y[t, d] = r[t] * p[t, d],   p = x @ W^T,   r[t] = rsqrt(mean_k x[t, k]^2 + eps)

x is the flattened stream tensor x_flat[T, K] (K = n*C) and W[D, K] the head
projection (D = 2n + n! = 32 in MHCLiteBlock).  Scaling the product instead of
the input is what makes the fusion a single pass: the row's sum of squares and
its dot products with W accumulate side by side over K tiles, and the scale is
applied once at the end.

Gradients (g = dL/dy, and g_r = dL/dr for the saved r when it is used):

    dr[t]/dx[t, k] = -1/2 (m + eps)^-3/2 * 2 x[t, k] / K = -r^3 x[t, k] / K
    dL/dx[t, k] = sum_d g[t, d] (r W[d, k] + p[t, d] dr/dx[t, k]) + g_r[t] dr/dx[t, k]
                = r (g @ W)[t, k] - x[t, k] * coef[t]
    coef[t]     = r^3 / K * (sum_d g p + g_r) = r^2 / K * sum_d g[t, d] y[t, d] + r^3 / K * g_r[t]
    dL/dW       = (g * r)^T @ x                                   (a plain matmul)

so the dx kernel reads x once, writes dx once, and needs only y and r from the
forward (which is why the forward op also returns r).

Ops: ``mhc::fused_rmsnorm_project_fwd(x, W, eps) -> (y, inv_rms)`` carries the
autograd formula; ``mhc::fused_rmsnorm_project(x, W, eps) -> y`` is the public
op (a CompositeImplicitAutograd wrapper returning y only), and
``mhc::fused_rmsnorm_project_bwd_dx`` is the backward kernel's op.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from harness import device as _device
from kernels.exc import UnsupportedInput

from . import configs
from ._common import (acc_dtype, check_activation, check_devices, check_same_dtype, coef_dtype, load_tile,
                      load_tile_zeroed, tl_acc)

_OP = "fused_rmsnorm_project"

# K1 keeps D in one tile of at most this many heads; larger D is split over
# a second grid axis (forward) or an inner loop (backward).
_MAX_BLOCK_D = 64

# How tl.dot is fed: NATIVE uses the operands' dtype (bf16/fp16 tensor cores,
# fp32/fp64 with input_precision="ieee", never tf32); UPCAST casts bf16/fp16 operands to
# fp32 first, which is exact (their products fit in fp32).  The interpreter
# needs UPCAST: its tl.dot multiplies bf16 as the raw uint16 bit patterns
# (triton 3.9 InterpreterBuilder.create_dot), returning garbage.  UPCAST also
# loads x with 1.0 tails zeroed after the upcast (see _common.load_tile).
_DOT_NATIVE = 0
_DOT_UPCAST = 1


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _fused_rmsnorm_project_fwd_kernel(
    x_ptr, w_ptr, y_ptr, rinv_ptr,
    T, K, D, eps,
    stride_xt, stride_wd, stride_yt,
    ACC: tl.constexpr, DOT_MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # One program: BLOCK_T rows x BLOCK_D heads.  Loop over K in BLOCK_K tiles:
    #   acc[t, d] += sum_k x[t, k] W[d, k]      (tl.dot, fp32/fp64 accumulate)
    #   ssq[t]    += sum_k x[t, k]^2
    # then y = acc * rsqrt(ssq / K + eps).  x is read exactly once when D <= BLOCK_D.
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    mask_t = offs_t < T
    mask_d = offs_d < D
    x_rows = x_ptr + offs_t.to(tl.int64)[:, None] * stride_xt
    w_rows = w_ptr + offs_d.to(tl.int64)[:, None] * stride_wd
    acc = tl.zeros([BLOCK_T, BLOCK_D], dtype=ACC)
    ssq = tl.zeros([BLOCK_T], dtype=ACC)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        m = mask_t[:, None] & mask_k[None, :]
        w = tl.load(w_rows + offs_k[None, :], mask=mask_d[:, None] & mask_k[None, :], other=0.0)
        if DOT_MODE == 1:
            xa = load_tile_zeroed(x_rows + offs_k[None, :], m, ACC)
            acc = tl.dot(xa, tl.trans(w.to(ACC)), acc, input_precision=PRECISION)
        else:
            x = tl.load(x_rows + offs_k[None, :], mask=m, other=0.0)
            xa = x.to(ACC)
            acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
        ssq += tl.sum(xa * xa, axis=1)
    rinv = 1.0 / tl.sqrt(ssq / K + eps)
    y = acc * rinv[:, None]
    y_ptrs = y_ptr + offs_t.to(tl.int64)[:, None] * stride_yt + offs_d[None, :]
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask_t[:, None] & mask_d[None, :])
    if pid_d == 0:
        tl.store(rinv_ptr + offs_t, rinv.to(rinv_ptr.dtype.element_ty), mask=mask_t)


@triton.jit
def _fused_rmsnorm_project_bwd_dx_kernel(
    x_ptr, w_ptr, gy_ptr, y_ptr, rinv_ptr, gr_ptr, dx_ptr,
    T, K, D,
    stride_xt, stride_wd, stride_gt, stride_yt, stride_dxt,
    HAS_GR: tl.constexpr, ACC: tl.constexpr, DOT_MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, ONE_D_TILE: tl.constexpr,
):
    # dx[t, k] = r[t] * (g @ W)[t, k] - x[t, k] * coef[t]
    # coef[t]  = r^2 / K * sum_d g[t, d] y[t, d]  (+ r^3 / K * g_r[t])
    # Phase 1 reduces g*y over D (tiny: [BLOCK_T, D]); phase 2 streams x -> dx
    # over K tiles, so x is read once and dx written once.
    pid_t = tl.program_id(0)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask_t = offs_t < T
    rows64 = offs_t.to(tl.int64)
    r = tl.load(rinv_ptr + offs_t, mask=mask_t, other=0.0).to(ACC)
    gy_dot_y = tl.zeros([BLOCK_T], dtype=ACC)
    for d0 in range(0, D, BLOCK_D):
        offs_d = d0 + tl.arange(0, BLOCK_D)
        m = mask_t[:, None] & (offs_d < D)[None, :]
        gy = tl.load(gy_ptr + rows64[:, None] * stride_gt + offs_d[None, :], mask=m, other=0.0)
        yv = tl.load(y_ptr + rows64[:, None] * stride_yt + offs_d[None, :], mask=m, other=0.0)
        gy_dot_y += tl.sum(gy.to(ACC) * yv.to(ACC), axis=1)
    coef = r * r / K * gy_dot_y
    if HAS_GR:
        gr = tl.load(gr_ptr + offs_t, mask=mask_t, other=0.0).to(ACC)
        coef += r * r * r / K * gr
    if ONE_D_TILE:
        # D fits one tile: keep g in registers across the whole K loop.
        offs_d0 = tl.arange(0, BLOCK_D)
        g0 = tl.load(gy_ptr + rows64[:, None] * stride_gt + offs_d0[None, :],
                     mask=mask_t[:, None] & (offs_d0 < D)[None, :], other=0.0)
        if DOT_MODE == 1:
            g0 = g0.to(ACC)  # upcast once, not once per K tile
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        gw = tl.zeros([BLOCK_T, BLOCK_K], dtype=ACC)
        for d0 in range(0, D, BLOCK_D):
            offs_d = d0 + tl.arange(0, BLOCK_D)
            mask_d = offs_d < D
            if ONE_D_TILE:
                g = g0
            else:
                g = tl.load(gy_ptr + rows64[:, None] * stride_gt + offs_d[None, :],
                            mask=mask_t[:, None] & mask_d[None, :], other=0.0)
            w = tl.load(w_ptr + offs_d.to(tl.int64)[:, None] * stride_wd + offs_k[None, :],
                        mask=mask_d[:, None] & mask_k[None, :], other=0.0)
            if DOT_MODE == 1:
                gw = tl.dot(g.to(ACC), w.to(ACC), gw, input_precision=PRECISION)
            else:
                gw = tl.dot(g, w, gw, input_precision=PRECISION)
        m = mask_t[:, None] & mask_k[None, :]
        x = load_tile(x_ptr + rows64[:, None] * stride_xt + offs_k[None, :], m, ACC)
        dx = r[:, None] * gw - x * coef[:, None]
        tl.store(dx_ptr + rows64[:, None] * stride_dxt + offs_k[None, :], dx.to(dx_ptr.dtype.element_ty), mask=m)


# ---------------------------------------------------------------------------- launchers

def _dot_mode(dtype: torch.dtype) -> int:
    if _device.is_interpreter() and dtype in (torch.bfloat16, torch.float16):
        return _DOT_UPCAST
    return _DOT_NATIVE


def _precision(dtype: torch.dtype) -> str:
    """tl.dot input_precision: full fp32 ("ieee", not tf32) for fp32 / fp64 operands; the 16-bit
    dtypes ignore it and keep Triton's default."""
    return "ieee" if dtype in (torch.float32, torch.float64) or _dot_mode(dtype) == _DOT_UPCAST else "tf32"


def _block_d(D: int) -> int:
    return min(_MAX_BLOCK_D, max(16, triton.next_power_of_2(D)))


def rmsnorm_project_fwd(x: torch.Tensor, W: torch.Tensor, eps: float, *,
                        config: configs.LaunchConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch K1 forward on validated inputs: returns (y[T, D] in x's dtype, inv_rms[T] fp32/fp64)."""
    x = x.contiguous()
    W = W.contiguous()
    T, K = x.shape
    D = W.shape[0]
    y = torch.empty((T, D), dtype=x.dtype, device=x.device)
    rinv = torch.empty((T,), dtype=coef_dtype(x.dtype), device=x.device)
    if T == 0:
        return y, rinv
    cfg = configs.resolve("k1_fwd", config, T=T, C=K, device=x.device)
    block_d = _block_d(D)
    grid = (triton.cdiv(T, cfg.block_t), triton.cdiv(D, block_d))
    _fused_rmsnorm_project_fwd_kernel[grid](
        x, W, y, rinv, T, K, D, float(eps),
        x.stride(0), W.stride(0), y.stride(0),
        ACC=tl_acc(x.dtype), DOT_MODE=_dot_mode(x.dtype), PRECISION=_precision(x.dtype),
        BLOCK_T=cfg.block_t, BLOCK_K=cfg.block_c, BLOCK_D=block_d,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return y, rinv


def rmsnorm_project_bwd_dx(x: torch.Tensor, W: torch.Tensor, gy: torch.Tensor, y: torch.Tensor,
                           inv_rms: torch.Tensor, g_inv_rms: torch.Tensor | None, *,
                           config: configs.LaunchConfig | None = None) -> torch.Tensor:
    """Launch K1 backward dx: dx[T, K] in x's dtype (g_inv_rms may be None)."""
    x, W, gy, y, inv_rms = (t.contiguous() for t in (x, W, gy, y, inv_rms))
    T, K = x.shape
    D = W.shape[0]
    dx = torch.empty_like(x)
    if T == 0:
        return dx
    has_gr = g_inv_rms is not None
    gr = g_inv_rms.contiguous() if has_gr else inv_rms
    cfg = configs.resolve("k1_bwd_dx", config, T=T, C=K, device=x.device)
    block_d = _block_d(D)
    grid = (triton.cdiv(T, cfg.block_t),)
    _fused_rmsnorm_project_bwd_dx_kernel[grid](
        x, W, gy, y, inv_rms, gr, dx, T, K, D,
        x.stride(0), W.stride(0), gy.stride(0), y.stride(0), dx.stride(0),
        HAS_GR=has_gr, ACC=tl_acc(x.dtype), DOT_MODE=_dot_mode(x.dtype), PRECISION=_precision(x.dtype),
        BLOCK_T=cfg.block_t, BLOCK_K=cfg.block_c, BLOCK_D=block_d, ONE_D_TILE=D <= block_d,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return dx


# ---------------------------------------------------------------------------- eager reference

def reference_fused_rmsnorm_project(x_flat: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Pure-torch K1: (x @ W^T) * rsqrt(mean(x^2, -1) + eps), accumulated in float32 (float64 for float64)."""
    acc = acc_dtype(x_flat.dtype)
    xa = x_flat.to(acc)
    rinv = torch.rsqrt(xa.pow(2).mean(-1, keepdim=True) + eps)
    return ((xa @ W.to(acc).T) * rinv).to(x_flat.dtype)


def reference_rmsnorm_project_bwd_dx(x_flat: torch.Tensor, W: torch.Tensor, gy: torch.Tensor,
                                     y: torch.Tensor, inv_rms: torch.Tensor) -> torch.Tensor:
    """Pure-torch K1 backward dx from the saved y and inv_rms: r (g @ W) - x r^2/K sum_d(g y)."""
    acc = acc_dtype(x_flat.dtype)
    r = inv_rms.to(acc)[:, None]
    g = gy.to(acc)
    coef = r * r / x_flat.shape[1] * (g * y.to(acc)).sum(-1, keepdim=True)
    return (r * (g @ W.to(acc)) - x_flat.to(acc) * coef).to(x_flat.dtype)


# ---------------------------------------------------------------------------- validation

def _check(x_flat: torch.Tensor, W: torch.Tensor, eps: float) -> None:
    check_activation(_OP, "x_flat", x_flat, 2)
    check_activation(_OP, "W", W, 2)
    check_same_dtype(_OP, "W", W, "x_flat", x_flat)
    check_devices(_OP, x_flat=x_flat, W=W)
    if x_flat.shape[1] == 0:
        raise UnsupportedInput(f"{_OP}: x_flat has no features (shape {tuple(x_flat.shape)}); RMSNorm needs n*C >= 1",
                               argument="x_flat")
    if W.shape[1] != x_flat.shape[1]:
        raise UnsupportedInput(
            f"{_OP}: W has shape {tuple(W.shape)} but x_flat has {x_flat.shape[1]} features; "
            f"W must be [D, {x_flat.shape[1]}]", argument="W")
    if W.shape[0] == 0:
        raise UnsupportedInput(f"{_OP}: W has no rows (shape {tuple(W.shape)}); D must be >= 1", argument="W")
    if not (eps >= 0.0 and eps < float("inf")):
        raise UnsupportedInput(f"{_OP}: eps must be a finite number >= 0, got {eps!r}", argument="eps")


# ---------------------------------------------------------------------------- registration

@torch.library.custom_op("mhc::fused_rmsnorm_project_fwd", mutates_args=())
def _fwd_op(x_flat: torch.Tensor, W: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    _check(x_flat, W, eps)
    return rmsnorm_project_fwd(x_flat, W, eps)


@_fwd_op.register_fake
def _fwd_fake(x_flat, W, eps):
    _check(x_flat, W, eps)
    T = x_flat.shape[0]
    return (x_flat.new_empty((T, W.shape[0])), x_flat.new_empty((T,), dtype=coef_dtype(x_flat.dtype)))


@torch.library.custom_op("mhc::fused_rmsnorm_project_bwd_dx", mutates_args=())
def _bwd_dx_op(x_flat: torch.Tensor, W: torch.Tensor, gy: torch.Tensor, y: torch.Tensor,
               inv_rms: torch.Tensor, g_inv_rms: torch.Tensor | None) -> torch.Tensor:
    return rmsnorm_project_bwd_dx(x_flat, W, gy.to(x_flat.dtype), y, inv_rms,
                                  None if g_inv_rms is None else g_inv_rms.to(inv_rms.dtype))


@_bwd_dx_op.register_fake
def _bwd_dx_fake(x_flat, W, gy, y, inv_rms, g_inv_rms):
    return torch.empty_like(x_flat, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    x_flat, W, _eps = inputs
    y, inv_rms = output
    ctx.save_for_backward(x_flat, W, y, inv_rms)


def _backward(ctx, gy, g_inv_rms):
    x_flat, W, y, inv_rms = ctx.saved_tensors
    dx = dW = None
    if gy is None:
        gy = torch.zeros_like(y)
    if ctx.needs_input_grad[0]:
        dx = torch.ops.mhc.fused_rmsnorm_project_bwd_dx(x_flat, W, gy, y, inv_rms, g_inv_rms)
    if ctx.needs_input_grad[1]:
        # dW = (g * r)^T @ x: a [D, T] x [T, K] matmul in x's dtype (fp32 accumulate in the GEMM).
        scaled = (gy.to(inv_rms.dtype) * inv_rms[:, None]).to(x_flat.dtype)
        dW = (scaled.T @ x_flat).to(W.dtype)
    return dx, dW, None


_fwd_op.register_autograd(_backward, setup_context=_setup_context)

# The public op returns y only; it decomposes (CompositeImplicitAutograd) into the
# (y, inv_rms) op above, so autograd, fake tensors and torch.compile see that op.
_lib = torch.library.Library("mhc", "FRAGMENT")
_lib.define("fused_rmsnorm_project(Tensor x_flat, Tensor W, float eps=1e-06) -> Tensor")


def _public_impl(x_flat: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return torch.ops.mhc.fused_rmsnorm_project_fwd(x_flat, W, eps)[0]


_lib.impl("fused_rmsnorm_project", _public_impl, "CompositeImplicitAutograd")


def fused_rmsnorm_project(x_flat: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """K1: ``(x_flat @ W^T) * rsqrt(mean(x_flat^2, -1) + eps)`` -> [T, D] in x_flat's dtype.

    x_flat[T, K] and W[D, K] share a dtype (bfloat16, float16, float32; float64
    for gradcheck) and a device.  Differentiable in x_flat and W.
    """
    return torch.ops.mhc.fused_rmsnorm_project(x_flat, W, float(eps))
