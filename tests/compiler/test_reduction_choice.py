"""Which strategy and blocks a reduction group gets (``codegen.reduction.choice``), checked by value: each
strategy's ``applies`` asked in precedence order, or the forced one's ``choose``."""
import pytest

from tritondiff import compiler
from tritondiff.compiler import heuristics
from tritondiff.compiler.codegen import reduction
from tritondiff.compiler.codegen.reduction import RowFacts

from .test_heuristics import H100


def decide(xnumel, rnumel, split_ok, **facts):
    return reduction.decide(RowFacts(xnumel, rnumel, split_ok, **facts))


def test_choose_reduction_split_uses_the_sm_based_count():
    with compiler.config.patch(**H100):
        choice = decide(16, 1_152_000, split_ok=True)
        assert (choice.strategy, choice.xblock, choice.rblock) == ("split", 4, 1024)
        assert choice.splits == 264 // 4
        assert decide(16, 1_152_000, split_ok=False).strategy == "looped"
        assert decide(4231, 41, split_ok=True).strategy == "persistent"


# The GPU's wide-row knobs (config.py), with its persistent limit of 8192 and looped chunks of 4096.
WIDE = dict(persistent_max_rnumel=8192, looped_rblock=4096, max_reduction_block_numel=4096,
            persistent_wide_max_rnumel=32768, persistent_wide_held_numel=32768, persistent_wide_warps=32,
            persistent_wide_min_fill=0.75, split_min_rnumel=2**20)


@pytest.mark.parametrize("rnumel, held, want", [
    (32768, 1, ("persistent", 1, 32768, 32)),   # softmax / RMSNorm over 32768: x held, 32 values a thread
    (32768, 0, ("looped", 1, 4096, None)),      # one pass (a sum of squares): nothing kept, nothing reread
    (30000, 1, ("persistent", 1, 32768, 32)),   # 92% of its block
    (24576, 1, ("persistent", 1, 32768, 32)),   # 75%: the least fill taken
    (24575, 1, ("looped", 1, 4096, None)),      # below 75%
    (10240, 1, ("looped", 1, 4096, None)),      # layer norm 4096 x 10240's forward: 62.5%, measured slower
    (32768, 3, ("looped", 1, 4096, None)),      # three row tiles kept: 3 x 32768
    (16384, 2, ("persistent", 1, 16384, 32)),   # 2 x 16384 fits
    (65536, 1, ("looped", 1, 4096, None)),      # past persistent_wide_max_rnumel
    (8192, 5, ("persistent", 1, 8192, None)),   # within persistent_max_rnumel: persistent whatever it holds
])
def test_a_wide_row_runs_persistent_while_the_tiles_it_keeps_fit_one_program(rnumel, held, want):
    with compiler.config.patch(**WIDE):
        c = decide(4096, rnumel, split_ok=True, held=held)
    assert (c.strategy, c.xblock, c.rblock, c.warps) == want


@pytest.mark.parametrize("xnumel, rnumel, want", [
    (8192, 8192, ("looped", 1, 8192)),    # rms_norm 8192 x 8192: one whole-row step per pass
    (64, 1000, ("looped", 4, 1024)),      # the persistent tile: 4 rows of 1024
])
def test_a_persistent_row_that_keeps_loads_alone_reads_them_again_one_step_per_pass(xnumel, rnumel, want):
    with compiler.config.patch(**WIDE):
        c = decide(xnumel, rnumel, split_ok=True, reread=True)
        assert (c.strategy, c.xblock, c.rblock, c.warps, c.stages) == (*want, None, None)
        held = decide(xnumel, rnumel, split_ok=True, reread=False)
        assert (held.strategy, held.xblock, held.rblock) == ("persistent", *want[1:])
    with compiler.config.patch(**WIDE, persistent_reread_loads=False):
        assert decide(xnumel, rnumel, split_ok=True, reread=True).strategy == "persistent"


def test_reading_again_yields_to_forced_knobs_splits_wide_rows_and_column_sums():
    with compiler.config.patch(**WIDE, rblock=8192):                   # a forced block keeps the rows held
        c = decide(64, 8192, split_ok=False, reread=True)
        assert (c.strategy, c.rblock) == ("persistent", 8192)
    with compiler.config.patch(**WIDE, xblock=2):
        c = decide(64, 1000, split_ok=False, reread=True)
        assert (c.strategy, c.xblock) == ("persistent", 2)
    with compiler.config.patch(**WIDE, reduction_strategy="persistent"):
        assert decide(64, 1000, split_ok=False, reread=True).strategy == "persistent"
    with compiler.config.patch(**WIDE):
        assert decide(1, 2**21, split_ok=True, reread=True).strategy == "split"
        wide = decide(64, 32768, split_ok=False, held=1, reread=True)
        assert (wide.strategy, wide.warps) == ("persistent", 32)        # wide rows keep their rule
        outer = decide(1000, 64, split_ok=False, outer=True, reread=True)
        assert outer == decide(1000, 64, split_ok=False, outer=True)   # column sums: no rows


