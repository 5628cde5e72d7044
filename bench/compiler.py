"""Benchmark: tritondiff-compiled vs Inductor (torch.compile's default backend) vs eager, seed workloads.

    python -m bench.compiler [--out FILE.md] [--json FILE] [--suite seed|wide|models|all] [--only NAME ...]
                                 [--budget-s S] [--dry-run]
                                 [--backends inductor tritondiff] [--variant NAME:KNOB=VALUE,... ...]
                                 [--rounds N]
    python -m bench.compiler --summary FILE.json

Per workload and backend: time (CUDA-event timings after warm-up, ``_timing.bench``: the median of
``ROUNDS`` rounds that each time every backend once, interleaved, so host drift on a VM hits all alike),
GB/s of the workload's minimal traffic (bytes every implementation must move: inputs read
once, outputs written once, saved statistics of a backward), that as a % of the measured
device-to-device copy bandwidth, the speedup of tritondiff over Inductor, and each backend's
cold compile time (the first call's wall time, Triton / Inductor caches pointed at an empty
directory and dynamo reset, so nothing is reused).  GPU time (the kernels' summed durations) is
taken in the same rounds, and each speedup carries the lowest and highest of its rounds' ratios:
a range that holds 1 is a tie at the run's noise (``--rounds`` sets how many rounds).  The
geometric mean of the speedups closes the table.  A workload that fails is reported with its error and the run goes on; workloads
left when ``--budget-s`` is spent are reported as skipped, so the command fits the nightly slot.
``--variant`` adds tritondiff runs with ``compiler.config`` knobs patched: the heuristics'
defaults are chosen from such sweeps on a GPU (reports/performance-log.md).

On a machine without a CUDA GPU it exits 2 with one line; ``--dry-run`` lists the workloads
and their byte counts anywhere, and ``--summary`` prints an earlier run's ``--json`` file one line per
tritondiff row (GPU time against Inductor's, % of copy bandwidth, the oracle).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

import torch

from tritondiff.base import device as _device

from tritondiff.compiler import models, workloads

GPU_LINE = "bench.compiler: needs a CUDA GPU (none found here); --dry-run lists the workloads"
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmarked program: its inputs, the callable, and its minimal traffic in bytes."""

    name: str
    shape: str
    dtype: torch.dtype
    nbytes: int
    make: Callable[[], tuple]           # inputs on the current CUDA device
    build: Callable[[Callable], Callable]  # fn -> the timed callable (adds the backward when needed)
    fn: Callable


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _randn(*shape: int, dtype: torch.dtype = F32, grad: bool = False) -> torch.Tensor:
    t = torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)
    return t.requires_grad_(grad)


def _forward(fn: Callable) -> Callable:
    return fn


def _fwd_bwd(fn: Callable) -> Callable:
    def run(x, w, b, dy):
        y = fn(x, w, b)
        return torch.autograd.grad(y, (x, w, b), dy)
    return run


def _nrm2(n: int) -> Workload:
    return Workload(f"nrm2 2^{int(math.log2(n))}", f"[{n}]", F32, n * 4 + 4, lambda: (_randn(n),), _forward,
                    workloads.nrm2)


def _layer_norm(m: int, n: int, dtype: torch.dtype) -> Workload:
    e = _size(dtype)
    # forward reads x, writes y and (mean, rstd); backward reads x, dy, (mean, rstd), writes dx; params are small
    nbytes = 5 * m * n * e + 2 * 2 * m * 4 + 6 * n * e

    def make():
        return (_randn(m, n, dtype=dtype, grad=True), _randn(n, dtype=dtype, grad=True),
                _randn(n, dtype=dtype, grad=True), _randn(m, n, dtype=dtype))
    return Workload(f"layer_norm fwd+bwd {m}x{n} {str(dtype)[6:]}", f"[{m}, {n}]", dtype, nbytes, make, _fwd_bwd,
                    workloads.layer_norm)


