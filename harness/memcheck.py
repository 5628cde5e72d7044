"""GPU out-of-bounds checking: run a repro under ``compute-sanitizer --tool memcheck``.

The interpreter's bounds checker (``sanitizer.py``) sees every lane on CPU;
on a GPU the same question goes to NVIDIA's memcheck: by default in ``tritondiff check`` where
compute-sanitizer is on PATH (``config.sanitize``; ``--sanitize`` / ``--no-sanitize``), and on
request in ``tritondiff replay --sanitize``.

What ``check --sanitize`` does with it (:func:`sanitize`):

* a subject that failed: its dump's repro runs under memcheck; memcheck errors
  make the finding ``out_of_bounds`` (the class it had is kept in the summary
  under ``was``), with the report in the dump as ``memcheck.txt``;
* a subject that passed: the last case that passed (:class:`LastPassing`
  watches the examples) is written as a repro and run under memcheck: a silent
  out-of-bounds write on a GPU changes no output and would never be seen
  otherwise.  Errors make it an ``out_of_bounds`` finding with a dump; no errors
  leave nothing behind.

A dump whose finding memcheck made (``summary["detected_by"] == "memcheck"``)
replays under memcheck again (:func:`replay_under_memcheck`), so its
``repro.py`` keeps failing while the bad access is there.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Callable

from tritondiff.base import device
from .config import config

#: The record lines memcheck starts an error with (after the ``========= `` prefix).
_ERROR_RECORD = re.compile(r"^=+ (Invalid __\w+__ (?:read|write|atomic)\b.*|Program hit .*|"
                           r"Malloc/Free error.*|Misaligned .*|Out-of-range .*|Cuda API error.*|"
                           r"Barrier error.*|Leaked .*)$")
#: Bytes of compute-sanitizer padding after each allocation: past the widest block a kernel reads over
#: the end with (64K float32 lanes).
PADDING_BYTES = 1 << 18
_SUMMARY = re.compile(r"ERROR SUMMARY:\s+(\d+) errors?\s*$")


def available() -> str | None:
    """Why memcheck cannot run here, or None when it can."""
    if device.MODE != "cuda":
        return "compute-sanitizer needs a CUDA GPU (on CPU the interpreter's bounds checker runs instead)"
    if shutil.which("compute-sanitizer") is None:
        return "compute-sanitizer is not on PATH"
    return None


def wanted() -> bool:
    """Whether ``check`` runs memcheck after each subject (``config.sanitize``): "on" always (then
    :func:`sanitize` says why it cannot), "auto" where it can, "off" never."""
    if config.under_memcheck or config.sanitize == "off":
        return False
    return config.sanitize == "on" or available() is None


# ---------------------------------------------------------------------------------------------- running it

def memcheck_dump(dump_dir: str, *, timeout_s: float = 900) -> tuple[str, int]:
    """Run the dump's repro under memcheck; returns (report path, number of memcheck errors).
    The report is ``memcheck.txt`` in the dump; ``summary.json`` records the count under ``memcheck``."""
    # API errors (a CUDA call returning an error, which torch and triton may provoke harmlessly) are not
    # memory errors: left out, so the count is of invalid / misaligned / out-of-range accesses only.
    # --padding: a buffer after every allocation, so an over-read lands in no neighbouring allocation
    # (small cudaMallocs sit side by side, and a read into the next one is a valid access to memcheck)
    cmd = ["compute-sanitizer", "--tool", "memcheck", "--report-api-errors", "no", "--print-limit", "50",
           "--error-exitcode", "97", "--padding", str(PADDING_BYTES),
           sys.executable, os.path.join(dump_dir, "repro.py"), "--in-process", "--device", "cuda"]
    env = {**os.environ, "TRITONDIFF_DEVICE": "cuda", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
           "TRITONDIFF_UNDER_MEMCHECK": "1"}     # its replay must not start memcheck again
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        text, code = (proc.stdout or "") + (proc.stderr or ""), proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        text, code = f"memcheck timed out after {timeout_s:.0f} s\n{out}", -1
    errors = _count_errors(text)
    records = _error_records(text)
    own = [r for r in records if _in_triton_kernel(r)]
    library = [r for r in records if r not in own]
    if records and not own:
        # every access memcheck printed was made by a library kernel -- the eager reference's (PyTorch's
        # memory-efficient attention reading past a strided input, seen on an H200), never the subject's
        # Triton code: not the subject's finding
        library_errors, errors = errors, 0
    else:
        library_errors = len(library)
    path = os.path.join(dump_dir, "memcheck.txt")
    with open(path, "w") as f:
        f.write(f"$ {' '.join(cmd)}\n# exit {code}; memcheck errors: {errors}"
                f"{f' (and {library_errors} in library kernels, not counted)' if library_errors else ''}\n{text}")
    _update_summary(dump_dir, memcheck={"errors": errors, "report": "memcheck.txt", "exit": code,
                                        "first_errors": own[:5],
                                        "library_errors": library_errors, "first_library_errors": library[:3]})
    return path, errors


def _in_triton_kernel(record: str) -> bool:
    """Whether an error record's kernel is one Triton compiled: its entry point is a plain identifier (the
    @triton.jit function's name), where PyTorch's and other libraries' kernels are C++ functions printed with
    their parameter list, templates or namespaces.  A record that names no kernel counts as the subject's."""
    m = re.search(r"\bat (.+?)\+0x[0-9a-fA-F]+", record)
    if not m:
        return True
    return not any(c in m.group(1) for c in "(<:")


