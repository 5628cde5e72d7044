"""The lowering registry's contents, one module per family of ops.

Importing this package registers every lowering with ``compiler.lowering.register_lowering``.
"""
from . import creation, pointwise, reductions, structured, views  # noqa: F401

__all__ = ["creation", "pointwise", "reductions", "structured", "views"]
