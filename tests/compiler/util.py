"""Helpers shared by the compiler tests: compile-and-compare, golden files."""
from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Callable

import torch

from tritondiff import compiler

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "golden")


def flat(value: Any) -> list:
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out.extend(flat(v))
        return out
    return [value]


def assert_same(got: Any, want: Any, *, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Same structure, shapes and dtypes; values close (exact for ints/bools, NaN == NaN)."""
    got, want = flat(got), flat(want)
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, torch.Tensor):
            assert g == w, f"output {i}: {g!r} != {w!r}"
            continue
        assert isinstance(g, torch.Tensor), f"output {i}: {type(g).__name__}, expected a tensor"
        assert g.shape == w.shape, f"output {i}: shape {tuple(g.shape)} != {tuple(w.shape)}"
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} != {w.dtype}"
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"output {i}: {m}")


@contextlib.contextmanager
def reaches_compiler(graphs: int = 1):
    """Fail unless at least ``graphs`` graphs reach the compiler inside the block.

    Dynamo runs a function eagerly without a word when it cannot trace it (or has given up on
    it): a compile-and-compare test would then compare eager with eager and pass.
    """
    before = compiler.counters["graphs_compiled"]
    yield
    got = compiler.counters["graphs_compiled"] - before
    assert got >= graphs, (f"{graphs} graph(s) should have reached the compiler, {got} did: dynamo ran the "
                           f"function eagerly, so the result says nothing about the compiler")


def run_compiled(fn: Callable, *args: Any, **compile_kwargs: Any) -> Any:
    """``fn(*args)`` compiled afresh; fails if no graph reached the compiler."""
    torch._dynamo.reset()
    with reaches_compiler():
        return compiler.compile(fn, **compile_kwargs)(*args)


def check(fn: Callable, *args: Any, rtol: float = 1e-5, atol: float = 1e-5, **compile_kwargs: Any) -> Any:
    """Compile ``fn``, run it on ``args`` and compare with eager; returns the compiled output.

    Fails if no graph reached the compiler (``run_compiled``)."""
    want = fn(*args)
    got = run_compiled(fn, *args, **compile_kwargs)
    assert_same(got, want, rtol=rtol, atol=atol)
    return got


def kernel_sources(text: str) -> list[str]:
    """The generated ``@triton.jit`` kernels of a module, prelude helpers left out."""
    parts = re.split(r"\n(?=@triton.jit\n)", text)
    return [p.strip() + "\n" for p in parts if p.startswith("@triton.jit\ndef ") and "def _td_" not in p]


def normalize(source: str) -> str:
    """Golden-file form: graph ids and cache paths removed."""
    source = re.sub(r"\bg\d+_(forward|backward|inference)_\d+", r"G_\1", source)
    return re.sub(r"/[^\s'\"]*tritondiff-compiler[^\s'\"]*", "<cache>", source)


def assert_golden(name: str, text: str) -> None:
    """Compare with tests/compiler/golden/<name>; EXPECTTEST_ACCEPT=1 writes (or rewrites) the file.

    A missing golden file is a failure, never silently created: a test that writes its own
    expectation and passes proves nothing.
    """
    path = os.path.join(GOLDEN_DIR, name)
    text = normalize(text)
    if os.environ.get("EXPECTTEST_ACCEPT", "0") not in ("", "0"):
        os.makedirs(GOLDEN_DIR, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return
    if not os.path.exists(path):
        raise AssertionError(f"golden file {path} is missing; run this test with EXPECTTEST_ACCEPT=1 to create "
                             f"it, check the generated source in it, and commit it")
    with open(path) as f:
        expected = f.read()
    assert text == expected, (f"generated source differs from {path}; if the change is intended, rerun with "
                              f"EXPECTTEST_ACCEPT=1\n--- got ---\n{text}")


def trace_meta(fn: Callable, *args: Any) -> torch.fx.GraphModule:
    """An ATen graph of ``fn`` traced on (meta) tensors with the compiler's decompositions."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from tritondiff.compiler.decompositions import decomposition_table
    return make_fx(fn, decomposition_table=decomposition_table())(*args)


def assert_oracle(got: Any, eager: Any, truth: Any) -> None:
    """The harness oracle: as right as eager is, judged against a float64 truth."""
    from tritondiff.harness.oracle import compare
    result = compare(got, eager, truth)
    assert result.passed, f"{result.failure_class}: {result.message}"


def seeded_randn(*shape: int, seed: int) -> torch.Tensor:
    """Normal values fixed by ``seed`` (drawn on CPU), on the kernel device."""
    from tritondiff.base import device
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, device="cpu").to(device.torch_device())