def _mhc(t: int, c: int) -> list[Workload]:
    n = workloads.MHC_N
    k = 2 * n + math.factorial(n)
    pre = Workload("mHC pre_map", f"T={t} C={c}", BF16, t * n * c * 2 + t * n * 4 + t * c * 2,
                   lambda: (_randn(t, n, c, dtype=BF16), torch.rand(t, n, device="cuda")), _forward,
                   workloads.mhc_pre_map)
    post = Workload("mHC post_res", f"T={t} C={c}", BF16, 2 * t * n * c * 2 + t * c * 2 + t * n * n * 4 + t * n * 4,
                    lambda: (_randn(t, n, c, dtype=BF16), _randn(t, c, dtype=BF16),
                             torch.softmax(torch.randn(t, n, n, device="cuda"), -1), torch.rand(t, n, device="cuda")),
                    _forward, workloads.mhc_post_res)
    proj = Workload("mHC rmsnorm_project", f"T={t} C={c}", BF16, t * n * c * 2 + k * n * c * 2 + t * k * 4,
                    lambda: (_randn(t, n * c, dtype=BF16), _randn(k, n * c, dtype=BF16) * 0.02), _forward,
                    workloads.mhc_rmsnorm_project)
    return [pre, post, proj]


def all_workloads() -> list[Workload]:
    """The seed workloads (issue #8), in the order they are run."""
    m = 8192
    return [
        _nrm2(2**20), _nrm2(2**28),
        _layer_norm(1_152_000, 16, F32), _layer_norm(1_152_000, 16, F16), _layer_norm(4096, 10240, F16),
        *_mhc(65536, 2560),
        Workload(f"softmax {m}x{m}", f"[{m}, {m}]", F32, 2 * m * m * 4, lambda: (_randn(m, m),), _forward,
                 workloads.softmax),
        Workload(f"rms_norm {m}x{m}", f"[{m}, {m}]", F32, 2 * m * m * 4 + m * 4,
                 lambda: (_randn(m, m), _randn(m)), _forward, workloads.rms_norm),
    ]


def _log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x, dim=-1)


def _column_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=0)


def wide_workloads() -> list[Workload]:
    """Shapes past the seeds' (``--suite wide``): rows too long for one block, so the looped and non-mixed-order
    paths that the seed table never reaches are timed against Inductor too -- vocabulary-sized softmax rows,
    a long-row RMSNorm and layer norm, and a column sum -- and two layer norms whose plans were 4x behind eager:
    a square one (its row and column sums alike in extent) and float32 rows of 10240 (the mixed-order kernel's
    registers)."""
    m, n, v = 4096, 32768, 131072
    return [
        Workload(f"softmax {m}x{n}", f"[{m}, {n}]", F32, 2 * m * n * 4, lambda: (_randn(m, n),), _forward,
                 workloads.softmax),
        Workload(f"softmax 1024x{v} bf16", f"[1024, {v}]", BF16, 2 * 1024 * v * 2,
                 lambda: (_randn(1024, v, dtype=BF16),), _forward, workloads.softmax),
        Workload(f"log_softmax {m}x{n}", f"[{m}, {n}]", F32, 2 * m * n * 4, lambda: (_randn(m, n),), _forward,
                 _log_softmax),
        Workload(f"rms_norm {m}x{n}", f"[{m}, {n}]", F32, 2 * m * n * 4 + n * 4,
                 lambda: (_randn(m, n), _randn(n)), _forward, workloads.rms_norm),
        _layer_norm(2048, n, F16),
        _layer_norm(4096, 4096, F16),
        _layer_norm(4096, 10240, F32),
        Workload("column sum 8192x8192", "[8192, 8192]", F32, 8192 * 8192 * 4 + 8192 * 4,
                 lambda: (_randn(8192, 8192),), _forward, _column_sum),
    ]


#: (block, mode) rows of ``--suite models``: every block in float32 and bfloat16, and under bfloat16 autocast the
#: blocks mixed-precision training runs that way (``compiler.models``).
MODEL_MODES = ("float32", "bfloat16")
AUTOCAST_MODELS = ("nanogpt_block", "llama_layer", "tied_mlp_lm", "resnet_basic_block")