def _count_errors(text: str) -> int:
    """memcheck's error count: its last ``ERROR SUMMARY: N errors`` line (not the ``... errors were not
    printed`` line that follows it past ``--print-limit``); without one (the run was cut short), the
    number of error records printed."""
    for line in text.splitlines()[::-1]:
        m = _SUMMARY.search(line)
        if m:
            return int(m.group(1))
    return len(_error_records(text))


def _error_records(text: str) -> list[str]:
    """One line per error memcheck printed: what it was, where (kernel+offset) and the address note."""
    out: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _ERROR_RECORD.match(line.strip())
        if not m:
            continue
        what, where, address = m.group(1).strip(), "", ""
        for follow in lines[i + 1:i + 8]:
            body = follow.strip().lstrip("=").strip()
            if not body or _ERROR_RECORD.match(follow.strip()):
                break
            if body.startswith("at ") and not where:
                where = body
            elif body.startswith("Address ") and not address:
                address = body
        out.append(" ".join(p for p in (what, where, f"({address})" if address else "") if p))
    return out


# ---------------------------------------------------------------------------------------------- check --sanitize

class LastPassing:
    """``explore(on_example=...)`` callback that keeps the passing case memcheck runs: the last one of
    those with the most ragged dims (not a multiple of 16), where a missing mask reads or writes past
    the end."""

    def __init__(self) -> None:
        self.case = None
        self._ragged = -1

    def __call__(self, case: Any, verdict: Any) -> None:
        if verdict.status != "pass":
            return
        ragged = sum(1 for v in case.dims.values() if v % 16)
        if ragged >= self._ragged:
            self.case, self._ragged = case, ragged


def sanitize(subject: Any, result: Any, last_pass: Any = None, *, out_dir: str | None = None,
             disabled: frozenset = frozenset(), say: Callable[[str], None] | None = None) -> Any:
    """``check --sanitize`` for one explored subject: memcheck its finding's repro, or (when it passed)
    a repro of ``last_pass`` (a :class:`LastPassing` or a Case).  Returns ``result`` (a
    ``SubjectResult``), made an ``out_of_bounds`` failure when memcheck reports errors."""
    say = say or (lambda line: print(line, flush=True))
    why = available()
    if why:
        say(f"      memcheck: skipped: {why}")
        return result
    if result.dump:
        path, errors = memcheck_dump(result.dump)
        if errors:
            result = _out_of_bounds(result, errors)           # the dump moves to its new signature's folder
            path = os.path.join(result.dump, "memcheck.txt")
        say(f"      memcheck: {errors} error(s): {path}")
        return result
    case = getattr(last_pass, "case", last_pass)
    if result.status != "pass" or case is None:
        return result
    return _sanitize_passing(subject, result, case, out_dir or config.out_dir, disabled, say)


