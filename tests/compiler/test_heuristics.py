"""Heuristic choices, checked by value (never by timing): fusion scores, split counts, tiles."""
import pytest

from tritondiff import compiler
from tritondiff.compiler import heuristics
from tritondiff.compiler.heuristics import FusionTraffic

# A GPU-like setting that does not depend on where the tests run.
H100 = dict(sm_count=132, programs_per_sm=2, max_reduction_block_numel=4096, split_min_chunk=2048,
            looped_rblock=1024, persistent_max_rnumel=1024, split_min_rnumel=32_768)


def test_fusion_score_orders_by_bytes_saved_then_proximity():
    producer = FusionTraffic(handoff_load=4096, dropped_store=4096)
    sibling = FusionTraffic(shared_read=4096)
    assert producer.saved == 8192 and sibling.saved == 4096
    assert heuristics.fusion_score(producer, 9) > heuristics.fusion_score(sibling, 1)
    near, far = heuristics.fusion_score(sibling, 1), heuristics.fusion_score(sibling, -7)
    assert near > far and far == (4096, -7)


def test_mixed_order_saving_charges_the_workspace_both_ways():
    t = heuristics.mixed_order_saving(2 * 341 * 16 * 4, programs=3, columns=16, column_reductions=2, acc_bytes=4)
    assert t.extra == 2 * 3 * 16 * 2 * 4
    assert t.saved == 2 * 341 * 16 * 4 - t.extra
    tiny = heuristics.mixed_order_saving(64, programs=264, columns=16, column_reductions=2, acc_bytes=4)
    assert tiny.saved < 0


def test_sm_count_is_the_knob_then_the_nominal_count_under_the_interpreter():
    with compiler.config.patch(sm_count=132, programs_per_sm=2):
        assert heuristics.sm_count() == 132
        assert heuristics.target_programs() == 264
    with compiler.config.patch(nominal_sm_count=5, programs_per_sm=1):
        from tritondiff.base import device
        if device.is_interpreter():
            assert heuristics.sm_count() == 5 and heuristics.target_programs() == 5


@pytest.mark.parametrize("xprograms, rnumel, want", [
    (1, 2**21, 256),        # fill the machine (264 slots), in chunks that tile the axis: 256 x 8 x 1024
    (1, 2051 * 1024, 264),  # no count within 10% below 264 divides 2051 blocks: one partial per slot
    (1, 8192, 4),           # but each partial reduces >= split_min_chunk (2048) elements
    (16, 2**21, 16),        # 16 row blocks already: 264 // 16 partials each
    (1000, 2**21, 2),       # the rows fill the machine; a split is still at least 2
    (1, 4096 + 9, 2),       # odd extent: floor(4105 / 2048) partials
])
def test_split_count_fills_the_machine_with_long_enough_partials(xprograms, rnumel, want):
    with compiler.config.patch(**H100):
        assert heuristics.split_count(xprograms, rnumel, 1024) == want


@pytest.mark.parametrize("rnumel, rblock, short_per_sm, tagged, want", [
    (2**20, 4096, 1, False, 128),   # 256 one-step partials would fill 264 slots: one per SM (132), tiled: 128 x 2
    (2**20, 4096, 2, False, 256),   # the knob at programs_per_sm: as before
    (2**20, 4096, 1, True, 256),    # tagged partials: split_short_tagged_programs_per_sm (2)
    (2**28, 4096, 1, False, 256),   # 65,536 steps: partials that stream keep two per SM
    (2**28, 4096, 1, True, 256),
    (265 * 4096, 4096, 1, False, 264),   # one more chunk than slots: not short, two per SM (264)
])
def test_a_split_of_one_step_partials_aims_at_one_program_per_sm(rnumel, rblock, short_per_sm, tagged, want):
    """nrm2 2^20 on an H100, fence form: 256 partials of one step 3.33-3.38 us of GPU time, 128 of two 3.15
    (Inductor 3.36).  Tagged, on an H200: 256 partials 2.75, 128 2.81 (Inductor 2.88)."""
    with compiler.config.patch(**H100, split_short_programs_per_sm=short_per_sm):
        assert heuristics.split_count(1, rnumel, rblock, tagged) == want
    with compiler.config.patch(**H100, split_short_tagged_programs_per_sm=1):
        assert heuristics.split_count(1, 2**20, 4096, True) == 128


