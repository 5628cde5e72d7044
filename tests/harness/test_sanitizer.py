"""harness.sanitizer: interpreted out-of-bounds checks (before the access); the inputs' guard-region canaries."""
from __future__ import annotations

import pytest
import torch

from tritondiff.base import device
import triton
import triton.language as tl
from triton.runtime.errors import InterpreterError
from triton.tools.tensor_descriptor import TensorDescriptor

from tritondiff.harness.case import TensorCase
from tritondiff.harness.exc import OutOfBoundsAccess
from tritondiff.harness.sanitizer import bounds_checking
from tritondiff.harness.tensors import GUARD_ELEMENTS, materialize
from tritondiff.harness.tensors import guards_intact as tensor_guards_intact

pytestmark = pytest.mark.skipif(not device.is_interpreter(), reason="bounds checks run in the interpreter")


@triton.jit
def _k(x_ptr, out, n, EXTRA: tl.constexpr, BLOCK: tl.constexpr):
    # copies x to out; EXTRA lanes past n are left switched on by the store mask (the bug)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0), mask=offs < n + EXTRA)


@triton.jit
def _shifted_load(x_ptr, out_ptr, n, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + SHIFT, mask=mask), mask=mask)


@triton.jit
def _atomic_kernel(acc_ptr, x_ptr, n, SLOT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(acc_ptr + SLOT, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))


@triton.jit
def _cas_kernel(lock_ptr, SLOT: tl.constexpr):
    tl.atomic_cas(lock_ptr + SLOT, 0, 1)


