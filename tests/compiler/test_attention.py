"""compiler.attention: hand-written attention becomes scaled_dot_product_attention before AOTAutograd, with the
written-out program's values (scale, mask, fully masked rows) and gradients; anything else is left alone."""
import math

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import attention
from tests.compiler.conftest import fresh_compiler  # noqa: F401  (autouse: fresh dynamo caches, counters)


def _qkv(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g).to(dtype).requires_grad_() for _ in range(3)]


def _masked(q, k, v, mask):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(mask, float("-inf"))
    return torch.nn.functional.softmax(att, dim=-1) @ v


def _unscaled(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v


def _divided(q, k, v):
    return (q @ k.transpose(2, 3) / 4.0).softmax(dim=-1) @ v


def _grads(fn, *args):
    leaves = [a.detach().requires_grad_() if a.is_floating_point() else a for a in args]
    out = fn(*leaves)
    grads = torch.autograd.grad(out, [a for a in leaves if a.requires_grad], torch.ones_like(out))
    return (out.detach(),) + grads


@pytest.mark.parametrize("fn", [_unscaled, _divided])
def test_a_written_out_attention_is_fused_and_matches_eager(fn):
    q, k, v = _qkv(2, 3, 7, 8)
    got = _grads(compiler.compile(fn, dynamic=False), q, k, v)
    assert compiler.counters["attention_fused"] == 1
    for g, w in zip(got, _grads(fn, q, k, v)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_a_causal_mask_is_fused_and_a_fully_masked_row_stays_nan():
    q, k, v = _qkv(1, 2, 5, 4)
    mask = torch.ones(5, 5).tril() == 0
    got = _grads(compiler.compile(_masked, dynamic=False), q, k, v, mask)
    assert compiler.counters["attention_fused"] == 1
    for g, w in zip(got, _grads(_masked, q, k, v, mask)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    dead = mask.clone()
    dead[2] = True                                   # row 2 attends to nothing: NaN in the written-out softmax
    with torch.no_grad():
        out = compiler.compile(_masked, dynamic=False)(q, k, v, dead)
        want = _masked(q, k, v, dead)
    assert torch.isnan(out[:, :, 2]).all() and torch.isnan(want[:, :, 2]).all()
    torch.testing.assert_close(out[:, :, [0, 1, 3, 4]], want[:, :, [0, 1, 3, 4]], rtol=1e-4, atol=1e-5)


def test_attention_weights_used_elsewhere_or_a_knob_off_leave_the_graph_alone():
    def weights_returned(q, k, v):
        p = torch.softmax(q @ k.transpose(-2, -1), -1)
        return p @ v, p

    q, k, v = _qkv(1, 2, 4, 4)
    compiler.compile(weights_returned, dynamic=False)(q, k, v)
    assert compiler.counters["attention_fused"] == 0
    torch._dynamo.reset()
    with compiler.config.patch(fuse_attention=False):
        compiler.compile(_unscaled, dynamic=False)(q, k, v)
    assert compiler.counters["attention_fused"] == 0


def test_only_the_matched_shape_is_rewritten():
    gm = torch.fx.symbolic_trace(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -1) @ v)
    assert attention.fuse(gm) == 0                    # no example values (rank, dtype unknown): not matched


def test_float32_attention_on_cuda_is_rewritten_only_past_the_written_out_scores_it_beats():
    """On CUDA float32 runs the memory-efficient kernel, slower than cuBLAS GEMMs and a softmax while the
    scores are small; fp16 / bf16 (flash, cuDNN) and the CPU are always rewritten."""
    limit = attention.COMPOSED_MAX_SCORE_BYTES
    assert not attention.pays("cuda", torch.float32, limit)
    assert attention.pays("cuda", torch.float32, limit + 1)
    assert attention.pays("cuda", torch.bfloat16, 1) and attention.pays("cuda", torch.float16, 1)
    assert attention.pays("cpu", torch.float32, 1)
