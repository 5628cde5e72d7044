"""K4 of mHC-lite: the post-res, merged stream mixing plus the scaled layer output.

    out[t, i, c] = sum_j H[t, i, j] x[t, j, c] + hp[t, i] lo[t, c]
    x: [T, 4, C], lo = layer_output: [T, C], H = H_merged: [T, 4, 4] fp32, hp = h_post: [T, 4] fp32

Gradients (g = dL/dout, [T, 4, C]), all produced by ONE backward kernel:

    dL/dx[t, j, c]  = sum_i H[t, i, j] g[t, i, c]     (H^T applied per token)
    dL/dlo[t, c]    = sum_i hp[t, i] g[t, i, c]
    dL/dH[t, i, j]  = sum_c g[t, i, c] x[t, j, c]     (reduction over C)
    dL/dhp[t, i]    = sum_c g[t, i, c] lo[t, c]       (reduction over C)

The backward reads g, x and lo once (9 [T, C] planes) and writes dx and dlo
once (5 planes): each program owns BLOCK_T rows and loops over C, keeping the
20 per-row reductions as [BLOCK_T] accumulators.  Within an iteration the tiles
are streamed in phases (4 g tiles stay live; lo, then each x_j, is loaded, used
and dropped), so at most 6 tiles are live at once: seed 003's fix for the SM90
register spills of the 9-tiles-at-once version.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritondiff.kernels.config import store_dtype

from . import configs
from ._common import (N_STREAMS, acc_dtype, check_activation, check_coef, check_devices, check_n,
                      check_same_dtype, check_shape, load_coef4, load_tile, load_tile_zeroed, tl_acc)

_OP = "fused_post_res"


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _fused_post_res_fwd_kernel_n4(
    x_ptr, lo_ptr, H_ptr, hp_ptr, out_ptr,
    T, C, num_c_tiles,
    stride_xt, stride_xj, stride_lot, stride_Ht, stride_hpt, stride_ot, stride_oi,
    ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # One [BLOCK_T, BLOCK_C] tile of all four outputs: 5 tiles in (x0..x3, lo), 4 out.
    # out_i = H[i,0] x0 + H[i,1] x1 + H[i,2] x2 + H[i,3] x3 + hp[i] lo
    pid = tl.program_id(0)
    pid_t = pid // num_c_tiles
    pid_c = pid % num_c_tiles
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_t = offs_t < T
    mask = mask_t[:, None] & (offs_c < C)[None, :]
    rows64 = offs_t.to(tl.int64)
    xp = x_ptr + rows64[:, None] * stride_xt + offs_c[None, :]
    x0 = load_tile(xp, mask, ACC)
    x1 = load_tile(xp + stride_xj, mask, ACC)
    x2 = load_tile(xp + 2 * stride_xj, mask, ACC)
    x3 = load_tile(xp + 3 * stride_xj, mask, ACC)
    lo = load_tile(lo_ptr + rows64[:, None] * stride_lot + offs_c[None, :], mask, ACC)
    hp0, hp1, hp2, hp3 = load_coef4(hp_ptr, rows64, stride_hpt, mask_t, ACC)
    op = out_ptr + rows64[:, None] * stride_ot + offs_c[None, :]
    ty = out_ptr.dtype.element_ty
    a, b, c, d = load_coef4(H_ptr + 0, rows64, stride_Ht, mask_t, ACC)  # H[t, 0, :]
    o = a[:, None] * x0 + b[:, None] * x1 + c[:, None] * x2 + d[:, None] * x3 + hp0[:, None] * lo
    tl.store(op, o.to(ty), mask=mask)
    a, b, c, d = load_coef4(H_ptr + 4, rows64, stride_Ht, mask_t, ACC)  # H[t, 1, :]
    o = a[:, None] * x0 + b[:, None] * x1 + c[:, None] * x2 + d[:, None] * x3 + hp1[:, None] * lo
    tl.store(op + stride_oi, o.to(ty), mask=mask)
    a, b, c, d = load_coef4(H_ptr + 8, rows64, stride_Ht, mask_t, ACC)  # H[t, 2, :]
    o = a[:, None] * x0 + b[:, None] * x1 + c[:, None] * x2 + d[:, None] * x3 + hp2[:, None] * lo
    tl.store(op + 2 * stride_oi, o.to(ty), mask=mask)
    a, b, c, d = load_coef4(H_ptr + 12, rows64, stride_Ht, mask_t, ACC)  # H[t, 3, :]
    o = a[:, None] * x0 + b[:, None] * x1 + c[:, None] * x2 + d[:, None] * x3 + hp3[:, None] * lo
    tl.store(op + 3 * stride_oi, o.to(ty), mask=mask)


@triton.jit
def _post_res_bwd_stream(x_ptrs, mask, g0, g1, g2, g3, H_ptr, rows64, stride_Ht, j: tl.constexpr,
                         mask_t, dx_ptrs, ACC: tl.constexpr):
    """Phase j of the backward: stream x_j through once.

    Stores dx_j = sum_i H[i, j] g_i and returns the four partial sums
    sum_c g_i x_j (the column j of dH) for this C tile.
    """
    x = load_tile_zeroed(x_ptrs, mask, ACC)  # zero tails: the dH sums need them
    # Column j of H, reloaded every C tile (L1 hits): holding all 16 H values for the
    # whole loop raised SM90 registers 120 -> 160 a thread (bf16, 16x128, 8 warps).
    base = H_ptr + rows64 * stride_Ht + j
    h0 = tl.load(base + 0, mask=mask_t, other=0.0).to(ACC)
    h1 = tl.load(base + 4, mask=mask_t, other=0.0).to(ACC)
    h2 = tl.load(base + 8, mask=mask_t, other=0.0).to(ACC)
    h3 = tl.load(base + 12, mask=mask_t, other=0.0).to(ACC)
    dx = h0[:, None] * g0 + h1[:, None] * g1 + h2[:, None] * g2 + h3[:, None] * g3
    tl.store(dx_ptrs, dx.to(dx_ptrs.dtype.element_ty), mask=mask)
    return tl.sum(g0 * x, axis=1), tl.sum(g1 * x, axis=1), tl.sum(g2 * x, axis=1), tl.sum(g3 * x, axis=1)


@triton.jit
def _fused_post_res_bwd_fused_kernel_n4(
    g_ptr, x_ptr, lo_ptr, H_ptr, hp_ptr,
    dx_ptr, dlo_ptr, dH_ptr, dhp_ptr,
    T, C,
    stride_gt, stride_gi, stride_xt, stride_xj, stride_lot, stride_Ht, stride_hpt,
    stride_dxt, stride_dxj, stride_dlot, stride_dHt, stride_dhpt,
    ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # Per C tile, phase by phase (max live: 4 g tiles + 1 streamed tile + 1 result):
    #   load g0..g3                          (live for the whole iteration)
    #   lo phase:  dlo = sum_i hp_i g_i -> store;   dhp_i += sum_c g_i lo
    #   x_j phase: dx_j = sum_i H[i,j] g_i -> store; dH[i,j] += sum_c g_i x_j
    # The 16 + 4 row reductions stay in [BLOCK_T] registers until the loop ends.
    pid_t = tl.program_id(0)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask_t = offs_t < T
    rows64 = offs_t.to(tl.int64)
    hp0, hp1, hp2, hp3 = load_coef4(hp_ptr, rows64, stride_hpt, mask_t, ACC)
    z = tl.zeros([BLOCK_T], dtype=ACC)
    dhp0, dhp1, dhp2, dhp3 = z, z, z, z
    dH00, dH10, dH20, dH30 = z, z, z, z
    dH01, dH11, dH21, dH31 = z, z, z, z
    dH02, dH12, dH22, dH32 = z, z, z, z
    dH03, dH13, dH23, dH33 = z, z, z, z
    g_rows = g_ptr + rows64[:, None] * stride_gt
    x_rows = x_ptr + rows64[:, None] * stride_xt
    dx_rows = dx_ptr + rows64[:, None] * stride_dxt
    for c0 in range(0, C, BLOCK_C):
        offs_c = c0 + tl.arange(0, BLOCK_C)
        mask = mask_t[:, None] & (offs_c < C)[None, :]
        gp = g_rows + offs_c[None, :]
        # g tails are left at 1.0: every sum over C multiplies g by a zero-tailed lo / x_j tile.
        g0 = load_tile(gp, mask, ACC)
        g1 = load_tile(gp + stride_gi, mask, ACC)
        g2 = load_tile(gp + 2 * stride_gi, mask, ACC)
        g3 = load_tile(gp + 3 * stride_gi, mask, ACC)
        # lo phase
        lo = load_tile_zeroed(lo_ptr + rows64[:, None] * stride_lot + offs_c[None, :], mask, ACC)
        dlo = hp0[:, None] * g0 + hp1[:, None] * g1 + hp2[:, None] * g2 + hp3[:, None] * g3
        tl.store(dlo_ptr + rows64[:, None] * stride_dlot + offs_c[None, :],
                 dlo.to(dlo_ptr.dtype.element_ty), mask=mask)
        dhp0 += tl.sum(g0 * lo, axis=1)
        dhp1 += tl.sum(g1 * lo, axis=1)
        dhp2 += tl.sum(g2 * lo, axis=1)
        dhp3 += tl.sum(g3 * lo, axis=1)
        # x_j phases
        xp = x_rows + offs_c[None, :]
        dxp = dx_rows + offs_c[None, :]
        s0, s1, s2, s3 = _post_res_bwd_stream(xp, mask, g0, g1, g2, g3, H_ptr, rows64, stride_Ht, 0,
                                              mask_t, dxp, ACC)
        dH00 += s0
        dH10 += s1
        dH20 += s2
        dH30 += s3
        s0, s1, s2, s3 = _post_res_bwd_stream(xp + stride_xj, mask, g0, g1, g2, g3, H_ptr, rows64,
                                              stride_Ht, 1, mask_t, dxp + stride_dxj, ACC)
        dH01 += s0
        dH11 += s1
        dH21 += s2
        dH31 += s3
        s0, s1, s2, s3 = _post_res_bwd_stream(xp + 2 * stride_xj, mask, g0, g1, g2, g3, H_ptr, rows64,
                                              stride_Ht, 2, mask_t, dxp + 2 * stride_dxj, ACC)
        dH02 += s0
        dH12 += s1
        dH22 += s2
        dH32 += s3
        s0, s1, s2, s3 = _post_res_bwd_stream(xp + 3 * stride_xj, mask, g0, g1, g2, g3, H_ptr, rows64,
                                              stride_Ht, 3, mask_t, dxp + 3 * stride_dxj, ACC)
        dH03 += s0
        dH13 += s1
        dH23 += s2
        dH33 += s3
    _store_row4(dhp_ptr + rows64 * stride_dhpt, dhp0, dhp1, dhp2, dhp3, mask_t)
    dHp = dH_ptr + rows64 * stride_dHt
    _store_row4(dHp + 0, dH00, dH01, dH02, dH03, mask_t)
    _store_row4(dHp + 4, dH10, dH11, dH12, dH13, mask_t)
    _store_row4(dHp + 8, dH20, dH21, dH22, dH23, mask_t)
    _store_row4(dHp + 12, dH30, dH31, dH32, dH33, mask_t)


@triton.jit
def _store_row4(p, v0, v1, v2, v3, mask_t):
    """Store four [BLOCK_T] vectors to p[t, 0..3]."""
    ty = p.dtype.element_ty
    tl.store(p + 0, v0.to(ty), mask=mask_t)
    tl.store(p + 1, v1.to(ty), mask=mask_t)
    tl.store(p + 2, v2.to(ty), mask=mask_t)
    tl.store(p + 3, v3.to(ty), mask=mask_t)


# ---------------------------------------------------------------------------- launchers

def post_res_fwd(x_streams: torch.Tensor, layer_output: torch.Tensor, H_merged: torch.Tensor,
                 h_post: torch.Tensor, *, config: configs.LaunchConfig | None = None) -> torch.Tensor:
    """Launch K4 forward on validated inputs: out[T, 4, C] in x's dtype."""
    x, lo, H, hp = (t.contiguous() for t in (x_streams, layer_output, H_merged, h_post))
    T, _, C = x.shape
    # bf16 in the interpreter: stored as fp32 and rounded by torch (kernels.config.store_dtype).
    out = torch.empty(x.shape, dtype=store_dtype(x.dtype), device=x.device)
    if T == 0 or C == 0:
        return out.to(x.dtype)
    cfg = configs.resolve("k4_fwd", config, T=T, C=C, device=x.device)
    n_c = triton.cdiv(C, cfg.block_c)
    _fused_post_res_fwd_kernel_n4[(triton.cdiv(T, cfg.block_t) * n_c,)](
        x, lo, H, hp, out, T, C, n_c,
        x.stride(0), x.stride(1), lo.stride(0), H.stride(0), hp.stride(0), out.stride(0), out.stride(1),
        ACC=tl_acc(x.dtype), BLOCK_T=cfg.block_t, BLOCK_C=cfg.block_c,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out.to(x.dtype)


def post_res_bwd(grad_out: torch.Tensor, x_streams: torch.Tensor, layer_output: torch.Tensor,
                 H_merged: torch.Tensor, h_post: torch.Tensor, *,
                 config: configs.LaunchConfig | None = None):
    """Launch the fused K4 backward: (dx[T,4,C], dlo[T,C]) in x's dtype, (dH[T,4,4], dhp[T,4]) fp32/fp64."""
    g, x, lo, H, hp = (t.contiguous() for t in (grad_out, x_streams, layer_output, H_merged, h_post))
    T, _, C = x.shape
    acc = acc_dtype(x.dtype)
    dx = torch.empty(x.shape, dtype=store_dtype(x.dtype), device=x.device)     # see post_res_fwd
    dlo = torch.empty(lo.shape, dtype=store_dtype(lo.dtype), device=x.device)
    if T == 0 or C == 0:
        return (dx.to(x.dtype), dlo.to(lo.dtype), torch.zeros((T, N_STREAMS, N_STREAMS), dtype=acc, device=x.device),
                torch.zeros((T, N_STREAMS), dtype=acc, device=x.device))
    dH = torch.empty((T, N_STREAMS, N_STREAMS), dtype=acc, device=x.device)
    dhp = torch.empty((T, N_STREAMS), dtype=acc, device=x.device)
    cfg = configs.resolve("k4_bwd_fused", config, T=T, C=C, device=x.device)
    _fused_post_res_bwd_fused_kernel_n4[(triton.cdiv(T, cfg.block_t),)](
        g, x, lo, H, hp, dx, dlo, dH, dhp, T, C,
        g.stride(0), g.stride(1), x.stride(0), x.stride(1), lo.stride(0), H.stride(0), hp.stride(0),
        dx.stride(0), dx.stride(1), dlo.stride(0), dH.stride(0), dhp.stride(0),
        ACC=tl_acc(x.dtype), BLOCK_T=cfg.block_t, BLOCK_C=cfg.block_c,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return dx.to(x.dtype), dlo.to(lo.dtype), dH, dhp


# ---------------------------------------------------------------------------- eager references

def reference_fused_post_res(x_streams: torch.Tensor, layer_output: torch.Tensor, H_merged: torch.Tensor,
                             h_post: torch.Tensor) -> torch.Tensor:
    """Pure-torch K4: H @ x + h_post * lo per token, accumulated in float32 (float64 for float64)."""
    acc = acc_dtype(x_streams.dtype)
    mixed = torch.einsum("tij,tjc->tic", H_merged.to(acc), x_streams.to(acc))
    return (mixed + h_post.to(acc)[:, :, None] * layer_output.to(acc)[:, None, :]).to(x_streams.dtype)


def reference_post_res_bwd(grad_out: torch.Tensor, x_streams: torch.Tensor, layer_output: torch.Tensor,
                           H_merged: torch.Tensor, h_post: torch.Tensor):
    """Pure-torch K4 backward: (dx, dlo) in x's dtype, (dH, dh_post) in float32 (float64 for float64)."""
    acc = acc_dtype(x_streams.dtype)
    g, x, lo = grad_out.to(acc), x_streams.to(acc), layer_output.to(acc)
    dx = torch.einsum("tij,tic->tjc", H_merged.to(acc), g)
    dlo = torch.einsum("ti,tic->tc", h_post.to(acc), g)
    dH = torch.einsum("tic,tjc->tij", g, x)
    dhp = torch.einsum("tic,tc->ti", g, lo)
    return dx.to(x_streams.dtype), dlo.to(x_streams.dtype), dH, dhp


# ---------------------------------------------------------------------------- validation

def _check(x_streams, layer_output, H_merged, h_post, grad_out=None) -> None:
    """The forward's inputs; with ``grad_out`` (the backward op), also grad_out[T, 4, C] in x's dtype."""
    op, ref = (_OP, _OP) if grad_out is None else (f"{_OP}_bwd", "post_res_bwd")
    check_activation(op, "x_streams", x_streams, 3)
    T, n, C = x_streams.shape
    check_n(op, n, reference=ref)
    check_activation(op, "layer_output", layer_output, 2)
    check_same_dtype(op, "layer_output", layer_output, "x_streams", x_streams)
    check_shape(op, "layer_output", layer_output, (T, C))
    check_coef(op, "H_merged", H_merged, (T, n, n), x_streams)
    check_coef(op, "h_post", h_post, (T, n), x_streams)
    tensors = dict(x_streams=x_streams, layer_output=layer_output, H_merged=H_merged, h_post=h_post)
    if grad_out is not None:
        check_activation(op, "grad_out", grad_out, 3)
        check_same_dtype(op, "grad_out", grad_out, "x_streams", x_streams)
        check_shape(op, "grad_out", grad_out, (T, n, C))
        tensors["grad_out"] = grad_out
    check_devices(op, **tensors)


# ---------------------------------------------------------------------------- registration

@torch.library.custom_op("mhc::fused_post_res", mutates_args=())
def _fwd_op(x_streams: torch.Tensor, layer_output: torch.Tensor, H_merged: torch.Tensor,
            h_post: torch.Tensor) -> torch.Tensor:
    _check(x_streams, layer_output, H_merged, h_post)
    return post_res_fwd(x_streams, layer_output, H_merged, h_post)


@_fwd_op.register_fake
def _fwd_fake(x_streams, layer_output, H_merged, h_post):
    _check(x_streams, layer_output, H_merged, h_post)
    return torch.empty_like(x_streams, memory_format=torch.contiguous_format)


@torch.library.custom_op("mhc::fused_post_res_bwd", mutates_args=())
def _bwd_op(grad_out: torch.Tensor, x_streams: torch.Tensor, layer_output: torch.Tensor,
            H_merged: torch.Tensor, h_post: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _check(x_streams, layer_output, H_merged, h_post, grad_out)
    return post_res_bwd(grad_out, x_streams, layer_output, H_merged, h_post)


@_bwd_op.register_fake
def _bwd_fake(grad_out, x_streams, layer_output, H_merged, h_post):
    _check(x_streams, layer_output, H_merged, h_post, grad_out)
    T, n, _ = x_streams.shape
    acc = acc_dtype(x_streams.dtype)
    return (torch.empty_like(x_streams, memory_format=torch.contiguous_format),
            torch.empty_like(layer_output, memory_format=torch.contiguous_format),
            x_streams.new_empty((T, n, n), dtype=acc), x_streams.new_empty((T, n), dtype=acc))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad_out):
    x_streams, layer_output, H_merged, h_post = ctx.saved_tensors
    if not any(ctx.needs_input_grad):
        return None, None, None, None
    dx, dlo, dH, dhp = torch.ops.mhc.fused_post_res_bwd(
        grad_out.to(x_streams.dtype), x_streams, layer_output, H_merged, h_post)
    need = ctx.needs_input_grad
    return (dx if need[0] else None, dlo if need[1] else None,
            dH.to(H_merged.dtype) if need[2] else None, dhp.to(h_post.dtype) if need[3] else None)


_fwd_op.register_autograd(_backward, setup_context=_setup_context)


def fused_post_res(x_streams: torch.Tensor, layer_output: torch.Tensor, H_merged: torch.Tensor,
                   h_post: torch.Tensor) -> torch.Tensor:
    """K4: ``out[t, i, c] = sum_j H_merged[t, i, j] x[t, j, c] + h_post[t, i] layer_output[t, c]``.

    x_streams[T, 4, C] and layer_output[T, C] share a dtype (bfloat16, float16,
    float32; float64 for gradcheck); H_merged[T, 4, 4] and h_post[T, 4] are
    float32 (float64 beside float64 x).  Returns [T, 4, C] in x's dtype;
    differentiable in all four inputs.
    """
    return torch.ops.mhc.fused_post_res(x_streams, layer_output, H_merged, h_post)
