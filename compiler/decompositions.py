"""The decomposition table AOTAutograd applies before graphs reach the compiler.

Core ATen decompositions, plus the composite ops our lowerings cover in pieces (layer
norm, softmax, log-softmax, GELU, vector norms, batch norm).  Ops we lower directly or
call as externs (mean, var_mean, addmm, ...) are left whole.

A decomposition must reproduce every output of its op: in a training graph the op's backward
stays whole and reads the forward's auxiliary outputs.  Core ATen's decomposition of CPU flash
attention returns the attention weights where the op returns the logsumexp its backward reads
(every gradient upstream of the attention came out wrong): it is left out (:data:`_NOT_FAITHFUL`),
and tests/compiler/test_decompositions.py checks the multi-output decompositions kept against
their ops.

Their dtypes too: the norms' decompositions (layer, group and batch norm) hand back their statistics in
the input's dtype, where ATen computes mixed-type calls -- a bfloat16 input with float32 weights, as
autocast and mixed-precision modules make them -- in float32 and returns float32 statistics (and on some
devices does so for every low-precision input).  A backward fed the rounded statistics is less accurate
than eager's, and an op left whole is described by a fake kernel that disagrees with what it returns.
:func:`_statistics_as_eager` asks the op itself, once per dtypes and device on two-element tensors, which
dtypes it returns, and where the decomposition differs computes on the upcast input and casts each output
to the op's dtype.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

_EXTRA = [
    aten.native_layer_norm, aten._softmax, aten._log_softmax, aten.gelu, aten.gelu_backward,
    aten.linalg_vector_norm, aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_no_training, aten.hardtanh,
    aten.leaky_relu, aten.elu, aten.softplus, aten.hardsigmoid, aten.hardswish, aten.mish, aten.logit,
]


#: Decompositions whose outputs differ from their op's (see the module docstring).
_NOT_FAITHFUL = (aten._scaled_dot_product_flash_attention_for_cpu.default,)


_BATCH_NORMS = (aten._native_batch_norm_legit_no_training.default, aten._native_batch_norm_legit_functional.default,
                aten._native_batch_norm_legit.default)
_NORMS = (aten.native_layer_norm.default, aten.native_group_norm.default, *_BATCH_NORMS)


def _tiny(t: Any, *shape: int) -> Any:
    return torch.ones(shape, dtype=t.dtype, device=t.device) if isinstance(t, torch.Tensor) else t


def _tiny_args(op: Any, args: tuple) -> tuple:
    """``op``'s arguments rebuilt as two-channel real tensors of the same dtypes and device."""
    x = args[0]
    if op is aten.native_layer_norm.default:
        return (_tiny(x, 2, 2), [2], _tiny(args[2], 2), _tiny(args[3], 2), args[4])
    if op is aten.native_group_norm.default:
        return (_tiny(x, 1, 2, 2), _tiny(args[1], 2), _tiny(args[2], 2), 1, 2, 2, 1, args[7])
    return (_tiny(x, 2, 2, 2), *(_tiny(a, 2) for a in args[1:5]), *args[5:])


_OUTPUT_DTYPES: dict[tuple, tuple] = {}


def _output_dtypes(op: Any, args: tuple) -> tuple:
    """The dtypes ``op`` returns for arguments of ``args``' dtypes on their device: asked of the op itself, once."""
    key = (op, *((a.dtype, a.device.type) if isinstance(a, torch.Tensor) else None for a in args))
    if key not in _OUTPUT_DTYPES:
        from torch.utils._python_dispatch import _disable_current_modes
        with _disable_current_modes(), torch.no_grad():      # the real op, outside tracing and fake mode
            out = op(*_tiny_args(op, args))
        _OUTPUT_DTYPES[key] = tuple(o.dtype if isinstance(o, torch.Tensor) else None for o in out)
    return _OUTPUT_DTYPES[key]


def _statistics_as_eager(op: Any, decomposition: Callable) -> Callable:
    """``decomposition`` of norm ``op`` with each output in the dtype ``op`` returns (module docstring)."""
    def run(*args: Any, **kwargs: Any) -> Any:
        out = decomposition(*args, **kwargs)
        x = args[0]
        if kwargs or not isinstance(x, torch.Tensor) or x.dtype not in (torch.float16, torch.bfloat16):
            return out
        want = _output_dtypes(op, args)
        if all(not isinstance(o, torch.Tensor) or o.dtype == w for o, w in zip(out, want)):
            return out
        upcast = decomposition(x.to(torch.float32), *args[1:])
        return tuple(o.to(w) if isinstance(o, torch.Tensor) and w is not None else o for o, w in zip(upcast, want))
    return run


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for op in (aten.mean.dim, aten.mean.default, aten.var_mean.correction, aten.var.correction,
               aten.clamp_min.default, aten.clamp_max.default, *_NOT_FAITHFUL):
        table.pop(op, None)
    table.update(get_decompositions([aten.native_group_norm]))
    for op in _NORMS:
        if op in table:
            table[op] = _statistics_as_eager(op, table[op])
    return table
