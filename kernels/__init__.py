"""Hand-written Triton kernels registered as torch custom ops."""
from harness import device as _device  # noqa: F401  (must precede every @triton.jit)
from .nrm2 import nrm2  # noqa: E402
from .layer_norm import layer_norm  # noqa: E402
from . import mhc  # noqa: E402
