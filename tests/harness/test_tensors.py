"""harness.tensors: guard regions filled with other values than the canary (the canary-read control)."""
import math

import torch

from harness.case import TensorCase
from harness.tensors import GUARD_ELEMENTS, guards_intact, materialize


def _storage(t):
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())


def test_guard_fill_replaces_the_canary_on_the_side_asked_for_and_only_there():
    tc = TensorCase((10,), "float32", "offset", 4, "normal", 1, "")      # offset: a canary gap before the view
    plain = materialize(tc)
    after_only = materialize(tc, fill=(None, 0.0))
    both = materialize(tc, fill=(2.0, 0.0))
    assert torch.equal(plain, after_only) and torch.equal(plain, both)   # the values themselves never change
    start, end = plain.storage_offset(), plain.storage_offset() + 10
    s = _storage(after_only)
    assert math.isnan(float(s[start - 1])) and math.isnan(float(s[0]))   # the gap and guard before: canary
    assert (s[end:] == 0).all() and s[end:].numel() == GUARD_ELEMENTS
    s = _storage(both)
    assert (s[:start] == 2).all() and (s[end:] == 0).all()
    for t in (plain, after_only, both):
        assert guards_intact(t) is None                                  # checked against its own fill


def test_guards_intact_catches_writes_into_a_filled_guard():
    t = materialize(TensorCase((10,), "float32", "contiguous", 0, "normal", 1, ""), fill=(0.0, 0.0))
    _storage(t)[t.storage_offset() + 12] = float("nan")                  # anything but the fill value
    msg = guards_intact(t)
    assert msg and "after" in msg and "offset 12" in msg


def test_integer_guards_take_a_fill_too():
    t = materialize(TensorCase((5,), "int32", "contiguous", 0, "normal", 1, ""), fill=(0, 7))
    s = _storage(t)
    assert (s[:t.storage_offset()] == 0).all() and (s[t.storage_offset() + 5:] == 7).all()
    assert guards_intact(t) is None
