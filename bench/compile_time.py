"""Compile time of the models suite's blocks: cold, and warm from the on-disk caches in a new process.

    python -m bench.compile_time [--only BLOCK ...] [--modes float32 bfloat16 autocast]
                                 [--backends inductor tritondiff tritondiff-threads] [--out FILE.md] [--json FILE]

Per block of ``--suite models`` (``bench.compiler``'s workloads: forward and backward at the benchmark sizes)
and backend, two fresh processes share one set of cache directories made empty for the pair: the first
compiles cold (Triton's cache, the generated modules, the autotune and graph caches and Inductor's caches
all empty), the second starts warm from what the first left.  Compile time is a process's first call (compile
and run, forward and backward) minus its second call, as torch.compile users see it.  ``tritondiff`` runs on
one compile thread (each kernel compiled at its first launch); ``tritondiff-threads`` with its defaults, a
graph's kernels compiled on up to 16 threads before their first launch (``compiler.parallel``).  Where a
tritondiff process's time goes is printed too: the lean runtime's AOTAutograd trace and partition, its
pipeline (lowering, scheduling, code generation), Triton's compiles (or loads from its cache), and the rest
(Dynamo, the runtime's set-up, the calls themselves).  Every process
runs with Python's bytecode cache on and the project's bytecode written first, as an installed package has
it.  Inductor runs with its defaults (its compile workers, its FX graph and AOTAutograd caches on).  Prints a
Markdown table: cold and warm seconds per backend, warm / cold, and tritondiff's cold against Inductor's.
On a machine without a CUDA GPU it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional, Sequence

BACKENDS = ("inductor", "tritondiff", "tritondiff-threads")
MODES = ("float32", "bfloat16", "autocast")


def _cache_env(root: str, backend: str) -> dict[str, str]:
    env = {"TRITON_CACHE_DIR": os.path.join(root, "triton"),
           "TRITONDIFF_COMPILER_CACHE": os.path.join(root, "generated"),
           "TRITONDIFF_AUTOTUNE_CACHE": os.path.join(root, "autotune"),
           "TRITONDIFF_GRAPH_CACHE_DIR": os.path.join(root, "graphs"),
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor")}
    if backend.startswith("tritondiff"):        # one row on one thread, one on the default's, whatever the caller set
        threads = max(2, min(16, os.cpu_count() or 2))
        env["TRITONDIFF_COMPILE_WORKERS"] = str(threads) if backend == "tritondiff-threads" else "1"
    return env


def _profiled(fn: Callable[[], object], path: str) -> None:
    """Run ``fn`` under cProfile and write its heaviest functions (cumulative, then own time) to ``path``."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.runcall(fn)
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("cumulative").print_stats(60)
    stats.sort_stats("tottime").print_stats(30)
    with open(path, "w") as fh:
        fh.write(text.getvalue())


def one(name: str, backend: str, profile_to: Optional[str] = None) -> dict:
    """In a child process: the first and second call of workload ``name`` under ``backend``, seconds; with
    ``profile_to``, the first call runs under cProfile (its time then includes the profiler's) and the file
    gets where it went."""
    import torch
    import triton.compiler

    from bench import compiler as bench_compiler

    spans = []
    real = triton.compiler.compile

    def timed(*args, **kwargs):          # every JIT function binds triton.compiler.compile at its first call
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spans.append(time.perf_counter() - start)
    triton.compiler.compile = timed

    work = next(w for w in bench_compiler.model_workloads() if w.name == name)
    wrap = bench_compiler._backends(["inductor", "tritondiff"])["inductor" if backend == "inductor" else "tritondiff"]
    torch.manual_seed(0)
    inputs = work.make()
    fn = bench_compiler.build(work, wrap)
    times = []
    for call in range(2):
        torch.cuda.synchronize()
        start = time.perf_counter()
        if call == 0 and profile_to:
            _profiled(lambda: fn(*inputs), profile_to)
        else:
            fn(*inputs)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    out = {"first_s": times[0], "second_s": times[1], "compile_s": times[0] - times[1]}
    out["triton_compiles"], out["triton_s"] = len(spans), sum(spans)
    if backend != "inductor":
        from tritondiff import compiler

        out["workers"] = compiler.config.compile_workers
        out["kernels_submitted"] = compiler.counters["parallel_compile.submitted"]
        out["waited_s"] = compiler.counters["parallel_compile.waited_us"] / 1e6
        out["graphs"] = compiler.counters["graphs_compiled"]
        from tritondiff.compiler import pipeline

        out["pipeline_s"] = sum(pipeline.STEP_SECONDS.values())
        from tritondiff.compiler import lean

        out["trace_s"] = sum(lean.TRACE_SECONDS.values())
        out["lean_graphs"] = (compiler.counters["lean_runtime.training"]
                              + compiler.counters["lean_runtime.inference"])
        out["graph_cache_hits"] = compiler.counters["graph_cache.hits"]
    return out


def _with_bytecode(env: dict[str, str]) -> dict[str, str]:
    """``env`` with Python's bytecode cache on: an environment that turns it off (PYTHONDONTWRITEBYTECODE, as
    some containers do) makes every process compile the project's modules from source, seconds a start that
    no installed package pays (pip writes the bytecode at install)."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def prime_bytecode() -> None:
    """Write the bytecode of the project's packages, as ``pip install`` does, before any process is timed."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = [os.path.join(root, d) for d in ("compiler", "harness", "kernels", "tritondiff", "bench")
            if os.path.isdir(os.path.join(root, d))]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], env=_with_bytecode(dict(os.environ)),
                   capture_output=True, check=False)


