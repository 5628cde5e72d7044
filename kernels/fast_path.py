"""When a kernel's Python wrapper may call its launchers directly instead of its custom op.

The custom ops (``torch.ops.tritondiff.*``) are what ``torch.compile`` traces, what
``opcheck`` tests, and what tensor subclasses, dispatch / function modes and functorch
transforms see; they always stay the interface.  Their dispatch costs host time,
though, and a memory-bound kernel pays that time in full: on an H100 VM (torch 2.11,
reports/performance-log.md) a no-op custom op took 27 us of host time and
layer norm forward + backward through the op's ``register_autograd`` path ~2 ms, against
0.17 ms of GPU time.  So in plain eager mode -- plain tensors, no mode or transform
active, not traced by dynamo or torch.jit -- the public wrappers (``kernels.nrm2``,
``kernels.layer_norm``) validate once and call the same launchers themselves, through a
``torch.autograd.Function`` only when a gradient is needed.  Results are bitwise those
of the op (tests check it).  ``kernels.config.eager_fast_path = False`` (env
``TRITONDIFF_EAGER_FAST_PATH=0``) always goes through the op.
"""
from __future__ import annotations

from typing import Optional

import torch

from .config import config

_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _modes_active() -> bool:
    """True when a torch-function mode, a dispatch mode or a functorch transform is active, or when
    that cannot be told (a torch without these hooks): then only the op is safe."""
    c = torch._C
    try:
        return bool(c._is_torch_function_mode_enabled() or c._len_torch_dispatch_stack()
                    or c._are_functorch_transforms_active())
    except AttributeError:
        return True


def _jit_tracing() -> bool:
    """Under torch.jit.trace raw launches would be left out of the trace: the op is recorded instead."""
    try:
        return torch._C._get_tracing_state() is not None
    except AttributeError:
        return True


def plain_eager(*tensors: Optional[torch.Tensor]) -> bool:
    """May the wrapper bypass its custom op for these arguments (``None`` entries are skipped)?"""
    if not config.eager_fast_path or torch.compiler.is_compiling() or _modes_active() or _jit_tracing():
        return False
    return all(t is None or type(t) in _PLAIN for t in tensors)


def needs_grad(*tensors: Optional[torch.Tensor]) -> bool:
    """Whether autograd must record the call: grad mode on and some input requires grad."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
