"""The pre-merge gate: ``python -m tritondiff.harness.gate [--junit-dir DIR]`` (what ``.ci/run`` runs).

Three parts, each one pytest invocation with its own JUnit XML file:

1. ``unit``        -- the project's unit tests (``tests/``), without the
                      bundled-subject file and the regression corpus, and
                      without tests marked ``slow``;
2. ``subjects``    -- every bundled subject at the ``ci`` profile
                      (``tests/test_bundled_subjects.py``), on 2 xdist workers;
3. ``regressions`` -- replay of the regression corpus (``tests/regressions/``):
                      every finding ever fixed must pass now.

All parts run even when one fails; the gate prints the time and test counts
per part at the end and exits 1 when any part failed (2 on bad arguments).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Part:
    """One pytest invocation of the gate."""

    key: str                   # also the JUnit file's name
    title: str
    args: tuple[str, ...]      # pytest arguments (paths relative to the repository root)
    xdist_workers: int = 0     # run on this many xdist workers when pytest-xdist is installed


PARTS = (
    Part("unit", "unit tests", ("tests", "--ignore=tests/test_bundled_subjects.py", "--ignore=tests/regressions",
                                "-m", "not slow"), xdist_workers=2),
    Part("subjects", "bundled subjects (ci profile)", ("tests/test_bundled_subjects.py", "--tritondiff-profile=ci"),
         xdist_workers=2),
    Part("regressions", "regression corpus", ("tests/regressions",)),
)


@dataclasses.dataclass
class PartResult:
    part: Part
    returncode: int
    seconds: float
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0

    @property
    def passed(self) -> bool:
        return self.returncode == 0

    @property
    def verdict(self) -> str:
        if self.passed:
            return "passed"
        if self.returncode == 5:
            return "NO TESTS"
        return "FAILED"


def pytest_command(part: Part, junit_path: str, extra: list[str] | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *part.args, f"--junitxml={junit_path}", "-q", "-rfE"]
    if part.xdist_workers and importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", str(part.xdist_workers)]
    return cmd + list(extra or [])


def junit_counts(path: str) -> dict[str, int]:
    """tests / failures / errors / skipped summed over the suites of a JUnit XML file (zeros if unreadable)."""
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return counts
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0) or 0)
    return counts


def run_part(part: Part, junit_dir: str, *, cwd: str = ROOT, extra: list[str] | None = None) -> PartResult:
    junit_path = os.path.join(junit_dir, f"{part.key}.xml")
    try:
        os.unlink(junit_path)            # a part that crashes must not report an earlier run's counts
    except FileNotFoundError:
        pass
    cmd = pytest_command(part, junit_path, extra)
    print(f"\n=== gate: {part.title}: {' '.join(cmd[2:])}", flush=True)
    start = time.monotonic()
    rc = subprocess.call(cmd, cwd=cwd)
    result = PartResult(part, rc, time.monotonic() - start)
    for key, value in junit_counts(junit_path).items():
        setattr(result, key, value)
    return result


def format_table(results: list[PartResult]) -> str:
    head = f"{'part':<32} {'result':<9} {'tests':>6} {'failed':>7} {'errors':>7} {'skipped':>8} {'seconds':>9}"
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(f"{r.part.title:<32} {r.verdict:<9} {r.tests:>6} {r.failures:>7} {r.errors:>7} {r.skipped:>8} "
                     f"{r.seconds:>9.1f}")
    total = sum(r.seconds for r in results)
    verdict = "passed" if all(r.passed for r in results) else "FAILED"
    lines.append("-" * len(head))
    lines.append(f"{'gate':<32} {verdict:<9} {sum(r.tests for r in results):>6} "
                 f"{sum(r.failures for r in results):>7} {sum(r.errors for r in results):>7} "
                 f"{sum(r.skipped for r in results):>8} {total:>9.1f}")
    return "\n".join(lines)


def run_gate(parts: tuple[Part, ...] = PARTS, *, junit_dir: str, cwd: str = ROOT,
             extra: list[str] | None = None) -> tuple[int, list[PartResult]]:
    """Run every part (even after a failure); returns (exit status, per-part results)."""
    os.makedirs(junit_dir, exist_ok=True)
    results = [run_part(part, junit_dir, cwd=cwd, extra=extra) for part in parts]
    print("\n=== gate: time per part\n" + format_table(results), flush=True)
    return (0 if all(r.passed for r in results) else 1), results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritondiff.harness.gate", description=__doc__.splitlines()[0])
    parser.add_argument("--junit-dir", default=os.path.join("reports", "junit"),
                        help="where the JUnit XML files go (default reports/junit)")
    parser.add_argument("--part", action="append", choices=[p.key for p in PARTS],
                        help="run only this part (repeatable; default: all three)")
    args = parser.parse_args(argv)
    parts = tuple(p for p in PARTS if not args.part or p.key in args.part)
    junit_dir = os.path.abspath(args.junit_dir)
    status, _ = run_gate(parts, junit_dir=junit_dir)
    return status


if __name__ == "__main__":
    sys.exit(main())
