"""GEMM template kernels and autotune candidates of every step of a schedule.

``add_templates_and_variants`` runs after the ordinary groups were generated: each GEMM
template gets its kernel for the heuristic tile (with its epilogue), and when tuning is on
(``config.autotune``, or ``config.matmul == "autotune"`` for templates) each step also gets a
small candidate set, all in the same module:

- GEMM template: a few tile configurations (``templates.gemm.candidate_configs``) and the ATen
  call followed by the epilogue as a standalone pointwise kernel (not for a template that folds
  row reductions of A: ATen would need them as a kernel of their own);
- pointwise group: block sizes around the heuristic one, 4 or 8 warps;
- reduction group: the heuristic blocks with half and twice the warps, the other strategy (persistent
  or looped) where both apply, XBLOCK / RBLOCK halved or doubled, its loop software-pipelined over 2
  stages (``reduction_candidates``); a mixed-order group keeps its blocks and tries half and twice the
  warps (``MIXED_ORDER_CANDIDATES``).

The heuristic choice is always the first candidate, so a CPU run without timing keeps it.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tritondiff.base import device as _device

from ..config import MAX_WARPS, config
from ..exc import ConfigError, TensorTooLarge
from ..heuristics import ReductionChoice, loop_stages, next_pow2
from ..ir import LoweredGraph
from ..scheduler import KernelGroup, Schedule
from ..templates.gemm import GemmTemplate, candidate_configs, heuristic_config, template_kernel
from .kernel import KernelSpec
from .nodes import GroupContext
from .pointwise import pointwise_kernel
from .reduction import STRATEGIES
from .reduction import choose as choose_reduction_for
from .reduction import kernels as reduction_kernels


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
                                                                                 f"{name}_{step.name}",
                                                                                 kernels[step.name])
            variants[step.name] = found
            found = found[1:]
        else:
            continue
        for v in found:
            for spec in v.specs:
                if spec.name not in emitted:  # warps variants share one source
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
    if tune_templates() and not node.row_reduction_nodes:   # ATen cannot fold A's row reductions
        specs = [pointwise_kernel(f"{kname}_epilogue", _ctx(group, sched, graph))] if group is not None else []
        out.append(Variant("aten", specs, extern=True))
    return out


def _with(spec: KernelSpec, warps: int) -> KernelSpec:
    """``spec`` launched at ``warps``, at most its source's ``meta["max_warps"]`` (a tagged split's poll gives
    each thread its own words only up to that many: ``codegen.reduction.SplitReduction._tagged_last_program``)."""
    return dataclasses.replace(spec, num_warps=min(warps, spec.meta.get("max_warps", warps)))


MAX_REDUCTION_CANDIDATES = 12
# A mixed-order group's candidates: factors of its warps.  Its row loop is not pipelined: 2 and 3 stages
# (tl.range) made layer norm 4096 x 10240's backward 159.9 / 161.6 us against 141.0 us, with more
# spills.
MIXED_ORDER_CANDIDATES = (0.5, 2)


@dataclasses.dataclass(frozen=True)
class ReductionCandidate:
    """One tuning candidate of a reduction group: its blocks, strategy and loop pipelining (``choice``),
    its warps as a factor of those the code generator gives each kernel (1: as generated)."""

    choice: ReductionChoice
    warp_factor: float = 1

    @property
    def name(self) -> str:
        c = self.choice
        return (f"{c.strategy}_x{c.xblock}_r{c.rblock}" + (f"_w{self.warp_factor:g}x" if self.warp_factor != 1 else "")
                + (f"_s{c.stages}" if c.stages else ""))


def reduction_candidates(choice: ReductionChoice, xnumel: int, rnumel: int, *, gpu: bool) -> list[ReductionCandidate]:
    """The candidates tried beside the heuristic ``choice`` (which is not among them), best guesses first.

    On a GPU: the heuristic blocks with half and twice the warps; the strategy's ``alternatives`` where
    ``config.reduction_strategy`` is "auto" (other strategies' blocks: ``codegen.reduction``); the neighbouring
    blocks (XBLOCK halved / doubled, and RBLOCK where the strategy ``loops``); its loop software-pipelined over 2 stages
    (``tl.range(..., num_stages=2)``; a loop without ``tl.dot`` is pipelined only so).  At
    most ``MAX_REDUCTION_CANDIDATES``.  Under the interpreter (timing is slow and rarely on): the
    neighbouring block shapes, of which the caller keeps the first two it can generate.  Shapes of several
    rows stay within the block budget, as the heuristic's do; a shape the code generator still refuses is
    skipped by the caller."""
    budget = min(config.max_reduction_block_numel, config.max_triton_tensor_numel)
    out: list[ReductionCandidate] = []

    def add(strategy: str, xblock: int, rblock: int, factor: float = 1, stages: Optional[int] = None) -> None:
        new_blocks = (strategy, xblock, rblock) != (choice.strategy, choice.xblock, choice.rblock)
        if new_blocks and (xblock < 1 or rblock < 16 or (xblock > 1 and xblock * rblock > budget)):
            return                      # one row: any block the heuristic may take; rows: within the budget
        if stages is None or strategy == "persistent":
            stages = loop_stages(strategy)      # None for a persistent kernel: no loop
        warps = None if new_blocks else choice.warps    # the heuristic's blocks keep the warps it chose for them
        if warps and factor != 1 and _scaled_warps(warps, factor) == warps:
            return                      # scaled to what the heuristic launches already (32 doubled): no candidate
        c = ReductionCandidate(ReductionChoice(strategy, xblock, rblock, choice.splits, stages, warps), factor)
        if c not in out and c != ReductionCandidate(choice):
            out.append(c)

    strategy, xb, rb = choice.strategy, choice.xblock, choice.rblock
    own = STRATEGIES[strategy]
    neighbours = [(max(1, xb // 2), rb), (min(xb * 2, next_pow2(xnumel)), rb)]
    if own.loops:
        neighbours += [(xb, max(16, rb // 2)), (xb, rb * 2)]
    if not gpu:
        for x, r in sorted(set(neighbours)):
            add(strategy, x, r)
        return out
    add(strategy, xb, rb, 0.5)
    add(strategy, xb, rb, 2)
    if config.reduction_strategy == "auto":
        for other, x, r, factor in own.alternatives(choice, rnumel):
            add(other, x, r, factor)
    for x, r in neighbours:
        add(strategy, x, r)
    if own.loops:
        add(strategy, xb, rb, 1, 1 if choice.stages else 2)     # the loop pipelined, or no longer
    return out[:MAX_REDUCTION_CANDIDATES]


def _gpu_candidates() -> bool:
    """Tune with the GPU's candidate set (False under the interpreter: fewer, no warps variants)."""
    return not _device.is_interpreter()


def _group_variants(group: KernelGroup, sched: Schedule, graph: LoweredGraph, kname: str,
                    heuristic: list[KernelSpec]) -> list[Variant]:
    interp = not _gpu_candidates()
    out: list[Variant] = []
    if group.alone is not None:         # a scatter's or a scan's blocks: nothing to tune apart
        return out
    if not group.has_reduction:
        base = config.pointwise_block
        blocks = [base // 4] if interp else [b for b in (512, 1024, 2048, 4096) if b != base]
        for i, block in enumerate(b for b in blocks if b >= 16):
            with config.patch(pointwise_block=block, pointwise_tile_numel=block):
                spec = pointwise_kernel(f"{kname}_v{i}", _ctx(group, sched, graph))
            for warps in ((spec.num_warps,) if interp else (4, 8)):
                out.append(Variant(f"block{block}_w{warps}", [_with(spec, warps)]))
        return out
    if getattr(group, "columns", None) is not None:  # mixed-order kernels: the heuristic blocks, other warps
        tried = {tuple(s.num_warps for s in heuristic)}
        for factor in (() if interp else MIXED_ORDER_CANDIDATES):
            specs = [_with(s, _scaled_warps(s.num_warps, factor)) for s in heuristic]
            warps = tuple(s.num_warps for s in specs)
            if warps not in tried:
                tried.add(warps)
                out.append(Variant(f"mixed_order_w{factor:g}x", specs))
        return out
    choice = choose_reduction_for(_ctx(group, sched, graph))
    sources: dict[ReductionChoice, list[KernelSpec]] = {choice: heuristic}   # warps variants: one source
    launched = {_launches(heuristic)}        # a candidate that launches what another does (warps clamped) is not
    for cand in reduction_candidates(choice, group.xnumel, group.rnumel, gpu=not interp):
        blocks = cand.choice
        specs = sources.get(blocks)
        if specs is None:
            try:
                specs = reduction_kernels(blocks.strategy, f"{kname}_v{len(sources)}", _ctx(group, sched, graph),
                                          blocks)
            except (TensorTooLarge, ConfigError):
                specs = []
            sources[blocks] = specs
        variant = [_with(s, _scaled_warps(s.num_warps, cand.warp_factor)) for s in specs]
        if specs and _launches(variant) not in launched:
            launched.add(_launches(variant))
            out.append(Variant(cand.name, variant))
        if interp and len(out) == 2:
            break
    return out


def _launches(specs: list[KernelSpec]) -> tuple:
    """What a candidate launches: each kernel's source and launch config."""
    return tuple((s.source, s.num_warps, s.meta.get("num_stages")) for s in specs)


def _scaled_warps(warps: int, factor: float) -> int:
    """A candidate's warps: the generator's scaled by ``factor``, at most the larger of
    ``config.max_num_warps`` and the generator's own (a streaming split partial's 32 stays 32 at x1)."""
    return max(1, min(max(config.max_num_warps, warps), MAX_WARPS, int(warps * factor)))


__all__ = ["Variant", "ReductionCandidate", "add_templates_and_variants", "reduction_candidates", "tune_templates"]
