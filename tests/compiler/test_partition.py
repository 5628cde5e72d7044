"""compiler.partition: what a training graph saves for its backward, and what the backward recomputes."""
import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import workloads
from tritondiff.compiler.backend import capture_graphs
from tests.compiler.util import assert_oracle, seeded_randn


def _saved(m: int, n: int, **knobs) -> list[tuple]:
    """Shapes of what layer norm's forward graph hands its backward (beyond its output y)."""
    x = seeded_randn(m, n, seed=0).requires_grad_()
    w, b = seeded_randn(n, seed=1).requires_grad_(), seeded_randn(n, seed=2).requires_grad_()
    with compiler.config.patch(**knobs):
        graphs = capture_graphs(workloads.layer_norm, x, w, b, backward=True)
    forward = next(g for g in graphs if g.kind == "forward")
    outputs = list(forward.gm.graph.find_nodes(op="output"))[0].args[0]
    return [tuple(o.meta["val"].shape) for o in outputs[1:]]


def test_layer_norm_over_short_rows_saves_neither_mean_nor_rstd():
    """Rows of 16 fit one block: the backward recomputes mean and rstd from x, which it loads anyway, so the
    forward writes y alone; the default partition saves both per-row statistics."""
    assert _saved(64, 16) == [(64, 16), (16,)]                       # x and w only
    assert sorted(_saved(64, 16, partitioner="default")) == sorted([(64, 16), (16,), (64, 1), (64, 1)])


def test_rows_longer_than_a_block_keep_their_statistics():
    """A reduced extent past persistent_max_rnumel would cost the backward another pass over memory to
    recompute: mean and rstd are saved, as Inductor's partitioner saves them."""
    assert (64, 1) in _saved(64, 256, persistent_max_rnumel=128)
    assert (64, 1) not in _saved(64, 256, persistent_max_rnumel=256)


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
@pytest.mark.parametrize("m, n, dtype", [(300, 16, torch.float32), (77, 40, torch.float16), (5, 300, torch.bfloat16)])
def test_layer_norm_gradients_are_as_right_as_eager_under_either_partitioner(partitioner, m, n, dtype):
    x = seeded_randn(m, n, seed=3).to(dtype).requires_grad_()
    w, b = (seeded_randn(n, seed=s).to(dtype).requires_grad_() for s in (4, 5))
    dy = seeded_randn(m, n, seed=6).to(dtype)

    def run(fn, *args):
        out = fn(*args[:3])
        return [out] + list(torch.autograd.grad(out, args[:3], args[3]))
    eager = run(workloads.layer_norm, x, w, b, dy)
    truth = run(workloads.layer_norm, *(t.detach().double().requires_grad_() for t in (x, w, b)), dy.double())
    with compiler.config.patch(partitioner=partitioner):
        got = run(compiler.compile_fresh(workloads.layer_norm), x, w, b, dy)
    assert_oracle(got, eager, truth)


