"""The eager (pure-torch) references of the mHC-lite ops, under the ops' own names.

Each accumulates in float32 (float64 for float64 inputs) and returns the
dtype the op returns; they accept any stream count n, unlike the kernels.
``kernels.mhc.reference.fused_pre_map(x, h)`` is the oracle of
``kernels.mhc.fused_pre_map(x, h)``, and so on.  The ``*_bwd*`` functions are
the references of the individual backward kernels (used by the benchmark's
Inductor column and by the tests).
"""
from __future__ import annotations

from .post_res import reference_fused_post_res as fused_post_res
from .post_res import reference_post_res_bwd as post_res_bwd
from .pre_map import reference_fused_pre_map as fused_pre_map
from .pre_map import reference_pre_map_bwd_dx as pre_map_bwd_dx
from .pre_map import reference_pre_map_bwd_hpre as pre_map_bwd_hpre
from .rmsnorm_project import reference_fused_rmsnorm_project as fused_rmsnorm_project
from .rmsnorm_project import reference_rmsnorm_project_bwd_dx as rmsnorm_project_bwd_dx

__all__ = [
    "fused_rmsnorm_project", "rmsnorm_project_bwd_dx",
    "fused_pre_map", "pre_map_bwd_dx", "pre_map_bwd_hpre",
    "fused_post_res", "post_res_bwd",
]
