"""Row reductions of a GEMM's A operand folded into the template's K loop (templates.row_reductions)."""
import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler.scheduler import KernelGroup
from tests.compiler.test_templates import _judge, _sched, _templates
from tests.compiler.util import assert_same, kernel_sources, seeded_randn


def rms_project(x, w):
    """mHC K1's shape: the projection's rows scaled by rsqrt(mean(x^2)) of the same rows."""
    inv_rms = torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    return (x @ w.t()) * inv_rms


def max_scaled(x, w):
    """Maxima and minima of rows; the last is the max of negative values (a lane past K must not add 0)."""
    return ((x @ w.t()) / (x.abs().amax(-1, keepdim=True) + 1.0) + x.amin(-1, keepdim=True)
            + (-x.abs() - 1.0).amax(-1, keepdim=True))


def _fused(fn, *args):
    """The schedule of ``fn``: its one template with the reductions inside, and no other kernel."""
    _, sched = _sched(fn, *args)
    (gemm,) = _templates(sched)
    assert gemm.row_reductions is not None, sched.refused
    assert not [s for s in sched.steps if isinstance(s, KernelGroup)]
    return gemm, sched


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,k,n", [(41, 96, 24), (37, 70, 5), (1, 17, 33), (64, 64, 48)])  # K ragged or not
def test_mean_of_squares_in_the_k_loop_matches_float64(dtype, m, k, n):
    x, w = seeded_randn(m, k, seed=1).to(dtype), seeded_randn(n, k, seed=2).to(dtype)
    _judge(rms_project, x, w)
    src = compiler.dump.last_artifacts().texts["triton"]
    assert len(kernel_sources(src)) == 1 and "row reductions ['" in src
    gemm, _ = _fused(rms_project, x, w)
    assert [p.node.buf.data.reduction_type for p in gemm.row_reduction_nodes] == ["sum"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_maxima_and_minima_of_rows_in_the_k_loop(dtype):
    x, w = seeded_randn(23, 45, seed=3).to(dtype), seeded_randn(7, 45, seed=4).to(dtype)
    x[3, 44] = 50.0   # the row's maximum sits in the ragged last K step
    x[5, 0] = -60.0   # and a minimum in the first
    _judge(max_scaled, x, w)
    gemm, _ = _fused(max_scaled, x, w)
    assert sorted(p.node.buf.data.reduction_type for p in gemm.row_reduction_nodes) == ["max", "max", "min"]


def exp_sum_scaled(x, w):
    """A sum whose body is not 0 at a lane past K (exp(0) = 1): those lanes must hold the identity."""
    return (x @ w.t()) / x.exp().sum(-1, keepdim=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_sum_over_a_ragged_k_masks_the_lanes_past_k(dtype):
    x, w = seeded_randn(21, 45, seed=26).to(dtype), seeded_randn(5, 45, seed=27).to(dtype)
    _judge(exp_sum_scaled, x, w)
    _fused(exp_sum_scaled, x, w)


def test_nan_in_a_row_reaches_the_max_through_the_k_loop():
    x, w = seeded_randn(9, 40, seed=5), seeded_randn(3, 40, seed=6)
    x[2, 39] = float("nan")
    _fused(max_scaled, x, w)
    got = compiler.compile(max_scaled)(x, w)
    assert torch.isnan(got[2]).all() and not torch.isnan(got[[0, 1, 3]]).any()


def test_ir_execution_modes_agree():
    x, w = seeded_randn(19, 50, seed=7), seeded_randn(6, 50, seed=8)
    _fused(rms_project, x, w)
    want = rms_project(x, w)
    for mode in ("triton", "ir", "ir_unfused"):
        torch._dynamo.reset()
        with compiler.config.patch(execution=mode, verify_ir=True):
            torch.testing.assert_close(compiler.compile(rms_project)(x, w), want, rtol=1e-5, atol=1e-5)


def _refused(fn, *args, **knobs):
    with compiler.config.patch(**knobs):
        _judge(fn, *args)
        _, sched = _sched(fn, *args)
    (gemm,) = _templates(sched)
    assert gemm.row_reductions is None
    return " / ".join(why for _, _, why in sched.refused)


def test_a_reduction_that_is_also_an_output_stays_a_kernel():
    x, w = seeded_randn(19, 50, seed=9), seeded_randn(6, 50, seed=10)

    def fn(x, w):
        ms = (x * x).mean(-1, keepdim=True)
        return (x @ w.t()) * ms, ms
    assert "graph outputs" in _refused(fn, x, w)


def test_a_reduction_read_by_another_kernel_stays_a_kernel():
    x, w, z = seeded_randn(19, 50, seed=11), seeded_randn(6, 50, seed=12), seeded_randn(3, 19, seed=18)

    def fn(x, w, z):
        s = x.sum(-1, keepdim=True)
        return (x @ w.t()) * s, s.reshape(1, -1) + z   # 3 x 19: a kernel of its own reads s
    assert "outside" in _refused(fn, x, w, z)


def test_a_reduction_of_another_tensor_or_other_elements_stays_a_kernel():
    x, w, y = seeded_randn(50, 50, seed=13), seeded_randn(6, 50, seed=14), seeded_randn(50, 50, seed=15)
    assert "where the K loop holds" in _refused(lambda x, w, y: (x @ w.t()) * y.sum(-1, keepdim=True), x, w, y)
    # x's column sums, one per row of the product (x is square): the K loop holds rows, not columns
    assert "where the K loop holds" in _refused(lambda x, w: (x @ w.t()) * x.sum(0)[:, None], x, w)


def test_an_epilogue_reading_the_reduction_by_column_keeps_it_a_kernel():
    x, w = seeded_randn(50, 70, seed=19), seeded_randn(50, 70, seed=20)   # a square product: rows and columns
    assert "not at its own row" in _refused(lambda x, w: (x @ w.t()) * x.sum(-1)[None, :], x, w)


def test_tuned_templates_fold_the_reduction_too_and_drop_the_aten_candidate(tmp_path):
    """Tuning used to keep the reduction a kernel so that the ATen candidate could run: mHC rmsnorm_project
    tuned read x twice, 0.90 ms against 0.47.  The tile candidates fold it; ATen is left
    out of that template's candidates."""
    from tritondiff.compiler import autotune
    x, w = seeded_randn(19, 50, seed=16), seeded_randn(6, 50, seed=17)
    autotune._caches.clear()
    with compiler.config.patch(matmul="autotune", autotune_persist=False, autotune_cpu_timing=True,
                               autotune_cache_dir=str(tmp_path)):
        _, sched = _sched(rms_project, x, w)
        (gemm,) = _templates(sched)
        assert gemm.row_reductions is not None
        got = compiler.compile_fresh(rms_project)(x, w)
        (entry,) = autotune.get_cache()._memory.values()
    autotune._caches.clear()
    assert_same(got, rms_project(x, w), rtol=1e-4, atol=1e-4)
    assert "aten" not in entry["timings"] and len(entry["timings"]) >= 2


def test_review_finding_a_reduction_the_template_reads_as_an_operand_or_bias_stays_a_kernel():
    """Review finding: folded anyway, nothing wrote the buffer the template reads (KeyError)."""
    x, w = seeded_randn(19, 50, seed=21), seeded_randn(50, 6, seed=22)

    def as_bias(x, w):
        s = (x * x).sum(-1, keepdim=True)
        return torch.addmm(s, x, w) * s

    def as_operand(x, w):
        s = x.sum(-1, keepdim=True)
        return (x @ s.expand(-1, 4)) * s
    assert "as an operand or bias" in _refused(as_bias, x, w)
    assert "as an operand or bias" in _refused(as_operand, seeded_randn(20, 20, seed=23), w)


def test_folded_reductions_are_not_listed_as_stored():
    x, w = seeded_randn(19, 50, seed=24), seeded_randn(6, 50, seed=25)
    gemm, sched = _fused(rms_project, x, w)
    assert not {p.name for p in gemm.row_reduction_nodes} & sched.stored
