"""The front end: registration, forward + backward through AOTAutograd, dynamic shapes."""
import importlib.metadata

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import workloads
from tests.compiler.util import assert_same, check


def _installed() -> bool:
    try:
        return any(ep.name == "tritondiff" for ep in importlib.metadata.entry_points(group="torch_dynamo_backends"))
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(not _installed(), reason="the tritondiff distribution is not installed (pip install -e .)")
def test_backend_is_registered_by_entry_point():
    assert "tritondiff" in torch._dynamo.list_backends()
    x = torch.randn(41)
    fn = lambda x: torch.relu(x + 1)  # noqa: E731
    assert_same(torch.compile(fn, backend="tritondiff")(x), fn(x))
    assert compiler.counters["graphs_compiled"] == 1


def test_compile_works_as_a_decorator():
    @compiler.compile
    def f(x):
        return x.sigmoid() * x

    @compiler.compile(dynamic=False)
    def g(x):
        return x.tanh()

    x = torch.randn(9)
    assert_same(f(x), x.sigmoid() * x)
    assert_same(g(x), x.tanh())


def test_forward_and_backward_graphs_both_come_through_the_compiler():
    x = torch.randn(41, 16, requires_grad=True)
    w1, b1 = torch.randn(16, requires_grad=True), torch.randn(16, requires_grad=True)
    w2 = torch.randn(16, 9, requires_grad=True)

    def model(x, w1, b1, w2):
        h = workloads.layer_norm(x, w1, b1)
        return torch.nn.functional.gelu(h @ w2).softmax(-1)

    params = [x, w1, b1, w2]
    want = model(*params)
    want_grads = torch.autograd.grad(want.sum(), params)
    got = compiler.compile(model)(*params)
    got_grads = torch.autograd.grad(got.sum(), params)
    assert_same(got, want, rtol=1e-5, atol=1e-6)
    assert_same(got_grads, want_grads, rtol=1e-4, atol=1e-5)
    kinds = {a.graph.split("_")[1] for a in compiler.dump.recent_artifacts()[-2:]}
    assert kinds == {"forward", "backward"}
    # forward mm, two in the backward: inlined as pointwise (K <= matmul_small_k_max), GEMM templates or ATen
    assert compiler.counters["extern.aten.mm"] + compiler.counters["gemm_template.mm"] + \
        compiler.counters["small_matmul_inlined"] >= 3


def test_dynamic_shapes_recompile_per_shape_and_stay_correct():
    torch._dynamo.reset()
    fn = compiler.compile(lambda x: (x * 2).sum(0) + x.shape[0])
    for n in (5, 7, 9, 41):
        x = torch.randn(n, 3)
        assert_same(fn(x), (x * 2).sum(0) + n)
    assert compiler.counters["graphs_compiled"] == 4


def test_explicitly_dynamic_graphs_are_specialised():
    torch._dynamo.reset()
    fn = compiler.compile(lambda x, y: torch.cat([x, y]).softmax(0), dynamic=True)
    for n in (3, 8):
        x, y = torch.randn(n, 4), torch.randn(n + 1, 4)
        assert_same(fn(x, y), torch.cat([x, y]).softmax(0))


def test_changing_a_codegen_knob_recompiles():
    torch._dynamo.reset()
    fn = compiler.compile(lambda x: x.sum(1))
    x = torch.randn(9, 341)
    fn(x)
    with compiler.config.patch(reduction_strategy="looped"):
        fn(x)
    assert compiler.counters["reduction_strategy.looped"] == 1
    assert compiler.counters["graphs_compiled"] == 2


def test_inference_mode_and_passthrough_outputs():
    x = torch.randn(9)
    with torch.no_grad():
        check(lambda x: (x, x * 2), x)
    check(lambda x, n: x * n, x, 3)


def test_a_backward_run_from_inside_a_compiled_function_is_not_traced_by_dynamo():
    """autograd.grad inside a compiled function: dynamo breaks the graph and resumes the frame, so the
    backward graph is compiled while dynamo's frame hook is live; the compiler must not be traced."""
    def fn(x):
        y = (x.sin() * 2).sum()
        (g,) = torch.autograd.grad(y, x)
        return g * 3

    x = torch.randn(41, requires_grad=True)
    got = compiler.compile(fn)(x)
    assert_same(got, x.detach().cos() * 6, rtol=1e-5, atol=1e-5)
    assert compiler.counters["graphs_compiled"] >= 2


def test_executable_keys_tell_signed_zeros_nans_and_bools_apart():
    from tritondiff.compiler.backend import _signature
    assert _signature([0.0]) != _signature([-0.0])            # a compiled graph may bake the sign in
    assert _signature([float("nan")]) == _signature([float("-nan") * 0 + float("nan")])   # every NaN: one entry
    assert _signature([True]) != _signature([1]) != _signature([1.0])
    x = torch.zeros(4, 3)
    assert _signature([x]) == _signature([torch.ones(4, 3)]) != _signature([x.t()])
