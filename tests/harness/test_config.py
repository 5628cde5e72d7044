"""harness.config: the typed config base shared by the packages (knobs, environment, patch, validation)."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from harness.config import HarnessConfig, TypedConfig, config, flag, knob, one_of, positive
from harness.exc import ConfigError, UsageError
from harness.runner import enabled_hazards


@dataclasses.dataclass
class _Toy(TypedConfig):
    package: ClassVar[str] = "toy"
    mode: str = knob("a", env="TOY_MODE", check=one_of("a", "b"))
    size: int = knob(4, env="TOY_SIZE", parse=int, check=positive)
    fast: bool = knob(False, env="TOY_FAST", parse=flag)
    table: dict = knob(dict)


def test_defaults_environment_and_a_fresh_default_per_instance(monkeypatch):
    a, b = _Toy(), _Toy()
    assert (a.mode, a.size, a.fast, a.table) == ("a", 4, False, {}) and a.table is not b.table
    monkeypatch.setenv("TOY_MODE", "b")
    monkeypatch.setenv("TOY_SIZE", "41")
    monkeypatch.setenv("TOY_FAST", "Yes")
    assert (_Toy().mode, _Toy().size, _Toy().fast) == ("b", 41, True)


@pytest.mark.parametrize("var, raw, fragment", [
    ("TOY_SIZE", "many", "TOY_SIZE='many': invalid literal for int()"),
    ("TOY_SIZE", "-3", "TOY_SIZE='-3': must be a positive finite number"),
    ("TOY_MODE", "c", "TOY_MODE='c': choose one of a, b"),
    ("TOY_FAST", "maybe", "TOY_FAST='maybe': not a switch; use 1 or 0"),
])
def test_a_malformed_environment_variable_names_itself(monkeypatch, var, raw, fragment):
    monkeypatch.setenv(var, raw)
    with pytest.raises(ConfigError) as e:
        _Toy()
    assert str(e.value) == fragment or str(e.value).startswith(fragment)
    assert e.value.knob == var and isinstance(e.value, UsageError)


def test_patch_restores_validates_and_refuses_unknown_knobs():
    toy = _Toy()
    with toy.patch(size=9, mode="b") as same:
        assert same is toy and (toy.size, toy.mode) == (9, "b")
    assert (toy.size, toy.mode) == (4, "a")
    with pytest.raises(RuntimeError), toy.patch(size=341):
        raise RuntimeError("restored even when the body raises")
    assert toy.size == 4
    with pytest.raises(AttributeError, match="unknown toy config knob\\(s\\): colour, sise; known: fast, mode"):
        with toy.patch(sise=5, colour="red"):
            pass
    with pytest.raises(ConfigError, match="toy config size=0: must be a positive finite number"):
        with toy.patch(size=0):
            pass
    assert toy.size == 4                                   # a refused patch changes nothing


def test_harness_knobs_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRITONDIFF_DISABLE", "poison, canary")
    monkeypatch.setenv("TRITONDIFF_HUGE_SHAPES", "1")
    monkeypatch.setenv("TRITONDIFF_BUDGET", "7.5")
    fresh = HarnessConfig()
    assert fresh.disabled_hazards == frozenset({"poison", "canary"}) and fresh.huge_shapes is True
    assert fresh.budget_s == 7.5
    monkeypatch.setenv("TRITONDIFF_DISABLE", "poison,gremlins")
    with pytest.raises(ConfigError, match="unknown hazard\\(s\\) gremlins; known: autotune"):
        HarnessConfig()
    monkeypatch.setenv("TRITONDIFF_DISABLE", "")
    monkeypatch.setenv("TRITONDIFF_PROFILE", "weekly")
    with pytest.raises(ConfigError, match="choose one of ci, nightly, gpu_huge"):
        HarnessConfig()


def test_disabled_hazards_knob_switches_hunters_off_everywhere():
    from harness import subject, tensor
    from harness.api import HAZARDS

    @subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": (1, 9)}, disable=("mutation",),
             name="config_test.identity")
    def subj(x):
        return x

    assert enabled_hazards(subj) == frozenset(HAZARDS) - {"mutation"}
    with config.patch(disabled_hazards=frozenset({"poison", "bounds"})):
        on = enabled_hazards(subj, frozenset({"canary"}))
    assert on == frozenset(HAZARDS) - {"mutation", "poison", "bounds", "canary"}
    with pytest.raises(ConfigError, match="must be a frozenset"):
        with config.patch(disabled_hazards="poison"):
            pass


def test_the_kernels_config_is_built_on_the_same_base(monkeypatch):
    from kernels.config import KernelConfig
    from kernels.config import config as kernel_config
    from kernels.exc import LaunchConfigError

    assert isinstance(kernel_config, TypedConfig)
    with kernel_config.patch(launch_overrides={"nrm2": {"num_warps": 2}}):
        assert kernel_config.launch_overrides == {"nrm2": {"num_warps": 2}}
    assert "nrm2" not in kernel_config.launch_overrides
    with pytest.raises(AttributeError, match="unknown kernels config knob\\(s\\): launch"):
        with kernel_config.patch(launch={}):
            pass
    with pytest.raises(ConfigError, match="kernels config launch_overrides=3: must be a dict"):
        with kernel_config.patch(launch_overrides=3):
            pass
    monkeypatch.setenv("TRITONDIFF_KERNEL_LAUNCH", "nrm2.num_warps=4, nrm2.block_bytes=16384")
    assert KernelConfig().launch_overrides == {"nrm2": {"num_warps": 4, "block_bytes": 16384}}
    monkeypatch.setenv("TRITONDIFF_KERNEL_LAUNCH", "nrm2.num_warps=four")
    with pytest.raises(LaunchConfigError, match="'four' is not an integer"):   # its own error, not wrapped
        KernelConfig()
