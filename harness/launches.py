"""Capture every Triton kernel launch while a recorder is active.

What it catches: each launch of any ``@triton.jit`` function -- called
directly, through ``triton.heuristics`` or through ``triton.autotune``,
compiled (``JITFunction.run``) or interpreted (``InterpretedFunction.run``) --
with the kernel's source, its constexpr values and launch options as applied,
the evaluated grid, a description of every runtime argument, and, for
autotuned kernels, the config used and whether the launch was one of the
autotuner's benchmark trials rather than the real call.

How: the ``run`` methods of those classes, and ``Autotuner.run`` /
``Autotuner._bench``, are wrapped once, at class level, idempotently.  The
autotuner wrappers keep a per-thread stack of "frames" (which tuner is
running, which config is being benchmarked) that the launch wrapper reads.
With no recorder active the wrappers call straight through: no behaviour
changes.  A launch is recorded *before* it runs, so a launch that crashes is
still in the list; its ``grid`` is filled in when the kernel evaluates it.

The small ``patch_method`` helper used here is shared by the other
instrumentation modules (sanitizer, autotuning).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import os
import re
import threading
import weakref
from typing import Any, Callable, Iterable

from tritondiff.base import device  # noqa: F401  (decides CUDA vs interpreter before triton is imported)
from tritondiff.base.limits import GRID_LIMITS, check_grid  # noqa: F401  (GRID_LIMITS re-exported)

import triton  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

try:  # every supported triton has it; stay importable if a future one moves it
    from triton.runtime.autotuner import Autotuner
except ImportError:  # pragma: no cover
    Autotuner = None  # type: ignore[assignment,misc]
try:
    from triton.runtime.interpreter import InterpretedFunction
except Exception:  # pragma: no cover  (a build without the interpreter)
    InterpretedFunction = None  # type: ignore[assignment,misc]

__all__ = ["Launch", "LaunchRecorder", "record_launches", "recording", "write_sources", "patch_method",
           "current_tuner_frames"]


# --------------------------------------------------------------------------------------------
# Idempotent class-level patching
# --------------------------------------------------------------------------------------------

def patch_method(cls: type | None, name: str, tag: str,
                 factory: Callable[[Callable], Callable]) -> bool:
    """Wrap ``cls.name`` with ``factory(original)`` once.

    ``tag`` identifies the wrapper: if a function carrying it is already in the
    ``__wrapped__`` chain of the current attribute, nothing happens.  Returns
    False when the class or the attribute does not exist in this triton
    version (callers feature-detect instead of failing).
    """
    if cls is None:
        return False
    current = cls.__dict__.get(name)
    if current is None or not callable(current):
        return False
    fn = current
    while fn is not None:
        if getattr(fn, "__tritondiff_tag__", None) == tag:
            return True
        fn = getattr(fn, "__wrapped__", None)
    wrapper = factory(current)
    functools.update_wrapper(wrapper, current)
    wrapper.__tritondiff_tag__ = tag  # type: ignore[attr-defined]
    setattr(cls, name, wrapper)
    return True


# --------------------------------------------------------------------------------------------
# Autotuner frames: which tuner runs, which config is being benchmarked
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class TunerFrame:
    """One active ``Autotuner.run`` ("run") or ``Autotuner._bench`` ("bench") call."""
    kind: str
    tuner: Any
    config: Any = None


_tls = threading.local()


def current_tuner_frames() -> list[TunerFrame]:
    """The autotuner calls active on this thread, outermost first."""
    frames = getattr(_tls, "frames", None)
    if frames is None:
        frames = _tls.frames = []
    return frames


def _tuner_run_factory(original):
    def run(self, *args, **kwargs):
        frames = current_tuner_frames()
        frames.append(TunerFrame("run", self))
        try:
            return original(self, *args, **kwargs)
        finally:
            frames.pop()
    return run


def _tuner_bench_factory(original):
    def _bench(self, *args, **kwargs):
        frames = current_tuner_frames()
        frames.append(TunerFrame("bench", self, kwargs.get("config")))
        try:
            return original(self, *args, **kwargs)
        finally:
            frames.pop()
    return _bench


def base_function(kernel: Any) -> Callable | None:
    """The Python function under a JITFunction / InterpretedFunction / Autotuner / Heuristics."""
    fn = kernel
    for _ in range(16):
        if inspect.isfunction(fn):
            return fn
        fn = getattr(fn, "fn", None)
        if fn is None:
            return None
    return None


def _tuning_context(fn: Callable) -> tuple[str | None, bool]:
    """(autotune config applied to this launch of ``fn``, inside a benchmark trial?)."""
    frames = current_tuner_frames()
    trial = any(f.kind == "bench" for f in frames)
    for frame in reversed(frames):
        if base_function(frame.tuner) is fn:
            config = frame.config if frame.kind == "bench" else getattr(frame.tuner, "best_config", None)
            return (str(config) if config is not None else None), trial
    return None, trial


# --------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Launch:
    """One kernel launch as the kernel saw it."""
    kernel: str
    qualname: str
    source: str
    constexprs: dict
    grid: tuple
    args: list
    autotune_config: str | None = None
    tuning_trial: bool = False
    mode: str = "compiled"          # "compiled" | "interpreted"

    def to_json(self, *, include_source: bool = True) -> dict:
        out = {
            "kernel": self.kernel,
            "qualname": self.qualname,
            "mode": self.mode,
            "grid": list(self.grid),
            "constexprs": _jsonable(self.constexprs),
            "args": _jsonable(self.args),
            "autotune_config": self.autotune_config,
            "tuning_trial": self.tuning_trial,
        }
        if include_source:
            out["source"] = self.source
        return out


class LaunchRecorder:
    """Context manager collecting the launches made while it is active.

    Recorders nest: every active recorder sees every launch.  ``keep_trials=False``
    drops the autotuner's benchmark-trial launches (counted in ``trial_count``),
    which keeps GPU autotuning, with its hundreds of timed repetitions, cheap.
    """

    def __init__(self, *, keep_trials: bool = True):
        self.launches: list[Launch] = []
        self.trial_count = 0
        self.keep_trials = keep_trials
        self._active = False

    def __enter__(self) -> "LaunchRecorder":
        install()
        if self._active:
            raise RuntimeError("this LaunchRecorder is already active; create a new one to nest")
        self._active = True
        _recorders.append(self)
        return self

    def __exit__(self, *exc) -> None:
        self._active = False
        for i in range(len(_recorders) - 1, -1, -1):
            if _recorders[i] is self:
                del _recorders[i]
                break

    def _add(self, launch: Launch) -> None:
        if launch.tuning_trial:
            self.trial_count += 1
            if not self.keep_trials:
                return
        self.launches.append(launch)

    @property
    def real_launches(self) -> list[Launch]:
        """The launches that were not autotuner benchmark trials."""
        return [launch for launch in self.launches if not launch.tuning_trial]


_recorders: list[LaunchRecorder] = []


def recording() -> bool:
    """Whether a recorder is active (then every launch must go through ``JITFunction.run``)."""
    return bool(_recorders)


def record_launches(*, keep_trials: bool = True) -> LaunchRecorder:
    """``with record_launches() as rec: ...`` then read ``rec.launches``."""
    return LaunchRecorder(keep_trials=keep_trials)


# --------------------------------------------------------------------------------------------
# Describing a launch
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class _FnInfo:
    params: list[str]
    constexpr: frozenset
    defaults: dict
    source: str


_fn_info: "weakref.WeakKeyDictionary[Callable, _FnInfo]" = weakref.WeakKeyDictionary()


def _is_constexpr_annotation(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):
        return annotation.strip().split(".")[-1] == "constexpr"
    return annotation is triton.language.constexpr or getattr(annotation, "__name__", "") == "constexpr"


def _info(fn: Callable, kernel: Any) -> _FnInfo:
    info = _fn_info.get(fn)
    if info is None:
        sig = inspect.signature(fn)
        params = list(sig.parameters)
        constexpr = frozenset(n for n, p in sig.parameters.items() if _is_constexpr_annotation(p.annotation))
        defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = getattr(kernel, "src", "") or ""
        info = _fn_info[fn] = _FnInfo(params, constexpr, defaults, source)
    return info


def describe_arg(name: str, value: Any) -> dict:
    """The launch-record description of one runtime argument."""
    if value is None:
        return {"name": name, "kind": "none"}
    base = getattr(value, "base", None)
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        tensor = value if base is None or not hasattr(base, "data_ptr") else base  # TensorWrapper
        return {
            "name": name, "kind": "tensor",
            "shape": list(tensor.shape), "stride": list(tensor.stride()),
            "dtype": str(value.dtype), "storage_offset": int(tensor.storage_offset()),
            "numel": int(tensor.numel()), "device": str(tensor.device),
        }
    if hasattr(value, "block_shape") and base is not None:  # a host TensorDescriptor
        return {
            "name": name, "kind": "descriptor",
            "base": describe_arg(name, base),
            "shape": [_plain(s) for s in value.shape], "strides": [_plain(s) for s in value.strides],
            "block_shape": [_plain(s) for s in value.block_shape],
        }
    if isinstance(value, tuple):
        return {"name": name, "kind": "tuple",
                "items": [describe_arg(f"{name}[{i}]", v) for i, v in enumerate(value)]}
    return {"name": name, "kind": "scalar", "value": _plain(value), "type": type(value).__name__}


def _plain(value: Any) -> Any:
    """A JSON-friendly version of a scalar / constexpr value."""
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if type(value).__name__ == "constexpr":  # tl.constexpr
        return _plain(getattr(value, "value", None))
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item) and getattr(value, "shape", None) in ((), None):
        try:
            return _plain(item())
        except Exception:  # noqa: BLE001  (a describer never raises into the launch)
            pass
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if inspect.isfunction(value) or hasattr(value, "fn"):
        fn = base_function(value)
        if fn is not None:
            return f"<function {fn.__module__}.{fn.__qualname__}>"
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return _plain(value)


def _ints(grid: Any) -> tuple:
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    out = []
    for g in grid:
        try:
            out.append(int(getattr(g, "value", g)))
        except (TypeError, ValueError):
            try:  # interpreter tensors
                out.append(int(g.handle.data.reshape(-1)[0]))
            except Exception:  # noqa: BLE001
                out.append(str(g))
    return tuple(out)


def _make_launch(kernel: Any, fn: Callable, args: tuple, kwargs: dict, mode: str) -> Launch:
    info = _info(fn, kernel)
    named = dict(zip(info.params, args))
    options = {}
    for k, v in kwargs.items():
        if k in ("grid", "warmup"):
            continue
        if k in info.params:
            named[k] = v
        else:
            options[k] = v
    for k, v in info.defaults.items():
        named.setdefault(k, v)
    constexprs = {k: named[k] for k in info.params if k in info.constexpr and k in named}
    constexprs.update(options)
    arg_desc = [describe_arg(k, named[k]) for k in info.params if k not in info.constexpr and k in named]
    config, trial = _tuning_context(fn)
    return Launch(kernel=fn.__name__, qualname=f"{fn.__module__}.{fn.__qualname__}", source=info.source,
                  constexprs=constexprs, grid=(), args=arg_desc, autotune_config=config,
                  tuning_trial=trial, mode=mode)


def _kernel_run_factory(mode: str):
    def factory(original):
        def run(self, *args, **kwargs):
            if not _recorders or kwargs.get("warmup"):
                return original(self, *args, **kwargs)
            fn = base_function(self)
            try:
                launch = _make_launch(self, fn, args, kwargs, mode)
            except Exception as e:  # noqa: BLE001  (recording must never change what the launch does)
                launch = Launch(kernel=getattr(fn, "__name__", "?"), qualname=getattr(fn, "__qualname__", "?"),
                                source="", constexprs={}, grid=(), mode=mode,
                                args=[{"name": "?", "kind": "unrecorded", "error": repr(e)}])
            grid = kwargs.get("grid")
            if callable(grid):
                def grid_probe(meta, _grid=grid):
                    value = _grid(meta)
                    launch.grid = _ints(value)
                    check_grid(launch.kernel, launch.grid)
                    return value
                kwargs["grid"] = grid_probe
            elif grid is not None:
                launch.grid = _ints(grid)
            for recorder in list(_recorders):
                recorder._add(launch)
            check_grid(launch.kernel, launch.grid)
            return original(self, *args, **kwargs)
        return run
    return factory


_install_lock = threading.Lock()


def install() -> None:
    """Install the class-level wrappers (idempotent: each is found by its tag; done by every recorder).

    Checked on every call, not remembered: a wrapper installed over a method that something else had
    replaced for a while (a test's monkeypatch of ``Autotuner._bench``) goes when that is undone, and
    the next recorder must put it back, or tuning trials would be counted as real launches."""
    with _install_lock:
        patch_method(JITFunction, "run", "tritondiff.launches", _kernel_run_factory("compiled"))
        patch_method(InterpretedFunction, "run", "tritondiff.launches", _kernel_run_factory("interpreted"))
        patch_method(Autotuner, "run", "tritondiff.launches.frames", _tuner_run_factory)
        patch_method(Autotuner, "_bench", "tritondiff.launches.frames", _tuner_bench_factory)


# --------------------------------------------------------------------------------------------
# Writing the sources of a failure's kernels
# --------------------------------------------------------------------------------------------

def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "kernel"


def write_sources(launches: Iterable[Launch | dict], dirpath: str | os.PathLike) -> list[str]:
    """Write each distinct kernel's source once (``<kernel>.py``) plus ``launches.json``.

    ``launches`` are :class:`Launch` objects or their ``to_json()`` form (what a
    verdict carries back from a worker process).  Two different kernels with the
    same ``__name__`` get ``<kernel>__2.py`` and so on; a launch without a source
    is listed with no file.  Each entry of ``launches.json`` names its
    ``source_file``.  Returns the paths written.
    """
    os.makedirs(dirpath, exist_ok=True)
    files: dict[tuple[str, str], str] = {}
    taken: set[str] = {"launches.json"}
    written = []
    entries = []
    for launch in launches:
        entry = launch.to_json() if isinstance(launch, Launch) else dict(launch)
        source = entry.pop("source", None) or ""
        key = (entry.get("qualname") or entry.get("kernel", "kernel"), source)
        if source and key not in files:
            stem, n = _safe_name(entry.get("kernel", "kernel")), 1
            name = f"{stem}.py"
            while name in taken:
                n += 1
                name = f"{stem}__{n}.py"
            taken.add(name)
            files[key] = name
            path = os.path.join(dirpath, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(source if source.endswith("\n") else source + "\n")
            written.append(path)
        entry["source_file"] = files.get(key)
        entries.append(entry)
    path = os.path.join(dirpath, "launches.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(_jsonable(entries), f, indent=1)
        f.write("\n")
    written.append(path)
    return written
