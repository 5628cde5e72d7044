"""Pre-written kernel templates with an epilogue injection point (seed 002, sections 2.3, 5.4-5.5).

``gemm``: mm / addmm / bmm as one tiled Triton kernel; the IR node (``GemmTemplate``), its
tile configurations and the source generator.  ``epilogue``: the scheduler hook that moves
pointwise consumers of a template's output into the template's kernel, before its store.
``row_reductions``: the hook that moves reductions over A's rows that the epilogue reads
(mHC's mean of squares) into the template's K loop.
"""
from .fusion import fuse_templates
from .gemm import GemmConfig, GemmTemplate, candidate_configs, heuristic_config

__all__ = ["GemmConfig", "GemmTemplate", "candidate_configs", "fuse_templates", "heuristic_config"]
