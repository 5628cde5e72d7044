"""The seeds' workloads compiled end to end and judged by the harness oracle against float64."""
import re

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import workloads
from tests.compiler.util import assert_oracle, reaches_compiler, seeded_randn


def _judge(fn, *args, grads=False):
    def run(f, inputs):
        out = f(*inputs)
        if not grads:
            return out
        leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
        cotangent = seeded_randn(*out.shape, seed=7).to(out.dtype)  # not ones: d(sum softmax) is zero
        return (out,) + torch.autograd.grad(out, leaves, cotangent)

    def copy(t, dtype=None):
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().to(dtype or t.dtype)
        return c.requires_grad_(t.requires_grad)
    eager = run(fn, [copy(a) for a in args])
    truth = run(fn, [copy(a, torch.float64 if a.dtype.is_floating_point else None) if isinstance(a, torch.Tensor)
                     else a for a in args])
    torch._dynamo.reset()
    with reaches_compiler(2 if grads else 1):  # forward and backward graphs
        got = run(compiler.compile(fn), [copy(a) for a in args])
    assert_oracle(got, eager, truth)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(9, 41), (4231, 9), (3, 2049)])
def test_softmax(dtype, shape):
    _judge(workloads.softmax, torch.randn(shape).to(dtype).requires_grad_(), grads=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm(dtype):
    x = torch.randn(341, 41).to(dtype).requires_grad_()
    w = torch.randn(41).to(dtype).requires_grad_()
    _judge(workloads.rms_norm, x, w, grads=True)


@pytest.mark.parametrize("n", [9, 4231, 2**20 + 3])
def test_nrm2(n):
    _judge(workloads.nrm2, torch.randn(n))


def test_mhc_lite_layer_forward_and_backward():
    t, n, c = 41, workloads.MHC_N, 33
    xs = torch.randn(t, n, c, requires_grad=True)
    weight = (torch.randn(2 * n + 24, n * c) * 0.1).requires_grad_()
    perm = workloads.mhc_permutations()
    _judge(workloads.mhc_layer, xs, weight, perm, grads=True)
    assert compiler.counters["extern.aten.mm"] + compiler.counters["gemm_template.mm"] >= 2  # ATen or template


def test_mhc_lite_kernels_separately_in_bf16():
    t, n, c = 64, workloads.MHC_N, 40
    xs = torch.randn(t, n, c).bfloat16()
    h_pre, h_post = torch.rand(t, n), torch.rand(t, n) * 2
    h_res = torch.softmax(torch.randn(t, n, n), -1)
    _judge(workloads.mhc_pre_map, xs, h_pre)
    _judge(workloads.mhc_post_res, xs, torch.randn(t, c).bfloat16(), h_res, h_post)


def _x_load_indices(source: str, arg: str) -> list[str]:
    """The index expressions of every ``tl.load(<arg> + idxN)`` in ``source``."""
    defs = dict(re.findall(r"(idx\d+) = (.*)", source))
    return [defs[i] for i in re.findall(rf"tl\.load\({arg} \+ (idx\d+)[,)]", source)]


@pytest.mark.parametrize("name", ["mhc_pre_map", "mhc_post_res"])
def test_mhc_stream_mixing_is_one_pointwise_kernel_reading_along_c(name):
    """The sum over the n = 4 streams is unrolled (issue #8): a pointwise kernel whose lanes walk c, the
    contiguous axis of x_streams [T, 4, C], not a reduction whose 4-wide tile strides by C."""
    t, n, c = 64, workloads.MHC_N, 40
    xs = torch.randn(t, n, c).bfloat16()
    args = {"mhc_pre_map": (xs, torch.rand(t, n)),
            "mhc_post_res": (xs, torch.randn(t, c).bfloat16(), torch.softmax(torch.randn(t, n, n), -1),
                             torch.rand(t, n) * 2)}[name]
    _judge(getattr(workloads, name), *args)
    assert compiler.counters["reductions_unrolled"] == 1 and compiler.counters["kernels_generated"] == 1
    assert not compiler.counters.with_prefix("reduction_strategy.")
    source = compiler.dump.last_artifacts().texts["triton"].split("def g", 1)[1]
    assert "rindex" not in source and "yindex" not in source
    indices = _x_load_indices(source, "p_arg1")
    assert len(indices) == n and all(f"(xindex % {c})" in i and f"* (xindex % {c})" not in i for i in indices)