def _sanitize_passing(subject, result, case, out_dir: str, disabled: frozenset, say) -> Any:
    from .dump import dump_dir_for, write_dump
    from .loader import ref
    from .runner import Verdict, enabled_hazards

    verdict = Verdict("fail", "out_of_bounds", "compute-sanitizer memcheck reports errors in a passing case",
                      "memcheck", "repro under compute-sanitizer memcheck")
    os.makedirs(out_dir, exist_ok=True)
    probe_root = tempfile.mkdtemp(prefix=".memcheck-", dir=out_dir)
    try:
        probe = write_dump(probe_root, subject, ref(subject), case, verdict,
                           hazards=enabled_hazards(subject, disabled))
        _update_summary(probe, detected_by="memcheck")
        _, errors = memcheck_dump(probe)
        if not errors:
            say("      memcheck: 0 errors in the last passing case")
            return result
        final = dump_dir_for(out_dir, subject.name, verdict.signature(subject.name))
        if os.path.isdir(final):
            shutil.rmtree(final)           # the same finding, dumped by an earlier run
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.replace(probe, final)
    finally:
        shutil.rmtree(probe_root, ignore_errors=True)
    say(f"      memcheck: {errors} error(s) in the last passing case: {os.path.join(final, 'memcheck.txt')}")
    result = _out_of_bounds(dataclasses.replace(result, status="fail", dump=final, case=case, verdict=verdict,
                                                tier="wrong"), errors)
    return dataclasses.replace(result, findings=[*result.findings, dataclasses.replace(result, findings=[])])


def _out_of_bounds(result: Any, errors: int) -> Any:
    """``result`` as the out_of_bounds finding memcheck's errors make it; its dump moves to the
    folder of the new signature, its summary says what the finding was before."""
    summary = _read_summary(result.dump)
    first = (summary.get("memcheck", {}).get("first_errors") or ["(no error record printed)"])[0]
    message = f"compute-sanitizer memcheck: {errors} error(s); first: {first}"
    was = None if result.failure_class in (None, "out_of_bounds") else {"failure_class": result.failure_class,
                                                                         "message": result.message}
    if result.failure_class == "out_of_bounds":          # the harness saw it already: memcheck confirms it
        message = f"{result.message} [{message}]"
        location = getattr(result.verdict, "location", "memcheck")
    else:
        location = "memcheck"
    name = summary.get("subject", result.subject)
    signature = f"{name}|out_of_bounds|{location}"
    from .dump import dump_dir_for

    root = os.path.dirname(os.path.dirname(result.dump))
    path = dump_dir_for(root, name, signature)
    if os.path.abspath(path) != os.path.abspath(result.dump):
        if os.path.isdir(path):
            shutil.rmtree(path)
        os.replace(result.dump, path)
    _update_summary(path, failure_class="out_of_bounds", message=message, location=location, signature=signature,
                    detected_by="memcheck", **({"was": was} if was else {}))
    verdict = result.verdict
    if verdict is not None and dataclasses.is_dataclass(verdict):
        verdict = dataclasses.replace(verdict, status="fail", failure_class="out_of_bounds", message=message,
                                      location=location, dump=path)
    return dataclasses.replace(result, status="fail", failure_class="out_of_bounds", message=message,
                               signature=signature, dump=path, verdict=verdict)


# ---------------------------------------------------------------------------------------------- replay

def replay_under_memcheck(dump_dir: str) -> int | None:
    """For a dump whose finding memcheck made: run its repro under memcheck again and return the
    exit status replay should give (1 while memcheck reports errors, else 0); None when that does
    not apply (another finding, or this is already the run under memcheck)."""
    summary = _read_summary(dump_dir)
    if summary.get("detected_by") != "memcheck" or config.under_memcheck:
        return None
    why = available()
    if why:
        print(f"found by compute-sanitizer memcheck, which cannot run here ({why}): cannot tell whether it "
              "still reproduces")
        return None
    path, errors = memcheck_dump(dump_dir)
    if errors:
        print(f"still fails: out_of_bounds (same class): compute-sanitizer memcheck reports {errors} error(s): {path}")
        return 1
    print(f"no longer reproduces ({summary.get('subject')}: memcheck reports no errors: {path})")
    return 0


def _read_summary(dump_dir: str) -> dict:
    try:
        with open(os.path.join(dump_dir, "summary.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _update_summary(dump_dir: str, **fields: Any) -> None:
    path = os.path.join(dump_dir, "summary.json")
    if not os.path.isfile(path):
        return
    summary = _read_summary(dump_dir)
    summary.update(fields)
    with open(path, "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
