"""GEMM template kernels and autotune candidates of every step of a schedule.

``add_templates_and_variants`` runs after the ordinary groups were generated: each GEMM
template gets its kernel for the heuristic tile (with its epilogue), and when tuning is on
(``config.autotune``, or ``config.matmul == "autotune"`` for templates) each step also gets a
small candidate set, all in the same module:

- GEMM template: a few tile configurations (``templates.gemm.candidate_configs``) and the ATen
  call followed by the epilogue as a standalone pointwise kernel;
- pointwise group: block sizes around the heuristic one, 4 or 8 warps;
- reduction group: the heuristic strategy with XBLOCK / RBLOCK halved or doubled, 4 or 8 warps,
  1 or 2 pipeline stages for looped reductions (mixed-order groups keep their one choice).

The heuristic choice is always the first candidate, so a CPU run without timing keeps it.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from harness import device as _device

from ..config import config
from ..exc import ConfigError, TensorTooLarge
from ..heuristics import ReductionChoice, next_pow2
from ..lowering import LoweredGraph
from ..scheduler import KernelGroup, Schedule
from ..templates.gemm import GemmTemplate, candidate_configs, heuristic_config, template_kernel
from .kernel import KernelSpec
from .nodes import GroupContext
from .pointwise import pointwise_kernel
from .reduction import STRATEGIES
from .reduction import choose as choose_reduction_for


@dataclasses.dataclass
class Variant:
    """One candidate for a step: kernels launched in order, after the ATen call when ``extern``."""

    name: str
    specs: list[KernelSpec]
    extern: bool = False


def _ctx(group: KernelGroup, sched: Schedule, graph: LoweredGraph) -> GroupContext:
    return GroupContext(group, sched.inlined, sched.stored, graph.buffers)


def tune_templates() -> bool:
    return config.autotune or config.matmul == "autotune"


def add_templates_and_variants(sched: Schedule, graph: LoweredGraph, name: str, kernels: dict,
                               parts: list[str]) -> dict[str, list[Variant]]:
    """Fill ``kernels`` / ``parts`` with template kernels and candidates; returns the candidates by step."""
    variants: dict[str, list[Variant]] = {}
    emitted = {spec.name for specs in kernels.values() for spec in specs}
    for step in sched.steps:
        if isinstance(step, GemmTemplate):
            found = _template_variants(step, sched, graph, f"{name}_{step.name}")
            kernels[step.name] = found[0].specs
            if tune_templates():
                variants[step.name] = found
            else:
                found = found[:1]
        elif isinstance(step, KernelGroup) and config.autotune:
            found = [Variant("heuristic", kernels[step.name])] + _group_variants(step, sched, graph,
                                                                                 f"{name}_{step.name}")
            variants[step.name] = found
            found = found[1:]
        else:
            continue
        for v in found:
            for spec in v.specs:
                if spec.name not in emitted:  # warps / stages variants share one source
                    emitted.add(spec.name)
                    parts.append("\n" + spec.source)
    return variants


def _template_variants(node: GemmTemplate, sched: Schedule, graph: LoweredGraph, kname: str) -> list[Variant]:
    group = node.epilogue
    configs = candidate_configs(node.m, node.n, node.k, node.dot_dtype) if tune_templates() else \
        [heuristic_config(node.m, node.n, node.k, node.dot_dtype)]
    out = []
    for i, cfg in enumerate(configs):
        ctx = _ctx(group, sched, graph) if group is not None else None
        suffix = "" if i == 0 else f"_c{i}"
        out.append(Variant(cfg.name, [template_kernel(kname + suffix, node, cfg, ctx, graph.buffers)]))
    if tune_templates():
        specs = [pointwise_kernel(f"{kname}_epilogue", _ctx(group, sched, graph))] if group is not None else []
        out.append(Variant("aten", specs, extern=True))
    return out


def _with(spec: KernelSpec, warps: int, stages: Optional[int] = None) -> KernelSpec:
    meta = dict(spec.meta)
    if stages is not None:
        meta["num_stages"] = stages
    return dataclasses.replace(spec, num_warps=warps, meta=meta)


def _group_variants(group: KernelGroup, sched: Schedule, graph: LoweredGraph, kname: str) -> list[Variant]:
    interp = _device.is_interpreter()
    out: list[Variant] = []
    if not group.has_reduction:
        base = config.pointwise_block
        blocks = [base // 4] if interp else [b for b in (512, 1024, 2048, 4096) if b != base]
        for i, block in enumerate(b for b in blocks if b >= 16):
            with config.patch(pointwise_block=block, pointwise_tile_numel=block):
                spec = pointwise_kernel(f"{kname}_v{i}", _ctx(group, sched, graph))
            for warps in ((spec.num_warps,) if interp else (4, 8)):
                out.append(Variant(f"block{block}_w{warps}", [_with(spec, warps)]))
        return out
    if getattr(group, "columns", None) is not None:  # mixed-order kernels: the heuristic blocks only
        return out
    choice = choose_reduction_for(group)
    shapes = {(max(1, choice.xblock // 2), choice.rblock), (min(choice.xblock * 2, next_pow2(group.xnumel)),
                                                             choice.rblock)}
    if choice.strategy != "persistent":
        shapes |= {(choice.xblock, max(16, choice.rblock // 2)), (choice.xblock, choice.rblock * 2)}
    shapes.discard((choice.xblock, choice.rblock))
    for i, (xb, rb) in enumerate(sorted(shapes)):
        alt = ReductionChoice(choice.strategy, xb, rb, choice.splits)
        try:
            specs = STRATEGIES[alt.strategy].kernels(f"{kname}_v{i}", _ctx(group, sched, graph), alt)
        except (TensorTooLarge, ConfigError):
            continue
        if interp:
            out.append(Variant(f"x{xb}_r{rb}", specs))
            continue
        for warps in (4, 8):
            for stages in ((1, 2) if alt.strategy != "persistent" else (None,)):
                out.append(Variant(f"x{xb}_r{rb}_w{warps}_s{stages}", [_with(s, warps, stages) for s in specs]))
    return out[:12] if not interp else out[:2]


__all__ = ["Variant", "add_templates_and_variants", "tune_templates"]