def test_the_wide_rule_yields_to_forced_knobs_and_column_sums():
    with compiler.config.patch(**WIDE, rblock=1024):                  # a forced RBLOCK keeps the loop
        assert decide(64, 32768, split_ok=False, held=1).strategy == "looped"
    with compiler.config.patch(**WIDE, xblock=2):                     # so does a forced XBLOCK (review finding)
        c = decide(64, 32768, split_ok=False, held=1)
        assert (c.strategy, c.xblock) == ("looped", 2)
    with compiler.config.patch(**WIDE, num_warps=8):                  # forced warps win over the wide ones
        assert decide(64, 32768, split_ok=False, held=1).warps == 8
    with compiler.config.patch(**{**WIDE, "persistent_wide_max_rnumel": 8192}):   # off: the old looped kernel
        assert decide(64, 32768, split_ok=False, held=1).strategy == "looped"
    with compiler.config.patch(**WIDE):
        outer = decide(32768, 32768, split_ok=False, outer=True, held=0)
        assert outer.strategy == "looped" and outer.warps is None and outer.xblock > 1
        assert decide(1, 2**21, split_ok=True, held=0).strategy == "split"


@pytest.mark.parametrize("rereads, want", [(0, None), (1, None), (2, 16), (3, 16)])
def test_a_looped_kernel_that_rereads_several_row_values_takes_more_warps(rereads, want):
    """Layer norm 2048 x 32768's dx loops (x, dy and w held: 3 x 32768 past the wide rule's budget) and
    rereads all three: 16 warps, not its block's 8.  A loop that rereads one value keeps the 8 (rows of 65536,
    past the wide rule, so that every count loops)."""
    with compiler.config.patch(**WIDE, looped_reread_min_held=2, looped_reread_warps=16):
        c = decide(2048, 65536, split_ok=False, rereads=rereads)
        assert (c.strategy, c.rblock, c.warps) == ("looped", 4096, want)
        assert heuristics.num_warps(c.xblock * c.rblock) == 8       # what the block alone would take
    with compiler.config.patch(**WIDE, num_warps=4):                  # forced warps win
        assert decide(2048, 32768, split_ok=False, rereads=3).warps is None
    with compiler.config.patch(**WIDE, reduction_strategy="looped", rblock=4096):   # a forced loop: as generated
        assert decide(2048, 32768, split_ok=False, rereads=3).warps is None
    with compiler.config.patch(**WIDE):                               # column sums have their own tile
        assert decide(32768, 2048, split_ok=False, outer=True, rereads=3).warps is None


def test_the_strategies_the_auto_choice_asks_end_with_one_that_takes_every_group():
    asked = sorted((s for s in reduction.STRATEGIES.values() if s.precedence is not None), key=lambda s: s.precedence)
    assert [s.name for s in asked] == ["split", "persistent", "looped"]
    for facts in (RowFacts(1, 1, False), RowFacts(10**6, 10**6, False, outer=True), RowFacts(1, 2**30, True)):
        assert asked[-1].applies(facts)
    assert not reduction.STRATEGIES["mixed_order"].applies(RowFacts(64, 64, False))


def test_the_tiles_a_persistent_kernel_would_hold_are_counted_only_when_a_strategy_asks():
    asked = []

    def count(value):
        def ask():
            asked.append(value)
            return value
        return ask

    with compiler.config.patch(**WIDE):
        assert decide(1, 2**21, True, held=count(1), reread=count(True)).strategy == "split"
        assert decide(64, 32768, False, outer=True, held=count(1), reread=count(True)).strategy == "looped"
        assert asked == []                                              # a split, a column sum: neither counted
        assert decide(64, 32768, False, held=count(1), reread=count(True)).strategy == "persistent"
        assert asked == [1]                                             # the wide rule asked what is held
        assert decide(64, 1000, False, held=count(2), reread=count(True)).strategy == "looped"
        assert asked == [1, True]                                       # the reread rule asked its question


def test_a_forced_strategy_takes_its_own_blocks_whatever_the_others_would_say():
    with compiler.config.patch(**H100, reduction_strategy="split"):
        c = decide(4096, 64, False)                 # no split would be chosen (nor is one legal: the caller's)
        assert c.strategy == "split" and c.splits >= 1
    with compiler.config.patch(**H100, reduction_strategy="persistent", rblock=16):
        with pytest.raises(compiler.exc.ConfigError, match="holds the whole axis in one block"):
            decide(8, 100, False)
