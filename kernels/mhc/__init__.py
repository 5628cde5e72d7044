"""mHC-lite (n = 4 streams) fused Triton kernels, registered as ``torch.ops.mhc.*``.

Ops (Python wrappers here, eager references in :mod:`kernels.mhc.reference`):

* :func:`fused_rmsnorm_project` (K1): ``(x @ W^T) * rsqrt(mean(x^2) + eps)``
* :func:`fused_pre_map` (K3): ``sum_j h_pre[t, j] x[t, j, c]``
* :func:`fused_post_res` (K4): ``sum_j H[t, i, j] x[t, j, c] + h_post[t, i] lo[t, c]``
* :class:`MHCLiteBlock`: K1, K2 (PyTorch), K3, the wrapped layer, K4.

Launch configurations per architecture live in :mod:`kernels.mhc.configs`.
"""
from . import configs, reference
from .block import MHCLiteBlock, permutation_matrices
from .post_res import fused_post_res, reference_fused_post_res
from .pre_map import fused_pre_map, reference_fused_pre_map
from .rmsnorm_project import fused_rmsnorm_project, reference_fused_rmsnorm_project

__all__ = [
    "MHCLiteBlock", "configs", "reference", "permutation_matrices",
    "fused_rmsnorm_project", "fused_pre_map", "fused_post_res",
    "reference_fused_rmsnorm_project", "reference_fused_pre_map", "reference_fused_post_res",
]
