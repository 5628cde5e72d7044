"""Compile a graph's kernels side by side, all at once, before their first launch.

Triton compiles a ``@triton.jit`` kernel at its first launch, in the launching thread: a model block's
forward and backward graphs hold 20-50 kernels, compiled one after another.  Once a graph is generated
(``compiler.pipeline``) every kernel it may launch is known -- its source, its arguments' dtypes, its grid,
warps and stages, and each autotune candidate's -- so :func:`start` hands them to a pool of
``config.compile_workers`` threads, which compile them through Triton's own ``JITFunction.warmup`` with
dtypes standing in for tensors (``MockTensor``: aligned pointers, as the runtime's buffers are).  Triton's
passes run in C++ and ``ptxas`` in a subprocess, so compiles overlap; a thread pool starts at once (a pool
of processes would import torch and Triton in each worker first, longer than the compiles it saves on a
model block).  A compiled kernel is kept in the JIT function's own cache and in Triton's on-disk cache
(keyed by the kernel's source, its specialisation, the options, the GPU and the versions).  A launch waits
for its own kernel's job only (:meth:`Jobs.wait`); the others go on compiling, and a graph's jobs overlap
the compilation of the next graph (AOTAutograd's backward).

Nothing here decides what runs: a job that fails, or a launch whose specialisation differs from the
stand-in's (an input whose data pointer is not 16-byte aligned), only means the launch compiles its
kernel itself, as without the pool, and reports any error there.  The on-disk cache makes a new process
(a restarted job, the next CI run) start warm.
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
import types
from typing import Iterable, Optional

from tritondiff.base import device as _device

from .config import config
from .counters import counters


def enabled() -> bool:
    """Kernels are compiled (a GPU, not the interpreter) and more than one thread is asked for.  A CUDA device
    must be present: the jobs compile for the launching thread's current one (code generated for a GPU target
    on a machine without one, to read its source, compiles nothing)."""
    if config.compile_workers <= 1 or _device.is_interpreter():
        return False
    import torch

    return torch.cuda.is_available()


class Jobs:
    """One executable's compile jobs, by launch key (kernel name, warps, stages)."""

    def __init__(self, futures: dict[tuple, concurrent.futures.Future]):
        self.futures = futures

    def wait(self, key: tuple) -> None:
        """Block until the job of ``key`` is done (nothing when there is none); its failure is not raised:
        the launch then compiles the kernel itself and reports what goes wrong there."""
        future = self.futures.pop(key, None)
        if future is None:
            return
        start = time.perf_counter()
        try:
            future.result()
            counters["parallel_compile.done"] += 1
        except Exception:  # noqa: BLE001 - the launch compiles it in this process and raises its own error
            counters["parallel_compile.failed"] += 1
        counters["parallel_compile.waited_us"] += int((time.perf_counter() - start) * 1e6)

    def wait_all(self) -> None:
        for key in list(self.futures):
            self.wait(key)


def start(module: types.ModuleType, launches: Iterable[tuple[tuple, str, tuple[str, ...], tuple, dict]]
          ) -> Optional[Jobs]:
    """Submit one job per ``(key, kernel, argument dtypes, grid, options)`` of the generated ``module``; None
    when the pool is off.  ``argument dtypes`` are torch dtype names (``"float32"``), one per argument."""
    if not enabled():
        return None
    import torch

    pool = _pool()
    device = torch.cuda.current_device()
    futures = {}
    for key, kernel, dtypes, grid, options in launches:
        if key not in futures:
            # the JIT function's per-device caches are made here, on the launching thread: made lazily by two
            # jobs at once (autotune variants share a function), one compiled kernel would land in a cache
            # nobody reads and its launch would compile it again
            caches = getattr(getattr(module, kernel), "device_caches", None)
            if caches is not None:
                _ = caches[device]                # a defaultdict: made by this lookup
            futures[key] = pool.submit(_compile, module, kernel, tuple(dtypes), tuple(grid), dict(options), device)
            counters["parallel_compile.submitted"] += 1
    return Jobs(futures)


# ---------------------------------------------------------------------------------------------- the pool

_POOL: Optional[concurrent.futures.ThreadPoolExecutor] = None
_POOL_WORKERS = 0
_LOCK = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's pool, made at first use with ``config.compile_workers`` threads (made again when the
    knob changes)."""
    global _POOL, _POOL_WORKERS
    with _LOCK:
        if _POOL is None or _POOL_WORKERS != config.compile_workers:
            if _POOL is not None:
                _POOL.shutdown(wait=False)
            _POOL_WORKERS = config.compile_workers
            _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=_POOL_WORKERS,
                                                          thread_name_prefix="tritondiff-compile")
        return _POOL


def _compile(module: types.ModuleType, kernel: str, dtypes: tuple[str, ...], grid: tuple, options: dict,
             device: int) -> float:
    """Compile ``kernel`` of ``module`` for arguments of ``dtypes`` into its JIT cache for ``device`` (the
    launching thread's: a thread's current CUDA device is its own); its seconds."""
    import torch

    torch.cuda.set_device(device)
    start = time.perf_counter()
    getattr(module, kernel).warmup(*[getattr(torch, d) for d in dtypes], grid=grid, **options)
    return time.perf_counter() - start
