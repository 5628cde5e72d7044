"""Reference programs the compiler is checked on: plain torch, no kernels of our own.

Layer norm, softmax, RMSNorm, nrm2 and the mHC-lite per-layer math (seed 003: fused
RMSNorm + projection, coefficient head, pre-map, post-res with n = 4 streams).  Tests,
subjects and the sweep compile these with ``compiler.compile`` and compare with eager.
"""
from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

MHC_N = 4


def _acc(t: torch.Tensor) -> torch.Tensor:
    """fp16 / bf16 upcast to fp32 for accumulation; fp32 and fp64 untouched (fp64 references stay fp64)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x * rsqrt(mean(x^2) + eps) * w, written out (the mean of squares the seeds use)."""
    ms = (_acc(x) * _acc(x)).mean(dim=-1, keepdim=True)
    return (_acc(x) * torch.rsqrt(ms + eps)).to(x.dtype) * w


def nrm2(x: torch.Tensor) -> torch.Tensor:
    """The L2 norm as seed 001 writes it: sqrt(sum(x * x)) over every element (fp16/bf16 summed in fp32)."""
    xf = _acc(x)
    return torch.sqrt((xf * xf).sum()).to(x.dtype)


def mhc_rmsnorm_project(x_flat: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """K1: RMSNorm of the flattened streams [T, n*C] then the projection to 2n + n! logits."""
    xf = _acc(x_flat)
    inv_rms = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    return (xf * inv_rms) @ _acc(weight).to(xf.dtype).t()


def mhc_permutations(n: int = MHC_N) -> torch.Tensor:
    """[n!, n*n] flattened permutation matrices (the fixed basis the residual mix is taken in)."""
    mats = []
    for perm in itertools.permutations(range(n)):
        m = torch.zeros(n, n)
        for i, j in enumerate(perm):
            m[i, j] = 1.0
        mats.append(m.flatten())
    return torch.stack(mats)


def mhc_coefficients(proj: torch.Tensor, perm_mat: torch.Tensor, n: int = MHC_N):
    """K2: h_pre = sigmoid, h_post = 2 * sigmoid, H_res = softmax(a_res) @ permutations."""
    h_pre = torch.sigmoid(proj[:, :n])
    h_post = 2.0 * torch.sigmoid(proj[:, n:2 * n])
    a_res = torch.softmax(proj[:, 2 * n:], dim=-1)
    h_res = (a_res @ perm_mat.to(a_res.dtype)).view(-1, n, n)
    return h_pre, h_post, h_res


def mhc_pre_map(x_streams: torch.Tensor, h_pre: torch.Tensor) -> torch.Tensor:
    """K3: the layer input, sum_j h_pre[t, j] * x_streams[t, j, :]."""
    return (h_pre.unsqueeze(-1) * _acc(x_streams)).sum(dim=1).to(x_streams.dtype)


def mhc_post_res(x_streams: torch.Tensor, layer_output: torch.Tensor, h_res: torch.Tensor,
                 h_post: torch.Tensor) -> torch.Tensor:
    """K4: out[t, i, :] = sum_j H[t, i, j] * x_streams[t, j, :] + h_post[t, i] * layer_output[t, :]."""
    mixed = (h_res.unsqueeze(-1) * _acc(x_streams).unsqueeze(1)).sum(dim=2)
    return (mixed + h_post.unsqueeze(-1) * _acc(layer_output).unsqueeze(1)).to(x_streams.dtype)


def mhc_layer(x_streams: torch.Tensor, weight: torch.Tensor, perm_mat: torch.Tensor) -> torch.Tensor:
    """K1..K4 around an identity "transformer layer" (tanh stands in for it)."""
    t, n, c = x_streams.shape
    proj = mhc_rmsnorm_project(x_streams.reshape(t, n * c), weight)
    h_pre, h_post, h_res = mhc_coefficients(proj, perm_mat, n)
    layer_in = mhc_pre_map(x_streams, h_pre)
    return mhc_post_res(x_streams, torch.tanh(layer_in), h_res, h_post)


def attention_block(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A pre-norm causal self-attention block without projections (batch, sequence, feature): layer norm,
    scaled_dot_product_attention over it, the residual -- the shape of nanoGPT's block."""
    h = torch.nn.functional.layer_norm(x, x.shape[-1:], w, b).unsqueeze(1)      # one head: (B, 1, T, C)
    return x + torch.nn.functional.scaled_dot_product_attention(h, h, h, is_causal=True).squeeze(1)


def gated_mlp(x: torch.Tensor, w: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """A Llama-style MLP input stage: RMSNorm, then SiLU(x W_gate) * (x W_up)."""
    h = rms_norm(x, w)
    return torch.nn.functional.silu(h @ gate) * (h @ up)

