"""Pointwise kernels: 1-D and 2-D tiling agree; int64 indexing; golden source."""
import re

import pytest
import torch

import compiler
from compiler.pipeline import compile_graph
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
    assert len(re.findall(r"for roffset", "\n".join(looped))) == 3
