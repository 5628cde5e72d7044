"""Pointwise kernels: 1-D and 2-D tiling agree; int64 indexing; golden source."""
import re

import pytest
import torch
import triton

from tritondiff import compiler
from tritondiff.compiler.pipeline import compile_graph
from tests.compiler.util import assert_golden, assert_same, check, kernel_sources, run_compiled, trace_meta


@pytest.mark.parametrize("tiling", ["1d", "2d"])
@pytest.mark.parametrize("shape", [(9, 41), (341, 33), (4, 1)])
def test_tilings_agree(tiling, shape):
    x = torch.randn(shape)
    y = torch.randn(shape[::-1])
    fn = lambda x, y: (x + y.t()) * x.sigmoid()  # noqa: E731
    with compiler.config.patch(pointwise_tiling=tiling, pointwise_tile_numel=64):
        check(fn, x, y)
        src = compiler.dump.last_artifacts().texts["triton"]
    uses_2d = "yindex" in src
    assert uses_2d == (tiling == "2d" and shape[1] > 1)


def test_auto_tiling_picks_2d_for_a_transpose_only():
    x = torch.randn(64, 48)
    check(lambda x: x.t().contiguous() * 2, x)
    assert "yindex" in compiler.dump.last_artifacts().texts["triton"]
    check(lambda x: x * 2 + 1, x)
    assert "yindex" not in compiler.dump.last_artifacts().texts["triton"]
    check(lambda x, b: x * b[:, None], x, torch.randn(64))  # a value per row, broadcast along the fast dim
    assert "yindex" not in compiler.dump.last_artifacts().texts["triton"]


def _only_kernel(fn, *args):
    """The one kernel spec of ``fn`` compiled for meta ``args`` (source, tiling, grid)."""
    graph = compile_graph(trace_meta(fn, *args), list(args), "unroll")
    (specs,) = graph.generated.kernels.values()
    (spec,) = specs
    return spec