def test_split_count_never_exceeds_the_chunks_and_obeys_a_forced_count():
    with compiler.config.patch(**H100):
        assert heuristics.split_count(1, 3000, 1024) == 2  # ceil(3000 / 1024) = 3 chunks, 1 long enough -> 2
        assert heuristics.split_count(1, 1500, 1024) == 2
        assert heuristics.split_count(1, 1024, 1024) == 1  # one chunk: nothing to split
    with compiler.config.patch(**H100, split_count=7):
        assert heuristics.split_count(1, 2**21, 1024) == 7
        assert heuristics.split_count(1, 4 * 1024, 1024) == 4
    # a machine "wide" enough to ask for more partials than grid axis 1 launches: capped at CUDA's 65,535
    with compiler.config.patch(**{**H100, "sm_count": 100_000, "split_min_chunk": 16}):
        assert heuristics.split_count(1, 2**32, 16) == 65_535


@pytest.mark.parametrize("rows, cols, want", [
    (1_152_000, 16, (256, 16, 264)),   # layer-norm backward of seed 000: 4500 row blocks, 264 programs
    (1_152_000, 64, (64, 64, 264)),
    (341, 16, (64, 16, 6)),            # fewer row blocks than SMs: blocks halve down to 1024 lanes
    (1024, 256, (4, 256, 256)),        # ... until they cover the SMs (nanoGPT's layer norm)
    (9, 41, (16, 64, 1)),              # a tile of 1024 lanes or fewer stays whole
    (4231, 4096, (1, 4096, 264)),
])
def test_choose_mixed_order_holds_whole_rows_and_fills_the_machine(rows, cols, want):
    with compiler.config.patch(**H100):
        c = heuristics.choose_mixed_order(rows, cols)
    assert (c.strategy, (c.xblock, c.rblock, c.splits)) == ("mixed_order", want)


@pytest.mark.parametrize("shape, transposed, want", [
    ((4096, 4096), False, (1, 1024)),    # contiguous: X (stride 1) takes the whole tile
    ((4096, 41), False, (16, 64)),       # a short X leaves the rest to Y
    ((4096, 4096), True, (32, 32)),      # transposed: square, 32 fp32 = 128 bytes per side
    ((4096, 4), True, (256, 4)),         # transposed but X only 4 wide: Y takes the rest
    ((3, 4096), True, (4, 256)),         # transposed but Y only 3 tall: X takes the rest
    ((9, 41), True, (16, 64)),
])
def test_choose_tile_favours_the_stride_1_axis(shape, transposed, want):
    with compiler.config.patch(pointwise_tile_numel=1024):
        assert heuristics.choose_tile(*shape, transposed=transposed) == want


def test_choose_tile_gives_x_the_larger_half_of_a_non_square_budget():
    with compiler.config.patch(pointwise_tile_numel=2048):
        assert heuristics.choose_tile(4096, 4096, transposed=True) == (32, 64)
    with compiler.config.patch(pointwise_tile_numel=65536):
        assert heuristics.choose_tile(4096, 4096, transposed=True) == (256, 256)


def test_a_transposed_read_gets_a_square_tile():
    import torch
    from tests.compiler.util import check

    x = torch.randn(64, 96)
    with compiler.config.patch(pointwise_tile_numel=1024):
        check(lambda x: (x * 2).t().contiguous(), x)
        src = compiler.dump.last_artifacts().texts["triton"]
    assert "pointwise over 96x64 in 32x32 tiles" in src


