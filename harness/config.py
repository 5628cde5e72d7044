"""Every knob of the harness, in one typed place (built on :class:`tritondiff.base.config.TypedConfig`).

Environment variables are read here and nowhere else.  Tests change knobs with
``config.patch(...)``, which validates names and values and restores the
previous values on exit.  The device knob (``TRITONDIFF_DEVICE``) is the base
layer's (``tritondiff.base.config``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from tritondiff.base.config import TypedConfig, flag, is_bool, knob, one_of, positive


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
    # Set by harness.memcheck for the repro it runs under compute-sanitizer, so that replay does not
    # start memcheck again for a finding memcheck made.  TRITONDIFF_UNDER_MEMCHECK=1.
    under_memcheck: bool = knob(False, env="TRITONDIFF_UNDER_MEMCHECK", parse=flag, check=is_bool)


config = HarnessConfig()
