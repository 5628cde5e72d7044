"""State that leaks across autotune trials, and configs that are wrong alone (seed 001's 1265x
``atomic_add`` under ``triton.autotune``).  Every autotuner's cache is cleared before an example, so
its real trials run in the first call (the tuning call); a second call then runs the cached winner.
A tuning call that is wrong where the cached call is right leaked state across trials
(``reset_to_zero`` / ``restore_value`` missing); each config is also run alone, forced, and one that
diverges beside configs that pass is the finding."""
from __future__ import annotations

from ..verdict import fail, last_line
from .base import Hunter

#: At most this many configs of one autotuner are run alone.
MAX_CONFIGS_CHECKED = 8


class Autotune(Hunter):
    name = "autotune"
    summary = "re-tuning every example, the cached call and each config alone"

    def before_example(self) -> None:
        from .. import autotuning

        autotuning.clear_caches()

    def wants_second_call(self, first) -> bool:
        return bool(first.tuners)

    def diagnose(self, ex, first, second, cmp, label):
        if first.tuned and second is not None and not second.error and ex.passes(second.output):
            return fail("tuning_trial", f"the tuning call is wrong but the cached call is right: state leaked "
                        f"across autotune trials of {', '.join(first.tuned)} (reset_to_zero / restore_value "
                        f"missing?). {cmp.message}", label, first, cmp.location, comparison=cmp.to_json())
        return self._config_beside_passing_ones(ex, first)

    def second_call_wrong(self, ex, first, second, cmp):
        # the winning config may be wrong alone while the tuning call's output was finished by the
        # other configs' trials: a config that fails alone beside ones that pass is the finding
        return self._config_beside_passing_ones(ex, first)

    def check_pass(self, ex, first, second):
        if first.tuners and ex.small_enough_for_control_runs():
            return check_configs(ex, first.tuners)
        return None

    def _config_beside_passing_ones(self, ex, first):
        if not first.tuners:
            return None
        bad = check_configs(ex, first.tuners)
        return bad if bad is not None and bad.details.get("passing_configs") else None


def check_configs(ex, tuners: list):
    """Run each config of each autotuner alone; report the first that diverges (None when all pass)."""
    from .. import autotuning

    failing, passing = [], []
    first_bad = None
    for tuner in tuners:
        for cfg in list(tuner.configs)[:MAX_CONFIGS_CHECKED]:
            with autotuning.forced_config(tuner, cfg):
                res = ex.call(ex.hazards - {Autotune.name})
            name = f"{autotuning.describe(tuner)} with {cfg}"
            ok = not res.error and ex.passes(res.output)
            (passing if ok else failing).append(name)
            if not ok and first_bad is None:
                first_bad = res
    if not failing:
        return None
    why = last_line(first_bad.error) if first_bad.error else ex.oracle(first_bad.output).message
    return fail("autotune_config", f"config(s) diverge when run alone: {'; '.join(failing)}. {why}",
                f"config {failing[0]}", first_bad, "config", failing_configs=failing, passing_configs=passing)
