"""Make ``triton.autotune`` run, and be checkable, under the interpreter.

What it catches
---------------
Autotuning runs a kernel once per candidate config (and several times per
config) on the caller's real arguments before the real launch.  A kernel that
accumulates into its output (``tl.atomic_add`` without ``reset_to_zero``) or
updates in place (without ``restore_value``) returns a multiple of the truth
on the call that tuned, and the truth on later calls that reuse the choice.
To see that on CPU the real trials have to run: under the interpreter
Triton's autotuner asks for a GPU benchmarker and fails ("0 active drivers").

How
---
``install_cpu_benchmarker()`` replaces ``Autotuner.do_bench`` (a class-level
property lookup) with a CPU benchmarker that times each trial with
``time.perf_counter``; the autotuner's own ``run``/``_bench``/hooks run
unchanged, so ``reset_to_zero``, ``restore_value``, ``pre_hook`` and
``prune_configs_by`` behave as they do on a GPU.  ``tuning_watch()`` wraps
``Autotuner.run``/``_bench`` to record, per tuner, the trials it ran, the
config each call used and whether a call reused an earlier choice.
``clear_caches()`` forgets tuned choices (and switches the disk cache off) so
the next call tunes again; ``forced_config()`` runs one exact config without
benchmarking.  On CUDA the real benchmarker is left alone.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import threading
import time
import weakref
from typing import Any, Iterable, Iterator

import numpy as np

from tritondiff.base import device
from .exc import UsageError
from .launches import base_function, patch_method

from triton.runtime.autotuner import Autotuner  # noqa: E402

__all__ = ["install_cpu_benchmarker", "cpu_benchmark", "live_autotuners", "clear_caches", "TunerStats",
           "TuningWatch", "tuning_watch", "forced_config", "describe", "find_autotuner"]


# --------------------------------------------------------------------------------------------
# CPU benchmarker
# --------------------------------------------------------------------------------------------

_cpu_reps = 2


def _summarize(times_ms: list[float], quantiles, return_mode: str):
    """What ``triton.testing.do_bench`` returns for these times (same contract)."""
    data = np.asarray(times_ms, dtype=np.float64)
    if quantiles is not None:
        values = [float(np.quantile(data, q)) for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return [float(t) for t in data]
    reducer = {"min": np.min, "max": np.max, "mean": np.mean, "median": np.median}.get(return_mode)
    if reducer is None:
        raise UsageError(f"return_mode={return_mode!r}: use min, max, mean, median or all")
    return float(reducer(data))


def cpu_benchmark(fn, warmup=None, rep=None, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Time ``fn`` on the CPU: ``reps`` runs (see ``install_cpu_benchmarker``), milliseconds.

    ``warmup`` and ``rep`` (GPU time budgets in ms) are accepted and ignored:
    interpreted kernels are slow and every run is a real trial.
    """
    times = []
    for _ in range(_cpu_reps):
        for tensor in grad_to_none or ():
            tensor.grad = None
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return _summarize(times, quantiles, return_mode)


def _cpu_do_bench(self):
    return cpu_benchmark


def install_cpu_benchmarker(*, reps: int = 2) -> None:
    """Let ``triton.autotune`` tune under the interpreter, timing each trial on the CPU.

    Idempotent (a second call only changes ``reps``, the runs per config).
    Under the interpreter every autotuner, including one with its own
    ``do_bench`` (which would need a GPU), uses the CPU benchmarker.  No-op on
    CUDA.  Kernel authors change nothing.
    """
    global _cpu_reps
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise UsageError(f"install_cpu_benchmarker(reps={reps!r}): pass an int >= 1")
    _cpu_reps = reps
    if not device.is_interpreter():
        return
    current = Autotuner.__dict__.get("do_bench")
    if getattr(current, "fget", None) is _cpu_do_bench:
        return
    Autotuner.do_bench = property(_cpu_do_bench, doc="CPU benchmarker installed by harness.autotuning")


# --------------------------------------------------------------------------------------------
# Finding and resetting autotuners
# --------------------------------------------------------------------------------------------

