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


#: Decompositions whose outputs differ from their op's (see the module docstring).
_NOT_FAITHFUL = (aten._scaled_dot_product_flash_attention_for_cpu.default,)


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for op in (aten.mean.dim, aten.mean.default, aten.var_mean.correction, aten.var.correction,
               aten.clamp_min.default, aten.clamp_max.default, *_NOT_FAITHFUL):
        table.pop(op, None)
    return table