def _model_workload(model: "models.Model", mode: str) -> Workload:
    """One block of the models suite, forward and backward, at its benchmark sizes in ``mode``: the timed call
    runs the backend's compiled module call and takes every input's and parameter's gradient.  The module is
    built once per dtype (float64 for the oracle's truth), so a backend compiles it once."""
    sizes = dict(model.bench)
    modules: dict[torch.dtype, torch.nn.Module] = {}

    def make():
        g = torch.Generator(device="cuda").manual_seed(0)
        inputs = tuple(torch.randint(0, sizes[i.ids_below], models.concrete(i.shape, sizes), device="cuda",
                                     generator=g)
                       if i.ids_below else torch.randn(models.concrete(i.shape, sizes), device="cuda", generator=g)
                       for i in model.inputs.values())
        cotangents = tuple(torch.randn(s, device="cuda", generator=g) for s in models.output_shapes(model, sizes))
        return inputs + cotangents

    def build(wrapped: Callable) -> Callable:
        count = len(model.inputs)

        def call(*tensors):
            floats = [t for t in tensors if t.is_floating_point()]
            dtype = models.compute_dtype(mode, floats[0].dtype)
            if dtype not in modules:
                modules[dtype] = models.module(model, sizes, 0, mode, dtype, "cuda")
            return models.forward_backward(modules[dtype], mode, [models.cast_input(t, mode) for t in tensors[:count]],
                                           [models.cast_input(t, mode) for t in tensors[count:]], wrapped)
        return call
    shape = " ".join(f"{k}={v}" for k, v in sizes.items())
    return Workload(f"{model.name} fwd+bwd {mode}", shape, models.compute_dtype(mode, F32), 0, make, build,
                    models.call_module)


def model_workloads() -> list[Workload]:
    """``--suite models``: the model building blocks of ``compiler.models`` (nanoGPT, Llama, ResNet, ViT, cross
    entropy, a tied LM, two MoE routings, a UNet block, a grab-bag of indexing ops), forward and backward."""
    return [_model_workload(m, mode) for m in models.SUITE
            for mode in MODEL_MODES + (("autocast",) if m.name in AUTOCAST_MODELS else ())]


SUITES = {"seed": all_workloads, "wide": wide_workloads, "models": model_workloads,
          "all": lambda: all_workloads() + wide_workloads()}


# ---------------------------------------------------------------------------------- running

@dataclasses.dataclass
class Result:
    backend: str
    ms: Optional[float] = None
    skipped: Optional[str] = None           # not run (the time budget was spent)
    ms_rounds: Optional[list] = None        # the latency of each round (ms is their median)
    gpu_ms: Optional[float] = None          # the kernels' summed durations per call (torch.profiler)
    gpu_ms_rounds: Optional[list] = None    # the GPU time of each round, None where missed (gpu_ms: the median)
    host_ms: Optional[float] = None         # wall time to enqueue one call, the GPU never waited on
    compile_s: Optional[float] = None
    launches: Optional[float] = None        # kernel launches per call (the profiler's count)
    generated: Optional[float] = None       # of which Triton kernels a compiler generated; the rest: library / ATen
    error: Optional[str] = None
    matches_eager: Optional[bool] = None


def _with_config(changes: dict) -> Callable[[Callable], Callable]:
    """tritondiff with ``compiler.config`` knobs, which ``build`` patches around each whole timed call."""
    from tritondiff import compiler

    def wrap(fn: Callable) -> Callable:
        return compiler.compile_fresh(fn)
    wrap.knobs = dict(changes)
    return wrap


def build(w: Workload, wrap: Callable) -> Callable:
    """The timed callable of ``w`` under one backend.  A variant's knobs are patched around the whole call --
    the compile, the compiled forward and the backward autograd runs after the forward returns: patched
    inside the compiled forward alone, a fwd+bwd workload compiled and ran its backward on the defaults."""
    fn = w.build(wrap(w.fn))
    knobs = getattr(wrap, "knobs", None)
    if not knobs:
        return fn
    from tritondiff import compiler

    def call(*args):
        with compiler.config.patch(**knobs):
            return fn(*args)
    return call


