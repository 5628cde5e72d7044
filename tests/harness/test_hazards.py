"""Hazard hunters end to end: each planted hazard is found with the right class; each twin passes."""
import pytest

from tritondiff.base import device
from tritondiff.harness import explore
from tritondiff.harness.config import HarnessConfig, config
from tritondiff.harness.executor import Isolated
from tritondiff.harness.runner import enabled_hazards

from . import planted_hazards as ph


@pytest.fixture(autouse=True)
def _small_examples():
    # hazards show at any size: keep examples small so autotuned subjects tune quickly in the interpreter
    with config.patch(max_example_bytes=1 << 20):
        yield


@pytest.fixture(autouse=True)
def _fresh_workspaces():
    ph._WORKSPACES.clear()      # the kept-workspace subjects are right on the first call of each size
    yield
    ph._WORKSPACES.clear()


@pytest.fixture(scope="module")
def isolated():
    ex = Isolated(timeout_s=15)
    yield ex
    ex.close()


def _explore(subj, tmp_path, executor, **kw):
    kw.setdefault("budget_s", 45)
    kw.setdefault("max_examples", 12)
    return explore(subj, seed=7, out_dir=str(tmp_path), database=False, executor=executor, **kw)


@pytest.mark.parametrize("bug, twin, klass", [
    (ph.inplace_autotuned_no_restore, ph.inplace_autotuned_restored, "tuning_trial"),
    (ph.accumulates_into_empty, ph.accumulates_into_zeros, "uninitialized"),
    (ph.norm_empty_grid_for_zero_size, ph.norm_one_program, "uninitialized"),
    (ph.sum_using_input_as_scratch, ph.sum_using_own_scratch, "input_mutation"),
    (ph.double_unmasked_tail, ph.double_masked, "out_of_bounds"),
    (ph.sum_unmasked_tail_read, ph.sum_masked_tail_read, "out_of_bounds"),
    (ph.sum_into_kept_workspace, ph.sum_into_kept_workspace_zeroed, "second_call"),
    (ph.sum_into_workspace_zeroed_by_autotuner, ph.sum_into_workspace_zeroed_by_caller, "cached_call"),
    (ph.sum_partials_in_random_order, ph.sum_partials_in_order, "nondeterministic"),
    (ph.triple_one_config_wrong, ph.triple_every_config_right, "autotune_config"),
], ids=lambda v: getattr(v, "name", v))
def test_hazard_found_and_twin_passes(bug, twin, klass, tmp_path, in_process):
    res = _explore(bug, tmp_path, in_process)
    assert res.status == "fail", f"{bug.name} not found"
    if klass == "out_of_bounds" and not device.is_interpreter():
        klass = res.failure_class        # on GPU the write lands in memory nobody checks: memcheck's job
    assert res.failure_class == klass, res.message
    twin_res = _explore(twin, tmp_path, in_process, max_examples=8)
    assert twin_res.status == "pass", twin_res.message


def test_empty_grid_shrinks_to_zero_size(tmp_path, in_process):
    res = _explore(ph.norm_empty_grid_for_zero_size, tmp_path, in_process)
    assert res.case.dims["N"] == 0


@pytest.mark.skipif(not device.is_interpreter(), reason="the lane-level bounds checker is the interpreter's")
def test_unmasked_tail_reports_kernel_tensor_and_offset(tmp_path, in_process):
    res = _explore(ph.double_unmasked_tail, tmp_path, in_process)
    n = res.case.dims["N"]
    # the first lane past the end of the n-element output is element n
    assert res.message.startswith(f"_double_kernel: store to out_ptr[+{n}] (view spans {n} elements)"), res.message


def test_unmasked_tail_read_is_blamed_on_the_canary_of_the_input_it_reads(tmp_path, in_process):
    # bounds off (the subject's own disable): only the NaN canary after x can tell the read apart
    res = _explore(ph.sum_unmasked_tail_read, tmp_path, in_process)
    assert res.failure_class == "out_of_bounds", res.message
    assert res.message.startswith("out-of-bounds read past the end of input 'x': the kernel read its canary")
    assert res.verdict.location == "canary_read:x"
    assert res.verdict.details["canary_read"]["tensor"] == "x"
    assert res.case.dims["N"] % ph.SUM_BLOCK != 0      # a multiple of the block reads nothing past the end


