"""A stand-in for an ATen-overriding library (flag-gems' shape), importable without tritondiff: ``enabled(op,
bug)`` registers a CPU kernel for aten::sigmoid (planted when ``bug``: the sign of the exponent flipped) or
aten::exp (correct), unregistered on exit."""
import contextlib

import torch


@contextlib.contextmanager
def enabled(op: str, bug: bool):
    lib = torch.library.Library("aten", "IMPL")
    try:
        if op == "sigmoid":
            def sigmoid(x):
                with torch._C._AutoDispatchBelowAutograd():
                    e = torch.ops.aten.exp.default(x if bug else torch.ops.aten.neg.default(x))
                    return torch.ops.aten.reciprocal.default(torch.ops.aten.add.Scalar(e, 1))
            lib.impl("sigmoid", sigmoid, "CPU")
        elif op == "exp":
            def exp(x):
                with torch._C._AutoDispatchBelowAutograd():
                    return torch.ops.aten.pow.Scalar(torch.e, x)
            lib.impl("exp", exp, "CPU")
        yield
    finally:
        lib._destroy()
