"""The models suite as bundled subjects: ``compiler.models.<block>``, forward and backward.

One subject per block of ``tritondiff.compiler.models.SUITE``.  Each example draws the block's dims (heads,
experts, groups... reach the module through :func:`~tritondiff.harness.api.dim`), its floating inputs and one
cotangent per floating output in float32, the precision mode (float32, bfloat16, float16 or bfloat16
autocast) and the parameters' seed; the candidate compiles the plain module call with the tritondiff
backend and takes the gradients of every input and parameter.  The reference is the same block run eagerly,
and the oracle's float64 truth is the block run on float64 copies (``models.run`` rounds them through the
mode's dtype first, so the truth holds the values the low-precision run holds).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from hypothesis import strategies as st

from tritondiff.harness import dim, subject, tensor
from tritondiff.harness.subjects.compiler import checked_run
from tritondiff.compiler import models
from tritondiff.compiler.backend import compile_fresh

#: Floating inputs: ordinary activations.  Edge families (overflowing squares, subnormals) and non-finite
#: sprinkles say nothing about a model block that its single-op subjects do not; "large_offset" rows put layer
#: norm's float32 statistics behind CPU eager's float64 ones (compiler.layer_norm_fwd_bwd leaves it out too).
VALUES = ("normal", "uniform_pos", "zeros", "integer")
#: Blocks that route by top-k over computed scores: equal scores (zeros, small integers) tie, and which of a
#: tie top-k keeps is unspecified -- eager's choice is not a contract the compiler must copy.
ROUTED = ("mixtral_moe", "gathered_moe")


def _parameters(model: models.Model) -> list[str]:
    return list(model.dims_of({d: 0 for d in model.dims}))


def _inputs(model: models.Model) -> dict[str, Any]:
    values = ("normal", "uniform_pos") if model.name in ROUTED else VALUES
    out: dict[str, Any] = {}
    for name, inp in model.inputs.items():
        if inp.ids_below:
            out[name] = tensor(inp.shape, dtypes=("int64",), low=0, high=inp.ids_below)
        else:
            out[name] = tensor(inp.shape, values=values, nonfinite=False)
    for i, shape in enumerate(model.outputs):
        out[f"dy{i}"] = tensor(shape, values=("normal",), nonfinite=False)
    out["mode"] = st.sampled_from(models.MODES)
    out["seed"] = st.integers(0, 2 ** 16)
    out.update({f"dim_{d}": dim(d) for d in _parameters(model)})
    return out


def _split(model: models.Model, kw: dict) -> tuple[dict, list, list]:
    sizes = {d: kw[f"dim_{d}"] for d in _parameters(model)}
    return sizes, [kw[n] for n in model.inputs], [kw[f"dy{i}"] for i in range(len(model.outputs))]


def _declare(model: models.Model) -> None:
    def reference(**kw):
        sizes, inputs, cotangents = _split(model, kw)
        return models.run(model, sizes, kw["mode"], kw["seed"], inputs, cotangents)

    def candidate(**kw):
        sizes, inputs, cotangents = _split(model, kw)
        count = len(inputs)

        def eager(*tensors):
            return models.run(model, sizes, kw["mode"], kw["seed"], tensors[:count], tensors[count:])

        def compiled(*tensors):
            return models.run(model, sizes, kw["mode"], kw["seed"], tensors[:count], tensors[count:],
                              wrap=lambda fn: compile_fresh(fn, dynamic=False))
        return run_compiled_model(model.name, compiled, eager, (*inputs, *cotangents))

    candidate.__name__ = model.name
    candidate.__doc__ = model.description
    where = [model.where] if model.where else []
    subject(name=f"compiler.models.{model.name}", reference=reference, inputs=_inputs(model),
            dims=dict(model.dims), where=where)(candidate)


def run_compiled_model(name: str, compiled: Callable, eager: Callable, args: tuple) -> Any:
    """``compiled(*args)`` through :func:`~tritondiff.harness.subjects.compiler.checked_run`: refused unless the
    forward and backward both reached the compiler; a wrong result gets its stage recorded.

    Dynamo's caches start empty: a block is a new module each example, and a block whose graph breaks on
    data-dependent sizes (Mixtral's expert loop) recompiles its methods per size, so past dynamo's recompile
    limit it would run them eagerly without a word -- eager against eager.  Hitting the limit raises instead.
    """
    torch._dynamo.reset()

    def run(*tensors):
        with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
            return compiled(*tensors)
    return checked_run(run, args, eager, graphs=2,
                       what=f"{name}: the forward and backward did not both reach the compiler")


for _model in models.SUITE:
    _declare(_model)
