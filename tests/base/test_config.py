"""base.config: the typed config every package builds on (knobs, environment, patch, validation)."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from tritondiff.base.config import TypedConfig, flag, knob, one_of, positive
from tritondiff.base.exc import ConfigError, UsageError


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
