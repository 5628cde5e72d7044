"""Flash-attention style forward: one program per (batch*head, query block), keys in blocks,
online softmax in the exp2 domain, causal and not."""
import math

import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


@triton.jit
def _attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, sqz, sqh, sqn, sqd, skz, skh, skn, skd, svz, svh, svn, svd,
              H, N, D, sm_scale, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    zh = tl.program_id(1)
    z = zh // H
    h = zh % H
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    q = tl.load(q_ptr + z * sqz + h * sqh + rm[:, None] * sqn + rd[None, :] * sqd,
                mask=(rm[:, None] < N) & (rd[None, :] < D), other=0.0)
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    hi = tl.minimum(N, (start_m + 1) * BLOCK_M) if CAUSAL else N
    for start_n in range(0, hi, BLOCK_N):
        rn = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + z * skz + h * skh + rn[None, :] * skn + rd[:, None] * skd,
                    mask=(rn[None, :] < N) & (rd[:, None] < D), other=0.0)
        qk = tl.dot(q, k, input_precision="ieee") * qk_scale
        valid = rn[None, :] < N
        if CAUSAL:
            valid = valid & (rm[:, None] >= rn[None, :])
        qk = tl.where(valid, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.math.exp2(qk - shift[:, None])
        alpha = tl.math.exp2(m_i - shift)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + z * svz + h * svh + rn[:, None] * svn + rd[None, :] * svd,
                    mask=(rn[:, None] < N) & (rd[None, :] < D), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + zh * N * D + rm[:, None] * D + rd[None, :], out.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < N) & (rd[None, :] < D))


def _attention(q, k, v, causal):
    Z, H, N, D = q.shape
    o = torch.empty((Z, H, N, D), dtype=q.dtype, device=q.device)
    if o.numel() == 0:
        return o
    BLOCK_D = max(16, triton.next_power_of_2(D))
    grid = (triton.cdiv(N, 32), Z * H)
    _attn_fwd[grid](q, k, v, o, *q.stride(), *k.stride(), *v.stride(), H, N, D, 1.0 / math.sqrt(D),
                    CAUSAL=causal, BLOCK_M=32, BLOCK_N=32, BLOCK_D=BLOCK_D)
    return o


ATTN_INPUTS = {"q": tensor(("Z", "H", "N", "D"), dtypes=FLOATS), "k": tensor(("Z", "H", "N", "D"), dtype_like="q"),
               "v": tensor(("Z", "H", "N", "D"), dtype_like="q")}
ATTN_DIMS = {"Z": (1, 2), "H": (1, 4), "N": (1, 256), "D": (1, 128)}


@subject(reference=lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
         inputs=ATTN_INPUTS, dims=ATTN_DIMS)
def flash_attention_fwd(q, k, v):
    return _attention(q, k, v, causal=False)


@subject(reference=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         inputs=ATTN_INPUTS, dims=ATTN_DIMS)
def flash_attention_fwd_causal(q, k, v):
    return _attention(q, k, v, causal=True)
