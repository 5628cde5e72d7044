"""Gathers at data-dependent positions (``compiler/lowerings/gather.py``): generated, not ATen calls, and equal
to eager, through the eager evaluator and the Triton kernels alike."""
import pytest
import torch

from tritondiff import compiler

from .util import check

_GATHERS = {
    "embedding": (lambda w, i: torch.nn.functional.embedding(i, w) * 2, (9, 5), (3, 4)),
    "index rows, negative ids": (lambda w, i: w[i - 4] + 1, (9, 5), (7,)),
    "index middle dim": (lambda w, i: w[:, i], (4, 9, 3), (2, 5)),
    "index two dims, broadcast": (lambda w, i: w[i[:, None], i[None, :2] % 5], (9, 5), (6,)),
    "index non-adjacent dims": (lambda w, i: w[i % 4, :, i % 3], (4, 6, 3), (5,)),
    "index_select dim 1": (lambda w, i: torch.index_select(w, 1, i % 5), (9, 5), (8,)),
    "gather dim 1": (lambda w, i: torch.gather(w, 1, (i.view(-1, 1) % 5).expand(-1, 3)), (9, 5), (9,)),
    "gather of a computed tensor": (lambda w, i: torch.gather(w.exp() * 3, 0, i.view(1, -1)[:, :5] % 9), (9, 5),
                                    (6,)),
    "gathered then reduced": (lambda w, i: w[i].sum(-1), (9, 33), (12,)),
    "index taken from a computed tensor": (lambda w, i: w[w[:, 0].argmax(0).view(1)], (9, 5), (1,)),
}


@pytest.mark.parametrize("execution", ["triton", "ir"])
@pytest.mark.parametrize("case", sorted(_GATHERS))
def test_gathers_are_generated_and_match_eager(case, execution):
    fn, wshape, ishape = _GATHERS[case]
    w = torch.randn(wshape)
    i = torch.randint(0, 9, ishape)
    with compiler.config.patch(execution=execution):
        check(fn, w, i)
    externs = [k for k in compiler.counters if k.startswith("extern.")]
    assert not externs, externs


def test_gathers_backward_matches_eager():
    w = torch.randn(9, 5, requires_grad=True)
    i = torch.randint(-9, 9, (4, 3))

    def fn(w, i):
        return (torch.nn.functional.embedding(i % 9, w).sin() * w[i].cos()).sum()
    want = torch.autograd.grad(fn(w, i), w)[0]
    torch._dynamo.reset()
    got = torch.autograd.grad(compiler.compile(fn)(w, i), w)[0]
    torch.testing.assert_close(got, want)


def test_an_index_out_of_range_raises_in_the_ir_and_reads_nothing_in_a_kernel():
    """Eager rejects it; the eager evaluator of the IR raises; a kernel masks the load (0, never a read outside
    the buffer) and reports it through ``tl.device_assert`` where Triton runs device asserts."""
    w, i = torch.randn(6, 3), torch.tensor([0, 6, -7, 1])
    with pytest.raises(IndexError):
        w[i]
    torch._dynamo.reset()
    with compiler.config.patch(execution="ir"), pytest.raises(Exception, match="out of range"):
        compiler.compile(lambda w, i: w[i] * 2)(w, i)
    torch._dynamo.reset()
    got = compiler.compile(lambda w, i: w[i] * 2)(w, i)
    torch.testing.assert_close(got[[0, 3]], w[[0, 1]] * 2)
    assert not got[1:3].any()
    source = compiler.dump.last_artifacts().texts["triton"]
    assert "tl.device_assert(" in source


def test_a_boolean_mask_is_left_to_aten():
    w = torch.randn(6, 3)
    m = torch.tensor([True, False, True, True, False, False])
    torch._dynamo.reset()
    got = compiler.compile(lambda w, m: w[m] * 2)(w, m)
    torch.testing.assert_close(got, w[m] * 2)

