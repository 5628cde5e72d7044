"""The typed config every package builds on, and the base layer's own knobs.

:class:`TypedConfig` is a dataclass whose fields are the knobs, declared with
:func:`knob` (default, environment variable, parser and check in one place),
with a ``patch()`` that refuses unknown names and values that fail a knob's
check and restores the previous values on exit.  ``harness.config``,
``kernels.config`` and ``compiler.config`` build on it; environment variables
are read in those modules and here, nowhere else.  Only the standard library is
imported (``base.device`` reads this module before torch is imported).
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
    A malformed environment variable raises :class:`~tritondiff.base.exc.ConfigError`
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
    package: ClassVar[str] = "tritondiff"

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


@dataclasses.dataclass
class BaseConfig(TypedConfig):
    """Knobs of the base layer, shared by every package."""

    package: ClassVar[str] = "tritondiff"

    # Where kernels run: "auto" (CUDA when available, else Triton's interpreter
    # on CPU tensors), "cuda", or "cpu" (interpreter).  TRITONDIFF_DEVICE.
    device: str = knob("auto", env="TRITONDIFF_DEVICE", parse=lambda s: s.strip().lower(),
                       check=one_of("auto", "cuda", "cpu", "interpreter"))


config = BaseConfig()
