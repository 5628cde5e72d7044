"""Prefix sums (``compiler/lowerings/scans.py``, ``codegen/scan.py``): one generated scan kernel, equal to eager
through the eager evaluator and the Triton kernels, whole rows and rows walked in blocks with a carry."""
import pytest
import torch

from tritondiff import compiler

from .util import check

_SCANS = {
    "last dim": ((5, 7), -1, torch.float32),
    "first dim (moved last)": ((5, 7, 3), 0, torch.float32),
    "bfloat16, summed in float32": ((4, 33), 1, torch.bfloat16),
    "int64": ((6, 5), 1, torch.int64),
    "bool to int64": ((3, 9), 1, torch.bool),
    "one dim": ((70,), 0, torch.float32),
}


@pytest.mark.parametrize("looped", [False, True])
@pytest.mark.parametrize("execution", ["triton", "ir"])
@pytest.mark.parametrize("case", sorted(_SCANS))
def test_cumsum_is_one_generated_scan(case, execution, looped):
    shape, dim, dtype = _SCANS[case]
    x = torch.randn(shape)
    x = x > 0 if dtype == torch.bool else (x * 4).to(dtype)
    fn = (lambda x: torch.cumsum(x.abs() + 1, dim) * 2) if dtype.is_floating_point else \
        (lambda x: torch.cumsum(x, dim) - 1)
    blocks = dict(persistent_max_rnumel=4, looped_rblock=2) if looped else {}   # rows of 5 to 70 in blocks of 2
    with compiler.config.patch(execution=execution, **blocks):
        check(fn, x, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5)
    assert compiler.counters["extern.aten.cumsum"] == 0
    if execution == "triton":
        assert "tl.cumsum(" in compiler.dump.last_artifacts().texts["triton"]


def test_cumsum_backward_matches_eager():
    """Its backward is a reversed cumsum (flip, scan, flip): both scans generated."""
    x = torch.randn(4, 50, requires_grad=True)
    dy = torch.randn(4, 50)
    want = torch.autograd.grad(torch.cumsum(x.sin(), 1), x, dy)[0]
    torch._dynamo.reset()
    got = torch.autograd.grad(compiler.compile(lambda x: torch.cumsum(x.sin(), 1))(x), x, dy)[0]
    torch.testing.assert_close(got, want)
    assert compiler.counters["extern.aten.cumsum"] == 0
