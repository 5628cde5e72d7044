"""Failure dumps: everything needed to understand and replay one finding, in one directory.

Layout of a dump directory::

    summary.json     subject, failure class, signature, seed, shapes/strides/dtypes, value families,
                     error stats, where the mismatches sit, versions, device
    case.json        the drawn example (rebuilds the exact inputs on any device)
    inputs.pt        the inputs themselves (torch.save, CPU)
    kernels/         the Triton source of every kernel launched, plus launches.json (grid, config, args)
    counters.json    harness (and compiler) debug counters
    traceback.txt    when the subject raised or crashed
    repro.py         standalone replay; exits non-zero while the failure reproduces
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import textwrap
from typing import Any

import torch

from . import device
from .api import Subject
from .case import Case
from .counters import counters
from .tensors import materialize


def versions() -> dict:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
            "device": device.describe(), "mode": device.MODE}


def dump_dir_for(root: str, subject_name: str, signature: str) -> str:
    digest = hashlib.sha1(signature.encode()).hexdigest()[:10]
    klass = signature.split("|")[1]
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in subject_name)
    return os.path.join(root, safe, f"{klass}-{digest}")


def write_dump(root: str, subject: Subject, subject_ref: dict, case: Case, verdict: Any, *,
               seed: int | None = None, hazards: frozenset = frozenset()) -> str:
    """Write the dump of ``verdict`` (a failing :class:`~harness.runner.Verdict`) and return its path."""
    signature = verdict.signature(subject.name)
    path = dump_dir_for(root, subject.name, signature)
    os.makedirs(os.path.join(path, "kernels"), exist_ok=True)
    inputs = {name: materialize(tc, "cpu") for name, tc in case.tensors.items()}
    summary = {
        "subject": subject.name,
        "subject_ref": subject_ref,
        "failure_class": verdict.failure_class,
        "signature": signature,
        "location": verdict.location,
        "call": verdict.call,
        "message": verdict.message,
        "seed": seed,
        "hazards": sorted(hazards),
        "inputs": {name: {"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype),
                          "storage_offset": t.storage_offset(), "layout": case.tensors[name].layout,
                          "values": case.tensors[name].values, "nonfinite": case.tensors[name].nonfinite}
                   for name, t in inputs.items()},
        "scalars": {k: repr(v) for k, v in case.scalars.items()},
        "details": _jsonable(verdict.details),
        "versions": versions(),
    }
    _write_json(os.path.join(path, "summary.json"), summary)
    _write_json(os.path.join(path, "case.json"), case.to_json())
    torch.save({"tensors": inputs, "scalars": case.scalars}, os.path.join(path, "inputs.pt"))
    _write_kernels(os.path.join(path, "kernels"), verdict.launches)
    _write_json(os.path.join(path, "counters.json"), counters.snapshot())
    _write_compiler_artifacts(path)
    if verdict.traceback:
        with open(os.path.join(path, "traceback.txt"), "w") as f:
            f.write(verdict.traceback)
    with open(os.path.join(path, "repro.py"), "w") as f:
        f.write(REPRO)
    os.chmod(os.path.join(path, "repro.py"), 0o755)
    return path


def _write_kernels(folder: str, launches: list[dict]) -> None:
    seen = set()
    for la in launches:
        name = la.get("kernel", "kernel")
        if name in seen or not la.get("source"):
            continue
        seen.add(name)
        with open(os.path.join(folder, f"{name}.py"), "w") as f:
            f.write(la["source"])
    slim = [{k: v for k, v in la.items() if k != "source"} for la in launches]
    _write_json(os.path.join(folder, "launches.json"), slim)


def _write_compiler_artifacts(path: str) -> None:
    """Copy the compiler's dumps of the most recent compilation, when compiled code ran."""
    dump = sys.modules.get("compiler.dump")
    last = getattr(dump, "last_artifacts", None)
    if not callable(last):
        return
    try:
        artifacts = last()
    except Exception:  # noqa: BLE001 - a dump must not fail because the compiler's bookkeeping did
        return
    if not artifacts:
        return
    folder = os.path.join(path, "compiler")
    os.makedirs(folder, exist_ok=True)
    for name, text in dict(artifacts).items():
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in str(name))
        with open(os.path.join(folder, safe), "w") as f:
            f.write(text if isinstance(text, str) else json.dumps(_jsonable(text), indent=1))


def _write_json(path: str, data: Any) -> None:
    with open(path, "w") as f:
        json.dump(_jsonable(data), f, indent=1, sort_keys=True)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)


REPRO = textwrap.dedent('''\
    #!/usr/bin/env python
    """Standalone repro of a tritondiff finding.

    Rebuilds the exact inputs from case.json, runs the subject with the same hazard
    hunters and prints the verdict.  Exit status: 1 while the failure reproduces,
    0 once it no longer does, 2 when the subject cannot be loaded.

        python repro.py                # CUDA when available, else the Triton interpreter on CPU
        python repro.py --device cpu   # force the interpreter
    """
    import argparse
    import os
    import sys

    HERE = os.path.dirname(os.path.abspath(__file__))


    def main() -> int:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
        parser.add_argument("--in-process", action="store_true", help="do not isolate the run in a worker")
        args = parser.parse_args()
        os.environ["TRITONDIFF_DEVICE"] = args.device      # read by harness.device at import
        from harness.replay import replay_dump

        return replay_dump(HERE, isolate=not args.in_process)


    if __name__ == "__main__":
        sys.exit(main())
    ''')
