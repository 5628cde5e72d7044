"""The decomposition table AOTAutograd applies before graphs reach the compiler.

Core ATen decompositions, plus the composite ops our lowerings cover in pieces (layer
norm, softmax, log-softmax, GELU, vector norms, batch norm).  Ops we lower directly or
call as externs (mean, var_mean, addmm, ...) are left whole.
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

_EXTRA = [
    aten.native_layer_norm, aten._softmax, aten._log_softmax, aten.gelu, aten.gelu_backward,
    aten.linalg_vector_norm, aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_no_training, aten.hardtanh,
    aten.leaky_relu, aten.elu, aten.softplus, aten.hardsigmoid, aten.hardswish, aten.mish, aten.logit,
]


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for op in (aten.mean.dim, aten.mean.default, aten.var_mean.correction, aten.var.correction,
               aten.clamp_min.default, aten.clamp_max.default):
        table.pop(op, None)
    return table
