"""Every knob of the harness, in one typed place.

Environment variables are read here and nowhere else.  Tests change knobs with
``config.patch(...)``, which restores the previous values on exit.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Iterator


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


@dataclasses.dataclass
class HarnessConfig:
    # Where kernels run: "auto" (CUDA when available, else Triton's interpreter
    # on CPU tensors), "cuda", or "cpu" (interpreter).  TRITONDIFF_DEVICE.
    device: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_DEVICE", "auto"))
    # Directory failure dumps go to.  TRITONDIFF_OUT.
    out_dir: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_OUT", "tritondiff-out"))
    # Upper bound on the bytes of all inputs of one example (before the fp64
    # reference copies).  Keeps CPU examples within the interpreter's reach.
    max_example_bytes: int = dataclasses.field(
        default_factory=lambda: int(_env("TRITONDIFF_MAX_EXAMPLE_BYTES", str(48 * 2**20))))
    # Default wall-clock budget per subject for `tritondiff check`, seconds.
    budget_s: float = dataclasses.field(default_factory=lambda: float(_env("TRITONDIFF_BUDGET", "90")))
    # Hard cap on the time spent shrinking one failure, seconds.
    shrink_budget_s: float = dataclasses.field(
        default_factory=lambda: float(_env("TRITONDIFF_SHRINK_BUDGET", "60")))
    # Seconds one example may run before it counts as a hang.
    example_timeout_s: float = dataclasses.field(
        default_factory=lambda: float(_env("TRITONDIFF_EXAMPLE_TIMEOUT", "120")))
    # Examples up to this many input elements also run every autotune config alone; larger
    # ones check only the tuning call and the cached call (each extra call costs a full run).
    config_check_max_numel: int = dataclasses.field(
        default_factory=lambda: int(_env("TRITONDIFF_CONFIG_CHECK_MAX_NUMEL", str(1 << 20))))
    # Hazard hunters switched off by name (comma separated in
    # TRITONDIFF_DISABLE): autotune, poison, mutation, idempotence, bounds,
    # canary, isolation.
    disabled_hazards: frozenset = dataclasses.field(
        default_factory=lambda: frozenset(h for h in _env("TRITONDIFF_DISABLE", "").split(",") if h))
    # Hypothesis profile used by the pytest plugin: "ci" or "nightly".
    profile: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_PROFILE", "ci"))

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator["HarnessConfig"]:
        """Temporarily override knobs (``with config.patch(budget_s=5): ...``)."""
        unknown = [k for k in changes if not hasattr(self, k)]
        if unknown:
            raise AttributeError(f"unknown harness config knob(s): {', '.join(unknown)}")
        saved = {k: getattr(self, k) for k in changes}
        for k, v in changes.items():
            setattr(self, k, v)
        try:
            yield self
        finally:
            for k, v in saved.items():
                setattr(self, k, v)


config = HarnessConfig()