def test_transposed_writes_count_like_transposed_reads():
    from tritondiff.compiler import indexing
    from tritondiff.compiler.indexing import walks_across as _walks_across

    i0, i1 = indexing.index_symbol("i0"), indexing.index_symbol("i1")
    assert _walks_across(i0 + 96 * i1, [i0, i1])       # column-major store of a [96, 64] output
    assert not _walks_across(64 * i0 + i1, [i0, i1])   # row-major
    assert not _walks_across(i1, [i0, i1])             # a broadcast row: stride 0 along i0


def test_warps_follow_the_block_and_one_wave_grids_take_more():
    """A 4096-element block: 8 warps (16 values per thread); as one wave of looping programs (split
    partials, mixed order) 16, since its warps per program are its warps per SM."""
    with compiler.config.patch(elements_per_warp=512, one_wave_elements_per_warp=256, max_num_warps=16):
        assert heuristics.num_warps(4096) == 8 and heuristics.num_warps(4096, one_wave=True) == 16
        assert heuristics.num_warps(16) == 4 and heuristics.num_warps(2**20, one_wave=True) == 16   # clamped
        with compiler.config.patch(num_warps=2):
            assert heuristics.num_warps(4096, one_wave=True) == 2                                 # forced


def test_a_split_partial_streaming_its_chunk_takes_the_streaming_warps():
    with compiler.config.patch(one_wave_elements_per_warp=256, max_num_warps=16, split_streaming_warps=32,
                               split_streaming_min_steps=8):
        assert heuristics.split_partial_warps(4096, steps=256) == 32          # nrm2 2^28: 1M elements a partial
        assert heuristics.split_partial_warps(4096, steps=7) == 16            # short loops keep one wave's
        assert heuristics.split_partial_warps(1024, steps=1) == 4
        assert heuristics.split_partial_warps(4096, steps=256, reductions=4) == 16   # 34 registers at 32 warps
        with compiler.config.patch(split_streaming_warps=8):
            assert heuristics.split_partial_warps(4096, steps=256) == 16      # never fewer than one wave's
        with compiler.config.patch(num_warps=2):
            assert heuristics.split_partial_warps(4096, steps=256) == 2       # forced


@pytest.mark.parametrize("cols, rblock, knobs, want", [
    (10240, 16384, {}, 2048),                                  # 5 x 2048 lanes, not 16384
    (9000, 16384, {}, 2048),                                   # 5 x 2048, the last chunk partial
    (12288, 16384, {}, 2048),                                  # 6 x 2048
    (16000, 16384, {}, 16384),                                 # 8 x 2048 = 16384: nothing saved
    (8192, 8192, {}, 8192),                                    # a power of two: one block
    (1500, 2048, {}, 2048),                                    # chunks of at least 1024: 2 x 1024 saves nothing
    (1500, 2048, {"mixed_order_min_chunk": 256}, 256),        # 6 x 256
    (10240, 16384, {"mixed_order_row_chunks": 4}, 4096),      # 3 x 4096
    (10240, 16384, {"mixed_order_row_chunks": 1}, 16384),     # off
])
def test_a_mixed_order_row_is_held_in_chunks_where_they_take_fewer_lanes_than_its_padded_block(cols, rblock,
                                                                                                knobs, want):
    with compiler.config.patch(**H100, **{"mixed_order_min_chunk": 1024, **knobs}):
        assert heuristics.mixed_order_row_chunk(cols, rblock) == want


def test_only_a_wide_mixed_order_kernel_prefetches_its_rows_unless_asked_and_never_beside_triton_pipelining():
    with compiler.config.patch(**H100):
        assert heuristics.mixed_order_prefetch(16384, 8) and not heuristics.mixed_order_prefetch(4096, 8)
        with compiler.config.patch(mixed_order_prefetch="all"):
            assert heuristics.mixed_order_prefetch(4096, 8)
        with compiler.config.patch(mixed_order_prefetch="off"):
            assert not heuristics.mixed_order_prefetch(16384, 8)
        with compiler.config.patch(mixed_order_loop_stages=2):
            assert not heuristics.mixed_order_prefetch(16384, 8)
    with pytest.raises(compiler.exc.ConfigError, match="mixed_order_prefetch"):
        compiler.config.mixed_order_prefetch = "yes"
    with pytest.raises(compiler.exc.ConfigError, match="power of two"):
        compiler.config.mixed_order_min_chunk = 1000


