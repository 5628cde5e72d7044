"""Failure dumps: everything needed to understand and replay one finding, in one directory.

Layout of a dump directory::

    summary.json     subject, failure class, signature, seed, shapes/strides/dtypes, value families,
                     error stats, where the mismatches sit, versions, device
    case.json        the drawn example (rebuilds the exact inputs on any device)
    inputs.pt        the inputs themselves (torch.save, CPU; left out past INPUTS_PT_MAX_BYTES)
    kernels/         the Triton source of every kernel launched, plus launches.json (grid, config, args)
    counters.json    harness (and compiler) debug counters of the run, workers' counts included
    compiler/        when compiled code ran: per graph the example compiled or ran, each pipeline
                     step's text (graph, IR, schedule, Triton source, plan), its counters, its error
    traceback.txt    when the subject raised or crashed
    repro.py         replay through tritondiff; exits non-zero while the failure reproduces
    standalone.py    the same case with torch and triton alone (kernel.py: the subject's file beside it;
                     standalone.json: which subject): prints the worst elements (inputs, eager, float64
                     truth, candidate); see harness/standalone.py
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import textwrap
from typing import Any

import torch

from tritondiff.base import device
from . import standalone
from .api import Subject
from .case import Case
from .counters import counters
from .launches import write_sources
from .tensors import layout_of, materialize, nbytes

#: Inputs larger than this in all are not saved to inputs.pt (case.json rebuilds them exactly).
INPUTS_PT_MAX_BYTES = 512 * 2 ** 20


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
    input_bytes = sum(nbytes(tc) for tc in case.tensors.values())
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
        "inputs": {name: _describe_input(tc) for name, tc in case.tensors.items()},
        "scalars": {k: repr(v) for k, v in case.scalars.items()},
        "details": _jsonable(verdict.details),
        "example_counters": dict(getattr(verdict, "counters", None) or {}),
        "versions": versions(),
    }
    if input_bytes > INPUTS_PT_MAX_BYTES:
        summary["inputs_pt"] = (f"left out: the inputs are {input_bytes / 2 ** 30:.1f} GiB; case.json rebuilds "
                                "them exactly (harness.tensors.materialize)")
    _write_json(os.path.join(path, "summary.json"), summary)
    _write_json(os.path.join(path, "case.json"), case.to_json())
    if input_bytes <= INPUTS_PT_MAX_BYTES:
        inputs = {name: materialize(tc, "cpu") for name, tc in case.tensors.items()}
        torch.save({"tensors": inputs, "scalars": case.scalars}, os.path.join(path, "inputs.pt"))
    write_sources(verdict.launches, os.path.join(path, "kernels"))
    _write_json(os.path.join(path, "counters.json"), counters.snapshot())
    _write_compiler_artifacts(path, getattr(verdict, "compiler", None) or [])
    if verdict.traceback:
        with open(os.path.join(path, "traceback.txt"), "w") as f:
            f.write(verdict.traceback)
    with open(os.path.join(path, "repro.py"), "w") as f:
        f.write(REPRO)
    os.chmod(os.path.join(path, "repro.py"), 0o755)
    if input_bytes <= INPUTS_PT_MAX_BYTES:
        _write_standalone(path, subject, verdict)
    return path


def _write_standalone(path: str, subject: Subject, verdict) -> None:
    """standalone.py, kernel.py (the subject's file, or the standalone source it gives) and standalone.json,
    when the subject has either."""
    attribute, source = subject.standalone or (subject.fn.__name__, None)
    if source is not None:
        with open(os.path.join(path, "kernel.py"), "w") as f:
            f.write(source)
    elif subject.file and os.path.isfile(subject.file):
        shutil.copyfile(subject.file, os.path.join(path, "kernel.py"))
    else:
        return
    shutil.copyfile(standalone.__file__, os.path.join(path, "standalone.py"))
    os.chmod(os.path.join(path, "standalone.py"), 0o755)
    _write_json(os.path.join(path, "standalone.json"), {
        "subject": subject.name, "kernel": "kernel.py", "attribute": attribute,
        "multiplier": subject.tolerance.multiplier, "mutates": list(subject.mutates),
        "finding": f"{verdict.failure_class}: {verdict.message}"})


def _describe_input(tc) -> dict:
    """One input as drawn: memory layout (and its parameter), value family and the seed of its values,
    so the summary alone says how to rebuild it (case.json holds the same, for tools)."""
    strides, storage_offset = layout_of(tc)
    out = {"shape": list(tc.shape), "stride": list(strides), "dtype": f"torch.{tc.dtype}",
           "storage_offset": storage_offset, "layout": tc.layout, "layout_param": tc.layout_param,
           "values": tc.values, "seed": tc.seed, "nonfinite": tc.nonfinite}
    if tc.low is not None or tc.high is not None:
        out["range"] = [tc.low, tc.high]
    return out


def _write_compiler_artifacts(path: str, compilations: list[dict]) -> None:
    """The compiler's artifacts (graph, IR before/after fusion, Triton source, counters) of the graphs
    the failing example compiled or ran -- a forward and a backward graph for a training step.  They
    come with the verdict (``runner.compiler_artifacts``) from the process that ran the example."""
    for i, art in enumerate(compilations):
        folder = os.path.join(path, "compiler", f"{i:02d}_" + _safe(str(art["graph"])))
        os.makedirs(folder, exist_ok=True)
        for n, (step, text) in enumerate(art["texts"].items(), 1):
            suffix = ".py" if step == "triton" else ".txt"
            with open(os.path.join(folder, f"{n:02d}_{_safe(step)}{suffix}"), "w") as f:
                f.write(text)
        _write_json(os.path.join(folder, "counters.json"), dict(art.get("counters") or {}))
        if art.get("error"):
            with open(os.path.join(folder, "error.txt"), "w") as f:
                f.write(art["error"])


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)


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
        os.environ["TRITONDIFF_DEVICE"] = args.device      # read by tritondiff.base.device at import
        from tritondiff.harness.replay import replay_dump

        return replay_dump(HERE, isolate=not args.in_process)


    if __name__ == "__main__":
        sys.exit(main())
    ''')
