"""K3 of mHC-lite: the pre-map, a per-token weighted sum of the n = 4 streams.

    out[t, c] = sum_j h[t, j] * x[t, j, c]           x: [T, 4, C], h = h_pre: [T, 4] fp32

Gradients (g = dL/dout):

    dL/dx[t, j, c] = h[t, j] * g[t, c]               (K3 bwd dx: read g once, write 4 tiles)
    dL/dh[t, j]    = sum_c g[t, c] * x[t, j, c]       (K3 bwd hpre: a reduction over C)

Every kernel is bandwidth bound: 2-D [BLOCK_T, BLOCK_C] tiles, the four
streams unrolled, fp32 accumulation (fp64 for float64 inputs), C tails masked.
The two element-wise kernels flatten their 2-D grid into one axis (C tiles
fastest, so neighbouring programs touch neighbouring memory, and no grid axis
exceeds CUDA's 65535 limit); the reduction kernel gives each program BLOCK_T
rows and loops over C.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritondiff.kernels.config import store_dtype

from . import configs
from ._common import (N_STREAMS, acc_dtype, check_activation, check_coef, check_devices, check_n, check_same_dtype,
                      check_shape, load_coef4, load_tile, load_tile_zeroed, tl_acc)

_OP = "fused_pre_map"


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _fused_pre_map_fwd_kernel(
    x_ptr, h_ptr, out_ptr,
    T, C, num_c_tiles,
    stride_xt, stride_xj, stride_ht, stride_ot,
    ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # out[t, c] = h0 x0 + h1 x1 + h2 x2 + h3 x3 on one [BLOCK_T, BLOCK_C] tile.
    pid = tl.program_id(0)
    pid_t = pid // num_c_tiles
    pid_c = pid % num_c_tiles
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_t = offs_t < T
    mask = mask_t[:, None] & (offs_c < C)[None, :]
    rows64 = offs_t.to(tl.int64)
    h0, h1, h2, h3 = load_coef4(h_ptr, rows64, stride_ht, mask_t, ACC)
    xp = x_ptr + rows64[:, None] * stride_xt + offs_c[None, :]
    acc = h0[:, None] * load_tile(xp, mask, ACC)
    acc += h1[:, None] * load_tile(xp + stride_xj, mask, ACC)
    acc += h2[:, None] * load_tile(xp + 2 * stride_xj, mask, ACC)
    acc += h3[:, None] * load_tile(xp + 3 * stride_xj, mask, ACC)
    op = out_ptr + rows64[:, None] * stride_ot + offs_c[None, :]
    tl.store(op, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _fused_pre_map_bwd_dx_kernel(
    g_ptr, h_ptr, dx_ptr,
    T, C, num_c_tiles,
    stride_gt, stride_ht, stride_dxt, stride_dxj,
    ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # dx[t, j, c] = h[t, j] * g[t, c]: one g tile in, four dx tiles out.
    pid = tl.program_id(0)
    pid_t = pid // num_c_tiles
    pid_c = pid % num_c_tiles
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_t = offs_t < T
    mask = mask_t[:, None] & (offs_c < C)[None, :]
    rows64 = offs_t.to(tl.int64)
    h0, h1, h2, h3 = load_coef4(h_ptr, rows64, stride_ht, mask_t, ACC)
    g = load_tile(g_ptr + rows64[:, None] * stride_gt + offs_c[None, :], mask, ACC)
    dxp = dx_ptr + rows64[:, None] * stride_dxt + offs_c[None, :]
    ty = dx_ptr.dtype.element_ty
    tl.store(dxp, (h0[:, None] * g).to(ty), mask=mask)
    tl.store(dxp + stride_dxj, (h1[:, None] * g).to(ty), mask=mask)
    tl.store(dxp + 2 * stride_dxj, (h2[:, None] * g).to(ty), mask=mask)
    tl.store(dxp + 3 * stride_dxj, (h3[:, None] * g).to(ty), mask=mask)


@triton.jit
def _fused_pre_map_bwd_hpre_kernel(
    g_ptr, x_ptr, dh_ptr,
    T, C,
    stride_gt, stride_xt, stride_xj, stride_dht,
    ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # dh[t, j] = sum_c g[t, c] x[t, j, c]: BLOCK_T rows per program, loop over C;
    # per tile the g tile is loaded once and multiplied into each x_j as it streams by.
    pid_t = tl.program_id(0)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask_t = offs_t < T
    rows64 = offs_t.to(tl.int64)
    g_rows = g_ptr + rows64[:, None] * stride_gt
    x_rows = x_ptr + rows64[:, None] * stride_xt
    d0 = tl.zeros([BLOCK_T], dtype=ACC)
    d1 = tl.zeros([BLOCK_T], dtype=ACC)
    d2 = tl.zeros([BLOCK_T], dtype=ACC)
    d3 = tl.zeros([BLOCK_T], dtype=ACC)
    for c0 in range(0, C, BLOCK_C):
        offs_c = c0 + tl.arange(0, BLOCK_C)
        mask = mask_t[:, None] & (offs_c < C)[None, :]
        g = load_tile_zeroed(g_rows + offs_c[None, :], mask, ACC)  # zero tails: the sums need them
        xp = x_rows + offs_c[None, :]
        d0 += tl.sum(g * load_tile(xp, mask, ACC), axis=1)
        d1 += tl.sum(g * load_tile(xp + stride_xj, mask, ACC), axis=1)
        d2 += tl.sum(g * load_tile(xp + 2 * stride_xj, mask, ACC), axis=1)
        d3 += tl.sum(g * load_tile(xp + 3 * stride_xj, mask, ACC), axis=1)
    dp = dh_ptr + rows64 * stride_dht
    ty = dh_ptr.dtype.element_ty
    tl.store(dp + 0, d0.to(ty), mask=mask_t)
    tl.store(dp + 1, d1.to(ty), mask=mask_t)
    tl.store(dp + 2, d2.to(ty), mask=mask_t)
    tl.store(dp + 3, d3.to(ty), mask=mask_t)


# ---------------------------------------------------------------------------- launchers

def pre_map_fwd(x_streams: torch.Tensor, h_pre: torch.Tensor, *,
                config: configs.LaunchConfig | None = None) -> torch.Tensor:
    """Launch K3 forward on validated inputs: out[T, C] in x's dtype."""
    x = x_streams.contiguous()
    h = h_pre.contiguous()
    T, _, C = x.shape
    # bf16 in the interpreter: stored as fp32 and rounded by torch (kernels.config.store_dtype: the
    # interpreter's own fp32 -> bf16 conversion truncates, and mangles subnormals).
    out = torch.empty((T, C), dtype=store_dtype(x.dtype), device=x.device)
    if T == 0 or C == 0:
        return out.to(x.dtype)
    cfg = configs.resolve("k3_fwd", config, T=T, C=C, device=x.device)
    n_c = triton.cdiv(C, cfg.block_c)
    _fused_pre_map_fwd_kernel[(triton.cdiv(T, cfg.block_t) * n_c,)](
        x, h, out, T, C, n_c, x.stride(0), x.stride(1), h.stride(0), out.stride(0),
        ACC=tl_acc(x.dtype), BLOCK_T=cfg.block_t, BLOCK_C=cfg.block_c,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out.to(x.dtype)


def pre_map_bwd_dx(grad_out: torch.Tensor, h_pre: torch.Tensor, *,
                   config: configs.LaunchConfig | None = None) -> torch.Tensor:
    """Launch K3 backward dx: dx[T, 4, C] in grad_out's dtype."""
    g = grad_out.contiguous()
    h = h_pre.contiguous()
    T, C = g.shape
    dx = torch.empty((T, N_STREAMS, C), dtype=store_dtype(g.dtype), device=g.device)
    if T == 0 or C == 0:
        return dx.to(g.dtype)
    cfg = configs.resolve("k3_bwd_dx", config, T=T, C=C, device=g.device)
    n_c = triton.cdiv(C, cfg.block_c)
    _fused_pre_map_bwd_dx_kernel[(triton.cdiv(T, cfg.block_t) * n_c,)](
        g, h, dx, T, C, n_c, g.stride(0), h.stride(0), dx.stride(0), dx.stride(1),
        ACC=tl_acc(g.dtype), BLOCK_T=cfg.block_t, BLOCK_C=cfg.block_c,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return dx.to(g.dtype)


def pre_map_bwd_hpre(grad_out: torch.Tensor, x_streams: torch.Tensor, *,
                     config: configs.LaunchConfig | None = None) -> torch.Tensor:
    """Launch K3 backward dh_pre: dh[T, 4] in the coefficient dtype (fp32, fp64 for fp64 x)."""
    g = grad_out.contiguous()
    x = x_streams.contiguous()
    T, _, C = x.shape
    acc = acc_dtype(x.dtype)
    if T == 0 or C == 0:
        return torch.zeros((T, N_STREAMS), dtype=acc, device=x.device)
    dh = torch.empty((T, N_STREAMS), dtype=acc, device=x.device)
    cfg = configs.resolve("k3_bwd_hpre", config, T=T, C=C, device=x.device)
    _fused_pre_map_bwd_hpre_kernel[(triton.cdiv(T, cfg.block_t),)](
        g, x, dh, T, C, g.stride(0), x.stride(0), x.stride(1), dh.stride(0),
        ACC=tl_acc(x.dtype), BLOCK_T=cfg.block_t, BLOCK_C=cfg.block_c,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return dh


# ---------------------------------------------------------------------------- eager references

def reference_fused_pre_map(x_streams: torch.Tensor, h_pre: torch.Tensor) -> torch.Tensor:
    """Pure-torch K3: sum_j h_pre[t, j] x[t, j, c], accumulated in float32 (float64 for float64)."""
    acc = acc_dtype(x_streams.dtype)
    return (h_pre.to(acc)[:, :, None] * x_streams.to(acc)).sum(1).to(x_streams.dtype)


def reference_pre_map_bwd_dx(grad_out: torch.Tensor, h_pre: torch.Tensor) -> torch.Tensor:
    """Pure-torch K3 backward dx: h_pre[t, j] * g[t, c] -> [T, n, C]."""
    acc = acc_dtype(grad_out.dtype)
    return (h_pre.to(acc)[:, :, None] * grad_out.to(acc)[:, None, :]).to(grad_out.dtype)


def reference_pre_map_bwd_hpre(grad_out: torch.Tensor, x_streams: torch.Tensor) -> torch.Tensor:
    """Pure-torch K3 backward dh_pre: sum_c g[t, c] x[t, j, c] -> [T, n] in float32 (float64 for float64)."""
    acc = acc_dtype(x_streams.dtype)
    return (grad_out.to(acc)[:, None, :] * x_streams.to(acc)).sum(-1)


# ---------------------------------------------------------------------------- validation

def _check(x_streams: torch.Tensor, h_pre: torch.Tensor) -> None:
    check_activation(_OP, "x_streams", x_streams, 3)
    T, n, C = x_streams.shape
    check_n(_OP, n)
    check_coef(_OP, "h_pre", h_pre, (T, n), x_streams)
    check_devices(_OP, x_streams=x_streams, h_pre=h_pre)


def _check_bwd_dx(grad_out: torch.Tensor, h_pre: torch.Tensor) -> None:
    """K3 bwd dx: grad_out[T, C] (an activation dtype), h_pre[T, 4] in grad_out's coefficient dtype."""
    op = f"{_OP}_bwd_dx"
    check_activation(op, "grad_out", grad_out, 2)
    if isinstance(h_pre, torch.Tensor) and h_pre.dim() == 2:
        check_n(op, h_pre.shape[1], argument="h_pre", reference="pre_map_bwd_dx")
    check_coef(op, "h_pre", h_pre, (grad_out.shape[0], N_STREAMS), grad_out)
    check_devices(op, grad_out=grad_out, h_pre=h_pre)


def _check_bwd_hpre(grad_out: torch.Tensor, x_streams: torch.Tensor) -> None:
    """K3 bwd hpre: x_streams[T, 4, C] and grad_out[T, C] of one activation dtype."""
    op = f"{_OP}_bwd_hpre"
    check_activation(op, "x_streams", x_streams, 3)
    T, n, C = x_streams.shape
    check_n(op, n, reference="pre_map_bwd_hpre")
    check_activation(op, "grad_out", grad_out, 2)
    check_same_dtype(op, "grad_out", grad_out, "x_streams", x_streams)
    check_shape(op, "grad_out", grad_out, (T, C))
    check_devices(op, x_streams=x_streams, grad_out=grad_out)


# ---------------------------------------------------------------------------- registration

@torch.library.custom_op("mhc::fused_pre_map", mutates_args=())
def _fwd_op(x_streams: torch.Tensor, h_pre: torch.Tensor) -> torch.Tensor:
    _check(x_streams, h_pre)
    return pre_map_fwd(x_streams, h_pre)


@_fwd_op.register_fake
def _fwd_fake(x_streams, h_pre):
    _check(x_streams, h_pre)
    return x_streams.new_empty((x_streams.shape[0], x_streams.shape[2]))


@torch.library.custom_op("mhc::fused_pre_map_bwd_dx", mutates_args=())
def _bwd_dx_op(grad_out: torch.Tensor, h_pre: torch.Tensor) -> torch.Tensor:
    _check_bwd_dx(grad_out, h_pre)
    return pre_map_bwd_dx(grad_out, h_pre)


@_bwd_dx_op.register_fake
def _bwd_dx_fake(grad_out, h_pre):
    _check_bwd_dx(grad_out, h_pre)
    return grad_out.new_empty((grad_out.shape[0], N_STREAMS, grad_out.shape[1]))


@torch.library.custom_op("mhc::fused_pre_map_bwd_hpre", mutates_args=())
def _bwd_hpre_op(grad_out: torch.Tensor, x_streams: torch.Tensor) -> torch.Tensor:
    _check_bwd_hpre(grad_out, x_streams)
    return pre_map_bwd_hpre(grad_out, x_streams)


@_bwd_hpre_op.register_fake
def _bwd_hpre_fake(grad_out, x_streams):
    _check_bwd_hpre(grad_out, x_streams)
    return x_streams.new_empty((x_streams.shape[0], N_STREAMS), dtype=acc_dtype(x_streams.dtype))


def _setup_context(ctx, inputs, output):
    x_streams, h_pre = inputs
    ctx.save_for_backward(x_streams, h_pre)


def _backward(ctx, grad_out):
    x_streams, h_pre = ctx.saved_tensors
    grad_out = grad_out.to(x_streams.dtype)
    dx = dh = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.mhc.fused_pre_map_bwd_dx(grad_out, h_pre)
    if ctx.needs_input_grad[1]:
        dh = torch.ops.mhc.fused_pre_map_bwd_hpre(grad_out, x_streams).to(h_pre.dtype)
    return dx, dh


_fwd_op.register_autograd(_backward, setup_context=_setup_context)


def fused_pre_map(x_streams: torch.Tensor, h_pre: torch.Tensor) -> torch.Tensor:
    """K3: ``out[t, c] = sum_j h_pre[t, j] * x_streams[t, j, c]`` -> [T, C] in x's dtype.

    x_streams[T, 4, C] in bfloat16 / float16 / float32 (float64 for gradcheck);
    h_pre[T, 4] float32 (float64 beside float64 x).  Differentiable in both.
    """
    return torch.ops.mhc.fused_pre_map(x_streams, h_pre)
