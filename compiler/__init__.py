"""tritondiff's torch.compile backend: ATen graphs -> loop IR -> fusion -> Triton."""

if __name__ != "tritondiff.compiler":          # imported as a top-level 'compiler' from a checkout's root folder
    raise ImportError("import tritondiff.compiler, not compiler: the package installs as tritondiff.compiler "
                      "(pip install -e . from the repo root)")
from tritondiff.base import device as _device  # (must precede every @triton.jit)
from tritondiff.base import interpreter as _interpreter

if _device.is_interpreter():
    _interpreter.install()        # bf16 arithmetic on values, not bit patterns

from . import dump, exc  # noqa: E402
from .backend import CompiledGraph, capture_graphs, compile, compile_fresh, tritondiff_backend  # noqa: E402
from .config import config  # noqa: E402
from .counters import counters  # noqa: E402
from .lowering import register_lowering  # noqa: E402

__all__ = ["compile", "compile_fresh", "capture_graphs", "tritondiff_backend", "config", "counters", "dump", "exc",
           "register_lowering", "CompiledGraph"]
