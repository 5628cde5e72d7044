"""Shared timing helpers for the GPU benchmarks: latency stats, measured copy bandwidth, tables.

Times come from ``triton.testing.do_bench`` (CUDA events, L2 flushed between
runs).  The roofline denominator is the device-to-device copy bandwidth
measured in the same process, so efficiency figures compare like with like.
"""
from __future__ import annotations

import datetime
import time
import platform
import statistics
import sys
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch


def require_gpu(script: str) -> bool:
    """Print a notice and return False when no CUDA device is present."""
    if torch.cuda.is_available():
        return True
    print(f"{script}: no CUDA device here; this benchmark measures GPU kernels and only runs on a GPU machine.")
    return False


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float


def bench(fn: Callable[[], object], *, warmup_ms: int = 25, rep_ms: int = 100) -> Timing:
    """Median / min / max latency of ``fn`` in milliseconds."""
    import triton.testing

    times = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    return Timing(statistics.median(times), min(times), max(times))


def interleaved_us(cases: dict[str, Callable[[], object]], rounds: int, *, rep_ms: int = 200) -> dict[str, list[float]]:
    """Each case's median latency in microseconds, once per round, the cases taking turns within a round: a
    machine that drifts (clocks, heat) moves every case alike instead of the last ones."""
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for k, fn in cases.items():
            times[k].append(bench(fn, rep_ms=rep_ms).median_ms * 1e3)
    return times


def interleaved_report(times: dict[str, list[float]], *, base: str, nbytes: int, copy_gbps: float,
                       checks: dict[str, str], digits: int = 2, check_header: str = "check") -> str:
    """The table of an ``interleaved_us`` run: each case's median of its rounds' medians, their range, its speed
    against case ``base``, its share of ``copy_gbps`` at ``nbytes`` moved, and ``checks[case]`` (or nothing)."""
    ref = statistics.median(times[base])
    rows = []
    for k, ts in times.items():
        med = statistics.median(ts)
        rows.append((k, f"{med:.{digits}f}", f"{min(ts):.{digits}f}-{max(ts):.{digits}f}", f"{ref / med:.4f}",
                     f"{nbytes / (med * 1e-6) / 1e9 / copy_gbps:.1%}", checks.get(k, "")))
    rounds = len(times[base])
    return (f"copy bandwidth {copy_gbps:.0f} GB/s; {rounds} interleaved rounds, median of the rounds' medians\n\n"
            + markdown_table(["kernel", "us", "range", f"vs {base}", "% copy BW", check_header], rows))


def registers(fn, skip: set = frozenset()) -> str:
    """Registers and spills of each compiled variant of ``fn`` (a ``triton.jit`` function) whose id is not in
    ``skip``, as "N regs, M spilled; ..."."""
    return "; ".join(f"{c.n_regs} regs, {c.n_spills} spilled" for c in compiled_of(fn) if id(c) not in skip)


def copy_bandwidth_gbps(nbytes: int = 2 * 2**30) -> float:
    """Device copy bandwidth (read + write bytes / time) measured with a large ``copy_``."""
    n = nbytes // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    t = bench(lambda: dst.copy_(src), rep_ms=200)
    del src, dst
    return 2 * n * 4 / (t.median_ms * 1e-3) / 1e9


def compiled_kernels(seen: set) -> list[tuple[str, int, int, int]]:
    """(name, registers per thread, spilled registers, shared memory bytes) of every Triton kernel
    compiled in this process and not in ``seen`` (ids, updated): what a kernel's speed hinges on
    besides its bytes -- a spill or a shared-memory pipeline shows here, not in its source."""
    import gc

    from triton.runtime.jit import JITFunction

    def is_jit(o) -> bool:
        try:
            return isinstance(o, JITFunction)
        except ReferenceError:          # a dead weak proxy among the collector's objects
            return False

    out = []
    for fn in [o for o in gc.get_objects() if is_jit(o)]:
        for compiled in compiled_of(fn):
            if id(compiled) not in seen:
                seen.add(id(compiled))
                out.append((compiled.name, compiled.n_regs, compiled.n_spills, compiled.metadata.shared))
    return out


def compiled_of(fn) -> list:
    """The compiled kernels a ``triton.jit`` function holds (its per-device caches)."""
    out = []
    for entry in getattr(fn, "device_caches", {}).values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        out += [c for c in (cache.values() if isinstance(cache, dict) else ()) if hasattr(c, "n_regs")]
    return out


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def environment() -> dict:
    """Device, driver and library versions for the header of a published table."""
    import triton

    info = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(device=props.name, sm=f"{props.major}{props.minor}", sms=props.multi_processor_count,
                    cuda=torch.version.cuda, driver=_driver_version())
    return info


def _driver_version() -> str:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0]
    except Exception:  # nvidia-smi missing: the table still prints
        return "unknown"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Render rows as a GitHub Markdown table (floats to 3 decimals)."""
    def cell(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def print_header(title: str) -> None:
    env = environment()
    print(f"## {title}\n")
    print(", ".join(f"{k}: {v}" for k, v in env.items()))
    print()
    sys.stdout.flush()


@dataclass
class Breakdown:
    """Where one call's time goes: the host enqueueing it, and the GPU kernels it launches."""

    latency_ms: float          # do_bench median (L2 flushed): what a caller waits for
    host_ms: float             # wall time to enqueue one call, GPU never waited on
    gpu_ms: float              # sum of the call's kernel durations (profiler)
    launches: float            # kernels per call
    kernels: list[tuple[str, float, float]]  # (name, launches per call, ms per call), slowest first


def host_ms(fn: Callable[[], object], *, iters: int = 30) -> float:
    """Wall time to enqueue one call of ``fn``, the GPU never waited on (after 3 warm-up calls)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed * 1e3 / iters


def kernel_times(fn: Callable[[], object], *, iters: int = 30) -> list[tuple[str, float, float]]:
    """(kernel name, launches per call, GPU ms per call) of ``fn``'s kernels (torch.profiler), slowest first."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    per_kernel: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time_total > 0:
            entry = per_kernel.setdefault(ev.name, [0.0, 0.0])
            entry[0] += 1
            entry[1] += ev.device_time_total / 1e3
    return sorted(((name[:90], n / iters, ms / iters) for name, (n, ms) in per_kernel.items()), key=lambda k: -k[2])


def gpu_ms(fn: Callable[[], object], *, iters: int = 20) -> float:
    """GPU time of one call of ``fn``: its kernels' summed durations (``kernel_times``)."""
    return sum(k[2] for k in kernel_times(fn, iters=iters))


def breakdown(fn: Callable[[], object], *, iters: int = 30) -> Breakdown:
    """Latency, host time and per-kernel GPU time of ``fn`` (a CUDA callable)."""
    host = host_ms(fn, iters=iters)
    kernels = kernel_times(fn, iters=iters)
    return Breakdown(bench(fn).median_ms, host, sum(k[2] for k in kernels), sum(k[1] for k in kernels), kernels)
