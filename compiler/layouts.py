"""Reading a compiled kernel's register layouts (its TTGIR): does any thread share an element with another?

A kernel whose correctness needs each element of some loads held by one thread alone -- the tagged split
reduction's poll, whose count and sum must read the same load of a slot (``codegen.reduction``,
``KernelSpec.meta["owned_loads"]``) -- is generated with a tile at least as large as its threads, so that
Triton's coalescing covers it without copies.  That is Triton's choice, not ours, so the runtime checks the
layout Triton gave each such load once per compiled kernel (``Executable._check_owned``), and the tests check
it for the GPU targets without a GPU (``triton.compile`` to a ``GPUTarget``).

A blocked layout gives each dimension ``sizePerThread x threadsPerWarp x warpsPerCTA`` elements per pass; where
that exceeds the tensor's extent, the layout wraps and several threads hold the same element.
"""
from __future__ import annotations

import re

_BLOCKED = re.compile(r"^\s*#(\w+)\s*=\s*#ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], "
                      r"threadsPerWarp = \[([\d, ]+)\], warpsPerCTA = \[([\d, ]+)\]")
_VOLATILE_LOAD = re.compile(r"tt\.load .*isVolatile = true.*?: tensor<([\dx]+)x!tt\.ptr<\w+>, #(\w+)>")


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


def shared_volatile_loads(ttgir: str) -> list[str]:
    """The volatile loads of ``ttgir`` whose elements some threads share (or whose layout is not a blocked one
    this reads), each as "tensor shape under layout (covers ...)"; empty when every such element has one owner.
    A kernel with ``owned_loads`` and no volatile load is reported too: its poll was not found."""
    layouts = blocked_layouts(ttgir)
    problems, found = [], 0
    for line in ttgir.splitlines():
        m = _VOLATILE_LOAD.search(line)
        if not m:
            continue
        found += 1
        shape, name = [int(v) for v in m.group(1).split("x")], m.group(2)
        cover = layouts.get(name)
        if cover is None:
            problems.append(f"a volatile load of {m.group(1)} under #{name}, not a blocked layout read here")
        elif len(cover) != len(shape) or any(c > s for c, s in zip(cover, shape)):
            problems.append(f"a volatile load of {m.group(1)} under #{name}, which covers "
                            f"{'x'.join(map(str, cover))}: threads share its elements")
    if not found:
        problems.append("no volatile load found in the kernel's TTGIR")
    return problems


__all__ = ["blocked_layouts", "shared_volatile_loads"]
