"""Running GEMM template steps, and any step that has autotune candidates, inside an ``Executable``.

A template step launches its kernel (tile, epilogue, store).  With candidates
(``GeneratedModule.variants``), the first call of the executable tunes them through
``compiler.autotune.run_tuned`` -- outputs cloned per trial, the winner run once on the real
buffers and re-checked -- and later calls reuse the winner.  The ATen candidate of a template
calls the op (``ExternKernel`` machinery) and then the epilogue as a standalone kernel.
"""
from __future__ import annotations

import functools
from typing import Any

from .. import autotune
from ..buffers import alloc
from ..config import compile_options
from ..counters import counters
from .gemm import GemmTemplate


def _tuned(exe: Any) -> dict:
    return exe.__dict__.setdefault("_tuned_variants", {})


def tuned_variant(exe: Any, step: Any) -> Any:
    """The candidate (``codegen.variants.Variant``) tuning chose for ``step``; None before it ran or when the
    step has no candidates."""
    return _tuned(exe).get(step.name)


def stored_names(exe: Any, step: Any) -> list[str]:
    """The buffers a template step writes: its output (when stored) and its stored epilogue nodes."""
    stored = [step.output.name] if step.store_output else []
    return stored + [p.name for p in step.epilogue_nodes if p.name in exe.sched.stored]


def _alloc_stored(exe: Any, names: list[str], env: dict) -> list[str]:
    written = []
    for name in names:
        if name not in env:
            env[name] = alloc(exe.graph.buffers[name].layout)
        written.append(name)
    return written


def _launch_all(exe: Any, specs: list, env: dict) -> None:
    """Launch ``specs`` in order; kernels of one step share its workspaces (a split's partials)."""
    workspaces: dict = {}
    for spec in specs:
        exe._launch(spec, env, workspaces)


def _run_variant(exe: Any, step: Any, variant: Any, env: dict) -> None:
    if variant.extern:
        exe._run_extern(step, env)
    _launch_all(exe, variant.specs, env)


def _run(exe: Any, step: Any, env: dict, written: list[str], what: str) -> None:
    variants = exe.generated.variants.get(step.name)
    if not variants:
        _launch_all(exe, exe.generated.kernels[step.name], env)
        return
    chosen = tuned_variant(exe, step)
    if chosen is not None:
        _run_variant(exe, step, chosen, env)
        return
    candidates = [autotune.Candidate(v.name, functools.partial(_run_variant, exe, step, v),
                                     {"kernels": [s.name for s in v.specs], "extern": v.extern}) for v in variants]
    names = sorted({a.name for v in variants for s in v.specs for a in s.args if not a.workspace} | set(written))
    sources = [s.source.replace(exe.generated.name, "G") for v in variants for s in v.specs]  # graph-id free
    key = autotune.make_key(f"{what} {exe.generated.name}/{step.name}", sources, env, names,
                            [v.name for v in variants], compile_options())
    winner = autotune.run_tuned(key, candidates, env, written)
    counters[f"autotune.winner.{winner.name}"] += 1
    _tuned(exe)[step.name] = next(v for v in variants if v.name == winner.name)
    exe.steps_changed()               # its fast loop (GPU) is rebuilt with the winner's kernels


def run_template(exe: Any, step: GemmTemplate, env: dict) -> None:
    """One template step: allocate what it stores, then its kernel (or its tuned candidate)."""
    written = _alloc_stored(exe, stored_names(exe, step), env)
    _run(exe, step, env, written, "GEMM")


def run_group_tuned(exe: Any, group: Any, env: dict) -> None:
    """A generated kernel group with candidates (its stored buffers are already allocated)."""
    written = [p.name for p in group.placed if p.name in exe.sched.stored]
    _run(exe, group, env, written, "kernel")


__all__ = ["run_template", "run_group_tuned", "stored_names", "tuned_variant"]