def _mix(x, h, y):
    """out[t, j, :] = sum_i h[t, j, i] * x[t, i, :] + y[t, :]: mHC post_res's shape (x read for every j)."""
    return (h.unsqueeze(-1) * x.unsqueeze(1)).sum(2) + y.unsqueeze(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("t,c", [(5, 37), (16, 64), (1, 3)])
def test_unrolled_tiling_matches_eager(dtype, t, c):
    x, h, y = torch.randn(t, 4, c).to(dtype), torch.randn(t, 4, 4).to(dtype), torch.randn(t, c).to(dtype)
    with compiler.config.patch(pointwise_block=64):   # several programs, the last one masked
        check(_mix, x, h, y, rtol=0, atol=0)
        src = compiler.dump.last_artifacts().texts["triton"]
    assert "4 outputs per lane" in src


def test_auto_unrolls_a_short_dim_when_rows_are_shared():
    meta = lambda *s: torch.empty(s, device="meta")  # noqa: E731
    spec = _only_kernel(_mix, meta(64, 4, 256), meta(64, 4, 4), meta(64, 256))
    assert spec.meta["tiling"] == "unrolled"
    # x: one load per stream for all four outputs (4), y: one; h: one per (j, i) coefficient (16)
    assert spec.source.count("tl.load(") == 4 + 1 + 16
    assert spec.source.count("tl.store(") == 4
    assert spec.grid == (triton.cdiv(64 * 256, spec.meta["xblock"]),)   # lanes over (t, c): one per 4 outputs
    with compiler.config.patch(pointwise_tiling="1d"):
        flat = _only_kernel(_mix, meta(64, 4, 256), meta(64, 4, 4), meta(64, 256))
    assert flat.meta["tiling"] == "1d" and flat.source.count("tl.store(") == 1
    with compiler.config.patch(pointwise_unroll_max_extent=3):   # the dim of 4 is past the limit
        assert _only_kernel(_mix, meta(64, 4, 256), meta(64, 4, 4), meta(64, 256)).meta["tiling"] == "1d"


def test_auto_keeps_1d_when_no_row_is_shared():
    meta = lambda *s: torch.empty(s, device="meta")  # noqa: E731
    same = lambda a, b: a * b + 1  # noqa: E731   every load depends on every dim: nothing to share
    assert _only_kernel(same, meta(64, 4, 256), meta(64, 4, 256)).meta["tiling"] == "1d"
    # a value per (t, j) broadcast along c is not a streamed read: unrolling j saves nothing
    per_row = lambda a, s: a * s[..., None]  # noqa: E731
    assert _only_kernel(per_row, meta(64, 4, 256), meta(64, 4)).meta["tiling"] == "1d"
    with compiler.config.patch(pointwise_tiling="unrolled"):   # forced: unrolled wherever a short dim exists
        spec = _only_kernel(same, meta(64, 4, 256), meta(64, 4, 256))
        assert spec.meta["tiling"] == "unrolled"
        assert _only_kernel(same, meta(64, 256), meta(64, 256)).meta["tiling"] == "1d"  # no short dim


def test_review_finding_a_node_of_another_shape_read_from_a_register_keeps_1d():
    """Review finding: post_res's output and a reshape of it in one kernel; the dim of 4 is not a
    dim of the (8, 3, 40) node, whose read of the register then failed the legality check at codegen."""
    x, h, y = torch.randn(6, 4, 40), torch.randn(6, 4, 4), torch.randn(6, 40)

    def fn(x, h, y):
        out = _mix(x, h, y)
        return out, out.reshape(8, 3, 40).exp()
    for tiling in ("auto", "unrolled"):
        with compiler.config.patch(pointwise_tiling=tiling, pointwise_block=64):
            check(fn, x, h, y)

    def sin_reshaped(a):
        s = a.sin()
        return s, s.reshape(6, 4, 5) * 2 + 1
    with compiler.config.patch(pointwise_tiling="unrolled"):
        check(sin_reshaped, torch.randn(4, 6, 5))


@pytest.mark.parametrize("value", [0, 17, True])
def test_unroll_extent_knob_is_validated(value):
    with pytest.raises(compiler.exc.ConfigError, match="pointwise_unroll_max_extent"):
        compiler.config.pointwise_unroll_max_extent = value


def test_forced_int64_indexing_gives_the_same_values():
    x = torch.randn(41, 9)
    fn = lambda x: (x.t() * 3).sum(0)  # noqa: E731
    with compiler.config.patch(force_int64_indexing=True):
        got = run_compiled(fn, x)
        src = compiler.dump.last_artifacts().texts["triton"]
    assert "tl.program_id(0).to(tl.int64)" in src
    assert_same(got, fn(x))


def test_int64_indexing_is_chosen_past_2_pow_31():
    big = torch.empty((2**30 + 8, 4), device="meta")
    src = compile_graph(trace_meta(lambda x: x[::2] * 2, big), [big], "huge").generated.source
    assert "tl.program_id(0).to(tl.int64)" in src
    small = torch.empty((8, 4), device="meta")
    assert "int64" not in kernel_sources(compile_graph(trace_meta(lambda x: x[::2] * 2, small), [small],
                                                       "small").generated.source)[0]


def test_block_past_the_limit_is_refused():
    x = torch.empty(2**21, device="meta")
    with compiler.config.patch(pointwise_block=2**21):
        with pytest.raises(compiler.exc.TensorTooLarge, match="pointwise_block"):
            compile_graph(trace_meta(lambda x: x + 1, x), [x], "big")
    assert compiler.counters["numel_guard_hits"] == 1


def test_views_broadcasts_and_cat_fuse_into_one_kernel():
    x, y = torch.randn(9, 41), torch.randn(41)
    fn = lambda x, y: torch.cat([x[:, :20] * y[:20], x[:, 20:].exp()], 1).relu()  # noqa: E731
    check(fn, x, y)
    assert compiler.counters["kernels_generated"] == 1


GOLDEN_KNOBS = dict(pointwise_block=1024, persistent_max_rnumel=1024, max_reduction_block_numel=4096,
                    looped_rblock=1024)  # the same source on a GPU and in the interpreter


@compiler.config.patch(**GOLDEN_KNOBS)
def test_golden_pointwise_and_softmax_kernels():
    x = torch.randn(9, 41)
    check(lambda x: torch.relu(x * 2 + 1), x)
    relu = kernel_sources(compiler.dump.last_artifacts().texts["triton"])
    check(lambda x: torch.softmax(x, -1), x)
    softmax = kernel_sources(compiler.dump.last_artifacts().texts["triton"])
    with compiler.config.patch(reduction_strategy="looped", rblock=16):
        check(lambda x: torch.softmax(x, -1), x)
        looped = kernel_sources(compiler.dump.last_artifacts().texts["triton"])
    assert_golden("pointwise_relu.py", "\n".join(relu))
    assert_golden("softmax_persistent.py", "\n".join(softmax))
    assert_golden("softmax_looped.py", "\n".join(looped))
    assert len(re.findall(r"for roffset", "\n".join(looped))) == 2     # max and sum of exp online, then the output
