"""The one place that decides where kernels run.

CUDA when a GPU is visible, otherwise Triton's interpreter on CPU tensors.
``TRITONDIFF_DEVICE=cpu`` (or an already-set ``TRITON_INTERPRET=1``) forces the
interpreter; ``TRITONDIFF_DEVICE=cuda`` forces CUDA and fails loudly without
one.  The decision is made at import: Triton reads ``TRITON_INTERPRET`` when a
kernel is decorated, so every package of the project imports this module first,
and jit functions decorated before it (triton imported first) are converted
(:func:`tritondiff.base.interpreter.adopt_compiled_functions`).

Deciding does not import torch where no GPU device node exists (or the
interpreter is forced), so importing the harness package stays light there.
"""
from __future__ import annotations

import os

from .config import config
from .exc import UsageError

_choice = config.device                   # validated by the config knob: auto, cuda, cpu or interpreter

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") and _choice == "auto":
    _choice = "cpu"


def _no_gpu_device_nodes() -> bool:
    """True where no GPU driver exposes a device: then CUDA cannot be available, and the decision
    needs no torch import (which keeps ``import tritondiff.harness`` -- and the pytest plugin -- light)."""
    nodes = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
    return os.name == "posix" and not any(os.path.exists(n) for n in nodes)


if _choice == "auto" and _no_gpu_device_nodes():
    _choice = "cpu"

if _choice in ("cpu", "interpreter"):
    os.environ["TRITON_INTERPRET"] = "1"
else:
    import torch  # noqa: E402  (TRITON_INTERPRET must be decided before triton is imported)

    if _choice == "auto":
        _choice = "cuda" if torch.cuda.is_available() else "cpu"
        if _choice == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
    elif not torch.cuda.is_available():
        raise UsageError("TRITONDIFF_DEVICE=cuda but torch sees no CUDA device; use TRITONDIFF_DEVICE=cpu")

#: "cuda" or "interpreter".
MODE = "cuda" if _choice == "cuda" else "interpreter"


def _adopt_earlier_kernels() -> None:
    """Triton decides compiled vs interpreted when a jit function is defined.  Where triton was imported
    before this decision (a kernel file importing triton first, ``torch.compile`` importing it before the
    backend), its own library functions (``tl.sum``, ``tl.max`` ...) and any kernel already defined are
    compiled functions: in interpreter mode they are made interpreted ones in place."""
    import sys

    if MODE == "interpreter" and "triton.runtime.jit" in sys.modules:
        from .interpreter import adopt_compiled_functions

        adopt_compiled_functions()


_adopt_earlier_kernels()


def is_interpreter() -> bool:
    """True when kernels run in Triton's interpreter on CPU tensors."""
    return MODE == "interpreter"


_TORCH_DEVICES: dict = {}


def torch_device():
    """The ``torch.device`` tensors of an example are created on (one object per mode: the compiler's
    runtime asks on every buffer it allocates)."""
    dev = _TORCH_DEVICES.get(MODE)
    if dev is None:
        import torch

        dev = _TORCH_DEVICES[MODE] = torch.device("cuda" if MODE == "cuda" else "cpu")
    return dev


def device_fault(error: BaseException) -> bool:
    """Whether ``error`` is a CUDA error that leaves the context unusable (an illegal address, a launch
    failure), as opposed to a Python error of the harness or an out-of-memory that frees up."""
    import torch

    kind = getattr(torch, "AcceleratorError", None)
    if kind is not None and isinstance(error, kind):
        return True
    return isinstance(error, RuntimeError) and not isinstance(error, torch.cuda.OutOfMemoryError) and \
        str(error).startswith("CUDA error")


def describe() -> str:
    """A one-line description of the device for dumps and reports."""
    if MODE == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return "cpu (triton interpreter)"