def test_a_wide_mixed_order_kernel_runs_one_program_per_sm_with_at_most_8_warps():
    """Layer norm 4096 x 10240's backward: two fp32 column accumulators over a 16384-lane row are 128 KiB,
    half an SM's registers.  H100: 113 us at 8 warps and one program per SM, 127 us at 16
    warps (spilling), 141 us as generated before (16 warps, two programs per SM)."""
    with compiler.config.patch(**H100):
        wide = heuristics.choose_mixed_order(4096, 10240, accumulator_bytes=8)
        assert (wide.xblock, wide.rblock, wide.splits) == (1, 16384, 132)
        assert heuristics.mixed_order_warps(16384, 8) == 8
        narrow = heuristics.choose_mixed_order(1_152_000, 16, accumulator_bytes=8)   # 4096 lanes: 32 KiB
        assert narrow.splits == 264 and heuristics.mixed_order_warps(4096, 8) == heuristics.num_warps(4096, True)
        assert heuristics.mixed_order_warps(4096, 8) == 16
        with compiler.config.patch(mixed_order_wide_bytes=16384):                    # a lower bar: wide too
            assert heuristics.choose_mixed_order(1_152_000, 16, accumulator_bytes=8).splits == 132
            assert heuristics.mixed_order_warps(4096, 8) == 8
        with compiler.config.patch(num_warps=4):                                     # a forced value wins
            assert heuristics.mixed_order_warps(16384, 8) == 4


@pytest.mark.parametrize("strategy, stages, want", [("looped", 2, 2), ("split", 3, 3), ("mixed_order", 2, 2),
                                                    ("persistent", 2, None), ("looped", 1, None),
                                                    ("looped", None, None)])
def test_loop_stages_reach_every_loop_but_a_persistent_kernel_has_none(strategy, stages, want):
    with compiler.config.patch(loop_stages=stages):
        assert heuristics.loop_stages(strategy) == want


@pytest.mark.parametrize("loop, mixed, want", [(None, 2, {"mixed_order": 2, "looped": None, "split": None}),
                                               (3, 2, {"mixed_order": 2, "looped": 3, "split": 3}),
                                               (3, 1, {"mixed_order": None, "looped": 3, "split": 3}),
                                               (3, None, {"mixed_order": 3, "looped": 3, "split": 3})])
def test_mixed_order_loop_stages_pipeline_the_row_loop_alone(loop, mixed, want):
    with compiler.config.patch(loop_stages=loop, mixed_order_loop_stages=mixed):
        assert {s: heuristics.loop_stages(s) for s in want} == want
        assert heuristics.loop_stages("persistent") is None


def test_a_wide_mixed_order_kernel_prefetches_only_while_its_registers_hold_two_row_blocks():
    """Layer norm's backward over rows of 10240 (5 chunks of 2048 lanes, dW and dB: 8 accumulator bytes a lane):
    float16 x and dy (4 bytes a lane, twice over) fit 192 KiB; float32's (8 bytes) do not, and spilled (1.8 ms
    against eager's 0.42 ms on the H200)."""
    assert heuristics.mixed_order_prefetch(10240, 8, 4)
    assert not heuristics.mixed_order_prefetch(10240, 8, 8)
    assert not heuristics.mixed_order_prefetch(1024, 8, 4)             # not wide: no prefetch in "wide" mode
    with compiler.config.patch(mixed_order_prefetch="all"):
        assert heuristics.mixed_order_prefetch(10240, 8, 8)
    with compiler.config.patch(**{"mixed_order.prefetch_max_bytes": 1 << 20}):
        assert heuristics.mixed_order_prefetch(10240, 8, 8)
