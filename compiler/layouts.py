"""Reading a compiled kernel's register layouts (its TTGIR): does any thread share an element with another?

A kernel whose correctness needs each element of some loads held by one thread alone -- the tagged split
reduction's poll, whose count and sum must read the same load of a slot (``codegen.reduction``,
``KernelSpec.meta["owned_loads"]``) -- is generated with a tile at least as large as its threads, so that
Triton's coalescing covers it without copies.  That is Triton's choice, not ours, so the runtime checks each
compiled kernel before its first launch (``Executable._owned_gate`` / ``_check_owned``), and the tests check
the generated kernels for the GPU targets without a GPU (``triton.compile`` to a ``GPUTarget``).

A blocked layout gives each dimension ``sizePerThread x threadsPerWarp x warpsPerCTA`` elements per pass; where
that exceeds the tensor's extent, the layout wraps and several threads hold the same element.  A linear layout
maps each bit of a thread's lane and warp to a step in the tensor; a zero step is a broadcast.  Triton may also
load a tensor once per layout its users want (rematerialisation): the kernel says how many volatile loads its
source has, and any other count is reported.
"""
from __future__ import annotations

import re
from typing import Optional

_BLOCKED = re.compile(r"^\s*#(\w+)\s*=\s*#ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], "
                      r"threadsPerWarp = \[([\d, ]+)\], warpsPerCTA = \[([\d, ]+)\]")
_LINEAR = re.compile(r"^\s*#(\w+)\s*=\s*#ttg\.linear<\{(.*)\}>")
_BASES = re.compile(r"\b(lane|warp) = \[((?:\[[\d, ]*\],? ?)*)\]")
_TENSOR = re.compile(r":\s*tensor<([\dx]+)x!tt\.ptr<\w+>, #(\w+)>")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def blocked_layouts(ttgir: str) -> dict[str, list[int]]:
    """Each blocked layout's name -> the elements one pass of it covers per dimension."""
    out = {}
    for line in ttgir.splitlines():
        m = _BLOCKED.match(line)
        if m:
            out[m.group(1)] = [a * b * c for a, b, c in zip(_ints(m.group(2)), _ints(m.group(3)), _ints(m.group(4)))]
    return out


def linear_layouts(ttgir: str) -> dict[str, bool]:
    """Each linear layout's name -> whether some lane or warp basis is zero: threads that differ only in that
    bit hold the same elements (a broadcast)."""
    out = {}
    for line in ttgir.splitlines():
        m = _LINEAR.match(line)
        if m:
            bases = [v for _, text in _BASES.findall(m.group(2)) for v in re.findall(r"\[([\d, ]*)\]", text)]
            out[m.group(1)] = any(not any(_ints(v)) for v in bases if v.strip())
    return out


def shared_volatile_loads(ttgir: str, expected: Optional[int] = None) -> list[str]:
    """What keeps the volatile loads of ``ttgir`` from each giving an element to one thread alone, once: a load
    whose layout several threads share an element under, one whose layout is not a blocked or linear layout
    named in the module (an inline one, which this does not read), and, where ``expected`` loads were written,
    any other count (Triton rematerialises a load per consumer layout, and two loads of a slot can see
    different flags).  Empty when there is nothing to say."""
    blocked, linear = blocked_layouts(ttgir), linear_layouts(ttgir)
    problems, found = [], 0
    for line in ttgir.splitlines():
        if "isVolatile = true" not in line or "tt.load" not in line:
            continue
        found += 1
        m = _TENSOR.search(line)
        if not m:
            problems.append(f"a volatile load whose type and layout are not read here: {line.strip()[:160]}")
            continue
        shape, name = [int(v) for v in m.group(1).split("x")], m.group(2)
        if name in linear:
            if linear[name]:
                problems.append(f"a volatile load of {m.group(1)} under #{name}, a linear layout with a zero lane "
                                f"or warp basis: threads share its elements")
            continue
        cover = blocked.get(name)
        if cover is None:
            problems.append(f"a volatile load of {m.group(1)} under #{name}, not a blocked or linear layout")
        elif len(cover) != len(shape) or any(c > n for c, n in zip(cover, shape)):
            problems.append(f"a volatile load of {m.group(1)} under #{name}, which covers "
                            f"{'x'.join(map(str, cover))}: threads share its elements")
    if not found:
        problems.append("no volatile load found in the kernel's TTGIR")
    elif expected is not None and found != expected:
        problems.append(f"{found} volatile loads where the source has {expected}: Triton duplicated a load")
    return problems


__all__ = ["blocked_layouts", "linear_layouts", "shared_volatile_loads"]
