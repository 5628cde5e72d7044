"""tritondiff harness: differential testing of Triton kernels against eager PyTorch.

Public API::

    from harness import subject, tensor, constant, explore, counters

``import harness`` by itself does nothing heavy and decides nothing: the public
names are imported on first use.  The device (CUDA or Triton's interpreter, see
:mod:`harness.device`) is decided by the first import of ``harness.device``,
which the API (``from harness import subject, tensor``), the kernels and the
compiler all do before any ``@triton.jit`` function exists.  So the pytest
plugin (``harness.pytest_plugin``, registered for every pytest run where
tritondiff is installed) neither imports torch nor sets ``TRITON_INTERPRET``
in test runs that never ask for the harness.
"""
import importlib
import sys
import types

#: public name -> the submodule that defines it
_EXPORTS = {"Subject": "api", "constant": "api", "registry": "api", "subject": "api", "tensor": "api",
            "config": "config", "counters": "counters", "compare": "oracle", "explore": "explore"}
#: public objects named like their submodule: importing the submodule must not rebind the name
_SHADOWED = frozenset(("config", "counters", "explore"))

__all__ = sorted([*_EXPORTS, "device"])


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value) -> None:
        # The import system binds a freshly imported submodule on its package (harness.explore =
        # <module>); for the shadowed names the public object stays (resolved by __getattr__).
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name == "device":              # the submodule, imported (and the device decided) on first use
        return importlib.import_module(".device", __name__)
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS))


