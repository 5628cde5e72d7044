"""The models suite's bundled subjects: one per block, its module dims drawn through ``dim()``, a right compiled
block passing and a wrong one (a planted unfaithful decomposition, a wrong norm statistic) caught."""
from unittest import mock

import torch

import tritondiff.harness.subjects.models  # noqa: F401  (registers the subjects)
from tritondiff.compiler import decompositions, models
from tritondiff.harness import registry
from tritondiff.harness.api import DimValue
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.runner import run_case
from tests.compiler.conftest import fresh_compiler  # noqa: F401  (autouse: fresh dynamo caches, counters)


def _case(dims: dict, shapes: dict, mode: str) -> Case:
    tensors = {name: TensorCase(shape, "float32", "contiguous", 0, "normal", 3 + i, "")
               for i, (name, shape) in enumerate(shapes.items())}
    return Case(dims, tensors, {"mode": mode, "seed": 7, **{f"dim_{k}": v for k, v in dims.items()}})


def test_every_block_is_a_subject_whose_module_dims_are_drawn_dims():
    subjects = registry()
    for m in models.SUITE:
        s = subjects[f"compiler.models.{m.name}"]
        dims = [spec.name for spec in s.inputs.values() if isinstance(spec, DimValue)]
        assert set(dims) == set(m.dims_of({d: 1 for d in m.dims})), m.name
        assert s.inputs["mode"] is not None and set(s.dims) == set(m.dims)


def _sdpa_case() -> Case:
    return _case({"B": 1, "T": 4, "C": 4, "H": 2}, {"x": (1, 4, 4), "dy0": (1, 4, 4)}, "float32")


def test_a_right_attention_block_passes_and_an_unfaithful_decomposition_fails():
    subject = registry()["compiler.models.nanogpt_block_sdpa"]
    assert run_case(subject, _sdpa_case()).status == "pass"
    from torch._decomp import core_aten_decompositions
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    table = {**decompositions.decomposition_table(), op: core_aten_decompositions()[op]}
    with mock.patch.object(decompositions, "decomposition_table", lambda: table), \
            mock.patch("tritondiff.compiler.backend.decomposition_table", lambda: table):
        verdict = run_case(subject, _sdpa_case())
    assert verdict.status == "fail" and verdict.failure_class == "mismatch", verdict.message


def test_a_batch_norm_whose_saved_statistics_are_off_is_caught():
    subject = registry()["compiler.models.resnet_basic_block"]
    case = _case({"N": 2, "C": 3, "O": 3, "HW": 4}, {"x": (2, 3, 4, 4), "dy0": (2, 3, 4, 4)}, "float32")
    assert run_case(subject, case).status == "pass"
    op = torch.ops.aten._native_batch_norm_legit_functional.default
    right = decompositions.decomposition_table()[op]

    def biased(*args, **kwargs):          # the saved rstd 1% high: the backward's dx and dweight go wrong
        out = list(right(*args, **kwargs))
        out[2] = out[2] * 1.01
        return tuple(out)
    table = {**decompositions.decomposition_table(), op: biased}
    with mock.patch.object(decompositions, "decomposition_table", lambda: table), \
            mock.patch("tritondiff.compiler.backend.decomposition_table", lambda: table):
        verdict = run_case(subject, case)
    assert verdict.status == "fail" and verdict.failure_class == "mismatch", verdict.message
