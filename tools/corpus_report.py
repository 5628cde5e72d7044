"""Run the tritondiff corpus (tests/corpus/correct: must pass; tests/corpus/bugs: must fail;
tests/corpus/edge_bugs: must be found as an edge finding) and write a Markdown table of verdicts with totals.

    python -m tools.corpus_report --budget 120 --out FILE.md [--jobs N] [--seed S] [--only GLOB ...]

Each subject is explored in-process (``InProcess`` executor) in a pool of ``--jobs`` processes.  A bug's
exploration stops at its first ``wrong`` finding (the seconds to that verdict are recorded); a correct
kernel runs its whole budget, then (on a GPU with compute-sanitizer, as ``tritondiff check`` does) a
repro of its last passing case runs under memcheck.  Edge-tier findings (overflow, subnormal, non-finite inputs) do not fail a
run unless strict; they are recorded in their own column, and an edge bug's verdict is ``edge`` once one is
found (its exploration stops there).
"""
from __future__ import annotations

import argparse
import datetime
import fnmatch
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "corpus")


class _Stop(Exception):
    pass


def corpus_subjects() -> list[tuple[str, str, str]]:
    """(expected, file, subject name) for every subject of the corpus."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tritondiff.harness.loader import load_file, subjects_in

    out = []
    for expected, folder in (("pass", "correct"), ("fail", "bugs"), ("edge", "edge_bugs")):
        d = os.path.join(CORPUS, folder)
        for f in sorted(os.listdir(d)):
            if f.endswith(".py") and not f.startswith("_"):
                path = os.path.join(d, f)
                for s in subjects_in(load_file(path)):
                    out.append((expected, path, s.name))
    return out


def run_one(expected: str, path: str, name: str, budget_s: float, seed: int, out_dir: str) -> dict:
    """Explore one subject in this process; return a row of the report."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tritondiff import explore
    from tritondiff.harness import memcheck
    from tritondiff.harness.executor import InProcess
    from tritondiff.harness.loader import load_file, subjects_in

    subj = next(s for s in subjects_in(load_file(path)) if s.name == name)
    start = time.monotonic()
    first: dict = {}
    edges: list = []

    def on_finding(found):
        if found.tier == "edge":
            edges.append(f"{found.failure_class}: {_short(found.message)}")
            if expected == "edge" and not first:
                first.update(seconds=time.monotonic() - start, klass=found.failure_class, message=found.message,
                             tier="edge", dump=found.dump, case=found.case.describe() if found.case else "")
                raise _Stop()
        if found.status == "fail" and not first:
            first.update(seconds=time.monotonic() - start, klass=found.failure_class, message=found.message,
                         tier=found.tier, dump=found.dump, case=found.case.describe() if found.case else "")
            if expected == "fail":
                raise _Stop()

    examples = [0]
    last = memcheck.LastPassing()

    def on_example(case, verdict):
        examples[0] += 1
        last(case, verdict)

    result = None
    try:
        result = explore(subj, budget_s=budget_s, seed=seed, executor=InProcess(), out_dir=out_dir,
                         database=False, on_finding=on_finding, on_example=on_example)
        if result.status == "pass" and memcheck.wanted():       # as `tritondiff check` does on a GPU
            result = memcheck.sanitize(subj, result, last, out_dir=out_dir,
                                       say=lambda line: print(f"{name}: {line.strip()}", flush=True))
            if result.status == "fail":
                on_finding(result)
    except _Stop:
        pass
    except Exception as e:  # noqa: BLE001 - a harness error is a row too
        return dict(case=name, file=os.path.relpath(path, ROOT), expected=expected, verdict="error",
                    klass=type(e).__name__, message=_short(str(e)), seconds=time.monotonic() - start,
                    examples=examples[0], edges=edges, dump="", case_desc="")
    verdict = first.get("tier", "wrong") if first else "pass"
    verdict = "fail" if verdict == "wrong" else verdict
    seconds = first.get("seconds", result.seconds if result else time.monotonic() - start)
    return dict(case=name, file=os.path.relpath(path, ROOT), expected=expected, verdict=verdict,
                klass=first.get("klass") or "", message=_short(first.get("message", "")), seconds=seconds,
                examples=examples[0], edges=edges, dump=first.get("dump") or "", case_desc=first.get("case", ""))


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _star(args):
    return run_one(*args)


