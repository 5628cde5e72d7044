"""Hand-written Triton kernels registered as torch custom ops."""

if __name__ != "tritondiff.kernels":          # imported as a top-level 'kernels' from a checkout's root folder
    raise ImportError("import tritondiff.kernels, not kernels: the package installs as tritondiff.kernels "
                      "(pip install -e . from the repo root)")
from tritondiff.base import device as _device  # (must precede every @triton.jit)
from tritondiff.base import interpreter as _interpreter

if _device.is_interpreter():
    _interpreter.install()        # bf16 arithmetic on values, not bit patterns
from .nrm2 import nrm2  # noqa: E402
from .layer_norm import layer_norm  # noqa: E402
from . import mhc  # noqa: E402
