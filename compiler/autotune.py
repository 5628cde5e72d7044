"""Autotuning: time candidate kernels of one launch, keep the winner in a persistent cache.

Seed 002, section 8: candidates (GEMM tiles, the ATen call, block sizes / warps / stages of a
generated kernel) are benchmarked on the real arguments and the fastest is recorded, so the
next compilation with the same key skips the benchmark.  The key hashes the kernel source,
the arguments' shapes, strides and dtypes, the candidate names, the torch and triton
versions -- and the *device name*: a choice tuned on one GPU model is not reused on another
(seed 002's cache-key problem).

Trials never leak state (seed 001: ``tl.atomic_add`` under ``triton.autotune`` accumulated
across trials): every argument a candidate writes is cloned per trial, the real launch runs
once, on the untouched arguments, after tuning; with ``config.autotune_recheck`` the winner
then runs once more on clones of the pristine arguments and the two results must agree.

On a GPU trials are timed with ``tritondiff.base.timing.bench`` (CUDA events).  Under the
interpreter the first candidate (the heuristic one) is taken without running anything,
unless ``config.autotune_cpu_timing`` asks for wall-clock trials.

The cache is an SQLite file (``<config.autotune_cache_dir>/autotune.sqlite3``); a file that is
not a readable cache is moved aside to ``*.corrupt`` and rebuilt, with a warning; a cache that
cannot be rebuilt raises ``AutotuneCacheError`` naming the file and the fix.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import time
from typing import Callable, Optional, Sequence

import torch
import triton

from tritondiff.base import device as _device

from .config import config
from .counters import counters
from .exc import AutotuneCacheError, AutotuneError
from .sqlite_file import SqliteFile

CACHE_FILE = "autotune.sqlite3"
_SCHEMA = ("CREATE TABLE IF NOT EXISTS tuned (key TEXT PRIMARY KEY, kernel TEXT NOT NULL, device TEXT NOT NULL, "
           "winner TEXT NOT NULL, timings TEXT NOT NULL, created REAL NOT NULL)")


def device_name() -> str:
    """The name the cache key carries: the CUDA device's, or the interpreter and CPU architecture."""
    if _device.is_interpreter() or not torch.cuda.is_available():
        return f"triton-interpreter/{platform.machine() or 'cpu'}"
    return torch.cuda.get_device_name(torch.cuda.current_device())


def tensor_signature(env: dict, names: Sequence[str]) -> tuple:
    """(name, shape, stride, dtype) of each named tensor: what a tuned choice depends on."""
    out = []
    for n in names:
        t = env.get(n)
        if isinstance(t, torch.Tensor):
            out.append((n, tuple(t.shape), tuple(t.stride()), str(t.dtype)))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class TuneKey:
    """Everything a tuned choice depends on; ``digest()`` is the cache key."""

    kernel: str
    source_hash: str
    signature: tuple
    candidates: tuple[str, ...]
    device: str
    options: tuple = ()  # Triton compile options of the launches, (name, value) pairs (runtime.compile_options)

    def digest(self) -> str:
        payload = {"source": self.source_hash, "signature": [list(map(str, s)) for s in self.signature],
                   "candidates": list(self.candidates), "device": self.device, "torch": torch.__version__,
                   "triton": triton.__version__}
        if self.options:  # absent when there are none, so keys written before options existed stay valid
            payload["options"] = [[k, repr(v)] for k, v in self.options]
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def make_key(kernel: str, sources: Sequence[str], env: dict, names: Sequence[str],
             candidates: Sequence[str], options: Optional[dict] = None) -> TuneKey:
    source_hash = hashlib.sha256("\n".join(sources).encode()).hexdigest()
    return TuneKey(kernel, source_hash, tensor_signature(env, names), tuple(candidates), device_name(),
                   tuple(sorted((options or {}).items())))


# ------------------------------------------------------------------------------------ cache

