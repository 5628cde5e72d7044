"""GPU out-of-bounds checking: run a dump's repro under ``compute-sanitizer --tool memcheck``.

The interpreter's bounds checker (``sanitizer.py``) sees every lane on CPU;
on a GPU the same question goes to NVIDIA's memcheck, on request
(``tritondiff check --sanitize`` / ``tritondiff replay --sanitize``).  The
report lands in the dump as ``memcheck.txt``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from . import device


def available() -> str | None:
    """Why memcheck cannot run here, or None when it can."""
    if device.MODE != "cuda":
        return "compute-sanitizer needs a CUDA GPU (on CPU the interpreter's bounds checker runs instead)"
    if shutil.which("compute-sanitizer") is None:
        return "compute-sanitizer is not on PATH"
    return None


def memcheck_dump(dump_dir: str, *, timeout_s: float = 900) -> tuple[str, int]:
    """Run the dump's repro under memcheck; returns (report path, number of memcheck errors)."""
    cmd = ["compute-sanitizer", "--tool", "memcheck", "--print-limit", "50", "--error-exitcode", "97",
           sys.executable, os.path.join(dump_dir, "repro.py"), "--in-process", "--device", "cuda"]
    env = {**os.environ, "TRITONDIFF_DEVICE": "cuda", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        text, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text, code = f"memcheck timed out after {timeout_s:.0f} s\n{e.stdout or ''}", -1
    errors = _count_errors(text)
    path = os.path.join(dump_dir, "memcheck.txt")
    with open(path, "w") as f:
        f.write(f"$ {' '.join(cmd)}\n# exit {code}; memcheck errors: {errors}\n{text}")
    return path, errors


def _count_errors(text: str) -> int:
    for line in text.splitlines()[::-1]:
        if "ERROR SUMMARY:" in line:
            try:
                return int(line.split("ERROR SUMMARY:")[1].split()[0])
            except (IndexError, ValueError):
                break
    return 0