@triton.jit
def _tile_copy(x_ptr, out_ptr, M, N, sxm, sxn, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    rn = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    mask = (rm < M) & (rn < N)
    tl.store(out_ptr + rm * N + rn, tl.load(x_ptr + rm * sxm + rn * sxn, mask=mask), mask=mask)


@triton.jit
def _concat(x_ptr, y_ptr, out_ptr, nx, ny, BLOCK: tl.constexpr):
    # out = concat(x, y), each lane's pointer picked by tl.where from two different arguments
    offs = tl.arange(0, BLOCK)
    p = tl.where(offs < nx, x_ptr + offs, y_ptr + (offs - nx))
    mask = offs < nx + ny
    tl.store(out_ptr + offs, tl.load(p, mask=mask), mask=mask)


@triton.jit
def _sum_both(x_ptr, y_ptr, out_ptr, READ_X: tl.constexpr, NY: tl.constexpr, BLOCK: tl.constexpr):
    # out[0] = sum(x[:READ_X]) + sum(y[:NY]); READ_X > len(x) reads past the end of x
    offs = tl.arange(0, BLOCK)
    xs = tl.load(x_ptr + offs, mask=offs < READ_X, other=0.0)
    ys = tl.load(y_ptr + offs, mask=offs < NY, other=0.0)
    tl.store(out_ptr, tl.sum(xs) + tl.sum(ys))


@triton.jit
def _desc_copy(desc, out_ptr, ROW: tl.constexpr):
    tile = desc.load([ROW, 0])
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    tl.store(out_ptr + offs, tile)


def _copy(x, out, n, extra, block):
    _k[(triton.cdiv(n + extra, block),)](x, out, n, EXTRA=extra, BLOCK=block)


@pytest.mark.parametrize("n", [9, 41, 341, 4231])
def test_masked_kernel_is_clean(n):
    x = torch.randn(n)
    out = torch.empty(n)
    with bounds_checking() as bc:
        _copy(x, out, n, 0, 128)
    assert bc.violations == []
    assert torch.equal(out, x)


def test_store_one_past_the_end_of_a_million_elements():
    n = 1 << 20
    x = torch.randn(n)
    out = torch.empty(n)
    with bounds_checking() as bc:
        with pytest.raises(InterpreterError) as info:
            _copy(x, out, n, 1, 1 << 18)
    (v,) = bc.violations
    assert v.message() == "_k: store to out[+1048576] (view spans 1048576 elements): 1 lane out of bounds"
    assert (v.kernel, v.access, v.tensor, v.offset_elements, v.extent_elements, v.lanes, v.inside_storage) == \
        ("_k", "store", "out", n, n, 1, False)
    assert isinstance(info.value.__cause__, OutOfBoundsAccess) and info.value.__cause__.violation is v


def test_violation_is_caught_before_memory_is_touched():
    n = 341
    buf = torch.full((n + 16,), -1.0)
    out = buf[:n]                                  # the storage goes on past the view
    x = torch.ones(n)
    with bounds_checking() as bc:
        with pytest.raises(InterpreterError):
            _copy(x, out, n, 5, 64)
    (v,) = bc.violations
    assert v.inside_storage and v.offset_elements == n and v.lanes == 5
    assert "inside the tensor's storage but outside the view" in v.message()
    assert bool((buf[n:] == -1).all())              # the bad store never happened
    # without a checker the same kernel silently writes (the load's other=0.0) past the view
    _copy(x, out, n, 5, 64)
    assert buf[n:n + 6].tolist() == [0.0] * 5 + [-1.0]


def test_load_before_the_start():
    x = torch.randn(41)
    out = torch.empty(41)
    with bounds_checking() as bc:
        with pytest.raises(InterpreterError):
            _shifted_load[(1,)](x, out, 41, SHIFT=-1, BLOCK=64)
    (v,) = bc.violations
    assert (v.access, v.tensor, v.offset_elements, v.lanes) == ("load", "x_ptr", -1, 1)


def test_atomic_rmw_and_cas_out_of_bounds():
    x = torch.ones(9)
    acc = torch.zeros(2)
    with bounds_checking() as bc:
        _atomic_kernel[(1,)](acc, x, 9, SLOT=1, BLOCK=16)        # in bounds
        assert acc.tolist() == [0.0, 9.0]
        with pytest.raises(InterpreterError):
            _atomic_kernel[(1,)](acc, x, 9, SLOT=2, BLOCK=16)
        lock = torch.zeros(1, dtype=torch.int32)
        with pytest.raises(InterpreterError):
            _cas_kernel[(1,)](lock, SLOT=3)
    first, second = bc.violations
    assert (first.access, first.tensor, first.offset_elements, first.extent_elements) == ("atomic", "acc_ptr", 2, 2)
    assert (second.access, second.tensor, second.offset_elements) == ("atomic", "lock_ptr", 3)
    assert acc.tolist() == [0.0, 9.0] and lock.tolist() == [0]


def test_pointer_into_no_argument_reports_nearest_tensor():
    a = torch.randn(9)
    out = torch.empty(9)
    with bounds_checking() as bc:
        with pytest.raises(InterpreterError):
            _shifted_load[(1,)](a, out, 9, SHIFT=1 << 30, BLOCK=16)
    (v,) = bc.violations
    assert v.tensor == "x_ptr" and not v.inside_storage and v.lanes == 9
    assert abs(v.offset_elements) > 1 << 29


def test_reading_past_x_into_its_neighbour_y_is_caught():
    buf = torch.arange(128, dtype=torch.float32)
    x, y = buf[:41], buf[41:82]                     # y starts right where x ends
    out = torch.empty(1)
    with bounds_checking() as bc:
        _sum_both[(1,)](x, y, out, READ_X=41, NY=41, BLOCK=64)
        assert out.item() == float(buf[:82].sum()) and bc.violations == []
        with pytest.raises(InterpreterError):
            _sum_both[(1,)](x, y, out, READ_X=45, NY=41, BLOCK=64)   # x[41:45] is y[0:4]
    (v,) = bc.violations
    assert (v.access, v.tensor, v.offset_elements, v.lanes) == ("load", "x_ptr", 41, 4)
    assert v.inside_storage and v.lands_in == "y_ptr"
    assert v.message().endswith("the address lies inside argument y_ptr")


def test_pointers_chosen_by_where_from_two_arguments_are_clean():
    x, y = torch.randn(41), torch.randn(9)
    out = torch.empty(64)
    with bounds_checking() as bc:
        _concat[(1,)](x, y, out, 41, 9, BLOCK=64)
    assert bc.violations == [] and torch.equal(out[:50], torch.cat([x, y]))


def test_strided_views_are_checked_against_their_span():
    base = torch.randn(12, 10)
    x = base[1:10:2, 1:9]                           # strides (20, 1), offset 11
    m, n = x.shape
    out = torch.empty(m, n)
    with bounds_checking() as bc:
        _tile_copy[(1, 1)](x, out, m, n, x.stride(0), x.stride(1), BM=8, BN=8)
        assert torch.equal(out, x)
        with pytest.raises(InterpreterError):       # wrong row stride: reads past the view's span
            _tile_copy[(1, 1)](x, out, m, n, x.stride(0) + 2, x.stride(1), BM=8, BN=8)
    (v,) = bc.violations
    assert v.tensor == "x_ptr" and v.inside_storage and v.extent_elements == (m - 1) * 20 + n


def test_tensor_descriptor_claiming_more_rows_than_it_has():
    base = torch.arange(256, dtype=torch.float32).reshape(16, 16)
    desc = TensorDescriptor(base, shape=[32, 16], strides=[16, 1], block_shape=[16, 16])
    out = torch.empty(16, 16)
    with bounds_checking() as bc:
        _desc_copy[(1,)](desc, out, ROW=0)
        assert torch.equal(out, base) and bc.violations == []
        with pytest.raises(InterpreterError):
            _desc_copy[(1,)](desc, out, ROW=16)
    (v,) = bc.violations
    assert (v.access, v.tensor, v.offset_elements, v.lanes) == ("load", "desc", 256, 256)


def test_nested_checkers_both_record():
    x = torch.randn(9)
    out = torch.empty(9)
    with bounds_checking() as outer:
        with bounds_checking() as inner:
            with pytest.raises(InterpreterError):
                _copy(x, out, 9, 1, 16)
        _copy(x, out, 9, 0, 16)
    assert len(inner.violations) == 1 and outer.violations == inner.violations


# ----------------------------------------------------------------------------------------------
# guard regions: the canaries every input is built inside (harness.tensors), which catch stray
# writes where the interpreter's checks do not run (the GPU)
# ----------------------------------------------------------------------------------------------

def _guarded(n: int, layout: str = "contiguous", param: int = 0) -> torch.Tensor:
    return materialize(TensorCase((n,), "float32", layout, param, "normal", 7, ""))


def test_kernel_writing_past_the_end_is_caught_by_the_canary():
    n = 341
    x = torch.randn(n)
    out = _guarded(n)
    assert tensor_guards_intact(out) is None
    _copy(x, out, n, 3, 128)                        # no bounds checking: the writes land in the guard
    assert torch.equal(out, x)
    assert tensor_guards_intact(out) == "3 element(s) after the tensor overwritten (first at element offset 341)"


def test_writes_into_the_gap_before_an_offset_view_are_caught():
    g = _guarded(9, "offset", 4)                    # 1 + 4 % 63 = 5 canary elements between guard and view
    assert g.storage_offset() == GUARD_ELEMENTS + 5
    raw = torch.empty(0).set_(g.untyped_storage())
    raw[GUARD_ELEMENTS + 3] = 1.0
    assert tensor_guards_intact(g) == "1 element(s) before the tensor overwritten (first at element offset -2)"
