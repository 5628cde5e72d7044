"""harness.config: the typed config base shared by the packages (knobs, environment, patch, validation)."""
from __future__ import annotations

import pytest

from tritondiff.harness.config import HarnessConfig, config
from tritondiff.base.exc import ConfigError
from tritondiff.harness.exc import UsageError
from tritondiff.harness.runner import enabled_hazards


def test_harness_knobs_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRITONDIFF_DISABLE", "poison, canary")
    monkeypatch.setenv("TRITONDIFF_HUGE_SHAPES", "1")
    monkeypatch.setenv("TRITONDIFF_BUDGET", "7.5")
    fresh = HarnessConfig()
    assert fresh.disabled_hazards == frozenset({"poison", "canary"}) and fresh.huge_shapes is True
    assert fresh.budget_s == 7.5
    monkeypatch.setenv("TRITONDIFF_DISABLE", "poison,gremlins")
    with pytest.raises(ConfigError, match="unknown hazard\\(s\\) gremlins; known: poison"):
        HarnessConfig()
    monkeypatch.setenv("TRITONDIFF_DISABLE", "")
    monkeypatch.setenv("TRITONDIFF_PROFILE", "weekly")
    with pytest.raises(ConfigError, match="choose one of ci, nightly, gpu_huge"):
        HarnessConfig()


def test_disabled_hazards_knob_switches_hunters_off_everywhere():
    from tritondiff.harness import subject, tensor
    from tritondiff.harness.api import HAZARDS

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
    from tritondiff.base.config import TypedConfig
    from tritondiff.kernels.config import KernelConfig
    from tritondiff.kernels.config import config as kernel_config
    from tritondiff.kernels.exc import LaunchConfigError

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


def test_project_settings_come_from_the_nearest_pyproject_and_the_environment_wins(tmp_path, monkeypatch):
    from tritondiff.harness.config import apply_project_settings, project_settings

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.tritondiff]\nstrict = true\nmax_findings = 2\n")
    (tmp_path / "pkg").mkdir()
    settings, path = project_settings(str(tmp_path / "pkg" / "kernels.py"))
    assert settings == {"strict": True, "max_findings": 2} and path == str(tmp_path / "pyproject.toml")
    monkeypatch.setenv("TRITONDIFF_MAX_FINDINGS", "3")
    with config.patch(strict=False, max_findings=3):
        apply_project_settings(str(tmp_path))
        assert config.strict is True and config.max_findings == 3          # the environment's stands
    (tmp_path / "pyproject.toml").write_text("[tool.tritondiff]\nmax_findings = 0\n")
    with pytest.raises(ConfigError, match=r"\[tool.tritondiff\] max_findings = 0: must be a whole number >= 1"):
        project_settings(str(tmp_path))
    assert project_settings("/") == ({}, None)


def test_project_settings_set_the_budget_profile_disabled_hunters_and_paths(tmp_path):
    from tritondiff.harness.config import project_settings

    (tmp_path / "pyproject.toml").write_text(
        "[tool.tritondiff]\nbudget_s = 30\nprofile = 'nightly'\ndisabled_hazards = ['autotune', 'poison']\n"
        "out_dir = 'build/td'\nbaseline = 'tritondiff-baseline.toml'\nsanitize = 'off'\n")
    settings, _ = project_settings(str(tmp_path))
    assert settings == {"budget_s": 30.0, "profile": "nightly", "disabled_hazards": frozenset({"autotune", "poison"}),
                        "out_dir": str(tmp_path / "build/td"), "baseline": str(tmp_path / "tritondiff-baseline.toml"),
                        "sanitize": "off"}
    (tmp_path / "pyproject.toml").write_text("[tool.tritondiff]\ndisabled_hazards = ['gremlins']\n")
    with pytest.raises(ConfigError, match=r"disabled_hazards = frozenset\(\{'gremlins'\}\): unknown hazard"):
        project_settings(str(tmp_path))
