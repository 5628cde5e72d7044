"""harness.tensors: guard regions (and their fills for the canary-read control); the CPU values, pinned; the
on-device generator of large tensors (run here on the CPU with its threshold and chunk shrunk)."""
import dataclasses
import hashlib
import itertools
import json
import math
import pathlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tritondiff.base import device
from tritondiff.harness import tensors
from tritondiff.harness.case import TensorCase
from tritondiff.harness.tensors import GUARD_ELEMENTS, guards_intact, materialize


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


# ---------------------------------------------------------------------------------------------- CPU values

def _cpu_grid():
    """Cases whose CPU values are pinned in tensors_cpu_values.json: every family, dtype, layout, clamp and
    sprinkle, at small sizes."""
    fams = ("normal", "uniform_pos", "large_offset", "large", "near_max", "tiny", "zeros", "integer")
    for dtype in ("float32", "float16", "bfloat16", "float64"):
        for fam, nf in itertools.product(fams, ("", "nan", "mixed")):
            yield TensorCase((37,), dtype, "contiguous", 0, fam, 11, nf)
        yield TensorCase((1500,), dtype, "contiguous", 0, "normal", 12, "mixed")
        yield TensorCase((41,), dtype, "contiguous", 0, "normal", 13, "inf", -0.5, 2.0)
        yield TensorCase((41,), dtype, "contiguous", 0, "uniform_pos", 13, "", None, 1.0)
        for layout, p in (("transposed", 0), ("strided", 3), ("offset", 5), ("expanded", 1), ("expanded", 0)):
            yield TensorCase((5, 7), dtype, layout, p, "normal", 14, "nan")
            yield TensorCase((9,), dtype, layout, p, "large", 15, "")
    for dtype in ("int32", "int64", "int8", "uint8", "bool"):
        for fam in ("normal", "large"):
            yield TensorCase((53,), dtype, "contiguous", 0, fam, 16, "")
        yield TensorCase((4, 6), dtype, "strided", 2, "normal", 17, "")
        yield TensorCase((4, 6), dtype, "expanded", 1, "normal", 17, "")
    yield TensorCase((0,), "float32", "contiguous", 0, "normal", 1, "nan")
    yield TensorCase((3, 0), "float32", "strided", 2, "normal", 1, "")


def _digest(t: torch.Tensor) -> str:
    """sha256 of the whole storage (guards included) and the view's geometry."""
    raw = _storage(t).contiguous().view(torch.uint8)
    geometry = repr((tuple(t.shape), t.stride(), t.storage_offset())).encode()
    return hashlib.sha256(raw.numpy().tobytes() + geometry).hexdigest()[:16]


def test_small_cases_keep_their_cpu_values_byte_for_byte():
    """Stored failures and tests/regressions replay from seeds: the digests were taken before the on-device
    generator existed, and must not change (a change here changes the inputs of every stored case)."""
    pinned = json.loads((pathlib.Path(__file__).parent / "tensors_cpu_values.json").read_text())
    got = {json.dumps([list(tc.shape), tc.dtype, tc.layout, tc.layout_param, tc.values, tc.seed, tc.nonfinite,
                       tc.low, tc.high]): _digest(materialize(tc)) for tc in _cpu_grid()}
    assert got.keys() == pinned.keys()
    # bf16 "tiny" stays in the normal range under the interpreter only (tensors._values): the digests are
    # the interpreter's, so on a GPU those cases are meant to differ
    mode_dependent = [k for k in got if not device.is_interpreter() and '"bfloat16"' in k and '"tiny"' in k]
    changed = [key for key in got if got[key] != pinned[key] and key not in mode_dependent]
    assert not changed, f"{len(changed)} case(s) changed their values, first {changed[0]}"


