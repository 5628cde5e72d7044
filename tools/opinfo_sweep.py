"""OpInfo sweep: every op of PyTorch's ``op_db`` with float32 samples, compiled vs eager.

    python -m tools.opinfo_sweep [--ops add,softmax] [--out sweep.md]
                                    [--max-samples 3] [--timeout 120] [--premerge]

Each sample runs eagerly (float32: "eager"; float64: "truth") and through the compiler, and
is classified:

- matched: the compiled result passes the harness oracle and at least one generated
  kernel ran;
- fell back: it passes, but only ATen ran (the op is an extern, or dynamo ran it eagerly);
- failed to compile: the compiler raised (or Triton rejected its source);
- mismatched: the oracle rejected the compiled result.  The sweep exists to keep this at 0,
  and every mismatch is printed with its sample: nothing fails silently.  Each mismatch is
  re-run as unfused and fused IR and carries the stage at fault (``tritondiff.harness.triage``:
  lowering, fusion, codegen, or unknown); the counts have a row per stage.

Random and uninitialised-memory ops are skipped (their eager output is not a reference).
The full sweep is the nightly command; ``PREMERGE_OPS`` is the fixed subset the pre-merge
gate runs (tests/compiler/test_opinfo_sweep.py).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import signal
import sys
import time
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

from tritondiff.base import device  # noqa: F401  (device decision before triton)

from tritondiff.harness import triage
from tritondiff.harness.opinfo import SKIP_RANDOM, SKIP_UNINITIALIZED, load_op_db, op_name  # noqa: F401
from tritondiff.compiler.backend import tritondiff_backend
from tritondiff.compiler.counters import counters

#: The fixed subset the pre-merge gate sweeps.
PREMERGE_OPS = ("add", "sub", "mul", "div", "neg", "abs", "exp", "log1p", "rsqrt", "sigmoid", "tanh", "erf",
                "where", "clamp", "maximum", "sum", "mean", "amax", "argmax", "var", "softmax", "log_softmax",
                "nn.functional.layer_norm", "nn.functional.gelu", "cat", "permute", "expand", "masked_fill",
                "nn.functional.pad", "linalg.vector_norm")

STATUSES = ("matched", "fell back", "failed to compile", "mismatched", "skipped")


@dataclasses.dataclass
class SampleResult:
    status: str
    detail: str = ""
    externs: tuple = ()
    seconds: float = 0.0
    stage: Optional[str] = None  # mismatched: "lowering" / "fusion" / "codegen" / "unknown" (tritondiff.harness.triage)


@dataclasses.dataclass
class OpResult:
    name: str
    samples: list[SampleResult]

    def count(self, status: str) -> int:
        return sum(1 for s in self.samples if s.status == status)

    @property
    def status(self) -> str:
        """The op's overall status: its worst sample (mismatched > failed > fell back > matched)."""
        for status in ("mismatched", "failed to compile", "fell back", "matched"):
            if self.count(status):
                return status
        return "skipped"


# ------------------------------------------------------------------------------ judging

def judge(candidate: Any, eager: Any, truth: Any) -> tuple[bool, str]:
    """(passed, message): the harness oracle (float64 truth, eager as the yardstick)."""
    try:
        from tritondiff.harness.oracle import compare
    except ImportError:  # the harness predates the oracle: plain tolerances
        return _local_judge(candidate, eager)
    result = compare(candidate, eager, truth)
    return result.passed, "" if result.passed else f"{result.failure_class}: {result.message}"


def _local_judge(candidate: Any, eager: Any) -> tuple[bool, str]:
    from tritondiff.harness.oracle import flatten  # noqa: F401  (only reached if compare is missing)
    try:
        torch.testing.assert_close(candidate, eager, equal_nan=True, rtol=1e-5, atol=1e-5)
        return True, ""
    except AssertionError as e:
        return False, str(e).splitlines()[0]


# ------------------------------------------------------------------------------ samples

def _flatten(value: Any, out: list) -> Any:
    """Replace every tensor in a nested structure by a slot number, collecting the tensors."""
    if isinstance(value, torch.Tensor):
        out.append(value)
        return _Slot(len(out) - 1)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_flatten(v, out) for v in value)
    if isinstance(value, dict):
        return {k: _flatten(v, out) for k, v in value.items()}
    return value


@dataclasses.dataclass(frozen=True)
class _Slot:
    i: int


def _fill(value: Any, tensors: Sequence[torch.Tensor]) -> Any:
    if isinstance(value, _Slot):
        return tensors[value.i]
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, tensors) for v in value)
    if isinstance(value, dict):
        return {k: _fill(v, tensors) for k, v in value.items()}
    return value


