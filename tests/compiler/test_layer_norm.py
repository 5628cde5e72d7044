"""Seed 000's regression: layer norm backward at 1,152,000 x 16, whose dW/dB reduction once got a
2,097,152-element tl.arange hoisted out of its loop.  Here: every strategy, the generated source, the
counters, and (slow) the full run."""
import re

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import workloads
from tritondiff.compiler.backend import capture_graphs
from tritondiff.compiler.exc import ReductionTooLarge
from tritondiff.compiler.pipeline import compile_graph
from tests.compiler.test_reduction import _arange_sizes, _full_sizes, assert_rindex_loop_local
from tests.compiler.util import assert_oracle, assert_same, run_compiled, seeded_randn

LIMIT = 1_048_576


def _params(m, n=16, dtype=torch.float32, seed=0):
    x = seeded_randn(m, n, seed=seed).to(dtype).requires_grad_()
    w = seeded_randn(n, seed=seed + 1).to(dtype).requires_grad_()
    b = seeded_randn(n, seed=seed + 2).to(dtype).requires_grad_()
    return x, w, b


def _fwd_bwd(fn, x, w, b, dy):
    out = fn(x, w, b)
    grads = torch.autograd.grad(out, (x, w, b), dy)
    return (out,) + grads


@pytest.mark.parametrize("strategy", ["auto", "persistent", "looped", "split"])
def test_layer_norm_forward_backward_all_strategies(strategy):
    """Judged by the oracle against float64: dW and dB sum 4231 rows, and a fixed 2e-4 once failed a looped
    dW element 2.5e-4 off eager (an unseeded dy; both orders of summation are as accurate)."""
    x, w, b = _params(4231)
    dy = seeded_randn(4231, 16, seed=3)
    want = _fwd_bwd(workloads.layer_norm, x, w, b, dy)
    truth = _fwd_bwd(workloads.layer_norm, *(t.detach().double().requires_grad_() for t in (x, w, b)), dy.double())
    with compiler.config.patch(reduction_strategy=strategy, rblock=1024 if strategy in ("looped", "split") else None):
        torch._dynamo.reset()
        got = _fwd_bwd(compiler.compile(workloads.layer_norm), x, w, b, dy)
    assert_oracle(got, want, truth)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_half_precision(dtype):
    x, w, b = _params(341, dtype=dtype)
    dy = torch.randn(341, 16).to(dtype)
    eager = _fwd_bwd(workloads.layer_norm, x, w, b, dy)
    truth = _fwd_bwd(workloads.layer_norm, *(t.detach().double().requires_grad_() for t in (x, w, b)), dy.double())
    got = _fwd_bwd(compiler.compile(workloads.layer_norm), x, w, b, dy)
    assert_oracle(got, eager, truth)


@pytest.fixture(scope="module")
def big_backward():
    return capture_graphs(workloads.layer_norm, *_params(1_152_000), backward=True)[1]


@pytest.mark.parametrize("strategy", ["auto", "looped", "split"])
def test_backward_at_1152000_rows_keeps_every_block_under_the_limit(big_backward, strategy):
    # dW/dB as their own group (the mixed-order kernel that joins them to dx is tested in test_scheduler)
    with compiler.config.patch(reduction_strategy=strategy, mixed_order_reductions=False):
        exe = compile_graph(big_backward.gm, big_backward.args, "ln_bwd")
    src = exe.generated.source
    assert max(_arange_sizes(src)) <= LIMIT and max(_full_sizes(src)) <= LIMIT
    assert_rindex_loop_local(src)
    assert compiler.counters["numel_guard_hits"] == 0
    cols = [g for g in exe.sched.groups() if g.xnumel == 16]
    assert len(cols) == 1 and [p.kind for p in cols[0].placed] == ["reduction", "reduction"]
    specs = exe.generated.kernels[cols[0].name]
    want = {"auto": "split", "looped": "looped", "split": "split"}[strategy]
    assert specs[0].meta["strategy"] == want
    assert compiler.counters[f"reduction_strategy.{want}"] >= 1
    if want != "split":
        assert re.search(r"for roffset in range\(0, 1152000, \d+\):", src)


def test_forced_persistent_backward_names_the_reduction_and_the_fix(big_backward):
    with compiler.config.patch(reduction_strategy="persistent"):
        with pytest.raises(ReductionTooLarge) as info:
            compile_graph(big_backward.gm, big_backward.args, "ln_bwd")
    err = info.value
    assert err.extent == 1_152_000 and err.block[1] == 2_097_152 and err.limit == LIMIT
    assert "sum" in err.reduction and "reduction_strategy='looped'" in str(err)


def test_dw_db_sums_at_1152000_rows_run(capsys):
    """The reduction of seed 000 itself, run: sum over 1,152,000 rows of (dy * xhat) and dy."""
    dy, xhat = seeded_randn(1_152_000, 16, seed=1), seeded_randn(1_152_000, 16, seed=2)
    fn = lambda dy, xhat: ((dy * xhat).sum(0), dy.sum(0))  # noqa: E731
    got = run_compiled(fn, dy, xhat)
    want = tuple(t.double() for t in fn(dy.double(), xhat.double()))
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=2e-3)
    assert compiler.counters["reduction_strategy.split"] == 2  # dW and dB sums, one kernel pair


@pytest.mark.parametrize("strategy", ["auto", pytest.param("looped", marks=pytest.mark.slow),
                                      pytest.param("split", marks=pytest.mark.slow)])
def test_layer_norm_forward_backward_at_1152000_rows_end_to_end(strategy):
    """Seed 000's workload itself, run: ~20 s in the interpreter for auto, 25-40 s forced (slow)."""
    x, w, b = _params(1_152_000)
    dy = torch.randn(1_152_000, 16)
    want = _fwd_bwd(workloads.layer_norm, x.double(), w.double(), b.double(), dy.double())
    with compiler.config.patch(reduction_strategy=strategy):
        got = _fwd_bwd(compiler.compile(workloads.layer_norm), x, w, b, dy)
    for a, t in zip(got, want):
        torch.testing.assert_close(a.double(), t, rtol=1e-4, atol=5e-3)