def test_the_host_cache_keeps_the_last_large_case(monkeypatch):
    calls = []
    real = tensors._values
    monkeypatch.setattr(tensors, "_values", lambda tc, shape: calls.append(shape) or real(tc, shape))
    monkeypatch.setattr(tensors, "HOST_CACHE_MIN_NUMEL", 100)
    monkeypatch.setattr(tensors, "_host_cache", {})
    big, small = (TensorCase((n,), "float32", "contiguous", 0, "normal", 3, "") for n in (300, 30))
    first = materialize(big)
    assert torch.equal(materialize(big), first) and calls == [(300,)]             # the second build: cached
    materialize(small), materialize(small)
    assert calls == [(300,), (30,), (30,)]                                       # too small to keep
    materialize(dataclasses.replace(big, seed=4))
    materialize(big)
    assert calls[-2:] == [(300,), (300,)]                                        # one entry: evicted


# ---------------------------------------------------------------------------------------------- device values
# The on-device generator is device-agnostic: with the threshold and the chunk shrunk it runs here on the CPU
# (10,000 elements in chunks of 1,000) exactly as it runs on a GPU past 2^31 elements.

N, CHUNK = 10_000, 1_000
FLOATS = ("float32", "float16", "bfloat16", "float64")


@pytest.fixture
def on_device(monkeypatch):
    monkeypatch.setattr(tensors, "ON_DEVICE_MIN_NUMEL", 5_000)
    monkeypatch.setattr(tensors, "CHUNK_NUMEL", CHUNK)


def _tc(values="normal", dtype="float32", n=N, **kw):
    return TensorCase(**{**dict(shape=(n,), dtype=dtype, layout="contiguous", layout_param=0, values=values,
                                seed=7, nonfinite=""), **kw})


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all()
                                                              if a.dtype.is_floating_point else (a == b).all())


def test_large_tensors_take_the_device_generator_and_small_ones_keep_the_cpu_values(on_device):
    for n in (4_999, 5_000):
        tc = _tc(n=n)
        cpu = tensors._values(tc, tc.shape).to(torch.float32)
        assert _same(materialize(tc), cpu) == (n < 5_000)


def test_device_values_are_deterministic_and_independent_of_the_chunking(on_device, monkeypatch):
    for tc in (_tc(nonfinite="mixed"), _tc("large", "float16"), _tc("integer", "bfloat16"), _tc(dtype="int32"),
               _tc(dtype="bool"), _tc("near_max", low=-1e38, high=2e38, nonfinite="inf")):
        ref = materialize(tc)
        assert _same(materialize(tc), ref)
        for chunk in (999, 4_096, 10_000, 1 << 20):
            monkeypatch.setattr(tensors, "CHUNK_NUMEL", chunk)
            assert _same(materialize(tc), ref), (tc.describe(), chunk)
        monkeypatch.setattr(tensors, "CHUNK_NUMEL", CHUNK)
        assert not _same(materialize(dataclasses.replace(tc, seed=8)), ref)


PINNED_UNIFORM_POS = [1.914832, 0.271403, 1.993252, 0.465397]
PINNED_INT32 = [55, 29, 51, 21, -50, 81, 33, 29]


def test_device_values_are_pinned():
    """The generator defines huge-mode inputs on every GPU: these are exact on every device (integer
    ops and IEEE float64 arithmetic), so a change to the generator shows here."""
    out = torch.empty(64, dtype=torch.float32)
    tensors._fill_on_device(out, _tc("uniform_pos", n=64))
    assert [round(float(x), 6) for x in out[:4]] == PINNED_UNIFORM_POS
    assert int(tensors._hash(torch.tensor([1]), 0)) & tensors._MASK64 == 0xE220A8397B1DCDAF   # splitmix64(0)
    ints = torch.empty(64, dtype=torch.int32)
    tensors._fill_on_device(ints, _tc(dtype="int32", n=64))
    assert ints[:8].tolist() == PINNED_INT32


