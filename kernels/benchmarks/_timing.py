"""Shared timing helpers for the GPU benchmarks: latency stats, measured copy bandwidth, tables.

Times come from ``triton.testing.do_bench`` (CUDA events, L2 flushed between
runs).  The roofline denominator is the device-to-device copy bandwidth
measured in the same process, so efficiency figures compare like with like.
"""
from __future__ import annotations

import datetime
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


def copy_bandwidth_gbps(nbytes: int = 2 * 2**30) -> float:
    """Device copy bandwidth (read + write bytes / time) measured with a large ``copy_``."""
    n = nbytes // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    t = bench(lambda: dst.copy_(src), rep_ms=200)
    del src, dst
    return 2 * n * 4 / (t.median_ms * 1e-3) / 1e9


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
