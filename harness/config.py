"""Every knob of the harness, in one typed place -- and the base every package's config builds on.

Environment variables are read here and nowhere else.  Tests change knobs with
``config.patch(...)``, which validates names and values and restores the
previous values on exit.

:class:`TypedConfig` is the shared part: a dataclass whose fields are the
knobs, declared with :func:`knob` (default, environment variable, parser and
check in one place), and a ``patch()`` that refuses unknown names and values
that fail a knob's check.  ``kernels/config.py`` builds on it too.  Only the
standard library is imported here (``harness.device`` reads this module before
torch is imported).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Callable, ClassVar, Iterator, TypeVar

from .exc import ConfigError

_C = TypeVar("_C", bound="TypedConfig")


def knob(default: Any, *, env: str | None = None, parse: Callable[[str], Any] | None = None,
         check: Callable[[Any], str | None] | None = None) -> Any:
    """A config field: ``default``, overridden by environment variable ``env`` (read by ``parse``).

    ``check(value)`` returns None for a good value, else what is wrong with it
    (it runs on the environment's value at start-up and on every ``patch``).
    A malformed environment variable raises :class:`~harness.exc.ConfigError`
    naming the variable, never a bare ``ValueError`` (a parser's own error class,
    e.g. ``kernels.exc.LaunchConfigError``, passes through).
    """
    meta = {"env": env, "check": check}

    def make() -> Any:
        raw = os.environ.get(env) if env else None
        if raw is None or (parse is None and raw == ""):
            return default() if callable(default) else default
        try:
            value = (parse or str)(raw)
        except (TypeError, ValueError) as e:
            if type(e) not in (TypeError, ValueError):
                raise                    # a package's own structured error (it names the problem already)
            raise ConfigError(f"{env}={raw!r}: {e}", knob=env) from None
        problem = check(value) if check else None
        if problem:
            raise ConfigError(f"{env}={raw!r}: {problem}", knob=env)
        return value

    return dataclasses.field(default_factory=make, metadata=meta)


@dataclasses.dataclass
class TypedConfig:
    """Base of a package's typed config: subclasses are dataclasses whose fields are :func:`knob` s."""

    #: Used in error messages ("unknown harness config knob").
    package: ClassVar[str] = "harness"

    @contextlib.contextmanager
    def patch(self: _C, **changes: Any) -> Iterator[_C]:
        """Temporarily override knobs (``with config.patch(budget_s=5): ...``); restored on exit."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        unknown = sorted(k for k in changes if k not in fields)
        if unknown:
            raise AttributeError(f"unknown {self.package} config knob(s): {', '.join(unknown)}; "
                                 f"known: {', '.join(sorted(fields))}")
        for name, value in changes.items():
            check = fields[name].metadata.get("check")
            problem = check(value) if check else None
            if problem:
                raise ConfigError(f"{self.package} config {name}={value!r}: {problem}", knob=name)
        saved = {k: getattr(self, k) for k in changes}
        for k, v in changes.items():
            setattr(self, k, v)
        try:
            yield self
        finally:
            for k, v in saved.items():
                setattr(self, k, v)


# ---------------------------------------------------------------------------------------------- checks

def one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"choose one of {', '.join(choices)}"


def positive(v: Any) -> str | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v == v and v != float("inf")
    return None if ok else "must be a positive finite number"


def flag(raw: str) -> bool:
    """An environment switch: 1/true/yes/on or 0/false/no/off (any case)."""
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise ValueError("not a switch; use 1 or 0")


def is_bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be True or False"


def _hazard_names(raw: str) -> frozenset:
    return frozenset(h.strip() for h in raw.split(",") if h.strip())


def _known_hazards(v: Any) -> str | None:
    from .api import HAZARDS           # lazily: this module stays standard-library only

    if not isinstance(v, frozenset):
        return "must be a frozenset of hazard names"
    bad = sorted(v - set(HAZARDS))
    return f"unknown hazard(s) {', '.join(bad)}; known: {', '.join(HAZARDS)}" if bad else None


# ---------------------------------------------------------------------------------------------- harness

@dataclasses.dataclass
class HarnessConfig(TypedConfig):
    package: ClassVar[str] = "harness"

    # Where kernels run: "auto" (CUDA when available, else Triton's interpreter
    # on CPU tensors), "cuda", or "cpu" (interpreter).  TRITONDIFF_DEVICE.
    device: str = knob("auto", env="TRITONDIFF_DEVICE", parse=lambda s: s.strip().lower(),
                       check=one_of("auto", "cuda", "cpu", "interpreter"))
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