def parse_variant(text: str) -> tuple[str, dict]:
    """``NAME:KNOB=VALUE[,KNOB=VALUE]`` -> (name, knobs); values are Python literals or strings."""
    import ast
    name, _, body = text.partition(":")
    if not name or not body:
        raise ValueError(f"--variant {text!r}: write NAME:KNOB=VALUE[,KNOB=VALUE...]")
    changes = {}
    for item in body.split(","):
        knob, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--variant {text!r}: {item!r} is not KNOB=VALUE")
        try:
            changes[knob.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            changes[knob.strip()] = value.strip()
    from tritondiff import compiler
    with compiler.config.patch(**changes):    # unknown knobs and bad values fail here, before any GPU work
        pass
    return name, changes


def parse_variants(parser: argparse.ArgumentParser, texts: Sequence[str]) -> list[tuple[str, dict]]:
    """``--variant`` values parsed; a bad one is the parser's one-line error (exit 2)."""
    try:
        return [parse_variant(v) for v in texts]
    except Exception as e:  # noqa: BLE001  (ValueError or compiler.exc.ConfigError: one line, exit 2)
        parser.error(str(e))


def _backends(names: Sequence[str] = ("eager", "inductor", "tritondiff"),
              variants: Sequence[tuple[str, dict]] = ()) -> dict[str, Callable[[Callable], Callable]]:
    from tritondiff import compiler
    known = {"eager": lambda fn: fn, "inductor": lambda fn: torch.compile(fn),
             "tritondiff": lambda fn: compiler.compile_fresh(fn)}
    chosen = {"eager": known["eager"]}               # always: the oracle's reference and the inputs' check
    chosen.update({n: known[n] for n in names if n in known})
    chosen.update({f"tritondiff[{name}]": _with_config(changes) for name, changes in variants})
    return chosen


def _upcast(inputs: tuple) -> tuple:
    """float64 copies of the floating inputs (requires_grad kept): the arbiter's inputs."""
    return tuple(t.detach().double().requires_grad_(t.requires_grad)
                 if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)


def _judge(got: Any, eager: Any, truth: Any) -> bool:
    """The harness's verdict (harness.oracle): as right as eager, judged against the float64 truth."""
    from tritondiff.harness import oracle
    return oracle.compare(got, eager, truth).passed


ROUNDS = 5      # latency / host / GPU-time rounds per workload (--rounds), the backends interleaved in each


def prepare(w: Workload, backend: str, wrap: Callable,
            reference: Optional[tuple[Any, Any]]) -> tuple[Result, Any, Optional[Callable[[], Any]]]:
    """Compile ``w`` under one backend (the first call timed, cold) and judge its output against ``reference``
    (eager output, float64 output).  Returns the result so far, the output (for eager: the reference pair)
    and the timed callable (None when it failed)."""
    res = Result(backend)
    try:
        torch.manual_seed(0)                      # every backend gets the same inputs as the reference
        inputs = w.make()
        fn = build(w, wrap)
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn(*inputs)
        torch.cuda.synchronize()
        res.compile_s = time.perf_counter() - start if backend != "eager" else None
        if reference is not None:
            res.matches_eager = _judge(out, *reference)
        elif backend == "eager":
            out = (out, w.build(w.fn)(*_upcast(inputs)))
    except Exception as e:  # noqa: BLE001  (reported per workload; the run goes on)
        res.error = _one_line(e)
        torch.cuda.empty_cache()
        return res, None, None
    return res, out, lambda: fn(*inputs)


def measure(timed: dict[str, tuple[Result, Callable[[], Any]]], rounds: int = ROUNDS) -> None:
    """Fill each result's latency, host time and GPU time.

    Each is taken in ``rounds`` rounds; each round measures every backend once, in an order rotated from
    round to round, and the median of the rounds is kept.  On a VM the host's speed drifts over seconds, and
    a GPU's clocks move with its temperature: backends measured one after the other would each see another
    machine.  The rounds' values are kept (``ms_rounds``, ``gpu_ms_rounds``): the spread of the per-round
    ratios says whether two backends differ or tie (``ratio_range``).
    """
    from tritondiff.base.timing import bench, host_ms, kernel_times
    names = list(timed)
    if not names:                 # every backend failed to compile, or the budget ran out
        return
    lat: dict[str, list[float]] = {n: [] for n in names}
    host: dict[str, list[float]] = {n: [] for n in names}
    gpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            res, call = timed[name]
            if res.error:
                continue
            try:
                lat[name].append(bench(call, warmup_ms=10, rep_ms=40).median_ms)
            except Exception as e:  # noqa: BLE001  (a failure while timing: reported, the others go on)
                res.error = _one_line(e)
                continue
            try:
                host[name].append(host_ms(call, iters=20))
            except Exception as e:  # noqa: BLE001
                print(f"  [{name}]: host time not measured: {_one_line(e)}", file=sys.stderr)
            gpu_round = None      # a round the profiler missed stays a gap, so rounds pair up by index
            try:      # a profiler failure costs the GPU column, never the measured latency
                kernels = kernel_times(call, iters=20)
                if kernels:                            # no kernel seen: unknown, not 0
                    gpu_round = sum(k[2] for k in kernels)
                    res.launches = sum(k[1] for k in kernels)
                    res.generated = sum(k[1] for k in kernels if generated_kernel(k[0]))
            except Exception as e:  # noqa: BLE001
                print(f"  [{name}]: GPU time not measured: {_one_line(e)}", file=sys.stderr)
            gpu[name].append(gpu_round)
    for name in names:
        res, call = timed[name]
        if lat[name] and not res.error:
            res.ms = statistics.median(lat[name])
            res.ms_rounds = lat[name]
        if res.error:             # failed in a later round: no latency, so no host or GPU time beside it either
            continue
        if host[name]:
            res.host_ms = statistics.median(host[name])
        measured = [g for g in gpu[name] if g is not None]
        if measured:
            res.gpu_ms = statistics.median(measured)
            res.gpu_ms_rounds = gpu[name]
    torch.cuda.empty_cache()


def generated_kernel(name: str) -> bool:
    """Whether a profiled kernel is one a compiler generated: Inductor's ``triton_*`` or ours (``g<graph>_<kind>_*``,
    ``compiler.backend.CompiledGraph``); anything else is a library or ATen kernel (cuBLAS, cuDNN, flash
    attention, ``at::native``) -- a node the compiler left to ATen, or eager."""
    import re
    return name.startswith("triton") or re.match(r"g\d+_[a-z]+_\d+_", name) is not None


def ratio_range(result: dict, inductor: dict, key: str = "gpu_ms_rounds") -> Optional[tuple[float, float]]:
    """The lowest and highest per-round ratio of Inductor's time to ``result``'s (``key``: "gpu_ms_rounds" or
    "ms_rounds"; rounds are interleaved, so round r of each was measured moments apart): a range that holds
    1.0 is a tie at this run's noise.  Only rounds both measured count (a missed round is None); None where
    there are none (results written before GPU times were kept per round)."""
    ours, theirs = result.get(key), inductor.get(key)
    if not ours or not theirs or len(ours) != len(theirs):
        return None
    ratios = [t / o for o, t in zip(ours, theirs) if o and t]
    return (min(ratios), max(ratios)) if ratios else None


def _range(spread: Optional[tuple[float, float]]) -> str:
    return f" ({spread[0]:.3f}-{spread[1]:.3f})" if spread else ""


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def run(selected: Sequence[Workload], budget_s: float,
        backends: Optional[dict[str, Callable[[Callable], Callable]]] = None,
        on_row: Optional[Callable[[list[dict], float], None]] = None,
        rounds: int = ROUNDS) -> tuple[list[dict], float]:
    """Every selected workload under every backend.  The budget is checked before each backend's run (a
    workload under ten variants takes minutes), and ``on_row(rows, copy_gbps)`` is called after each
    workload, so a run cut off by the nightly's command limit still leaves the rows it finished."""
    from tritondiff.base.timing import copy_bandwidth_gbps
    copy_gbps = copy_bandwidth_gbps()
    start, rows = time.perf_counter(), []
    spent = f"time budget of {budget_s:.0f} s spent"
    for w in selected:
        row: dict = {"workload": w.name, "shape": w.shape, "bytes": w.nbytes, "results": {}}
        if time.perf_counter() - start > budget_s:
            row["skipped"] = spent
            rows.append(row)
            continue
        reference, results, timed = None, {}, {}
        # once per workload, not per backend: a reset drops every compiled frame, so a later reset would make
        # the backends prepared before it compile again inside the timing, unjudged
        torch._dynamo.reset()
        for backend, wrap in (backends or _backends()).items():
            if time.perf_counter() - start > budget_s:
                results[backend] = Result(backend, skipped=spent)
                continue
            res, out, call = prepare(w, backend, wrap, reference)
            if backend == "eager" and out is not None:
                reference = out                   # (eager output, float64 output)
            results[backend] = res
            if call is not None:
                timed[backend] = (res, call)
            del out
        del reference                             # the float64 outputs: not held while timing
        measure(timed, rounds)
        del timed
        torch.cuda.empty_cache()
        row["results"] = {b: dataclasses.asdict(r) for b, r in results.items()}
        rows.append(row)
        print(f"  {w.name}: " + ", ".join(f"{b} {r['ms']:.3f} ms (GPU {_fmt(r['gpu_ms'], '.3f')})" if r["ms"]
                                          else f"{b} {'skipped' if r.get('skipped') else 'failed'}"
                                          for b, r in row["results"].items()),
              file=sys.stderr, flush=True)
        if on_row is not None:
            on_row(rows, copy_gbps)
    return rows, copy_gbps


# ---------------------------------------------------------------------------------- report

def _fmt(v: Optional[float], spec: str) -> str:
    return "-" if v is None else format(v, spec)


def report(rows: list[dict], copy_gbps: float, env: dict, rounds: int = ROUNDS) -> str:
    lines = ["# tritondiff compiler vs Inductor vs eager", "",
             ", ".join(f"{k}: {v}" for k, v in env.items()), "",
             f"measured device-to-device copy bandwidth: {copy_gbps:.0f} GB/s", "",
             "| workload | shape | MB | backend | ms | GB/s | % copy BW | compile s | oracle | vs Inductor | GPU ms | "
             "host ms | vs Inductor (GPU ms) | launches (generated) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups: dict[str, list[float]] = {}
    gpu_speedups: dict[str, list[float]] = {}
    for row in rows:
        mb = f"{row['bytes'] / 1e6:.1f}" if row["bytes"] else "-"      # a model block has no minimal traffic
        if "skipped" in row:
            lines.append(f"| {row['workload']} | {row['shape']} | {mb} | - | skipped: {row['skipped']} ||||||||| ")
            continue
        ind = row["results"].get("inductor", {})
        for backend, r in row["results"].items():
            if r.get("skipped"):
                lines.append(f"| {row['workload']} | {row['shape']} | {mb} | {backend} | skipped: {r['skipped']} "
                             "||||||||| ")
                continue
            if r["error"]:
                lines.append(f"| {row['workload']} | {row['shape']} | {mb} | {backend} | failed: {r['error']} "
                             "||||||||| ")
                continue
            gbs = row["bytes"] / (r["ms"] * 1e-3) / 1e9 if row["bytes"] else None
            speed = ind["ms"] / r["ms"] if ind.get("ms") else None
            gpu, ind_gpu = r.get("gpu_ms"), ind.get("gpu_ms")
            gpu_speed = ind_gpu / gpu if gpu and ind_gpu else None
            if backend.startswith("tritondiff"):
                if speed:
                    speedups.setdefault(backend, []).append(speed)
                if gpu_speed:
                    gpu_speedups.setdefault(backend, []).append(gpu_speed)
            match = {None: "-", True: "pass", False: "FAIL"}[r["matches_eager"]]
            mine = backend != "inductor"
            lat_range = _range(ratio_range(r, ind, "ms_rounds") if mine else None)
            gpu_range = _range(ratio_range(r, ind) if mine else None)
            pct = None if gbs is None else 100 * gbs / copy_gbps
            launches = "-" if r.get("launches") is None else f"{r['launches']:.0f} ({r['generated']:.0f})"
            lines.append(f"| {row['workload']} | {row['shape']} | {mb} | {backend} | {r['ms']:.3f} | {_fmt(gbs, '.0f')} | "
                         f"{_fmt(pct, '.0f')}% | {_fmt(r['compile_s'], '.1f')} | {match} | "
                         f"{_fmt(speed, '.2f')}x{lat_range} | {_fmt(gpu, '.3f')} | {_fmt(r.get('host_ms'), '.3f')} | "
                         f"{_fmt(gpu_speed, '.2f')}x{gpu_range} | {launches} |")
    lines.append("")
    for backend, values in speedups.items():
        lines.append(f"geometric mean speedup of {backend} over Inductor ({len(values)} workloads): "
                     f"{_geomean(values):.3f}x")
    for backend, values in gpu_speedups.items():
        lines.append(f"geometric mean GPU-time speedup of {backend} over Inductor ({len(values)} workloads): "
                     f"{_geomean(values):.3f}x")
    if not speedups:
        lines.append("geometric mean speedup over Inductor: - (no workload has both)")
    lines += ["",
              f"Time (ms): CUDA-event timings after warm-up (triton.testing.do_bench, L2 flushed), the median of "
              f"{rounds} rounds that each measure every backend once, in turn: what a "
              "caller waits for, host time included where the host is slower than the GPU. GPU ms: the call's "
              "kernels' summed durations (torch.profiler, 20 calls back to back, L2 not flushed; median of the "
              "rounds). In brackets after a speedup: the lowest and highest of the rounds' ratios to Inductor; a "
              "range that holds 1 is a tie at this run's noise. Host ms: wall time to enqueue one call without "
              "waiting on the GPU (median of the rounds). A row whose host ms exceeds its GPU ms is bound by the host path (dynamo guards, "
              "AOTAutograd, launches), which moves between runs on a VM. GB/s: minimal traffic / time. Compile s: "
              "wall time of the first call with empty Triton/Inductor caches. Oracle: the harness's verdict "
              "(harness.oracle) on the first call's outputs -- as right as eager, judged against the workload run "
              "in float64 on the same inputs. Launches: kernels per call (the profiler's count), in brackets those a "
              "compiler generated (Triton); the rest are library or ATen kernels -- the nodes left to ATen."]
    return "\n".join(lines) + "\n"


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def dry_run(selected: Sequence[Workload]) -> str:
    lines = ["| workload | shape | dtype | minimal traffic (bytes) |", "|---|---|---|---|"]
    lines += [f"| {w.name} | {w.shape} | {str(w.dtype)[6:]} | {w.nbytes:,} |" for w in selected]
    return "\n".join(lines) + "\n"


def _isolate_caches() -> None:
    """Cold compiles: fresh Triton cache directory, Inductor's caches off."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tritondiff-bench-triton-")
    from tritondiff import compiler
    compiler.config.cache_dir = tempfile.mkdtemp(prefix="tritondiff-bench-compiler-")
    try:
        import torch._inductor.config as inductor_config
        for knob in ("force_disable_caches",):
            if hasattr(inductor_config, knob):
                setattr(inductor_config, knob, True)
        inductor_config.fx_graph_cache = False
    except Exception:  # noqa: BLE001  (older torch: caches stay on; the header says so)
        pass


def summary(results: dict) -> str:
    """One line per workload and tritondiff backend of a ``--json`` file's ``results``: GPU time against
    Inductor's, the ratio and the range of the rounds' ratios, % of copy bandwidth from GPU time, and the
    oracle's verdict (what every GPU call script printed after its table)."""
    lines = []
    for r in results["rows"]:
        ind = r["results"].get("inductor", {}).get("gpu_ms")
        for backend, v in r["results"].items():
            if not backend.startswith("tritondiff") or not v.get("gpu_ms"):
                continue
            bw = r["bytes"] / (v["gpu_ms"] * 1e-3) / 1e9 / results["copy_gbps"] if r["bytes"] else None
            ratio = f"{ind / v['gpu_ms']:.4f}x" if ind else "-"
            vs = f"{ind * 1000:9.2f}" if ind else "        -"
            spread = ratio_range(v, r["results"].get("inductor", {}))
            spread = f" (rounds {spread[0]:.3f}-{spread[1]:.3f})" if spread else ""
            lines.append(f"{r['workload'][:36]:36s} {backend:24s} GPU {v['gpu_ms'] * 1000:9.2f} us vs {vs}  {ratio}"
                         f"{spread}  {'-' if bw is None else format(bw, '.1%')} CBW  oracle {v.get('matches_eager')}")
    return "\n".join(lines) + "\n"


def _replace(path: str, text: str) -> None:
    """Write ``path`` whole or not at all (a run killed mid-write keeps the previous version)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compiler", description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the Markdown report here")
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument("--suite", choices=sorted(SUITES), default="seed",
                        help="seed: the seed workloads of issue #8 (the default); wide: longer rows, past the "
                             "seeds' shapes; all: both; models: model building blocks forward and backward "
                             "(compiler.models)")
    parser.add_argument("--only", nargs="*", help="run only workloads whose name contains one of these")
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="start no workload after this many seconds (the nightly slot is 9 minutes)")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"interleaved rounds per workload (default {ROUNDS}); more narrow the medians and show "
                             "whether a near-1.00x row is a tie")
    parser.add_argument("--dry-run", action="store_true", help="list the workloads and byte counts, run nothing")
    parser.add_argument("--backends", nargs="*", default=["inductor", "tritondiff"],
                        help="backends besides eager (always run: the reference): inductor, tritondiff")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KNOB=VALUE[,KNOB=VALUE]",
                        help="also run tritondiff with these compiler.config knobs, as backend tritondiff[NAME] "
                             "(a heuristics sweep; repeatable)")
    parser.add_argument("--summary", metavar="JSON",
                        help="print each row of an earlier run's --json file (GPU time vs Inductor, %% of copy "
                             "bandwidth, oracle) and exit")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: needs at least one round")
    if args.summary:
        with open(args.summary) as f:
            print(summary(json.load(f)), end="")
        return 0
    variants = parse_variants(parser, args.variant)
    suite = SUITES[args.suite]()
    selected = [w for w in suite if not args.only or any(o in w.name for o in args.only)]
    if not selected:
        parser.error(f"--only {args.only} matches no workload of suite {args.suite!r}; names: "
                     f"{[w.name for w in suite]}")
    if args.dry_run:
        text = dry_run(selected)
        print(text, end="")
        if args.json:
            with open(args.json, "w") as f:
                json.dump([{"workload": w.name, "shape": w.shape, "bytes": w.nbytes} for w in selected], f, indent=1)
        return 0
    if _device.is_interpreter() or not torch.cuda.is_available():
        print(GPU_LINE)
        return 2
    from tritondiff.base.timing import environment
    _isolate_caches()
    env = environment()

    def write(rows: list[dict], copy_gbps: float) -> str:
        text = report(rows, copy_gbps, env, args.rounds)
        if args.out:
            _replace(args.out, text)
        if args.json:
            _replace(args.json, json.dumps({"env": env, "copy_gbps": copy_gbps, "rows": rows}, indent=1))
        return text

    rows, copy_gbps = run(selected, args.budget_s, _backends(args.backends, variants), on_row=write,
                          rounds=args.rounds)
    print(write(rows, copy_gbps), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