def sample_function(opinfo: Any, sample: Any) -> tuple[Callable, list[torch.Tensor]]:
    """``fn(*tensors)`` calling the op on the sample, with every tensor a graph input."""
    tensors: list[torch.Tensor] = []
    template = _flatten((sample.input, sample.args, sample.kwargs), tensors)
    op = opinfo.op

    def fn(*ts):
        inp, args, kwargs = _fill(template, ts)
        return op(inp, *args, **kwargs)
    return fn, tensors


def _copies(tensors: Sequence[torch.Tensor], dtype: Optional[torch.dtype] = None) -> list[torch.Tensor]:
    out = []
    for t in tensors:
        c = t.detach().clone()
        if dtype is not None and c.dtype.is_floating_point:
            c = c.to(dtype)
        out.append(c)
    return out


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    usable = seconds > 0 and hasattr(signal, "setitimer")
    try:
        usable = usable and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None, signal.default_int_handler)
    except ValueError:
        usable = False

    def expire(signum, frame):
        raise TimeoutError(f"sample took longer than {seconds:.0f} s")
    if not usable:
        yield
        return
    try:
        old = signal.signal(signal.SIGALRM, expire)
    except ValueError:  # not the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_sample(opinfo: Any, sample: Any, timeout: float = 120.0) -> SampleResult:
    start = time.time()
    fn, tensors = sample_function(opinfo, sample)
    try:
        eager = fn(*_copies(tensors))
    except Exception as e:  # noqa: BLE001  (a sample eager rejects is not ours to judge)
        return SampleResult("skipped", f"eager raises {type(e).__name__}")
    try:
        truth = fn(*_copies(tensors, torch.float64))
    except Exception:  # noqa: BLE001  (no float64 kernel: eager is its own truth)
        truth = eager
    counters.clear()
    torch._dynamo.reset()
    try:
        with _time_limit(timeout):
            compiled = torch.compile(fn, backend=tritondiff_backend, dynamic=False)
            got = compiled(*_copies(tensors))
    except Exception as e:  # noqa: BLE001  (every compiler failure is a finding)
        torch._dynamo.reset()
        return SampleResult("failed to compile", f"{type(e).__name__}: {str(e).splitlines()[0][:300]}",
                            seconds=time.time() - start)
    externs = tuple(sorted(k.split(".", 1)[1] for k in counters.with_prefix("extern.")))
    try:
        passed, message = judge(got, eager, truth)
    except Exception as e:  # noqa: BLE001  (e.g. complex outputs the oracle has no rule for)
        return SampleResult("skipped", f"the oracle cannot judge it: {type(e).__name__}: {e}", externs,
                            time.time() - start)
    if not passed:
        stage = _mismatch_stage(compiled, tensors, eager, truth, timeout)
        return SampleResult("mismatched", f"[{stage}] {message}"[:400], externs, time.time() - start, stage)
    seconds = time.time() - start
    if counters["graphs_compiled"] == 0:
        return SampleResult("fell back", "dynamo ran it eagerly", externs, seconds)
    if counters["kernels_generated"] == 0 and externs:
        return SampleResult("fell back", "ATen extern", externs, seconds)
    detail = "" if counters["kernels_generated"] else "nothing to compute (a view or an input)"
    return SampleResult("matched", detail, externs, seconds)


def _mismatch_stage(compiled: Callable, tensors: Sequence[torch.Tensor], eager: Any, truth: Any,
                    timeout: float) -> str:
    """Re-run a mismatched sample as unfused and fused IR: where did it go wrong?"""
    with _time_limit(timeout):
        found = triage.locate(lambda: compiled(*_copies(tensors)), lambda out: judge(out, eager, truth))
    triage.record(found, triage.compiled_since(0))  # counters were cleared for this sample
    return found.stage


def sweep_op(opinfo: Any, max_samples: int, timeout: float) -> OpResult:
    name = op_name(opinfo)
    if opinfo.name in SKIP_RANDOM or opinfo.name in SKIP_UNINITIALIZED:
        reason = "random" if opinfo.name in SKIP_RANDOM else "uninitialised memory"
        return OpResult(name, [SampleResult("skipped", reason)])
    from tritondiff.base import device
    where = device.torch_device().type
    if torch.float32 not in opinfo.supported_dtypes(where):
        return OpResult(name, [SampleResult("skipped", "no float32 support")])
    try:
        samples = list(opinfo.sample_inputs(where, torch.float32))[:max_samples]
    except Exception as e:  # noqa: BLE001
        return OpResult(name, [SampleResult("skipped", f"sample_inputs raises {type(e).__name__}")])
    if not samples:
        return OpResult(name, [SampleResult("skipped", "no float32 samples")])
    return OpResult(name, [run_sample(opinfo, s, timeout) for s in samples])


