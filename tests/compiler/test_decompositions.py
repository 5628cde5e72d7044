"""compiler.decompositions: every multi-output decomposition kept reproduces each output of its op (in a
training graph the op's backward stays whole and reads them), and attention's gradients come out right."""
import pytest
import torch
import torch.nn.functional as F

from tritondiff.compiler.decompositions import decomposition_table

aten = torch.ops.aten
BF16 = torch.bfloat16


def _g(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape) * 7 + shape[-1]), dtype=dtype)


# forward ops with auxiliary outputs a backward reads, each with inputs of its own
FORWARD_OPS = [
    (aten._scaled_dot_product_flash_attention_for_cpu.default, lambda: (_g(2, 3, 16, 8), _g(2, 3, 16, 8),
                                                                        _g(2, 3, 16, 8)), {"is_causal": True}),
    (aten.native_layer_norm.default, lambda: (_g(4, 10), [10], _g(10), _g(10), 1e-5), {}),
    (aten._fused_rms_norm.default, lambda: (_g(4, 10), [10], _g(10), 1e-6), {}),
    (aten.log_sigmoid_forward.default, lambda: (_g(4, 10),), {}),
    (aten.nll_loss_forward.default, lambda: (torch.log_softmax(_g(6, 5), -1), torch.tensor([0, 4, 2, 1, 3, 4]), None,
                                             1, -100), {}),
    (aten._native_batch_norm_legit_no_training.default, lambda: (_g(4, 3, 5), _g(3), _g(3), _g(3), _g(3).abs(),
                                                                 0.1, 1e-5), {}),
    (aten.var_mean.correction, lambda: (_g(4, 10), [1]), {"correction": 1}),
    (aten.std_mean.correction, lambda: (_g(4, 10), [1]), {"correction": 1}),
    (aten.aminmax.default, lambda: (_g(4, 10),), {"dim": 1}),
    (aten._weight_norm_interface.default, lambda: (_g(4, 10), _g(4, 1).abs(), 0), {}),
    # mixed types -- a bfloat16 input with float32 parameters, as autocast and mixed-precision modules make
    # them: ATen returns float32 statistics, which the norms' decompositions rounded to bfloat16
    (aten.native_layer_norm.default, lambda: (_g(4, 10, dtype=BF16), [10], _g(10), _g(10), 1e-5), {}),
    (aten.native_group_norm.default, lambda: (_g(2, 4, 9, dtype=BF16), _g(4), _g(4), 2, 4, 9, 2, 1e-5), {}),
    (aten._native_batch_norm_legit_functional.default, lambda: (_g(4, 3, 5, dtype=BF16), _g(3), _g(3), _g(3),
                                                                _g(3).abs(), True, 0.1, 1e-5), {}),
    (aten._native_batch_norm_legit.default, lambda: (_g(4, 3, 6, dtype=BF16), _g(3), _g(3), _g(3), _g(3).abs(),
                                                     True, 0.1, 1e-5), {}),
]


@pytest.mark.parametrize("op, make, kwargs", FORWARD_OPS, ids=[str(o[0]) for o in FORWARD_OPS])
def test_a_kept_decomposition_reproduces_every_output_of_its_op(op, make, kwargs):
    table = decomposition_table()
    if op not in table:
        return                                       # left whole: the op itself runs
    args = make()
    want, got = op(*args, **kwargs), table[op](*args, **kwargs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"output {i}: shape {tuple(g.shape)}, the op's {tuple(w.shape)}"
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, the op's {w.dtype}"
        low = w.dtype == BF16
        torch.testing.assert_close(g, w, rtol=1e-2 if low else 1e-4, atol=1e-2 if low else 1e-5,
                                   msg=f"output {i} of {op}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_through_scaled_dot_product_attention_match_eager(dtype):
    torch._dynamo.reset()

    def block(q, k, v):
        return F.scaled_dot_product_attention(q.sin(), k, v, is_causal=True).sum(-1)

    q, k, v = (_g(2, 3, 16, 8 + i, dtype=dtype)[..., :8].contiguous().requires_grad_() for i in range(3))
    got = torch.autograd.grad(torch.compile(block, backend="tritondiff")(q, k, v).sum(), (q, k, v))
    want = torch.autograd.grad(block(q, k, v).sum(), (q, k, v))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5,
                                   atol=2e-2 if dtype == torch.bfloat16 else 1e-5)
