"""tritondiff harness: differential testing of Triton kernels against eager PyTorch.

Public API::

    from tritondiff.harness import subject, tensor, constant, explore, counters

(the same names as ``from tritondiff import ...``).  ``import tritondiff.harness`` by
itself does nothing heavy and decides nothing: the public names are imported on
first use.  The device (CUDA or Triton's interpreter) is decided by the first
import of :mod:`tritondiff.base.device`, which the API, the kernels and the
compiler all do before any ``@triton.jit`` function exists.  So the pytest
plugin (``harness.pytest_plugin``, registered for every pytest run where
tritondiff is installed) neither imports torch nor sets ``TRITON_INTERPRET``
in test runs that never ask for the harness.
"""

if __name__ != "tritondiff.harness":          # imported as a top-level 'harness' from a checkout's root folder
    raise ImportError("import tritondiff.harness, not harness: the package installs as tritondiff.harness "
                      "(pip install -e . from the repo root)")
import importlib
import sys
import types

#: public name -> the submodule that defines it
_EXPORTS = {"Subject": "api", "constant": "api", "dim": "api", "registry": "api", "subject": "api", "tensor": "api",
            "config": "config", "counters": "counters", "compare": "oracle", "explore": "explore",
            "check": "explore"}
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
        return importlib.import_module("tritondiff.base.device")
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tritondiff.harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS))


