"""The ``tritondiff`` command line.

Exit codes: 0 all subjects pass (or the replayed failure is gone), 1 a subject
fails (or still fails), 2 usage error (missing file, import error, no
subjects, bad flag) or a harness error (the worker cannot load the subject,
...), reported in one line, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tritondiff.base import exc as base_exc

from .config import apply_project_settings, config
from .exc import HarnessError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


def _budget(text: str) -> float:
    """Seconds, or a number with s/m/h ('90', '90s', '10m', '1h')."""
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    try:
        value = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"budget {text!r} is not a duration (e.g. 90, 90s, 10m)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"budget {text!r} must be positive")
    return value


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return v


def _disable(text: str) -> frozenset:
    from .api import HAZARDS

    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    bad = sorted(names - set(HAZARDS))
    if bad:
        raise argparse.ArgumentTypeError(f"unknown hazard(s) {', '.join(bad)}; known: {', '.join(HAZARDS)}")
    return names


def _add_verdict_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strict", action="store_true", default=None,
                        help="fail on edge findings too (inputs at the dtype's overflow threshold, subnormal or "
                             "non-finite), not only on findings on normal-range inputs; also TRITONDIFF_STRICT=1 "
                             "or strict = true in [tool.tritondiff] of pyproject.toml")
    parser.add_argument("--max-findings", type=_positive_int, default=None,
                        help="distinct findings to look for per subject before its search stops (default 4)")
    parser.add_argument("--baseline", default=None, metavar="FILE",
                        help="a TOML file of accepted findings ([[accepted]] signature = ..., reason = ...): "
                             "reported, not failed; also TRITONDIFF_BASELINE or baseline in [tool.tritondiff]")


def _apply_verdict_options(args, start: str) -> None:
    """The project's [tool.tritondiff] settings, then the command line's, onto the harness config."""
    apply_project_settings(start)
    if args.strict:
        config.strict = True
    if args.max_findings is not None:
        config.max_findings = args.max_findings
    if getattr(args, "sanitize", None) is not None:
        config.sanitize = args.sanitize
    if args.baseline is not None:
        config.baseline = os.path.abspath(args.baseline)
    if config.baseline:
        from .baseline import load

        load(config.baseline)                 # a bad file is a usage error now, not after the first finding


def build_parser() -> argparse.ArgumentParser:
    from tritondiff import __version__

    parser = _Parser(prog="tritondiff", description="Differential correctness testing of Triton kernels.")
    parser.add_argument("--version", action="version", version=f"tritondiff {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    check = sub.add_parser("check", help="fuzz the subjects of one Python file (or bundled / pack subjects by name)")
    check.add_argument("file", help="a Python file declaring @subject functions, or a subject name or glob "
                                    "(kernels.nrm2, 'wild.liger.*')")
    check.add_argument("--subject", action="append", help="only this subject (repeatable)")
    check.add_argument("--budget", type=_budget, default=None,
                       help="wall time per subject (default 90s); an example still running when it ends may "
                            "overrun it by up to 20%% before it is cut short")
    check.add_argument("--max-examples", type=_positive_int, default=10_000)
    check.add_argument("--seed", type=int, default=None,
                       help="Hypothesis seed (default: a random one, printed per subject and kept in summary.json)")
    check.add_argument("--out", default=None, help="dump directory (default ./tritondiff-out)")
    check.add_argument("--disable", type=_disable, default=frozenset(),
                       help="comma-separated hazard hunters to switch off")
    check.add_argument("--sanitize", dest="sanitize", action="store_const", const="on", default=None,
                       help="on GPU, run each subject's repro (its finding's, or its last passing case's) under "
                            "compute-sanitizer memcheck, report in the dump (default: where compute-sanitizer is "
                            "on PATH; also TRITONDIFF_SANITIZE=on|off|auto or sanitize in [tool.tritondiff])")
    check.add_argument("--no-sanitize", dest="sanitize", action="store_const", const="off",
                       help="no compute-sanitizer run after each subject")
    check.add_argument("--json", action="store_true",
                       help="one JSON object per subject instead of the text lines: status, findings (tier, class, "
                            "message, case, dump), what was covered and what went untested")
    _add_verdict_options(check)
    fuzz = sub.add_parser("fuzz", help="a fuzz campaign over many subjects, with a findings store")
    fuzz.add_argument("targets", nargs="*",
                      help="subject files (file.py or file.py::name), bundled subject names or globs; "
                           "none: every bundled subject")
    fuzz.add_argument("--budget", type=_budget, default=None,
                      help="total wall time of the campaign (default 10m); with --resume, the campaign's new total "
                           "(time earlier runs spent counts against it; default: the stored total); "
                           "a long example may overrun its task's share by up to 20%% before it is cut short")
    fuzz.add_argument("--workers", type=_positive_int, default=None,
                      help="parallel lanes (default: one per GPU on CUDA, one per CPU core otherwise)")
    fuzz.add_argument("--seed", type=int, default=None, help="campaign seed (default: random, printed)")
    fuzz.add_argument("--store", default=None, help="SQLite findings store (default tritondiff-out/findings.db)")
    fuzz.add_argument("--resume", action="store_true", help="continue the store's latest unfinished campaign")
    fuzz.add_argument("--report", default=None, metavar="DIR", help="write the report to DIR when the run ends")
    fuzz.add_argument("--disable", type=_disable, default=frozenset(),
                      help="comma-separated hazard hunters to switch off")
    fuzz.add_argument("--list", action="store_true",
                      help="print the subjects the targets name (none: every bundled subject), grouped by prefix, "
                           "and exit")
    _add_verdict_options(fuzz)
    fuzz.add_argument("--ray", default=None, metavar="ADDRESS",
                      help="run the lanes as Ray actors on a cluster: the head's address (host:port), 'auto' on a "
                           "cluster node, or 'local' to start one here; the store stays here (needs "
                           "tritondiff[ray]); --workers defaults to the cluster's GPUs (CPUs without CUDA)")
    fuzz.add_argument("--huge", action="store_true",
                      help="CUDA only: draw each target's largest input just past 2^31 elements, within free GPU "
                           "and host memory (targets that do not fit are skipped, with the reason)")
    report = sub.add_parser("report", help="write Markdown, HTML and JSON reports of a findings store")
    report.add_argument("store", help="a findings store written by tritondiff fuzz")
    report.add_argument("--out", default=None,
                        help="output directory (default: beside the store, findings.db -> findings-report/)")
    replay = sub.add_parser("replay", help="re-run the finding in a dump directory")
    replay.add_argument("dump", help="a dump directory written by check or fuzz")
    replay.add_argument("--in-process", action="store_true", help="no worker isolation")
    replay.add_argument("--sanitize", action="store_true", help="also run the repro under compute-sanitizer memcheck")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError("tritondiff: missing command (check, fuzz, report, replay); see tritondiff --help")
        if args.command == "check":
            return _check(args)
        if args.command == "fuzz":
            return _fuzz(args)
        if args.command == "report":
            return _report(args)
        if args.command == "replay":
            from .replay import replay_dump

            code = replay_dump(args.dump, isolate=not args.in_process)
            if args.sanitize:
                _sanitize(args.dump)
            return code
        raise UsageError(f"tritondiff: unknown command {args.command!r}")
    except base_exc.UsageError as e:
        print(str(e).splitlines()[0] if str(e) else "tritondiff: usage error", file=sys.stderr)
        return 2
    except HarnessError as e:               # not the subject's failure (exit 1): the harness could not run it
        print(f"tritondiff: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tritondiff: interrupted", file=sys.stderr)
        return 130


def _one_line(error: HarnessError) -> str:
    """The first line of ``error``; when it only introduces a traceback ("...:"), with the traceback's
    last line (the exception that says what went wrong)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:
        cause = next((line for line in reversed(lines[1:]) if not line.startswith("---")), "")
        first = f"{first} {cause}".rstrip()
    return first