def _check_family(values: torch.Tensor, family: str, dtype: str) -> None:
    """The distribution properties of a family's values, whichever generator made them."""
    finfo = torch.finfo(tensors.torch_dtype(dtype))
    x = values.double()
    neg = float((x < 0).double().mean())
    quirk = {"near_max": math.inf, "large": finfo.max, "tiny": 0.0}
    if dtype == "float64" and family in quirk:
        # Known and kept (stored cases replay it): the signs are float32 (torch.where of two Python floats) and
        # sign * max overflows, sign * tiny underflows in float32: float64 "near_max" is all +-inf, "large" all
        # +-max, "tiny" all +-0.  Both generators agree.
        assert (x.abs() == quirk[family]).all() and 0.45 < float(torch.signbit(x).double().mean()) < 0.55
        return
    assert torch.isfinite(x).all(), family
    if family == "normal":
        assert abs(float(x.mean())) < 0.05 and 0.95 < float(x.std()) < 1.05 and 0.45 < neg < 0.55
    elif family == "uniform_pos":
        assert float(x.min()) >= 1e-3 * 0.99 and float(x.max()) <= 2.001 and abs(float(x.mean()) - 1.001) < 0.05
    elif family == "large_offset":
        offset = 64.0 if dtype in ("float16", "bfloat16") else 1000.0
        assert abs(float(x.mean()) - offset) < 0.1 and 0.9 < float(x.std()) < 1.1
    elif family == "large":
        assert float(x.abs().min()) >= math.sqrt(finfo.max) and 0.45 < neg < 0.55
        assert torch.isinf((values * values).to(values.dtype)).all()
    elif family == "near_max":
        assert (x.abs() >= finfo.max / 4 * 0.99).all() and (x.abs() <= finfo.max * 0.76).all()
        assert 0.45 < neg < 0.55
    elif family == "tiny":
        top = 2 * finfo.tiny if (dtype == "bfloat16" and device.is_interpreter()) else finfo.tiny
        # on a GPU bf16 "tiny" reaches the subnormals, and values below bf16's smallest one round to 0
        nonzero = float((x != 0).double().mean())
        assert nonzero >= (0.9 if dtype == "bfloat16" and not device.is_interpreter() else 1.0)
        assert float(x.abs().max()) <= top and 0.45 < neg < 0.55
    elif family == "zeros":
        assert (x == 0).all()
    elif family == "integer":
        assert torch.equal(x, x.round()) and set(x.unique().tolist()) == set(range(-8, 9))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("family", ["normal", "uniform_pos", "large_offset", "large", "near_max", "tiny", "zeros",
                                    "integer"])
def test_each_family_keeps_its_distribution_on_both_generators(on_device, family, dtype):
    _check_family(materialize(_tc(family, dtype, n=4_000)), family, dtype)       # the CPU generator
    _check_family(materialize(_tc(family, dtype)), family, dtype)                # the device generator


@pytest.mark.parametrize("dtype,family,lo,hi", [("int8", "normal", -100, 99), ("uint8", "normal", 0, 99),
                                                ("int32", "normal", -100, 99), ("int64", "large", None, None),
                                                ("int32", "large", -2 ** 31, 2 ** 31 - 2)])
def test_integer_dtypes_on_the_device(on_device, dtype, family, lo, hi):
    t = materialize(_tc(family, dtype))
    assert t.dtype == tensors.torch_dtype(dtype)
    if lo is None:
        assert int(t.min()) < -2 ** 60 and int(t.max()) > 2 ** 60              # int64 "large" spans the range
    else:
        assert int(t.min()) >= lo and int(t.max()) <= hi
        assert int(t.max()) - int(t.min()) > (hi - lo) * 0.99                  # and fills it
    b = materialize(_tc(dtype="bool"))
    assert b.dtype == torch.bool and 0.45 < float(b.float().mean()) < 0.55


@pytest.mark.parametrize("kind,specials", [("nan", {"nan"}), ("inf", {"inf"}), ("-inf", {"-inf"}),
                                           ("mixed", {"nan", "inf", "-inf"})])
def test_the_nonfinite_sprinkle_on_the_device(on_device, kind, specials):
    n = 200_000                                          # 200 positions, drawn with replacement over all chunks
    t = materialize(_tc(n=n, nonfinite=kind))
    bad = ~torch.isfinite(t)
    assert 195 <= int(bad.sum()) <= 200
    seen = {name for name, mask in (("nan", t.isnan()), ("inf", t == math.inf), ("-inf", t == -math.inf))
            if bool(mask.any())}
    assert seen == specials
    where = bad.nonzero().flatten()
    assert int(where.min()) < n // 10 and int(where.max()) > n - n // 10       # spread over the whole tensor
    assert int(torch.isfinite(materialize(_tc(n=N, nonfinite=kind)).logical_not().sum())) in range(1, 11)


