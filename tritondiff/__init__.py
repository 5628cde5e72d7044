"""tritondiff: differential correctness testing of Triton kernels and of the compiler that generates them.

Public API::

    from tritondiff import subject, tensor, constant, check, explore

    @subject(reference=lambda x: x.sum(), inputs={"x": tensor(("N",))}, dims={"N": (1, 4096)})
    def my_sum(x): ...

    check(my_sum)                  # raises SubjectFailed on a finding

The packages, bottom to top: ``tritondiff.base`` (device decision, launch limits, typed config,
the exception root, timing), ``tritondiff.kernels`` (hand-written Triton kernels as torch custom
ops) and ``tritondiff.compiler`` (the ``torch.compile`` backend), then ``tritondiff.harness``,
which diffs them (and any user's kernels) against eager PyTorch.

``import tritondiff`` imports nothing heavy and decides nothing: the names below are imported on
first use.  The device (CUDA or Triton's interpreter) is decided by the first import of
``tritondiff.base.device``, which the harness API, the kernels and the compiler all do.
"""
import importlib

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "subject": "tritondiff.harness.api", "tensor": "tritondiff.harness.api",
    "constant": "tritondiff.harness.api", "dim": "tritondiff.harness.api", "registry": "tritondiff.harness.api",
    "Subject": "tritondiff.harness.api",
    "check": "tritondiff.harness.explore", "explore": "tritondiff.harness.explore",
    "SubjectResult": "tritondiff.harness.explore",
    "compare": "tritondiff.harness.oracle",
    "TritondiffError": "tritondiff.base.exc", "UsageError": "tritondiff.base.exc",
    "ConfigError": "tritondiff.base.exc",
    "HarnessError": "tritondiff.harness.exc", "InvalidSubject": "tritondiff.harness.exc",
    "SubjectFailed": "tritondiff.harness.exc",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tritondiff' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS))