def _check(args) -> int:
    named = not os.path.isfile(args.file) and not args.file.endswith(".py") and os.sep not in args.file
    if not named and not os.path.isfile(args.file):   # answered before the heavy imports (torch, triton, hypothesis)
        raise UsageError(f"{os.path.abspath(args.file)}: no such file")
    from . import memcheck
    from .explore import explore
    from .loader import load_file, subjects_in

    _apply_verdict_options(args, args.file if not named else os.getcwd())
    if named:                                 # bundled or pack subjects by name or glob, as `fuzz` takes them
        from .campaign import resolve_targets, runnable
        subjects = runnable(resolve_targets([args.file]), print)
    else:
        subjects = subjects_in(load_file(args.file))
    if not subjects:
        raise UsageError(f"{args.file}: no @subject functions found")
    if args.subject:
        names = {s.name for s in subjects}
        missing = [n for n in args.subject if n not in names]
        if missing:
            raise UsageError(f"{args.file}: no subject named {', '.join(missing)} (have: {', '.join(sorted(names))})")
        subjects = [s for s in subjects if s.name in args.subject]
    failed = 0
    for subj in subjects:
        last = memcheck.LastPassing()
        progress = _CheckProgress(subj.name, args.budget or config.budget_s)
        result = explore(subj, budget_s=args.budget, max_examples=args.max_examples, seed=args.seed,
                         out_dir=args.out, disabled=args.disable, on_example=lambda c, v: (last(c, v), progress(c, v)))
        progress.close()
        if memcheck.wanted():
            result = memcheck.sanitize(subj, result, last, out_dir=args.out, disabled=args.disable)
        print(json.dumps(result.to_json()) if args.json else result.line(), flush=True)
        failed += result.status == "fail"
    return 1 if failed else 0