def versions() -> dict:
    import torch
    import triton

    from tritondiff.base import device
    return {"device": "cuda" if not device.is_interpreter() else "cpu (Triton interpreter)",
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}


def markdown(rows: list[dict], args, command: str, wall_s: float) -> str:
    v = versions()
    correct = [r for r in rows if r["expected"] == "pass"]
    bugs = [r for r in rows if r["expected"] == "fail"]
    edge_bugs = [r for r in rows if r["expected"] == "edge"]
    passed = sum(r["verdict"] == "pass" for r in correct)
    found = sum(r["verdict"] == "fail" for r in bugs)
    found_edge = sum(r["verdict"] in ("edge", "fail") for r in edge_bugs)
    false_edges = sum(bool(r["edges"]) for r in correct)
    bug_times = [r["seconds"] for r in bugs if r["verdict"] == "fail"]
    all_times = [r["seconds"] for r in rows]
    lines = ["# tritondiff corpus results", "",
             f"- command: `{command}`",
             f"- date: {datetime.date.today().isoformat()}; wall time {wall_s / 60:.1f} min",
             f"- device: {v['device']}; torch {v['torch']}, triton {v['triton']}, Python {v['python']}",
             f"- budget per subject: {args.budget} s; Hypothesis seed {args.seed}; executor InProcess; "
             f"{args.jobs} parallel jobs", "",
             "## Totals", "",
             f"- correct kernels passed: **{passed} / {len(correct)}**",
             f"- bugs found (a `wrong` finding): **{found} / {len(bugs)}**",
             f"- edge-only bugs found (an `edge` finding, non-finite inputs): **{found_edge} / {len(edge_bugs)}**",
             f"- correct kernels with an edge warning: {false_edges} / {len(correct)} (listed below)",
             f"- time to verdict, found bugs: median {statistics.median(bug_times):.1f} s, max {max(bug_times):.1f} s"
             if bug_times else "- time to verdict, found bugs: none found",
             f"- time to verdict, all cases (a passing case runs its whole budget): median "
             f"{statistics.median(all_times):.1f} s, max {max(all_times):.1f} s", "",
             "## Cases", "",
             "| case | file | expected | verdict | failure class | seconds to verdict | examples | edge warnings |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = "" if (r["verdict"] == r["expected"]) else " **(unexpected)**"
        edges = "; ".join(e.split(":")[0] for e in r["edges"]) or ""
        lines.append(f"| {r['case']} | {r['file']} | {r['expected']} | {r['verdict']}{ok} | {r['klass']} | "
                     f"{r['seconds']:.1f} | {r['examples']} | {edges} |")
    lines += ["", "## Verdict messages (unexpected verdicts and edge warnings)", ""]
    for r in rows:
        if r["verdict"] != r["expected"] or r["edges"]:
            lines.append(f"- **{r['case']}** ({r['verdict']}, expected {r['expected']}): {r['message'] or '-'}"
                         + (f" -- case: {r['case_desc']}" if r["case_desc"] else ""))
            for e in r["edges"]:
                lines.append(f"  - edge: {e}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.corpus_report", description=__doc__.split("\n")[0])
    p.add_argument("--budget", type=float, default=120.0, help="seconds per subject")
    p.add_argument("--out", default="corpus_results.md")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1)))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", nargs="+", default=["*"], help="globs over subject names (a case matching any runs)")
    p.add_argument("--dump-dir", default=os.path.join(ROOT, "tritondiff-out", "corpus"))
    args = p.parse_args(argv)
    command = "python -m tools.corpus_report " + " ".join(sys.argv[1:] if argv is None else argv)
    subjects = [s for s in corpus_subjects() if any(fnmatch.fnmatch(s[2], glob) for glob in args.only)]
    work = [(e, f, n, args.budget, args.seed, args.dump_dir) for e, f, n in subjects]
    start = time.monotonic()
    rows = []
    with mp.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
        for row in pool.imap(_star, work):
            rows.append(row)
            print(f"{row['verdict']:5} (expected {row['expected']}) {row['case']:42} {row['klass']:16} "
                  f"{row['seconds']:6.1f} s  {row['examples']} ex", flush=True)
    text = markdown(rows, args, command, time.monotonic() - start)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