def test_only_untagged_long_reductions_are_marked_must_save():
    """A sum over 100,000 elements per row is marked MUST_SAVE; a sum over 4 is left to the min cut; a node
    activation checkpointing already tagged keeps the user's tag."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils.checkpoint import CheckpointPolicy
    from tritondiff.compiler import partition
    gm = make_fx(lambda x: (x.sum(1), x.sum(0), x.amax(1)), tracing_mode="fake")(torch.empty(4, 100_000))
    long_sum, short_sum, user_tagged = [n for n in gm.graph.nodes if n.op == "call_function"]
    user_tagged.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
    partition._save_long_reductions(gm)
    assert long_sum.meta["recompute"] == CheckpointPolicy.MUST_SAVE
    assert "recompute" not in short_sum.meta
    assert user_tagged.meta["recompute"] == CheckpointPolicy.PREFER_RECOMPUTE


def test_gradients_through_activation_checkpointing_stay_right():
    """Activation checkpointing tags its nodes for recomputation; the min cut honours the tags."""
    from torch.utils.checkpoint import checkpoint

    def fn(x, w):
        return checkpoint(lambda t: torch.nn.functional.layer_norm(t, (t.shape[-1],), w).relu() * 2, x,
                          use_reentrant=False).sum()
    x, w = seeded_randn(32, 16, seed=7).requires_grad_(), seeded_randn(16, seed=8).requires_grad_()
    want = torch.autograd.grad(fn(x, w), (x, w))
    got = torch.autograd.grad(compiler.compile_fresh(fn)(x, w), (x, w))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("draw", ["randn_like", "exponential_", "uniform_"])
def test_two_random_draws_stay_two_in_a_training_graph(draw):
    """Review finding: the min cut's CSE pass merged two randn_like(x) (and two empty_like().exponential_())
    into one tensor when an input required grad; each draw must stay its own, as in eager."""
    def one(x):
        return torch.randn_like(x) if draw == "randn_like" else getattr(torch.empty_like(x), draw)()

    def fn(x):
        return x * one(x), x * one(x)
    x = torch.ones(4, 6, requires_grad=True)
    a, b = compiler.compile_fresh(fn)(x)
    assert not torch.equal(a, b)
    ga, = torch.autograd.grad((a + b).sum(), x)              # d/dx (x*r1 + x*r2) = r1 + r2
    torch.testing.assert_close(ga, (a + b).detach())


def _joint(fn, *shapes):
    """The joint graph of ``fn`` as the lean runtime traces it (inputs requiring grad)."""
    from torch._functorch.aot_autograd import aot_export_joint_simple

    args = tuple(seeded_randn(*s, seed=i).requires_grad_() for i, s in enumerate(shapes))
    return aot_export_joint_simple(lambda *a: (fn(*a),), args, trace_joint=True)


def test_common_subexpressions_merge_before_the_min_cut():
    from tritondiff.compiler.partition import merge_common

    def fn(x, w):                          # x * w and its sigmoid computed twice
        return torch.sigmoid(x * w) + torch.sigmoid(x * w) * 2.0
    joint = _joint(fn, (8, 16), (16,))
    calls = len(joint.graph.find_nodes(op="call_function", target=torch.ops.aten.sigmoid.default))
    assert calls >= 2
    assert merge_common(joint) >= 2
    assert len(joint.graph.find_nodes(op="call_function", target=torch.ops.aten.sigmoid.default)) == 1


def test_the_merge_keeps_signed_zeros_and_outputs_apart():
    """add(x, 0.0) and add(x, -0.0) differ at x = -0.0; two outputs computed alike stay two tensors (a caller
    may write into one: two gradients that were one tensor would change together)."""
    from tritondiff.compiler.partition import merge_common

    def fn(x):
        a, b = torch.ops.aten.add.Tensor(x, 0.0), torch.ops.aten.add.Tensor(x, -0.0)
        return a * 3, b * 3, x * 2, x * 2
    from torch._functorch.aot_autograd import aot_export_joint_simple

    traced = aot_export_joint_simple(fn, (torch.zeros(3),), trace_joint=False)
    assert merge_common(traced) == 0
    out = traced(torch.full((3,), -0.0))
    assert torch.signbit(out[1]).all() and not torch.signbit(out[0]).any()
    assert out[2] is not out[3]


def test_a_training_compile_does_not_import_inductors_lowerings():
    """functorch's own CSE pass imports Inductor's pattern matcher, lowerings and kernel templates: about a
    second of every process's first compile.  A fresh process compiling a forward and backward must not."""
    import subprocess
    import sys

    code = ("import sys, torch, tritondiff.compiler\n"
            "f = torch.compile(lambda x, w: torch.nn.functional.gelu(x @ w).sum(-1), backend='tritondiff')\n"
            "x, w = torch.randn(8, 16, requires_grad=True), torch.randn(16, 16, requires_grad=True)\n"
            "f(x, w).sum().backward()\n"
            "from tritondiff.compiler import counters\n"
            "assert counters['lean_runtime.training'] == 1, dict(counters)\n"
            "print(sorted(m for m in ('torch._inductor.lowering', 'torch._inductor.pattern_matcher') "
            "if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
