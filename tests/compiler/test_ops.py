import inspect

import pytest
import torch

from tritondiff.compiler.analysis import AnalysisOps, FormatOps
from tritondiff.compiler.codegen.triton_ops import TritonOps
from tritondiff.compiler.eager import EagerOps
from tritondiff.compiler.ops import OP_NAMES, OpsHandler, accumulator_dtype, ops, reduction_identity, use_handler


@pytest.mark.parametrize("handler", [AnalysisOps, EagerOps, TritonOps, FormatOps])
def test_every_interpretation_implements_every_op(handler):
    missing = [name for name in OP_NAMES if not callable(getattr(handler, name, None))]
    assert not missing, f"{handler.__name__} lacks {missing}"


def test_every_op_is_documented():
    for name in OP_NAMES:
        doc = inspect.getdoc(getattr(OpsHandler, name))
        assert doc and len(doc) >= 4, f"ops.{name} has no docstring"
    assert len(OP_NAMES) >= 45


def test_ops_outside_a_handler_fails_loudly():
    add = ops.add  # taking the op is fine
    with pytest.raises(RuntimeError, match="use_handler"):
        add(1, 2)


def test_handler_dispatch_is_scoped():
    h = AnalysisOps()
    with use_handler(h):
        ops.load("buf", 0)
        ops.add(1, 2)
    assert h.loads == [("buf", 0)] and h.op_count == 2


def test_reduction_identities_and_accumulators():
    assert reduction_identity("max", torch.float32) == float("-inf")
    assert reduction_identity("min", torch.int32) == torch.iinfo(torch.int32).max
    assert reduction_identity("prod", torch.int64) == 1
    assert accumulator_dtype("sum", torch.float16) == torch.float32
    assert accumulator_dtype("sum", torch.int32) == torch.int64
    assert accumulator_dtype("max", torch.bfloat16) == torch.float32