def test_the_clamp_on_the_device(on_device):
    t = materialize(_tc(low=-0.5, high=2.0, nonfinite="nan")).double()
    finite = t[~t.isnan()]
    assert float(finite.min()) == -0.5 and float(finite.max()) == 2.0
    assert int((finite == -0.5).sum()) > N // 5                              # about 31% of a normal is below
    assert int(t.isnan().sum()) >= 9                                         # the sprinkle comes after


@pytest.mark.parametrize("layout,param,shape", [("offset", 5, (N,)), ("strided", 2, (N,)), ("strided", 3, (N,)),
                                                ("transposed", 0, (50, 200)), ("strided", 2, (50, 200)),
                                                ("expanded", 0, (2, 6_000)), ("offset", 3, (50, 200))])
def test_layouts_on_the_device(on_device, layout, param, shape):
    plain = materialize(_tc(shape=shape, n=None, nonfinite="mixed"))
    tc = _tc(shape=shape, n=None, layout=layout, layout_param=param, nonfinite="mixed")
    t = materialize(tc)
    assert guards_intact(t) is None
    strides, offset = tensors.layout_of(tc)
    assert t.stride() == strides and t.storage_offset() == offset
    if layout == "expanded":
        assert _same(t[0], t[1]) and 1 <= int((~torch.isfinite(t[0])).sum()) <= 6   # one slice, its own sprinkle
        return
    assert _same(t, plain)                       # the same values, another memory layout
    if layout == "strided":
        s = _storage(t)[GUARD_ELEMENTS:GUARD_ELEMENTS + t.numel() * param]
        skipped = s.view(-1, param)[:, 1:]       # the elements the steps skip: filler of the same family
        assert torch.isfinite(skipped).all() and abs(float(skipped.double().std()) - 1) < 0.1


def _created(fn) -> list[tuple[torch.dtype, int]]:
    """(dtype, numel) of every tensor an aten op returned while ``fn`` ran."""
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor):
                    seen.append((t.dtype, t.numel()))
            return out

    with Record():
        fn()
    return seen


@pytest.mark.parametrize("dtype,layout", [("float32", "contiguous"), ("float16", "strided"),
                                          ("bfloat16", "offset"), ("float32", "transposed")])
def test_no_full_size_float64_or_int64_tensor_on_the_device(on_device, dtype, layout):
    shape = (50, 200) if layout == "transposed" else (N,)
    tc = _tc("large", dtype, shape=shape, n=None, layout=layout, layout_param=2, nonfinite="mixed")
    wide = [n for dt, n in _created(lambda: materialize(tc)) if dt.itemsize == 8]
    assert wide and max(wide) <= CHUNK
    cpu = [n for dt, n in _created(lambda: materialize(dataclasses.replace(tc, shape=(4_000,), layout="contiguous")))
           if dt == torch.float64]
    assert max(cpu) == 4_000                     # the probe sees the CPU path's full-size float64 values


def test_masked_family_puts_one_boundary_block_of_neg_inf_in_every_row_and_keeps_a_finite_element():
    lengths, kinds = set(), set()
    for seed in range(40):
        tc = TensorCase((6, 300), "float32", "contiguous", 0, "masked", seed, "", None, None)
        v = tensors._cpu_values(tc, tc.shape)
        assert not torch.isnan(v).any() and not (v == math.inf).any()
        for row in v:
            masked = torch.isinf(row).nonzero().flatten()
            assert 1 <= masked.numel() <= 299                               # one finite element at least
            assert int(masked[-1] - masked[0]) + 1 == masked.numel()        # one contiguous block
            lengths.add(masked.numel())
            kinds.add("prefix" if int(masked[0]) == 0 else "suffix" if int(masked[-1]) == 299 else "span")
    assert {16, 17, 128, 129, 299} & lengths and kinds == {"prefix", "suffix", "span"}
    one_wide = TensorCase((5, 1), "float32", "contiguous", 0, "masked", 3, "", None, None)
    assert torch.isfinite(tensors._cpu_values(one_wide, one_wide.shape)).all()   # nothing to mask and keep