def sweep(ops: Optional[Sequence[str]] = None, max_samples: int = 3, timeout: float = 120.0,
          log: Optional[Callable[[str], None]] = print) -> list[OpResult]:
    """Sweep ``ops`` (OpInfo names, with or without ``.variant``; None: all of op_db)."""
    db = load_op_db()
    if ops is not None:
        wanted = set(ops)
        db = [o for o in db if o.name in wanted or op_name(o) in wanted]
        found = {o.name for o in db} | {op_name(o) for o in db}
        missing = sorted(wanted - found)
        if missing:
            raise SystemExit(f"unknown OpInfo name(s): {', '.join(missing)} (see torch.testing._internal."
                             f"common_methods_invocations.op_db)")
    results = []
    for i, opinfo in enumerate(db):
        result = sweep_op(opinfo, max_samples, timeout)
        results.append(result)
        if log:
            bad = [s for s in result.samples if s.status in ("mismatched", "failed to compile")]
            note = f" -- {bad[0].detail}" if bad else ""
            log(f"[{i + 1}/{len(db)}] {result.name}: {result.status}{note}")
    return results


# ------------------------------------------------------------------------------- report

def totals(results: Sequence[OpResult]) -> dict[str, dict[str, int]]:
    """Ops and samples per status; ``stages``: mismatched samples per stage at fault."""
    ops = {s: sum(1 for r in results if r.status == s) for s in STATUSES}
    samples = {s: sum(r.count(s) for r in results) for s in STATUSES}
    stages = {st: sum(1 for r in results for s in r.samples if s.status == "mismatched" and s.stage == st)
              for st in triage.STAGES}
    return {"ops": ops, "samples": samples, "stages": stages}


def stage_line(t: dict) -> str:
    return "mismatched samples by stage: " + ", ".join(f"{st}: {n}" for st, n in t["stages"].items())


def report(results: Sequence[OpResult], command: str) -> str:
    import triton

    from tritondiff.base import device
    t = totals(results)
    lines = [
        "# OpInfo sweep of the tritondiff compiler",
        "",
        f"- date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        f"- command: `{command}`",
        f"- torch {torch.__version__}, triton {triton.__version__}, device: {device.describe()}",
        "- each op: its first float32 samples on the kernel device, compiled with `backend=\"tritondiff\"`, judged by",
        "  `harness.oracle.compare` (float64 truth, eager float32 as the error yardstick)",
        "",
        "| | matched | fell back | failed to compile | mismatched | skipped |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for level in ("ops", "samples"):
        row = t[level]
        lines.append(f"| {level} | " + " | ".join(str(row[s]) for s in STATUSES) + " |")
    lines += ["", f"{stage_line(t)} (tritondiff.harness.triage: the IR straight out of lowering already wrong / "
              "the fused IR wrong / the IR right and the Triton wrong / an IR run raised)"]
    lines += ["", "## Ops that did not simply match", "", "| op | status | samples (m/f/x/mm/s) | detail |",
              "|---|---|---|---|"]
    for r in results:
        if r.status == "matched":
            continue
        detail = next((s.detail for s in r.samples if s.status == r.status), "")
        externs = sorted({e for s in r.samples for e in s.externs})
        if r.status == "fell back" and externs:
            detail = f"{detail}: {', '.join(externs)}"
        counts = "/".join(str(r.count(s)) for s in STATUSES)
        lines.append(f"| {r.name} | {r.status} | {counts} | {detail.replace('|', '/')} |")
    lines += ["", "## Matched ops", "", ", ".join(r.name for r in results if r.status == "matched"), ""]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.opinfo_sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all of op_db)")
    parser.add_argument("--premerge", action="store_true", help="sweep the fixed pre-merge subset")
    parser.add_argument("--out", help="write a markdown report here (its counts are published in reports/compiler.md)")
    parser.add_argument("--max-samples", type=int, default=3, help="samples per op (default 3)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per sample (default 120)")
    parser.add_argument("--quiet", action="store_true", help="no per-op progress lines")
    args = parser.parse_args(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()] if args.ops else None
    if args.premerge:
        ops = list(PREMERGE_OPS)
    results = sweep(ops, args.max_samples, args.timeout, log=None if args.quiet else print)
    t = totals(results)
    print("ops:    " + ", ".join(f"{s}: {t['ops'][s]}" for s in STATUSES))
    print("samples: " + ", ".join(f"{s}: {t['samples'][s]}" for s in STATUSES))
    print(stage_line(t))
    for r in results:
        for s in r.samples:
            if s.status in ("mismatched", "failed to compile"):
                print(f"  {r.name}: {s.status}: {s.detail}")
    if args.out:
        command = "python -m tools.opinfo_sweep " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(args.out, "w") as f:
            f.write(report(results, command.strip()))
        print(f"report written to {args.out}")
    return 1 if t["ops"]["mismatched"] else 0


if __name__ == "__main__":
    sys.exit(main())
