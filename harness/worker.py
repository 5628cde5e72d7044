"""Run examples in a long-lived worker process, so a crash or a hang costs one example, not the run.

What it catches
---------------
A kernel can kill the process that launches it: a segfault in the interpreter
(a wild pointer), an abort, a CUDA illegal address or device-side assert
(which leaves the CUDA context unusable), or it can spin forever.  ``Worker``
runs ``"pkg.module:function"`` targets in a separate process and turns each
outcome into a ``WorkerResult``:

* ``ok``    -- the function returned; ``value`` is its (pickled) return value;
* ``error`` -- it raised; ``error`` is the traceback text;
* ``crash`` -- the process died (signal or exit code, plus the tail of its
  stderr, where ``faulthandler`` wrote the Python stack), or the exception
  text says the CUDA context is dead ("illegal memory access",
  "device-side assert", ...); the worker is replaced;
* ``hang``  -- no answer within ``timeout`` seconds: the worker dumps its
  stacks (SIGUSR1 -> faulthandler), its process group is killed, and the
  report carries that dump.

How
---
One child process per ``Worker``, started lazily on the first call and reused
for every call after (importing torch and triton costs seconds), talking over a
socketpair with length-prefixed pickles.  The child runs in its own session,
so a terminal Ctrl-C reaches only the parent, which then kills the child;
the child also exits when it notices that its parent has died.  The child's
stdout and stderr go to a log file whose tail is attached to crash and hang
reports.  After a crash or a hang the next call transparently starts a fresh
worker.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from multiprocessing.connection import Connection
from typing import Any

if __package__:  # the parent imports harness.worker; the child loads this file alone (see _BOOTSTRAP)
    from .exc import UsageError, WorkerStartupError

__all__ = ["WorkerResult", "Worker", "CUDA_FATAL_MARKERS"]

#: Exception texts after which a CUDA context is unusable: the worker is replaced.
CUDA_FATAL_MARKERS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "an illegal memory access was encountered",
    "CUDA error: launch failed",
    "cudaErrorLaunchFailure",
)

# The child loads this file as a lone module, without importing the harness package
# (and so torch): a fresh worker answers in ~0.1 s; targets import what they need.
_BOOTSTRAP = ("import importlib.util as u, sys; s = u.spec_from_file_location('_tritondiff_worker_child', "
              "sys.argv[1]); m = sys.modules[s.name] = u.module_from_spec(s); s.loader.exec_module(m); "
              "m._child_main(int(sys.argv[2]))")
_TAIL_CHARS = 6000
_START_TIMEOUT_S = 300.0


@dataclasses.dataclass
class WorkerResult:
    """The outcome of one ``Worker.call``."""
    status: str                 # "ok" | "error" | "crash" | "hang"
    value: Any = None           # the return value when ok
    error: str | None = None    # traceback / crash description / timeout text
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _NoAnswer(Exception):
    """The child sent nothing within the timeout."""


def _check_target(target: Any, what: str) -> None:
    if not isinstance(target, str) or target.count(":") != 1 or not all(target.split(":")):
        raise UsageError(f"{what} must be a 'package.module:function' string, got {target!r}")


def _resolve(target: str):
    module_name, attr = target.split(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not callable")
    return obj


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker did not exit"
    if returncode < 0:
        try:
            return f"worker killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"worker killed by signal {-returncode}"
    return f"worker exited with code {returncode}"


class Worker:
    """A long-lived process running ``"pkg.module:function"`` targets.

    ``env`` entries are added to the child's environment (the device choice
    included: ``TRITONDIFF_DEVICE``); ``startup`` (``"module:function"``) runs
    once in each new child before its first call.  Use as a context manager or
    call ``close()``.
    """

    def __init__(self, *, env: dict | None = None, startup: str | None = None):
        if env is not None and (not isinstance(env, dict)
                                or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise UsageError("Worker(env=...) must be a dict of str to str")
        if startup is not None:
            _check_target(startup, "Worker(startup=...)")
        self._env = dict(env or {})
        self._startup = startup
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._log_path: str | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The current child's pid (None before the first call or after a crash)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def log_path(self) -> str | None:
        return self._log_path

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the child (politely, then by force) and delete its log."""
        with self._lock:
            if self._conn is not None and self._proc is not None and self._proc.poll() is None:
                try:
                    self._conn.send_bytes(pickle.dumps(("close",)))
                    self._proc.wait(timeout=2)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._discard()

    def start(self) -> None:
        """Start the child now (otherwise the first call does)."""
        with self._lock:
            self._ensure_started()

    def _ensure_started(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._discard()
        log = tempfile.NamedTemporaryFile(prefix="tritondiff-worker-", suffix=".log", delete=False)
        self._log_path = log.name
        parent_sock, child_sock = socket.socketpair()
        repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, **self._env, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH")) if p)}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, os.path.abspath(__file__), str(child_sock.fileno())],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                pass_fds=(child_sock.fileno(),), start_new_session=True)
        finally:
            child_sock.close()
            log.close()
        self._conn = Connection(parent_sock.detach())
        self._finalizer = weakref.finalize(self, _kill_process_group, self._proc)
        try:
            self._conn.send_bytes(pickle.dumps(("init", list(sys.path), self._startup)))
            reply = self._receive(_START_TIMEOUT_S)
        except _NoAnswer:
            reply = None
        except BaseException:
            self._discard()
            raise
        if reply is None or reply[0] != "ready":
            tail = self._tail(0)
            exit_text = _describe_exit(self._proc.poll())
            self._discard()
            if reply is None:
                raise WorkerStartupError(f"the worker process did not start ({exit_text})", log_tail=tail)
            raise WorkerStartupError(f"worker startup hook {self._startup!r} failed:\n{reply[1]}", log_tail=tail)

    def _discard(self) -> None:
        """Kill the current child, if any, and forget it."""
        if self._finalizer is not None:
            self._finalizer()  # kills the process group
            self._finalizer = None
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        if self._log_path is not None:
            try:
                os.unlink(self._log_path)
            except OSError:
                pass
        self._proc = self._conn = self._log_path = None

    # -- calls ---------------------------------------------------------------------------------

    def _receive(self, timeout: float):
        """The child's next message, or None when it died; raises _NoAnswer after ``timeout``."""
        try:
            if self._conn.poll(timeout):
                return pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            return None
        raise _NoAnswer

    def _tail(self, offset: int) -> str:
        if self._log_path is None:
            return ""
        try:
            with open(self._log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(offset, size - _TAIL_CHARS))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def _log_size(self) -> int:
        try:
            return os.path.getsize(self._log_path) if self._log_path else 0
        except OSError:
            return 0

    def call(self, target: str, *args: Any, timeout: float, **kwargs: Any) -> WorkerResult:
        """Run ``target(*args, **kwargs)`` in the worker, waiting at most ``timeout`` seconds."""
        _check_target(target, "Worker.call(target)")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
            raise UsageError(f"Worker.call(timeout={timeout!r}): pass a number of seconds > 0")
        try:
            payload = pickle.dumps(("call", target, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001  (any pickling failure is the caller's argument)
            raise UsageError(f"the arguments to {target} cannot be sent to the worker (not picklable): {e!r}") from e
        with self._lock:
            try:
                return self._call_locked(target, payload, timeout)
            except BaseException:
                # Ctrl-C (or any failure of ours) while the child runs: leave no orphan behind.
                self._discard()
                raise

    def _call_locked(self, target: str, payload: bytes, timeout: float) -> WorkerResult:
        self._ensure_started()
        offset = self._log_size()
        start = time.monotonic()
        try:
            self._conn.send_bytes(payload)
        except OSError:  # the idle child died since the last call: start afresh once
            self._discard()
            self._ensure_started()
            offset = self._log_size()
            start = time.monotonic()
            self._conn.send_bytes(payload)
        try:
            reply = self._receive(timeout)
        except _NoAnswer:
            return self._hang(target, timeout, offset, start)
        seconds = time.monotonic() - start
        if reply is None:
            text = f"{_describe_exit(self._proc.poll() if self._proc else None)} while running {target}"
            tail = self._tail(offset)
            self._discard()
            return WorkerResult("crash", None, text + (f"\n{tail}" if tail else ""), seconds)
        status, value = reply
        if status == "ok":
            return WorkerResult("ok", value, None, seconds)
        if status == "crash":
            tail = self._tail(offset)
            self._discard()
            return WorkerResult("crash", None, value + (f"\n--- worker log ---\n{tail}" if tail else ""), seconds)
        return WorkerResult("error", None, value, seconds)

    def _hang(self, target: str, timeout: float, offset: int, start: float) -> WorkerResult:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGUSR1)  # faulthandler dumps every thread's stack
                time.sleep(0.3)
            except OSError:
                pass
        tail = self._tail(offset)
        self._discard()
        text = f"{target} gave no answer within {timeout:g} s; the worker was killed"
        return WorkerResult("hang", None, text + (f"\n--- worker stacks ---\n{tail}" if tail else ""),
                            time.monotonic() - start)


def _kill_process_group(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# --------------------------------------------------------------------------------------------
# The child
# --------------------------------------------------------------------------------------------

def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def _is_cuda_fatal(text: str) -> bool:
    return any(marker in text for marker in CUDA_FATAL_MARKERS)


def _run_one(message: tuple) -> tuple[str, Any]:
    _, target, args, kwargs = message
    try:
        value = _resolve(target)(*args, **kwargs)
    except BaseException:  # noqa: BLE001  (everything the target raises is the caller's to see)
        text = traceback.format_exc()
        return ("crash" if _is_cuda_fatal(text) else "error"), text
    return "ok", value


def _child_main(fd: int) -> None:
    import faulthandler

    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    conn = Connection(fd)
    _, sys_path, startup = pickle.loads(conn.recv_bytes())
    for entry in sys_path:
        if entry not in sys.path:
            sys.path.append(entry)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    if startup:
        try:
            _resolve(startup)()
        except BaseException:  # noqa: BLE001
            conn.send_bytes(pickle.dumps(("startup_error", traceback.format_exc())))
            return
    conn.send_bytes(pickle.dumps(("ready", os.getpid())))
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            decoded = pickle.loads(message)
        except BaseException:  # noqa: BLE001
            status, value = "error", "the worker could not unpickle the call:\n" + traceback.format_exc()
        else:
            if decoded[0] == "close":
                return
            status, value = _run_one(decoded)
        try:
            reply = pickle.dumps((status, value), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001
            reply = pickle.dumps(("error", f"the return value of the call cannot be pickled: {e!r}"))
        sys.stdout.flush()
        sys.stderr.flush()
        conn.send_bytes(reply)
        if status == "crash":
            os._exit(70)  # a dead CUDA context: never run another example in this process
