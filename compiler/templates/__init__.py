"""Pre-written kernel templates with an epilogue injection point (seed 002, sections 2.3, 5.4-5.5).

``gemm``: mm / addmm / bmm as one tiled Triton kernel; the IR node (``GemmTemplate``), its
tile configurations and the source generator.  ``epilogue``: the scheduler hook that moves
pointwise consumers of a template's output into the template's kernel, before its store.
"""
from .gemm import GemmConfig, GemmTemplate, candidate_configs, heuristic_config

__all__ = ["GemmConfig", "GemmTemplate", "candidate_configs", "heuristic_config"]
