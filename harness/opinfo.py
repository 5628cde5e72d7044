"""PyTorch's OpInfo database as the harness uses it: the ops, their names, and which to leave out of a
differential comparison (the OpInfo sweep of the compiler, the ATen-override packs)."""
from __future__ import annotations

import sys
import types
import unittest
from typing import Any

SKIP_RANDOM = frozenset({
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal", "uniform",
    "rand_like", "randn", "randn_like", "randint", "randint_like", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.gumbel_softmax",
    # CUDA only: their philox seed and offset outputs are fresh RNG state on every call (the GPU sweep of
    # reported the seed as a mismatch)
    "torch.ops.aten._efficient_attention_forward", "torch.ops.aten._flash_attention_forward",
})
SKIP_UNINITIALIZED = frozenset({"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
                                "new_empty_strided"})


def load_op_db() -> list:
    """PyTorch's OpInfo database (its test utilities want ``expecttest``; a stand-in is enough)."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db
    return list(op_db)


def op_name(opinfo: Any) -> str:
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


__all__ = ["SKIP_RANDOM", "SKIP_UNINITIALIZED", "load_op_db", "op_name"]
