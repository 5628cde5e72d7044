"""Every knob of the harness, in one typed place (built on :class:`tritondiff.base.config.TypedConfig`).

Environment variables are read here and nowhere else.  Tests change knobs with
``config.patch(...)``, which validates names and values and restores the
previous values on exit.  The device knob (``TRITONDIFF_DEVICE``) is the base
layer's (``tritondiff.base.config``).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar

from tritondiff.base.config import TypedConfig, flag, is_bool, knob, one_of, positive
from tritondiff.base.exc import ConfigError


def at_least_one(v: Any) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else "must be a whole number >= 1"


def _hazard_names(raw: str) -> frozenset:
    return frozenset(h.strip() for h in raw.split(",") if h.strip())


def _known_hazards(v: Any) -> str | None:
    from .hunters import NAMES as HAZARDS      # lazily: this module stays standard-library only

    if not isinstance(v, frozenset):
        return "must be a frozenset of hazard names"
    bad = sorted(v - set(HAZARDS))
    return f"unknown hazard(s) {', '.join(bad)}; known: {', '.join(HAZARDS)}" if bad else None


# ---------------------------------------------------------------------------------------------- harness

@dataclasses.dataclass
class HarnessConfig(TypedConfig):
    package: ClassVar[str] = "harness"

    # Directory failure dumps go to.  TRITONDIFF_OUT.
    out_dir: str = knob("tritondiff-out", env="TRITONDIFF_OUT")
    # Upper bound on the bytes of all inputs of one example (before the fp64
    # reference copies).  Keeps CPU examples within the interpreter's reach.
    # TRITONDIFF_MAX_EXAMPLE_BYTES.
    max_example_bytes: int = knob(48 * 2 ** 20, env="TRITONDIFF_MAX_EXAMPLE_BYTES", parse=int, check=positive)
    # Default wall-clock budget per subject for `tritondiff check`, seconds.  TRITONDIFF_BUDGET.
    budget_s: float = knob(90.0, env="TRITONDIFF_BUDGET", parse=float, check=positive)
    # Fail on edge findings too (inputs at the dtype's overflow threshold, subnormal or non-finite; see
    # harness.tiers), not only on wrong ones.  TRITONDIFF_STRICT=1, --strict, or strict = true in the
    # [tool.tritondiff] table of the project's pyproject.toml.
    strict: bool = knob(False, env="TRITONDIFF_STRICT", parse=flag, check=is_bool)
    # Distinct findings one exploration looks for before it stops (each shrunk and dumped); the search
    # goes on after a finding until the budget is spent.  TRITONDIFF_MAX_FINDINGS, --max-findings.
    max_findings: int = knob(4, env="TRITONDIFF_MAX_FINDINGS", parse=int, check=at_least_one)
    # Seconds one example may run before it counts as a hang.  TRITONDIFF_EXAMPLE_TIMEOUT.
    example_timeout_s: float = knob(120.0, env="TRITONDIFF_EXAMPLE_TIMEOUT", parse=float, check=positive)
    # Examples up to this many input elements also run every autotune config alone; larger
    # ones check only the tuning call and the cached call (each extra call costs a full run).
    # TRITONDIFF_CONFIG_CHECK_MAX_NUMEL.
    config_check_max_numel: int = knob(1 << 20, env="TRITONDIFF_CONFIG_CHECK_MAX_NUMEL", parse=int, check=positive)
    # Hazard hunters switched off everywhere, on top of each run's own ``disabled``
    # (comma separated in TRITONDIFF_DISABLE): autotune, poison, mutation,
    # idempotence, bounds, canary, isolation.
    disabled_hazards: frozenset = knob(frozenset(), env="TRITONDIFF_DISABLE", parse=_hazard_names,
                                       check=_known_hazards)
    # Hypothesis profile used by the pytest plugin: "ci", "nightly" or "gpu_huge".  TRITONDIFF_PROFILE.
    profile: str = knob("ci", env="TRITONDIFF_PROFILE", check=one_of("ci", "nightly", "gpu_huge"))
    # GPU only: draw a subject's largest input just past 2^31 elements (32-bit offset overflow),
    # within free GPU memory; see harness.huge.  TRITONDIFF_HUGE_SHAPES=1.
    huge_shapes: bool = knob(False, env="TRITONDIFF_HUGE_SHAPES", parse=flag, check=is_bool)
    # `check` on a GPU: run a repro of each subject (its finding's, or its last passing case's) under
    # compute-sanitizer memcheck, which sees the out-of-bounds reads no output shows.  "auto": where a
    # CUDA GPU and compute-sanitizer are present; "on": always (a line says why it cannot run); "off".
    # TRITONDIFF_SANITIZE, --sanitize / --no-sanitize, or sanitize in [tool.tritondiff].
    sanitize: str = knob("auto", env="TRITONDIFF_SANITIZE", check=one_of("auto", "on", "off"))
    # A baseline file of accepted findings (harness.baseline): listed signatures are reported, not failed.
    # TRITONDIFF_BASELINE, --baseline, or baseline in [tool.tritondiff] (relative to that pyproject.toml).
    baseline: str = knob("", env="TRITONDIFF_BASELINE")
    # Set by harness.memcheck for the repro it runs under compute-sanitizer, so that replay does not
    # start memcheck again for a finding memcheck made.  TRITONDIFF_UNDER_MEMCHECK=1.
    under_memcheck: bool = knob(False, env="TRITONDIFF_UNDER_MEMCHECK", parse=flag, check=is_bool)


config = HarnessConfig()


# ------------------------------------------------------------------------------ the project's pyproject

#: Knobs a project may set in the ``[tool.tritondiff]`` table of its pyproject.toml.
PROJECT_KNOBS = ("strict", "max_findings", "sanitize", "budget_s", "profile", "disabled_hazards", "out_dir",
                 "baseline")


def project_settings(start: str) -> tuple[dict, str | None]:
    """The ``[tool.tritondiff]`` settings of the pyproject.toml nearest above ``start`` (a folder or a
    file): (knob -> value, the file's path), or ({}, None) without one.  Unknown keys and bad values
    raise :class:`ConfigError` naming the file."""
    folder = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(os.path.abspath(start)))
    while True:
        path = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(path):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            return {}, None
        folder = parent
    try:
        import tomllib
    except ModuleNotFoundError:                # Python 3.10: read only with tomli installed
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            return {}, None
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f).get("tool", {}).get("tritondiff", {})
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read [tool.tritondiff]: {e}", knob="tool.tritondiff") from None
    unknown = sorted(set(table) - set(PROJECT_KNOBS))
    if unknown:
        raise ConfigError(f"{path}: [tool.tritondiff] has unknown key(s) {', '.join(unknown)}; known: "
                          f"{', '.join(PROJECT_KNOBS)}", knob="tool.tritondiff")
    fields = {f.name: f for f in dataclasses.fields(HarnessConfig)}
    table = dict(table)
    for key, value in table.items():
        if key == "disabled_hazards" and isinstance(value, list):
            table[key] = value = frozenset(value)
        elif key in ("out_dir", "baseline") and isinstance(value, str) and value:
            table[key] = value = os.path.join(os.path.dirname(path), value)   # relative to the pyproject.toml
        elif key == "budget_s" and isinstance(value, int) and not isinstance(value, bool):
            table[key] = value = float(value)
        check = fields[key].metadata["check"]
        problem = check(value) if check else (None if isinstance(value, str) else "must be a string")
        if problem:
            raise ConfigError(f"{path}: [tool.tritondiff] {key} = {value!r}: {problem}", knob=key)
    return dict(table), path


def apply_project_settings(start: str) -> str | None:
    """Set the knobs of the project's ``[tool.tritondiff]`` table (see :func:`project_settings`) that the
    environment does not set; returns the pyproject.toml read, or None."""
    settings, path = project_settings(start)
    fields = {f.name: f for f in dataclasses.fields(HarnessConfig)}
    for key, value in settings.items():
        if os.environ.get(fields[key].metadata["env"]) is None:
            setattr(config, key, value)
    return path
