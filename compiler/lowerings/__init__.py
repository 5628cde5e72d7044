"""The lowering registry's contents, one module per family of ops.

Importing this package registers every lowering in ``registry`` (``register_lowering``).
"""
from . import convolution, creation, gather, pointwise, reductions, scans, structured, views  # noqa: F401
from . import matmul  # noqa: F401,E402  (last: it hands small inner sizes to lowerings registered before it)

__all__ = ["convolution", "creation", "gather", "pointwise", "reductions", "scans", "structured", "views", "matmul"]
