"""Hand-written Triton kernels registered as torch custom ops."""
from harness import device as _device  # noqa: F401  (must precede every @triton.jit)