def _child(name: str, backend: str, root: str, timeout_s: float, profile_to: Optional[str] = None) -> dict:
    env = _with_bytecode({**os.environ, **_cache_env(root, backend)})
    extra = ["--profile-to", profile_to] if profile_to else []
    try:
        done = subprocess.run([sys.executable, "-m", "bench.compile_time", "--one", name, "--backend", backend,
                               *extra],
                              env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout_s:.0f} s"}
    found = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode or not found:
        tail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        return {"error": f"exit {done.returncode}: {tail[:160]}"}
    return json.loads(found[0][len("RESULT "):])


def measure(name: str, backends: Sequence[str], timeout_s: float, profile_dir: Optional[str] = None) -> dict:
    row = {"workload": name}
    for backend in backends:
        def profile(run: str) -> Optional[str]:
            if not profile_dir:
                return None
            os.makedirs(profile_dir, exist_ok=True)
            stem = "".join(c if c.isalnum() else "_" for c in f"{name}-{backend}-{run}")
            return os.path.join(profile_dir, stem + ".txt")
        with tempfile.TemporaryDirectory(prefix="tritondiff-compile-time-") as root:
            cold = _child(name, backend, root, timeout_s, profile("cold"))
            warm = (_child(name, backend, root, timeout_s, profile("warm")) if "error" not in cold
                    else {"error": "cold failed"})
        row[backend] = {"cold": cold, "warm": warm}
    return row


def _s(r: dict) -> str:
    return f"{r['compile_s']:.1f}" if "compile_s" in r else f"error ({r.get('error', '?')})"


def breakdown(rows: list[dict], backends: Sequence[str]) -> str:
    """Where each tritondiff process's compile time went: its pipeline, Triton's compiles (summed over
    threads: with compile threads they overlap), and the rest."""
    lines = ["| block | backend | run | compile s | AOT trace s (graph cache hits) | pipeline s | Triton compiles "
             "| Triton s | launches waited s | rest s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for backend in backends:
            for run in ("cold", "warm"):
                r = row.get(backend, {}).get(run, {})
                if "compile_s" not in r or "pipeline_s" not in r:
                    continue
                threads = r.get("workers", 1) > 1      # compiles overlap there: what launches waited for counts
                trace = r.get("trace_s", 0.0)
                rest = r["compile_s"] - trace - r["pipeline_s"] - (r.get("waited_s", 0.0) if threads else r["triton_s"])
                # no graph ran on the lean runtime: AOTAutograd's own runtime traced it, untimed (in the rest)
                traced = (f"{trace:.2f} ({r.get('graph_cache_hits', 0)})" if r.get("lean_graphs", 1)
                          else "- (AOTAutograd)")
                lines.append(f"| {row['workload']} | {backend} | {run} | {r['compile_s']:.1f} | {traced} "
                             f"| {r['pipeline_s']:.2f} "
                             f"| {r['triton_compiles']} | {r['triton_s']:.1f} | {r.get('waited_s', 0.0):.1f} "
                             f"| {rest:.1f} |")
    return "\n".join(lines) + "\n"


def table(rows: list[dict], backends: Sequence[str]) -> str:
    head = "| block | " + " | ".join(f"{b} cold s | {b} warm s" for b in backends)
    head += " | tritondiff cold / Inductor cold | tritondiff warm / its cold |"   # tritondiff: one thread, else threads
    lines = [head, "|---|" + "---|---|" * len(backends) + "---|---|"]
    for row in rows:
        cells = [f"{_s(row[b]['cold'])} | {_s(row[b]['warm'])}" for b in backends]
        # the one-thread backend where measured, else the threaded one
        ours = row.get("tritondiff") or row.get("tritondiff-threads", {})
        ind = row.get("inductor", {})
        vs = warm_ratio = "-"
        if "compile_s" in ours.get("cold", {}) and "compile_s" in ind.get("cold", {}):
            vs = f"{ours['cold']['compile_s'] / ind['cold']['compile_s']:.2f}"
        if "compile_s" in ours.get("cold", {}) and "compile_s" in ours.get("warm", {}):
            warm_ratio = f"{ours['warm']['compile_s'] / ours['cold']['compile_s']:.2f}"
        lines.append(f"| {row['workload']} | " + " | ".join(cells) + f" | {vs} | {warm_ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compile_time", description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="these blocks only (compiler.models names: nanogpt_block, ...)")
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--timeout-s", type=float, default=300.0, help="per process")
    parser.add_argument("--out", help="write the Markdown table here")
    parser.add_argument("--json", help="write the raw figures here")
    parser.add_argument("--profile-dir", help="profile each process's first call (cProfile; it slows the call) "
                        "and write where its time went here, a file per block, backend and run")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench.compile_time: no CUDA device here; compile time is measured on a GPU")
        return 0
    if args.one:
        print("RESULT " + json.dumps(one(args.one, args.backend, args.profile_to)), flush=True)
        return 0
    from bench import compiler as bench_compiler

    names = [w.name for w in bench_compiler.model_workloads()
             if w.name.rsplit(" ", 1)[-1] in args.modes and (not args.only or w.name.split(" ", 1)[0] in args.only)]
    if not names:
        parser.error("no models-suite workload matches --only / --modes")
    import triton

    prime_bytecode()
    rows = []
    for name in names:
        rows.append(measure(name, args.backends, args.timeout_s, args.profile_dir))
        print(json.dumps(rows[-1]), flush=True)
    header = (f"Compile time, models suite: {torch.cuda.get_device_name()}, {os.cpu_count()} CPU cores, torch "
              f"{torch.__version__}, triton {triton.__version__}, Python {platform.python_version()}, "
              f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}; `python -m bench.compile_time "
              f"{' '.join(argv if argv is not None else sys.argv[1:])}`\n\n")
    text = header + table(rows, args.backends) + "\n" + breakdown(rows, args.backends)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