_seen: "weakref.WeakSet[Autotuner]" = weakref.WeakSet()
_scanned = False


def _register_factory(original):
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _seen.add(self)
    return __init__


# Tuners created from now on register themselves; live_autotuners() finds older ones once, with gc.
patch_method(Autotuner, "__init__", "tritondiff.autotuning.registry", _register_factory)


def find_autotuner(kernel: Any) -> Autotuner | None:
    """The ``Autotuner`` under ``kernel`` (itself, or inside ``triton.heuristics``), or None."""
    obj = kernel
    for _ in range(16):
        if isinstance(obj, Autotuner):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def _require_tuner(tuner: Any, where: str) -> Autotuner:
    found = find_autotuner(tuner)
    if found is None:
        raise UsageError(f"{where}: {tuner!r} is not a triton.autotune kernel; pass the object "
                         f"@triton.autotune returned")
    return found


def live_autotuners() -> list[Autotuner]:
    """Every ``Autotuner`` instance alive in this process.

    The first call scans the heap (``gc``) for tuners made before this module
    was imported; later ones registered themselves, so later calls are cheap.
    """
    global _scanned
    if not _scanned:
        for obj in gc.get_objects():
            if issubclass(type(obj), Autotuner):  # type(): never trips a lazy object's __class__
                _seen.add(obj)
        _scanned = True
    return list(_seen)


def clear_caches(tuners: Iterable[Any] | None = None) -> None:
    """Forget tuned choices so the next call of each tuner benchmarks again.

    Also switches off the tuner's on-disk cache (``cache_results``), which
    would otherwise hand back a stored choice without running the trials.
    ``tuners`` defaults to every live autotuner.
    """
    if tuners is None:
        targets = live_autotuners()
    else:
        if isinstance(tuners, Autotuner) or not hasattr(tuners, "__iter__"):
            raise UsageError("clear_caches(tuners=...) takes an iterable of autotuned kernels (or None for all)")
        targets = [_require_tuner(t, "clear_caches") for t in tuners]
    for tuner in targets:
        cache = getattr(tuner, "cache", None)
        if isinstance(cache, dict) or callable(getattr(cache, "clear", None)):
            cache.clear()
        # else a library's own cache type (flag-gems' LibTuner keeps a ConfigCache, with no way to empty it):
        # left as it is -- that tuner's choices are not forgotten, and no example fails for it
        tuner.cache_results = False


def describe(tuner: Any) -> str:
    """The kernel name to use in messages about ``tuner`` (any kernel object works)."""
    fn = base_function(tuner)
    return fn.__name__ if fn is not None else type(tuner).__name__


# --------------------------------------------------------------------------------------------
# Watching tuning
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class TunerStats:
    """What one autotuner did while a watch was active."""
    name: str
    calls: int = 0
    tuning_calls: int = 0         # calls that ran benchmark trials
    cached_calls: int = 0         # calls of a multi-config tuner that reused an earlier choice
    trials: list = dataclasses.field(default_factory=list)   # str(config) of every trial, in order
    chosen: list = dataclasses.field(default_factory=list)   # str(config) used by each call (None: failed)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class TuningWatch:
    """``with tuning_watch() as w: ...`` then ``w.tuned``, ``w.used``, ``w.stats(tuner)``."""

    def __init__(self) -> None:
        self._stats: dict[int, tuple[Autotuner, TunerStats]] = {}

    def __enter__(self) -> "TuningWatch":
        _install_watch_hooks()
        _watches.append(self)
        return self

    def __exit__(self, *exc) -> None:
        for i in range(len(_watches) - 1, -1, -1):
            if _watches[i] is self:
                del _watches[i]
                break

    def _entry(self, tuner: Autotuner) -> TunerStats:
        entry = self._stats.get(id(tuner))
        if entry is None:
            entry = self._stats[id(tuner)] = (tuner, TunerStats(describe(tuner)))
        return entry[1]

    @property
    def used(self) -> list[Autotuner]:
        """Tuners called while watching, in order of first call."""
        return [t for t, s in self._stats.values() if s.calls]

    @property
    def tuned(self) -> list[Autotuner]:
        """Tuners that ran benchmark trials while watching."""
        return [t for t, s in self._stats.values() if s.tuning_calls]

    def stats(self, tuner: Any) -> TunerStats:
        tuner = _require_tuner(tuner, "TuningWatch.stats")
        entry = self._stats.get(id(tuner))
        return entry[1] if entry else TunerStats(describe(tuner))

    def to_json(self) -> list[dict]:
        return [s.to_json() for _, s in self._stats.values()]


