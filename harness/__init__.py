"""tritondiff harness: differential testing of Triton kernels against eager PyTorch.

Public API::

    from harness import subject, tensor, constant, explore, counters
"""
from . import device  # noqa: F401  (decides CUDA vs interpreter before any kernel exists)
from .api import Subject, constant, registry, subject, tensor
from .config import config
from .counters import counters
from .oracle import compare
from .explore import explore  # noqa: E402  (binds the function over the submodule's name)


__all__ = ["Subject", "compare", "config", "constant", "counters", "device", "explore", "registry", "subject",
           "tensor"]