class AutotuneCache:
    """Winners by key digest: an SQLite file (``path``), or memory only (``path=None``)."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self._memory: dict[str, dict] = {}
        self._file = None if path is None else SqliteFile(
            path, _SCHEMA, "SELECT key, winner, timings FROM tuned LIMIT 1", name="autotune cache",
            counter="autotune.cache_rebuilt", error=lambda message, path: AutotuneCacheError(message, path=path))

    def get(self, key: TuneKey) -> Optional[dict]:
        digest = key.digest()
        if digest in self._memory or self.path is None:
            return self._memory.get(digest)
        row = self._file.fetchone("SELECT winner, timings FROM tuned WHERE key = ?", (digest,))
        if row is None:
            return None
        try:
            entry = {"winner": row[0], "timings": json.loads(row[1])}
        except ValueError:
            return None  # a damaged row is a miss; the next put replaces it
        self._memory[digest] = entry
        return entry

    def put(self, key: TuneKey, winner: str, timings: dict) -> None:
        digest = key.digest()
        self._memory[digest] = {"winner": winner, "timings": timings}
        if self.path is None:
            return
        self._file.write(("INSERT OR REPLACE INTO tuned VALUES (?, ?, ?, ?, ?, ?)",
                          (digest, key.kernel, key.device, winner, json.dumps(timings), time.time())))

    def entries(self) -> list[tuple[str, str, str]]:
        """(kernel, device, winner) of every stored entry (memory entries when not persistent)."""
        if self.path is None:
            return [("?", "?", e["winner"]) for e in self._memory.values()]
        return self._file.fetchall("SELECT kernel, device, winner FROM tuned ORDER BY created")


_caches: dict[Optional[str], AutotuneCache] = {}


def get_cache() -> AutotuneCache:
    """The cache ``config`` points at (one object per path, so memory hits stay warm)."""
    path = os.path.join(config.autotune_cache_dir, CACHE_FILE) if config.autotune_persist else None
    if path not in _caches:
        _caches[path] = AutotuneCache(path)
    return _caches[path]


# ------------------------------------------------------------------------------- tuning

@dataclasses.dataclass
class Candidate:
    """One way to perform a launch: ``run(env)`` writes its results into ``env`` (name -> tensor)."""

    name: str
    run: Callable[[dict], None]
    config: dict = dataclasses.field(default_factory=dict)


def benchmark(fn: Callable[[], None]) -> float:
    """Milliseconds per call: CUDA-event median on a GPU, one wall-clock run under the interpreter."""
    counters["autotune.benchmarks"] += 1
    if not _device.is_interpreter():
        from tritondiff.base.timing import bench
        return bench(fn, warmup_ms=5, rep_ms=25).median_ms
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def _trial_env(env: dict, mutated: Sequence[str]) -> dict:
    trial = dict(env)
    for name in mutated:
        if isinstance(env.get(name), torch.Tensor):
            trial[name] = env[name].clone()
    return trial


def choose(key: TuneKey, candidates: Sequence[Candidate], env: dict, mutated: Sequence[str]) -> Candidate:
    """The winner for ``key``: from the cache, or by timing trials on clones of ``mutated``."""
    if not candidates:
        raise AutotuneError(f"{key.kernel}: no candidates to tune", kernel=key.kernel)
    by_name = {c.name: c for c in candidates}
    if len(candidates) == 1:
        return candidates[0]
    cache = get_cache()
    hit = cache.get(key)
    if hit is not None and hit["winner"] in by_name:
        counters["autotune.cache_hits"] += 1
        return by_name[hit["winner"]]
    if _device.is_interpreter() and not config.autotune_cpu_timing:
        return candidates[0]
    counters["autotune.tuned"] += 1
    timings, failures = {}, {}
    for cand in candidates:
        trial = _trial_env(env, mutated)
        try:
            cand.run(trial)  # compile and warm up outside the timing
            timings[cand.name] = benchmark(lambda: cand.run(trial))
        except Exception as e:  # noqa: BLE001  (a candidate that does not run just loses)
            failures[cand.name] = f"{type(e).__name__}: {e}"
        trial = None            # this candidate's buffers freed before the next one's are made
    if not timings:
        raise AutotuneError(f"{key.kernel}: every candidate failed: {failures}", kernel=key.kernel,
                            candidates=tuple(by_name))
    winner = min(timings, key=timings.get)
    cache.put(key, winner, {**timings, **{k: None for k in failures}})
    return by_name[winner]


def run_tuned(key: TuneKey, candidates: Sequence[Candidate], env: dict, mutated: Sequence[str]) -> Candidate:
    """Choose, then launch the winner once on the real ``env``; re-check it when tuning ran."""
    tuned_before = counters["autotune.tuned"]
    pristine = _trial_env(env, mutated) if config.autotune_recheck else None
    winner = choose(key, candidates, env, mutated)
    winner.run(env)
    if pristine is not None and counters["autotune.tuned"] > tuned_before:
        winner.run(pristine)
        for name in mutated:
            got, again = env.get(name), pristine.get(name)
            if isinstance(got, torch.Tensor) and not _same(got, again):
                raise AutotuneError(
                    f"{key.kernel}: after tuning, {winner.name} wrote a different {name} than the same config "
                    f"recomputed from pristine inputs: a trial leaked state into the real arguments, or the "
                    f"kernel is not deterministic", kernel=key.kernel, candidates=tuple(c.name for c in candidates))
    return winner


def _same(a: torch.Tensor, b: Optional[torch.Tensor]) -> bool:
    if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool((a == b).all())


__all__ = ["AutotuneCache", "Candidate", "TuneKey", "benchmark", "choose", "run_tuned", "device_name",
           "get_cache", "make_key", "tensor_signature", "CACHE_FILE"]