def test_only_the_wrong_autotune_config_is_named(tmp_path, in_process):
    res = _explore(ph.triple_one_config_wrong, tmp_path, in_process)
    assert res.failure_class == "autotune_config", res.message
    failing = res.verdict.details["failing_configs"]
    assert len(failing) == 1 and "UNROLL: 2" in failing[0] and "_triple_kernel" in failing[0]
    assert len(res.verdict.details["passing_configs"]) == 2
    assert "UNROLL: 2" in res.message and "UNROLL: 1" not in res.message
    assert res.case.dims["N"] > 384                    # below that the overlapping programs still cover it


def test_declared_nondeterminism_is_judged_by_the_oracle_not_bitwise(tmp_path, in_process):
    assert _explore(ph.sum_partials_in_random_order_declared, tmp_path, in_process, max_examples=8).status == "pass"


def test_a_hunter_switched_off_by_the_subject_or_the_run_reports_nothing(tmp_path, in_process):
    assert _explore(ph.sum_using_input_as_scratch, tmp_path, in_process).failure_class == "input_mutation"
    assert _explore(ph.sum_using_input_as_scratch_unchecked, tmp_path, in_process).status == "pass"    # disable=
    off = _explore(ph.sum_using_input_as_scratch, tmp_path, in_process, disabled=frozenset({"mutation"}))
    assert off.status == "pass", off.message                                                          # --disable


def test_tritondiff_disable_switches_a_hunter_off(tmp_path, in_process, monkeypatch):
    monkeypatch.setenv("TRITONDIFF_DISABLE", "idempotence, poison")
    from_env = HarnessConfig().disabled_hazards           # what the knob reads at start-up
    assert from_env == frozenset({"idempotence", "poison"})
    with config.patch(disabled_hazards=from_env):
        assert "idempotence" not in enabled_hazards(ph.sum_partials_in_random_order)
        res = _explore(ph.sum_partials_in_random_order, tmp_path, in_process)
    assert res.status == "pass", res.message


def test_seed001_atomic_norm_is_a_tuning_trial_finding_and_reset_twin_passes(tmp_path, in_process):
    from tritondiff.harness.loader import load_file
    import os

    seed = load_file(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "seed001_nrm2.py"))
    res = _explore(seed.autotuned_atomic_nrm2, tmp_path, in_process)
    assert res.status == "fail" and res.failure_class == "tuning_trial"
    assert "_atomic_sum_body" in res.message
    assert _explore(seed.autotuned_atomic_nrm2_reset, tmp_path, in_process, max_examples=6).status == "pass"


def test_segfault_is_a_crash_finding_and_the_run_goes_on(tmp_path, isolated):
    res = _explore(ph.wild_load_segfaults, tmp_path, isolated)
    assert res.status == "fail" and res.failure_class == "crash"
    assert "signal" in res.message or "died" in res.message
    assert _explore(ph.tame_load, tmp_path, isolated, max_examples=4).status == "pass"   # worker replaced


def test_hang_is_a_finding_and_the_run_goes_on(tmp_path, isolated):
    res = _explore(ph.waits_forever, tmp_path, isolated, max_examples=2)
    assert res.status == "fail" and res.failure_class == "hang"
    assert _explore(ph.flag_already_set, tmp_path, isolated, max_examples=3).status == "pass"


def test_a_wrong_winning_config_is_named_even_when_the_tuning_trials_hide_it(tmp_path, in_process, monkeypatch):
    """The UNROLL=2 config wins the tuning: its own run leaves the tail unwritten, but the trial of the
    next config already wrote it, so the tuning call is right and the cached call wrong.  Each config run
    alone shows which config is wrong: that is the finding, not a cached-call state leak."""
    from triton.runtime.autotuner import Autotuner

    bench = Autotuner._bench

    def unroll_2_wins(self, *args, config, **meta):
        timing = bench(self, *args, config=config, **meta)
        if config.kwargs.get("UNROLL") == 2:
            return [0.0 for _ in timing] if isinstance(timing, list) else 0.0
        return timing

    monkeypatch.setattr(Autotuner, "_bench", unroll_2_wins)
    res = _explore(ph.triple_one_config_wrong, tmp_path, in_process)
    assert res.failure_class == "autotune_config", res.message
    assert res.verdict.call.startswith("config _triple_kernel with BLOCK: 128, UNROLL: 2")
    assert res.verdict.details["failing_configs"] == [res.verdict.call[len("config "):]]
