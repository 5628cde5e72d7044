"""The compiler's exception hierarchy: every error it raises on purpose derives from CompilerError.

Messages say what was wrong and how to fix it; errors that describe a limit carry
it as structured fields (the shape of Triton's ``OutOfResources(required, limit, name)``).
"""
from __future__ import annotations

from tritondiff.base.exc import TritondiffError


class CompilerError(TritondiffError):
    """Root of every error the compiler raises on purpose."""


class ConfigError(CompilerError, ValueError):
    """A knob of ``compiler.config`` was given a name or value it does not accept."""

    def __init__(self, message: str, *, knob: str | None = None):
        super().__init__(message)
        self.knob = knob


class LoweringError(CompilerError):
    """An FX node could not be turned into IR (and falling back was not possible)."""

    def __init__(self, message: str, *, op: str | None = None):
        super().__init__(message)
        self.op = op


class Unsupported(LoweringError):
    """A lowering declines one call (dtype, argument form); the node falls back to ATen.

    Raised inside lowering functions only; the graph lowering catches it and emits an
    ExternKernel for the node, so it never reaches users.
    """


class VerificationError(CompilerError):
    """The IR failed a consistency check between two pipeline steps (``config.verify_ir``)."""

    def __init__(self, message: str, *, step: str, node: str | None = None):
        super().__init__(f"[{step}] {message}")
        self.step = step
        self.node = node


class CodegenError(CompilerError):
    """Triton source could not be produced for a fused group (a compiler bug, never bad input)."""


class GridTooLarge(CodegenError):
    """A generated kernel's grid asks for more programs along an axis than CUDA launches: 2^31 - 1 along
    axis 0, 65,535 along axes 1 and 2 (a compiler bug: tilings fold such extents into axis 0 or a loop).

    Fields: ``kernel``, ``grid``, ``axis`` and ``limit``.
    """

    def __init__(self, kernel: str, grid: tuple[int, ...], axis: int, limit: int):
        super().__init__(f"kernel {kernel}: grid {tuple(grid)} has {grid[axis]:,} programs along axis {axis}, "
                         f"CUDA launches at most {limit:,} there; this is a compiler bug (a tiling must fold the "
                         "excess into axis 0 or loop inside the kernel): please report it with the dump")
        self.kernel, self.grid, self.axis, self.limit = kernel, tuple(grid), axis, limit


class TensorTooLarge(CodegenError):
    """A block-level tensor would exceed ``config.max_triton_tensor_numel``.

    Fields: ``what`` (the kernel and tensor), ``shape``, ``numel`` and ``limit``.
    """

    def __init__(self, message: str, *, what: str, shape: tuple[int, ...], numel: int, limit: int):
        super().__init__(message)
        self.what = what
        self.shape = tuple(shape)
        self.numel = numel
        self.limit = limit


class ReductionTooLarge(TensorTooLarge):
    """A forced reduction configuration needs a block tensor past the Triton limit.

    Fields: ``reduction`` (buffer name and type), ``extent`` (elements along the reduced
    axis), ``block`` (the block shape asked for, [XBLOCK, RBLOCK] for a tile), ``limit``,
    ``strategy`` and ``forced`` (the forced block knobs that shaped ``block``, e.g.
    ``{"rblock": 2097152}``).  The message's fix is built from those: the strategy to switch
    to when the whole axis cannot fit, else each forced knob with its largest legal value.
    """

    def __init__(self, *, reduction: str, extent: int, block: tuple[int, ...], limit: int, strategy: str,
                 forced: dict[str, int] | None = None):
        numel = 1
        for b in block:
            numel *= b
        forced = dict(forced or {})
        message = (
            f"reduction {reduction} over {extent:,} elements: the {strategy} strategy needs a block "
            f"of shape {list(block)} ({numel:,} elements), past max_triton_tensor_numel={limit:,}. "
            f"Fix: {_reduction_fix(strategy, extent, tuple(block), limit, forced)}.")
        super().__init__(message, what=f"reduction {reduction}", shape=block, numel=numel, limit=limit)
        self.reduction = reduction
        self.extent = extent
        self.block = tuple(block)
        self.strategy = strategy
        self.forced = forced


def _pow2_at_most(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n >= 1 else 0


def _reduction_fix(strategy: str, extent: int, block: tuple[int, ...], limit: int, forced: dict[str, int]) -> str:
    """How to get under ``limit``, from what was actually asked for."""
    xblock, rblock = (block[0], block[-1]) if len(block) >= 2 else (1, block[-1] if block else 1)
    whole_axis = strategy in ("persistent", "mixed_order")  # RBLOCK must cover the reduced axis
    fixes = []
    if whole_axis and _pow2_at_most(limit) < extent:
        fixes.append(f"the {strategy} strategy holds all {extent:,} elements of the axis in one block, which "
                     f"cannot fit: use compiler.config.patch(reduction_strategy='looped') or 'split' (they "
                     f"stream the axis in RBLOCK chunks)")
    for knob, other, other_name in (("rblock", xblock, "XBLOCK"), ("xblock", rblock, "RBLOCK")):
        if knob not in forced:
            continue
        largest = _pow2_at_most(limit // other)
        if largest == 0 or (knob == "rblock" and whole_axis and largest < extent):
            continue  # no value of this knob fits: the strategy (or the other knob) has to change
        with_other = f" while {other_name}={other:,}" if other > 1 else ""
        fixes.append(f"lower the forced compiler.config.{knob}={forced[knob]:,} to at most {largest:,}{with_other} "
                     f"(or leave it unset: the {strategy} strategy then picks a block that fits)")
    if not fixes:
        fixes.append("lower compiler.config.looped.rblock / max_reduction_block_numel, or force a smaller "
                     "rblock / xblock")
    return "; or ".join(fixes)


class KernelCompileError(CompilerError):
    """Triton rejected generated source; ``path`` points at the file that holds it."""

    def __init__(self, message: str, *, kernel: str, path: str):
        super().__init__(f"{message}\n  generated source: {path}")
        self.kernel = kernel
        self.path = path


# --- autotuning (compiler.autotune) ----------------------------------------------------------

class AutotuneError(CompilerError):
    """Tuning went wrong: no candidate ran, or a trial leaked state into the real arguments.

    Fields: ``kernel`` (what was tuned) and ``candidates`` (their names).
    """

    def __init__(self, message: str, *, kernel: str, candidates: tuple[str, ...] = ()):
        super().__init__(message)
        self.kernel = kernel
        self.candidates = tuple(candidates)


class GraphCacheError(CompilerError):
    """The on-disk graph cache (``compiler.graph_cache``) could not be read or rebuilt; ``path`` is the file."""

    def __init__(self, message: str, *, path: str):
        super().__init__(f"{message}\n  cache file: {path}\n  fix: delete the file, point "
                         f"compiler.config.graph_cache_dir elsewhere, or set graph_cache=False")
        self.path = path


class AutotuneCacheError(AutotuneError):
    """The on-disk autotune cache could not be read or rebuilt; ``path`` is the file."""

    def __init__(self, message: str, *, path: str):
        super().__init__(f"{message}\n  cache file: {path}\n  fix: delete the file, point "
                         f"compiler.config.autotune_cache_dir elsewhere, or set autotune_persist=False",
                         kernel="<cache>")
        self.path = path
