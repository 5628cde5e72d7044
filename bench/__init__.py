"""GPU benchmarks (run from the repo root: ``python -m bench.<name>``; each prints a notice and exits
on a machine without a GPU).  Their figures are published under ``reports/``."""


def tritondiff_compile(fn):
    """``fn`` compiled by this project's compiler (``backend="tritondiff"``, static shapes): the benchmarks'
    "compiler" column beside the hand kernels."""
    import torch

    from tritondiff import compiler  # noqa: F401  (registers the backend)
    return torch.compile(fn, backend="tritondiff", dynamic=False)
