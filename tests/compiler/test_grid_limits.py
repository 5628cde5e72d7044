"""CUDA's grid limits (2^31 - 1 programs along axis 0, 65,535 along axes 1 and 2) in generated plans.

Two tilings put programs on axis 1: the 2-D pointwise tile (Y blocks) and the split reduction
(partials).  Plans are checked at any shape on CPU (meta tensors, nothing launched); on a GPU the
boundary shapes run for real and must match eager bit for bit.
"""
from __future__ import annotations

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import codegen, heuristics
from tritondiff.compiler.backend import capture_graphs
from tritondiff.compiler.codegen import pointwise
from tritondiff.compiler.exc import ConfigError, GridTooLarge
from tritondiff.compiler.pipeline import compile_graph
from tritondiff.base import device

XNUMEL = 32                     # the transposed copy's output rows are 32 long
TILE = 1024                     # the GPU's 2-D tile budget: 32 x 32 tiles for a transposed copy


def transposed_copy(x):
    return x.t().contiguous() * 2


def _rows_for(y_programs: int) -> int:
    yblock, _ = heuristics.choose_tile(y_programs * 64, XNUMEL, transposed=True)
    return y_programs * yblock


def _plan(rows: int):
    """The launch plan of transposed_copy for an input of XNUMEL x rows (traced and compiled for meta
    tensors: no memory, nothing launched)."""
    (g,) = capture_graphs(transposed_copy, torch.empty(XNUMEL, rows, device="meta"))
    exe = compile_graph(g.gm, g.args, "grid")
    return [spec for specs in exe.generated.kernels.values() for spec in specs]


def _y_programs(specs) -> int:
    (spec,) = specs
    return spec.grid[1] if len(spec.grid) > 1 else 1


def test_the_2d_tile_reaches_exactly_65535_programs_on_axis_1_then_falls_back_to_1d():
    with compiler.config.patch(pointwise_tile_numel=TILE):
        at_limit = _plan(_rows_for(65_535))
        past = _plan(_rows_for(65_536))
    assert _y_programs(at_limit) == 65_535                      # the 2-D tile, as large as CUDA allows
    assert "yoffset" in at_limit[0].source
    assert _y_programs(past) == 1 and "yoffset" not in past[0].source   # 1-D: every program on axis 0


def test_a_plan_past_the_axis_1_limit_is_refused_before_any_launch(monkeypatch):
    monkeypatch.setattr(pointwise, "GRID_Y_LIMIT", 10 ** 9)    # planted: the tiling forgets the limit
    with compiler.config.patch(pointwise_tile_numel=TILE), pytest.raises(GridTooLarge) as err:
        _plan(_rows_for(65_536))
    assert (err.value.axis, err.value.limit, err.value.grid[1]) == (1, 65_535, 65_536)
    assert "compiler bug" in str(err.value)


def test_check_grid_limits_per_axis():
    codegen.check_grid("k", (2 ** 31 - 1, 65_535, 65_535))
    for grid, axis in (((2 ** 31, 1, 1), 0), ((1, 65_536), 1), ((1, 1, 65_536), 2)):
        with pytest.raises(GridTooLarge) as err:
            codegen.check_grid("k", grid)
        assert err.value.axis == axis


def test_split_count_past_the_axis_1_limit_is_a_config_error():
    with pytest.raises(ConfigError, match="at most 65,535"):
        compiler.config.split_count = 65_536
    with pytest.raises(ConfigError, match="at most 65,535"), compiler.config.patch(split_count=10 ** 6):
        pass
    assert compiler.config.split_count is None
    with compiler.config.patch(split_count=65_535):
        assert compiler.config.split_count == 65_535


def sum_of_squares(x):
    return (x * x).sum()


@pytest.mark.skipif(device.is_interpreter(), reason="65,535 programs a launch: GPU only (hours in the interpreter)")
@pytest.mark.parametrize("y_programs", [65_535, 65_536])
def test_gpu_transposed_copy_at_the_axis_1_limit_matches_eager(y_programs):
    torch._dynamo.reset()
    x = torch.randn(XNUMEL, _rows_for(y_programs), device="cuda")
    with compiler.config.patch(pointwise_tile_numel=TILE):
        got = compiler.compile(transposed_copy)(x)
    assert torch.equal(got, transposed_copy(x))


@pytest.mark.skipif(device.is_interpreter(), reason="65,535 programs a launch: GPU only (hours in the interpreter)")
def test_gpu_split_reduction_with_65535_partials_matches_float64():
    torch._dynamo.reset()
    x = torch.randn(65_535 * 16, device="cuda")
    with compiler.config.patch(reduction_strategy="split", split_count=65_535, rblock=16):
        (g,) = capture_graphs(sum_of_squares, x)
        plan = compile_graph(g.gm, g.args, "split65535")
        partial = [s for specs in plan.generated.kernels.values() for s in specs if s.name.endswith("_partial")]
        assert [s.grid[1] for s in partial] == [65_535]
        got = compiler.compile(sum_of_squares)(x)
    want = (x.double() * x.double()).sum()
    assert abs(got.double() - want) <= 1e-5 * want
