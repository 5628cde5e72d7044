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



# ------------------------------------------------------------------ index_put(accumulate=True): scatters

_INDEX_PUTS = {
    "gathered weights' gradient": (lambda w, i, v: w.index_put((i,), v, accumulate=True), (4, 3, 5), (6, 2),
                                   (6, 2, 3, 5)),
    "negative ids, broadcast values": (lambda w, i, v: w.index_put((i - 4,), v[:1, :1] * 2, accumulate=True) + 1,
                                       (4, 3, 5), (7,), (7, 3, 5)),
    "middle dim": (lambda w, i, v: torch.ops.aten.index_put(w, [None, i], v.transpose(0, 1), True), (3, 4, 5),
                   (7,), (7, 3, 5)),
    "into zeros, 1-d": (lambda w, i, v: torch.zeros_like(w).index_put((i,), v.sin(), accumulate=True), (4,), (9,),
                        (9,)),
}


@pytest.mark.parametrize("execution", ["triton", "ir"])
@pytest.mark.parametrize("case", sorted(_INDEX_PUTS))
def test_index_put_accumulate_is_a_generated_scatter(case, execution):
    """Duplicates sum (the index is full of them); no ATen call."""
    fn, wshape, ishape, vshape = _INDEX_PUTS[case]
    w, v = torch.randn(wshape), torch.randn(vshape)
    i = torch.randint(0, 4, ishape)
    with compiler.config.patch(execution=execution):
        check(fn, w, i, v)
    externs = [k for k in compiler.counters if k.startswith("extern.")]
    assert not externs, externs


def test_a_bfloat16_scatter_sums_in_float32_and_rounds_once():
    """Eight adds of 1/256 to 1.0 in bfloat16 each round back to 1.0 (eager's CPU loop); summed in float32
    first and rounded once they make 1.03125, the value the float64 truth rounds to."""
    w = torch.ones(2, dtype=torch.bfloat16)
    i = torch.zeros(8, dtype=torch.int64)
    v = torch.full((8,), 1 / 256, dtype=torch.bfloat16)
    torch._dynamo.reset()
    got = compiler.compile(lambda w, i, v: w.index_put((i,), v, accumulate=True))(w, i, v)
    truth = w.double().index_put((i,), v.double(), accumulate=True)
    assert got.dtype == torch.bfloat16 and torch.equal(got, truth.bfloat16())


def test_a_scatter_is_a_kernel_of_its_own():
    """Its producer and consumer are not fused into it (its adds reach any element of the output)."""
    w, v, i = torch.randn(4, 8), torch.randn(6, 8), torch.randint(0, 4, (6,))
    check(lambda w, i, v: (w.exp().index_put((i,), v.sin(), accumulate=True) * 3).sum(1), w, i, v)
    kernels = compiler.dump.last_artifacts().texts["triton"]
    assert kernels.count("tl.atomic_add(") == 1 and "_init(" in kernels


def test_embedding_and_gathers_backward_are_scatters():
    """An embedding's, a row gather's and gpt-fast's gathered experts' weight gradients: no ATen index call."""
    from tritondiff.compiler.models import GatheredMoE
    torch.manual_seed(0)
    m = GatheredMoE(8, 12, 4)
    table = torch.randn(9, 8, requires_grad=True)
    x, ids = torch.randn(5, 8, requires_grad=True), torch.randint(0, 9, (5,))

    def fn(x, ids):
        return m(x + torch.nn.functional.embedding(ids, table)).square().sum() + table[ids - 9].sum()
    params = [x, table, *m.parameters()]
    want = torch.autograd.grad(fn(x, ids), params)
    torch._dynamo.reset()
    got = torch.autograd.grad(compiler.compile(fn)(x, ids), params)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert not [k for k in compiler.counters if k.startswith("extern.aten.index")], compiler.counters
