"""tritondiff harness: differential testing of Triton kernels against eager PyTorch.

Public API::

    from harness import subject, tensor, constant, explore, counters
"""
from . import device  # noqa: F401  (decides CUDA vs interpreter before any kernel exists)
from .api import Subject, constant, registry, subject, tensor
from .config import config
from .counters import counters
from .oracle import compare


def explore(*args, **kwargs):
    """Fuzz one subject (see :func:`harness.explore.explore`)."""
    from .explore import explore as _explore

    return _explore(*args, **kwargs)


__all__ = ["Subject", "compare", "config", "constant", "counters", "device", "explore", "registry", "subject",
           "tensor"]
