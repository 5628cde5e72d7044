"""compiler.lean: the lean runtime keeps eager's autograd semantics, and refuses graphs it cannot run."""
import logging

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import workloads
from tritondiff.compiler.lean import _Function
from tritondiff.compiler.backend import compile_fresh
from tests.compiler.util import assert_same, seeded_randn


def _lean_ran(out: torch.Tensor) -> bool:
    return type(out.grad_fn).__name__ == _Function.__name__ + "Backward"


def _leaves(*shapes, requires_grad=True, seed=0):
    return [seeded_randn(*s, seed=seed + i).requires_grad_(requires_grad) for i, s in enumerate(shapes)]


def test_layer_norm_forward_and_backward_run_through_one_autograd_function():
    x, w, b = _leaves((37, 16), (16,), (16,))
    dy = torch.randn(37, 16)
    got = compile_fresh(workloads.layer_norm)(x, w, b)
    assert _lean_ran(got) and compiler.counters["lean_runtime.training"] == 1 and not compiler.counters["lean_runtime.refused"]
    want = workloads.layer_norm(x, w, b)
    assert_same(got, want, rtol=1e-5, atol=1e-5)
    assert_same(torch.autograd.grad(got, (x, w, b), dy), torch.autograd.grad(want, (x, w, b), dy), rtol=1e-4, atol=1e-4)


def test_outputs_that_need_no_grad_in_eager_need_none_here():
    """An output of inputs that do not require grad, an integer output and a detached one are plain
    tensors, as in eager; the differentiable output still carries the lean backward."""
    x, = _leaves((9, 5))
    y = torch.randn(9, 5)

    def fn(x, y):
        return x.sin() * y, y.cos(), (x * y).argmax(1), (x * 2).detach()

    got, want = compile_fresh(fn)(x, y), fn(x, y)
    assert [o.requires_grad for o in got] == [o.requires_grad for o in want] == [True, False, False, False]
    assert _lean_ran(got[0])
    assert_same(list(got), list(want))
    assert_same(torch.autograd.grad(got[0].sum(), x), torch.autograd.grad(want[0].sum(), x))


def test_an_output_the_loss_does_not_use_gets_a_zero_tangent_and_an_expanded_tangent_is_fine():
    x, w = _leaves((8, 6), (6,))

    def fn(x, w):
        return (x * w).tanh(), (x + w).exp()

    got, want = compile_fresh(fn)(x, w), fn(x, w)
    assert _lean_ran(got[0])
    # .sum() hands the backward an expanded ones (stride 0); the second output gets no gradient at all
    assert_same(torch.autograd.grad(got[0].sum(), (x, w)), torch.autograd.grad(want[0].sum(), (x, w)),
                rtol=1e-5, atol=1e-6)


def test_only_inputs_that_require_grad_get_one_and_module_parameters_accumulate():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 7), torch.nn.LayerNorm(7), torch.nn.GELU())
    twin = torch.nn.Sequential(torch.nn.Linear(12, 7), torch.nn.LayerNorm(7), torch.nn.GELU())
    twin.load_state_dict(model.state_dict())
    x = torch.randn(10, 12)                                   # no grad wanted for the input
    compiled = compiler.compile(model)
    for _ in range(2):                                        # .grad accumulates over two steps
        compiled(x).square().mean().backward()
        twin(x).square().mean().backward()
    assert compiler.counters["lean_runtime.training"] == 1
    for p, q in zip(model.parameters(), twin.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-5)