class _CheckProgress:
    """``check``'s live line on a terminal (stderr): examples so far, failing ones, the case being run and the
    time left; nothing when stderr is not a terminal (logs keep only the verdict lines)."""

    def __init__(self, name: str, budget_s: float, out=None):
        from .display import Display

        self.display = Display(out or sys.stderr, None)
        self.name, self.budget_s, self.start = name, budget_s, time.monotonic()
        self.examples = self.failing = 0
        self._shown_at = -1.0

    def __call__(self, case, verdict) -> None:
        self.examples += 1
        self.failing += verdict.status == "fail"
        now = time.monotonic()
        if not self.display.live or now - self._shown_at < 0.2:
            return
        self._shown_at = now
        left = max(0.0, self.budget_s - (now - self.start))
        self.display.status(f"{self.name}: {self.examples} examples, {self.failing} failing, {left:.0f} s left; "
                            f"last {case.describe()}")

    def close(self) -> None:
        self.display.close()


def _sanitize(dump_dir: str) -> None:
    from . import memcheck

    why = memcheck.available()
    if why:
        print(f"      memcheck: skipped: {why}", flush=True)
        return
    path, errors = memcheck.memcheck_dump(dump_dir)
    print(f"      memcheck: {errors} error(s): {path}", flush=True)


def _fuzz(args) -> int:
    import signal

    from .campaign import format_name_groups, resolve_targets, run_campaign

    if args.list:
        print(format_name_groups(s.name for s in resolve_targets(args.targets)))
        return 0
    _apply_verdict_options(args, os.getcwd())

    def _terminate(signum, frame):           # SIGTERM stops as cleanly as Ctrl-C
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        result = run_campaign(args.targets, budget_s=args.budget, workers=args.workers, seed=args.seed,
                              store=args.store, resume=args.resume, disabled=args.disable, report_dir=args.report,
                              huge=args.huge, ray=args.ray)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return result.exit_code


def _report(args) -> int:
    from .report import write_report

    out = args.out or os.path.splitext(os.path.abspath(args.store))[0] + "-report"
    paths = write_report(args.store, out)
    for kind, path in paths.items():
        print(f"{kind:<8} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
