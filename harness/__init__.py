"""tritondiff harness: differential testing of Triton kernels against eager PyTorch."""
from . import device  # noqa: F401  (decides CUDA vs interpreter before any kernel exists)