def test_values_the_backward_needs_are_kept_and_freed_like_eager():
    x, = _leaves((7, 3))
    fn = lambda x: (x.exp() * x).sum(0)                       # noqa: E731  saves exp(x) for the backward
    got = compile_fresh(fn)(x)
    assert _lean_ran(got)
    (g1,) = torch.autograd.grad(got.sum(), x, retain_graph=True)
    (g2,) = torch.autograd.grad(got.sum(), x)
    assert_same(g1, g2)
    assert_same(g1, (x.exp() * (x + 1)).detach(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(got.sum(), x)


@pytest.mark.parametrize("saves", ["the input", "an intermediate"])
def test_a_second_derivative_raises_instead_of_answering_zero(saves):
    """create_graph=True gives the first derivative, which still depends on x (a penalty term built on it
    must not silently drop out of a loss), and differentiating it raises."""
    x, = _leaves((5,))
    fn = (lambda x: x.pow(3).sum()) if saves == "the input" else (lambda x: x.exp().sum())
    got = compile_fresh(fn)(x)
    assert _lean_ran(got)
    (g,) = torch.autograd.grad(got, x, create_graph=True)
    assert_same(g.detach(), torch.autograd.grad(fn(x), x)[0], rtol=1e-5, atol=1e-6)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="double backward"):
        (fn(x) + g.sum()).backward()


def test_dynamic_graphs_keep_their_sizes_for_the_backward():
    torch._dynamo.reset()

    def fn(x):
        return (x * x.shape[0]).reshape(x.shape[0] * x.shape[1]).softmax(0)

    compiled = compiler.compile(fn, dynamic=True)
    for n in (3, 6):
        x, = _leaves((n, 4), seed=n)
        got, want = compiled(x), fn(x)
        assert _lean_ran(got)
        assert_same(got, want, rtol=1e-5, atol=1e-6)
        assert_same(torch.autograd.grad(got[1], x), torch.autograd.grad(want[1], x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["mutates an input", "returns a view of an input"])
def test_graphs_the_lean_runtime_cannot_run_go_through_aotautograd_and_say_why(case, caplog):
    x, = _leaves((6, 4))
    y = torch.randn(6, 4)

    def mutates(x, y):
        y.add_(1)
        return x * y

    def aliases(x, y):
        return x.view(24), x * y

    fn = mutates if case == "mutates an input" else aliases
    y_eager = y.clone()
    with caplog.at_level(logging.DEBUG, logger="tritondiff.compiler.lean"):
        got = compile_fresh(fn)(x, y)
    want = fn(x, y_eager)
    assert compiler.counters["lean_runtime.refused"] == 1 and not compiler.counters["lean_runtime.training"]
    assert "refused" in caplog.text
    assert_same(got, want)
    assert_same(y, y_eager)
    out = got if case == "mutates an input" else got[1]
    assert not _lean_ran(out)
    assert_same(torch.autograd.grad(out.sum(), x), (y_eager if case == "mutates an input" else y).expand(6, 4))


def test_the_knob_off_keeps_aotautograds_runtime():
    x, w, b = _leaves((9, 16), (16,), (16,))
    with compiler.config.patch(lean_runtime=False):
        got = compile_fresh(workloads.layer_norm)(x, w, b)
    assert not _lean_ran(got) and not compiler.counters["lean_runtime.training"]
    want = workloads.layer_norm(x, w, b)
    assert_same(torch.autograd.grad(got.sum(), (x, w, b)), torch.autograd.grad(want.sum(), (x, w, b)),
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["no_grad", "no input requires grad"])
def test_inference_graphs_run_as_one_call_without_a_backward(mode):
    x, = _leaves((9, 16), requires_grad=mode == "no_grad")
    fn = lambda x: (x.softmax(-1), x.sum(1).sqrt())          # noqa: E731
    compiled = compile_fresh(fn)
    if mode == "no_grad":
        with torch.no_grad():
            got = compiled(x)
    else:
        got = compiled(x)
    assert compiler.counters["lean_runtime.inference"] == 1
    assert not compiler.counters["lean_runtime.training"] and not compiler.counters["lean_runtime.refused"]
    assert all(o.grad_fn is None and not o.requires_grad for o in got)
    assert_same(list(got), list(fn(x.detach())), rtol=1e-5, atol=1e-6)


def test_an_inference_graph_that_mutates_its_input_goes_through_aotautograd():
    x = torch.randn(5, 3)
    x_eager = x.clone()

    def fn(x):
        x.mul_(2)
        return x.sum(0)

    got = compile_fresh(fn)(x)
    assert compiler.counters["lean_runtime.refused"] == 1 and not compiler.counters["lean_runtime.inference"]
    assert_same(got, fn(x_eager))
    assert_same(x, x_eager)


def test_a_graph_with_side_effecting_ops_goes_through_aotautograd(capfd):
    """aten._print is an ordered side effect: the traced graph threads an effect token through an extra input
    and output, which only AOTAutograd's runtime supplies."""
    x = seeded_randn(8, seed=1)

    def fn(x):
        torch.ops.aten._print("tritondiff-effect")
        return x * 2

    got = compile_fresh(fn)(x)
    assert compiler.counters["lean_runtime.refused"] == 1 and not compiler.counters["lean_runtime.inference"]
    assert_same(got, x * 2)
    assert "tritondiff-effect" in capfd.readouterr().out


def test_casts_leave_no_metadata_asserts_behind():
    """Export's tracing puts an aten._assert_tensor_metadata before each cast; the compiled graph must not
    run them (as extern calls) on every call."""
    x = torch.randn(6, 5)
    got = compile_fresh(lambda x: (x.half() * 2).float().sum(0))(x)
    assert compiler.counters["lean_runtime.inference"] == 1
    assert not compiler.counters.with_prefix("extern.")
    assert_same(got, (x.half() * 2).float().sum(0))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_an_unspecialised_float_argument_is_not_read_as_a_symbol(requires_grad):
    """Dynamo recompiles on a second float value with the float as a graph input read by .item(); only
    aot_module_simplified turns that back into tensor ops, so the lean runtime refuses it (it returned NaN)."""
    fn = lambda x, s: x.sin() * s                               # noqa: E731
    compiled = compile_fresh(fn)
    for s in (0.5, 1.7, -3.25):
        x = seeded_randn(4, 3, seed=2).requires_grad_(requires_grad)
        got, want = compiled(x, s), fn(x, s)
        assert_same(got, want, rtol=1e-5, atol=1e-6)
        if requires_grad:
            assert_same(torch.autograd.grad(got.sum(), x), torch.autograd.grad(want.sum(), x), rtol=1e-5, atol=1e-6)
    assert compiler.counters["lean_runtime.refused"] == 1


def test_grad_turned_on_inside_a_no_grad_caller_keeps_its_graph():
    """A graph that enables grad under a no_grad caller traces as a joint graph: refused, and its output
    still differentiates as eager's does."""
    def fn(x, w):
        with torch.enable_grad():
            y = x.sin() * w
        return y, x.cos()

    x, w = _leaves((8, 16), (16,))
    with torch.no_grad():
        got, want = compile_fresh(fn)(x, w), fn(x, w)
    assert compiler.counters["lean_runtime.refused"] == 1
    assert [o.requires_grad for o in got] == [o.requires_grad for o in want] == [True, False]
    assert_same(torch.autograd.grad(got[0].sum(), (x, w)), torch.autograd.grad(want[0].sum(), (x, w)),
                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad_before", [True, False])
def test_a_grad_mode_the_graph_sets_outlives_the_call_as_in_eager(grad_before):
    def fn(x):
        a = x.sin()
        torch.set_grad_enabled(not grad_before)
        return a, x * 2

    x, = _leaves((4, 3))
    compiled = compile_fresh(fn)
    modes = []
    try:
        for f in (fn, compiled):
            torch.set_grad_enabled(grad_before)
            outs = f(x)
            modes.append((torch.is_grad_enabled(), [o.requires_grad for o in outs]))
    finally:
        torch.set_grad_enabled(True)
    assert modes[0] == modes[1] and modes[0][0] is (not grad_before)
    assert compiler.counters["lean_runtime.refused"] == 1


def test_saved_tensor_hooks_see_only_the_compiled_forwards_saved_values():
    """The user's saved-tensor hooks (non-reentrant checkpointing counts the tensors saved in forward and in
    recomputation) must not see the fake run that finds which outputs require grad: on the compiling call
    they packed three FakeTensors before the three real saved values."""
    from torch.utils.checkpoint import checkpoint
    fn = lambda x, w: (x @ w).tanh() * 2                        # noqa: E731
    x, w = _leaves((6, 4), (4, 5))
    compiled = compile_fresh(fn)
    packed = []
    for _ in range(2):                                          # compiling call, then a cached one
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(type(t).__name__) or t, lambda t: t):
            compiled(x, w)
    assert packed[:len(packed) // 2] == packed[len(packed) // 2:] and "FakeTensor" not in packed
    torch._dynamo.reset()
    got = checkpoint(compile_fresh(fn), x, w, use_reentrant=False)      # compiles inside the checkpoint
    assert compiler.counters["lean_runtime.training"] == 2
    got_grads = torch.autograd.grad(got.sum(), (x, w))
    assert_same(got_grads, torch.autograd.grad(fn(x, w).sum(), (x, w)), rtol=1e-5, atol=1e-6)


def _silu_grad(dtype):
    """silu's gradient compiled and eager, on the kernel device (CPU generators draw the values there)."""
    on = torch.get_default_device()
    x = torch.randn(64, 128, dtype=dtype, generator=torch.Generator().manual_seed(3), device="cpu")
    x = x.to(on).requires_grad_()
    g = torch.randn(64, 128, dtype=dtype, generator=torch.Generator().manual_seed(4), device="cpu").to(on)
    (got,) = torch.autograd.grad(torch.compile(torch.nn.functional.silu, backend="tritondiff")(x), x, g)
    (want,) = torch.autograd.grad(torch.nn.functional.silu(x), x, g)
    return got, want


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_low_precision_training_graph_takes_the_backward_eager_takes(dtype):
    """The export trace decomposed silu's backward into its composite formula (sigmoid, mul, add chained in the
    low dtype, each rounding): twice eager's error and half the elements differing.  Traced by torch.compile's
    decomposition rule it is silu_backward, float32 inside and one rounding, as eager computes it."""
    from torch._subclasses.functional_tensor import FunctionalTensorMode
    torch._dynamo.reset()
    compiler.counters.clear()
    got, want = _silu_grad(dtype)
    assert compiler.counters["lean_runtime.training"] == 1 and not compiler.counters["lean_runtime.refused"]
    assert (got != want).float().mean() < 0.01                # one rounding apart at most, rarely
    torch.testing.assert_close(got, want)
    assert FunctionalTensorMode(export=True).export, "outside the lean trace an export-mode functional mode stays"


def test_a_low_precision_training_graph_is_refused_where_the_rule_did_not_apply(monkeypatch):
    """A torch whose export trace makes no functional mode the rule can change: the rule did not apply, and the
    graph goes to AOTAutograd's runtime rather than run with a low-precision chained backward."""
    import contextlib
    from tritondiff.compiler import lean
    monkeypatch.setattr(lean, "_decomposed_as_compile_does", contextlib.nullcontext)
    torch._dynamo.reset()
    compiler.counters.clear()
    with compiler.config.patch(graph_cache=False):
        got, want = _silu_grad(torch.bfloat16)
    assert compiler.counters["lean_runtime.refused"] == 1 and not compiler.counters["lean_runtime.training"]
    torch.testing.assert_close(got, want)


def test_a_low_precision_training_graph_is_refused_where_the_rule_cannot_be_applied(monkeypatch):
    """A torch whose functional mode has no decomposition hook: AOTAutograd's runtime runs the graph."""
    from tritondiff.compiler import lean
    monkeypatch.setattr(lean, "_compile_rule_patchable", lambda: False)
    torch._dynamo.reset()
    compiler.counters.clear()
    got, want = _silu_grad(torch.bfloat16)
    assert compiler.counters["lean_runtime.refused"] == 1 and not compiler.counters["lean_runtime.training"]
    torch.testing.assert_close(got, want)


def test_the_trace_and_partition_of_a_training_graph_are_timed():
    """bench.compile_time splits a compile into these and the pipeline's steps."""
    from tritondiff.compiler import lean
    before = dict(lean.TRACE_SECONDS)
    x = torch.randn(8, 5, requires_grad=True)
    with compiler.config.patch(graph_cache=False):          # a cached trace is not traced again
        compile_fresh(lambda t: (t.sin() * 2).sum())(x).backward()
    for key in ("trace", "partition"):
        assert lean.TRACE_SECONDS[key] > before.get(key, 0.0), key