def tuning_watch() -> TuningWatch:
    return TuningWatch()


_watches: list[TuningWatch] = []
_tls = threading.local()


def _trial_counters() -> list[list[int]]:
    counters = getattr(_tls, "counters", None)
    if counters is None:
        counters = _tls.counters = []
    return counters


def _watch_run_factory(original):
    def run(self, *args, **kwargs):
        _seen.add(self)
        if not _watches:
            return original(self, *args, **kwargs)
        counters = _trial_counters()
        counters.append([0])
        keys_before = set(self.cache) if isinstance(getattr(self, "cache", None), dict) else set()
        chosen = None
        try:
            result = original(self, *args, **kwargs)
            chosen = str(getattr(self, "best_config", None))
            return result
        finally:
            trials = counters.pop()[0]
            new_key = isinstance(getattr(self, "cache", None), dict) and bool(set(self.cache) - keys_before)
            multi = len(getattr(self, "configs", ())) > 1
            cached = multi and trials == 0 and (not new_key or bool(getattr(self, "cache_results", False)))
            for watch in list(_watches):
                stats = watch._entry(self)
                stats.calls += 1
                stats.tuning_calls += trials > 0
                stats.cached_calls += cached
                stats.chosen.append(chosen)
    return run


def _watch_bench_factory(original):
    def _bench(self, *args, **kwargs):
        if _watches:
            counters = _trial_counters()
            if counters:
                counters[-1][0] += 1
            for watch in list(_watches):
                watch._entry(self).trials.append(str(kwargs.get("config")))
        return original(self, *args, **kwargs)
    return _bench


def _install_watch_hooks() -> None:
    patch_method(Autotuner, "run", "tritondiff.autotuning.watch", _watch_run_factory)
    patch_method(Autotuner, "_bench", "tritondiff.autotuning.watch", _watch_bench_factory)


# --------------------------------------------------------------------------------------------
# Forcing a config
# --------------------------------------------------------------------------------------------

_FORCED_ATTRS = ("configs", "cache", "early_config_prune", "perf_model")
_MISSING = object()


def _resolve_config(tuner: Autotuner, config: Any):
    if isinstance(config, str):
        for candidate in tuner.configs:
            if str(candidate) == config:
                return candidate
        raise UsageError(f"forced_config: {describe(tuner)} has no config {config!r}; its configs are: "
                         + "; ".join(str(c) for c in tuner.configs))
    if not hasattr(config, "all_kwargs"):
        raise UsageError(f"forced_config: pass a triton.Config (or str() of one of the tuner's configs), "
                         f"got {type(config).__name__}")
    return config


@contextlib.contextmanager
def forced_config(tuner: Any, config: Any) -> Iterator[Any]:
    """Inside the block, ``tuner`` launches exactly ``config`` with no benchmarking.

    ``config`` is a ``triton.Config`` (need not be one of the tuner's) or the
    ``str()`` of one of its configs (as recorded in launch records).  The
    tuner's configs, cached choices and pruning are restored afterwards.
    """
    tuner = _require_tuner(tuner, "forced_config")
    config = _resolve_config(tuner, config)
    saved = {name: tuner.__dict__.get(name, _MISSING) for name in _FORCED_ATTRS}
    tuner.configs = [config]
    tuner.cache = {}
    tuner.early_config_prune = None
    tuner.perf_model = None
    try:
        yield config
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                tuner.__dict__.pop(name, None)
            else:
                setattr(tuner, name, value)
