"""The compiler's exception hierarchy: every error it raises on purpose derives from CompilerError.

Messages say what was wrong and how to fix it; errors that describe a limit carry
it as structured fields (the shape of Triton's ``OutOfResources(required, limit, name)``).
"""
from __future__ import annotations


class CompilerError(Exception):
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
    axis), ``block`` (the block shape asked for), ``limit``.
    """

    def __init__(self, *, reduction: str, extent: int, block: tuple[int, ...], limit: int, strategy: str):
        numel = 1
        for b in block:
            numel *= b
        message = (
            f"reduction {reduction} over {extent:,} elements: the {strategy} strategy needs a block "
            f"of shape {list(block)} ({numel:,} elements), past max_triton_tensor_numel={limit:,}. "
            f"Fix: use compiler.config.patch(reduction_strategy='looped') or 'split' (they stream the "
            f"axis in chunks), or lower rblock/xblock; Triton itself rejects tensors past 1,048,576 elements.")
        super().__init__(message, what=f"reduction {reduction}", shape=block, numel=numel, limit=limit)
        self.reduction = reduction
        self.extent = extent
        self.block = tuple(block)
        self.strategy = strategy


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


class AutotuneCacheError(AutotuneError):
    """The on-disk autotune cache could not be read or rebuilt; ``path`` is the file."""

    def __init__(self, message: str, *, path: str):
        super().__init__(f"{message}\n  cache file: {path}\n  fix: delete the file, point "
                         f"compiler.config.autotune_cache_dir elsewhere, or set autotune_persist=False",
                         kernel="<cache>")
        self.path = path
