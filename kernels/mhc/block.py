"""MHCLiteBlock: one mHC-lite layer wrapper (seed 003's per-layer flow) over the fused ops.

    x_streams [T, n, C]  --K1-->  heads [T, D]          (RMSNorm + projection, D = 2n + n!)
                         --K2-->  h_pre [T, n], h_post [T, n], H_merged [T, n, n]   (PyTorch)
                         --K3-->  layer_input [T, C]   (pre-map)
                         layer(layer_input) -> layer_output [T, C]
                         --K4-->  out [T, n, C]        (post-res)

K2, the coefficient maths (fp32; fp64 beside fp64 activations):

    heads    = K1(x_flat, W) + b                       x_flat = x_streams.reshape(T, n*C)
    h_pre    = sigmoid(heads[:, :n])                   weights of the pre-map, in (0, 1)
    h_post   = 2 * sigmoid(heads[:, n:2n])             scale of the layer output per stream, in (0, 2)
    a_res    = softmax(heads[:, 2n:], -1)              weights over the n! permutations
    H_merged = (a_res @ perm_mat).view(T, n, n)        a convex mix of permutation matrices:
                                                       doubly stochastic by construction (mHC-lite)

perm_mat[p] is the flattened n x n permutation matrix of the p-th permutation
of range(n) in itertools order (row i has its one at column perm[i]), so the
first row is the identity.  Initialisation: W ~ N(0, (0.1 / sqrt(n*C))^2)
(heads move by about 0.1 at start); b puts h_pre at 1/n (the pre-map starts
as the stream mean), h_post at 1, and 90% of a_res on the identity
permutation (the block starts close to a plain residual on every stream).

``eager=True`` runs the same parameters through the pure-torch references
(``kernels.mhc.reference``) instead of the Triton ops, so the whole block's
forward and backward can be diffed against it.
"""
from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from tritondiff.kernels.exc import UnsupportedInput

from ._common import N_STREAMS, coef_dtype
from .post_res import fused_post_res, reference_fused_post_res
from .pre_map import fused_pre_map, reference_fused_pre_map
from .rmsnorm_project import fused_rmsnorm_project, reference_fused_rmsnorm_project


def permutation_matrices(n: int) -> torch.Tensor:
    """[n!, n*n] float32: row p is the flattened permutation matrix of the p-th permutation of range(n)."""
    perms = list(itertools.permutations(range(n)))
    mats = torch.zeros(len(perms), n, n, dtype=torch.float32)
    for p, perm in enumerate(perms):
        mats[p, torch.arange(n), torch.tensor(perm)] = 1.0
    return mats.reshape(len(perms), n * n)


class MHCLiteBlock(nn.Module):
    """Wrap ``layer`` (a map [T, C] -> [T, C], no residual inside) in an n = 4 stream mHC-lite block.

    Input and output are ``x_streams`` of shape [T, n_streams, hidden_size].
    Parameters: ``head_proj`` [2n + n!, n*C] (in the module's dtype; cast to the
    activations' dtype for K1) and ``head_bias`` [2n + n!].
    """

    def __init__(self, layer: nn.Module, hidden_size: int, n_streams: int = N_STREAMS, *,
                 eps: float = 1e-6, eager: bool = False):
        super().__init__()
        if n_streams != N_STREAMS:
            raise UnsupportedInput(
                f"MHCLiteBlock: mHC-lite kernels support n=4 only (got n_streams={n_streams})",
                argument="n_streams")
        if not isinstance(hidden_size, int) or hidden_size < 1:
            raise UnsupportedInput(f"MHCLiteBlock: hidden_size must be a positive int, got {hidden_size!r}",
                                   argument="hidden_size")
        if not isinstance(layer, nn.Module):
            raise UnsupportedInput(f"MHCLiteBlock: layer must be an nn.Module, got {type(layer).__name__}",
                                   argument="layer")
        self.layer = layer
        self.hidden_size = hidden_size
        self.n_streams = n_streams
        self.eps = float(eps)
        self.eager = eager
        self.num_heads = 2 * n_streams + math.factorial(n_streams)
        self.head_proj = nn.Parameter(torch.empty(self.num_heads, n_streams * hidden_size))
        self.head_bias = nn.Parameter(torch.empty(self.num_heads))
        self.register_buffer("perm_mat", permutation_matrices(n_streams), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        n = self.n_streams
        with torch.no_grad():
            self.head_proj.normal_(0.0, 0.1 / math.sqrt(n * self.hidden_size))
            bias = torch.zeros(self.num_heads)
            bias[:n] = math.log(1.0 / (n - 1))  # sigmoid = 1/n
            n_perm = self.num_heads - 2 * n
            bias[2 * n] = math.log(0.9 * (n_perm - 1) / 0.1)  # softmax puts 0.9 on the identity
            self.head_bias.copy_(bias)

    def coefficients(self, x_streams: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """K1 + K2: (h_pre [T, n], h_post [T, n], H_merged [T, n, n]) in fp32 (fp64 for fp64 x)."""
        T, n, C = x_streams.shape
        x_flat = x_streams.reshape(T, n * C)
        W = self.head_proj.to(x_streams.dtype)
        project = reference_fused_rmsnorm_project if self.eager else fused_rmsnorm_project
        cdt = coef_dtype(x_streams.dtype)
        heads = project(x_flat, W, self.eps).to(cdt) + self.head_bias.to(cdt)
        h_pre = torch.sigmoid(heads[:, :n])
        h_post = 2.0 * torch.sigmoid(heads[:, n:2 * n])
        a_res = torch.softmax(heads[:, 2 * n:], dim=-1)
        H_merged = (a_res @ self.perm_mat.to(cdt)).view(T, n, n)
        return h_pre, h_post, H_merged

    def forward(self, x_streams: torch.Tensor) -> torch.Tensor:
        want = ("T", self.n_streams, self.hidden_size)
        if x_streams.dim() != 3 or x_streams.shape[1] != self.n_streams or x_streams.shape[2] != self.hidden_size:
            raise UnsupportedInput(
                f"MHCLiteBlock: x_streams has shape {tuple(x_streams.shape)}, expected {want} "
                f"(reshape a [T, n*C] tensor with .view(T, {self.n_streams}, {self.hidden_size}))", argument="x_streams")
        h_pre, h_post, H_merged = self.coefficients(x_streams)
        pre_map = reference_fused_pre_map if self.eager else fused_pre_map
        post_res = reference_fused_post_res if self.eager else fused_post_res
        layer_input = pre_map(x_streams, h_pre)
        layer_output = self.layer(layer_input)
        if layer_output.shape != layer_input.shape:
            raise UnsupportedInput(
                f"MHCLiteBlock: the wrapped layer returned shape {tuple(layer_output.shape)} for an input of "
                f"shape {tuple(layer_input.shape)}; it must map [T, C] to [T, C]", argument="layer")
        return post_res(x_streams, layer_output.to(x_streams.dtype), H_merged, h_post)

    def extra_repr(self) -> str:
        return (f"hidden_size={self.hidden_size}, n_streams={self.n_streams}, eps={self.eps}, "
                f"eager={self.eager}")
