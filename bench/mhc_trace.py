"""Roofline report of the mHC-lite kernels in a torch.profiler Chrome trace of a training step.

    python -m bench.mhc_trace TRACE.json[.gz] --peak-gbps 3350
        [--T 65536] [--C 2560] [--dtype bfloat16] [--comm-regex REGEX] [--out reports/mhc-trace.md]

Seed 003's method: for each of the seven kernels found in the trace, the
number of calls, total and average time, the stream(s) it ran on, the bytes
one call must move at the given shape (:func:`bench.mhc.traffic_bytes`),
the lower bound bytes / peak, and the efficiency lower bound / average.
Invocations that overlap a communication kernel running on another stream
compete with it for memory bandwidth: they are counted and listed, and the
"clean" columns repeat the figures without them.  A kernel is communication
when its name matches ``--comm-regex`` (case-insensitive search; by default
:data:`DEFAULT_COMM_REGEX`: NCCL / RCCL / NVSHMEM kernels, and all-reduce,
all-gather, reduce-scatter, all-to-all and cross-device kernels under any
prefix, such as symmetric-memory or custom all-reduce kernels).  Kernel events
of zero duration (sub-microsecond kernels, rounded by the profiler) are
counted; efficiencies and GB/s of a zero average read "-".
Runs anywhere (no GPU needed): it only reads the JSON.
"""
from __future__ import annotations

import argparse
import bisect
import gzip
import json
import re
from dataclasses import dataclass, field
from typing import Iterable

from tritondiff.base.timing import markdown_table
from bench.mhc import _DTYPES, traffic_bytes
from tritondiff.kernels.mhc.configs import KERNELS

_NAME_TO_KEY = {name: key for key, name in KERNELS.items()}
_KERNEL_CATEGORIES = ("kernel", "gpu_kernel", "cuda_kernel")

#: Communication kernels (searched case-insensitively in the kernel name): NCCL (``ncclDevKernel_*``,
#: ``ncclKernel_*``), RCCL, NVSHMEM, and collective kernels under any prefix (``one_shot_all_reduce``,
#: ``cross_device_reduce_2stage``, ``multimem_all_gather``, ``AllToAll``).
DEFAULT_COMM_REGEX = (r"nccl|rccl|nvshmem|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"
                      r"|cross_?device")


@dataclass
class Event:
    name: str
    ts: float  # microseconds
    dur: float  # microseconds
    stream: str

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass
class KernelStats:
    key: str
    name: str
    events: list[Event] = field(default_factory=list)
    overlapped: list[tuple[Event, Event]] = field(default_factory=list)  # (ours, the communication kernel)


def load_trace(path: str) -> list[dict]:
    """The ``traceEvents`` of a Chrome trace file (plain or gzipped JSON; a bare event list is accepted)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        data = json.load(fh)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a Chrome trace (no 'traceEvents' list)")
    return events


def _kernel_events(raw: Iterable[dict]) -> list[Event]:
    out = []
    for e in raw:
        if e.get("ph") != "X" or str(e.get("cat", "")).lower() not in _KERNEL_CATEGORIES:
            continue
        args = e.get("args") or {}
        stream = args.get("stream", e.get("tid", "?"))
        out.append(Event(str(e.get("name", "")), float(e["ts"]), float(e.get("dur", 0.0)), str(stream)))
    return out


def _our_key(name: str) -> str | None:
    """The kernel key of a trace name: exact, or the Triton name plus a suffix."""
    if name in _NAME_TO_KEY:
        return _NAME_TO_KEY[name]
    for kname in sorted(_NAME_TO_KEY, key=len, reverse=True):
        if name.startswith(kname) and not name[len(kname):len(kname) + 1].isalnum():
            return _NAME_TO_KEY[kname]
    return None


def analyse(raw: Iterable[dict], *, comm_regex: str = DEFAULT_COMM_REGEX) -> dict[str, KernelStats]:
    """Group our kernels' invocations and find those overlapping communication kernels (names matching
    ``comm_regex``, case-insensitive) on other streams."""
    events = _kernel_events(raw)
    is_comm = re.compile(comm_regex, re.IGNORECASE).search
    comm = sorted((e for e in events if is_comm(e.name) and _our_key(e.name) is None), key=lambda e: e.ts)
    comm_starts = [e.ts for e in comm]
    longest = max((e.dur for e in comm), default=0.0)
    stats: dict[str, KernelStats] = {}
    for e in events:
        key = _our_key(e.name)
        if key is None:
            continue
        s = stats.setdefault(key, KernelStats(key, KERNELS[key]))
        s.events.append(e)
        # Candidates start before our end and no earlier than our start minus the longest comm kernel.
        lo = bisect.bisect_left(comm_starts, e.ts - longest)
        hi = bisect.bisect_left(comm_starts, e.end)
        for c in comm[lo:hi]:
            if c.stream != e.stream and c.ts < e.end and e.ts < c.end:
                s.overlapped.append((e, c))
                break
    return {k: stats[k] for k in KERNELS if k in stats}


def _pct(num: float, den: float) -> str:
    """num / den as a percentage; "-" where den is 0 (all zero-duration events) or not a number."""
    return f"{100 * num / den:.1f}%" if den > 0 else "-"


def _gbps(nbytes: float, avg_us: float) -> float | str:
    return nbytes / (avg_us * 1e3) if avg_us > 0 else "-"


def report(stats: dict[str, KernelStats], *, T: int, C: int, elem: int, peak_gbps: float,
           max_listed: int = 20) -> str:
    """Seed 003's roofline table plus the list of communication-overlapped invocations, as Markdown."""
    rows = []
    tot = dict(bytes=0.0, lb=0.0, avg=0.0, clean=0.0, calls=0, total=0.0)
    for key, s in stats.items():
        nbytes = traffic_bytes(key, T=T, C=C, elem=elem)
        lb_us = nbytes / (peak_gbps * 1e3)  # bytes / (GB/s) -> us
        durs = [e.dur for e in s.events]
        hit = {id(e) for e, _ in s.overlapped}
        clean = [e.dur for e in s.events if id(e) not in hit]
        avg = sum(durs) / len(durs)
        clean_avg = sum(clean) / len(clean) if clean else float("nan")
        streams = ", ".join(sorted({e.stream for e in s.events}))
        rows.append((f"`{s.name}`", len(durs), sum(durs) / 1e3, avg, streams, nbytes / 1e6, lb_us,
                     _pct(lb_us, avg), len(s.overlapped), clean_avg,
                     _pct(lb_us, clean_avg) if clean else "-", _gbps(nbytes, avg)))
        tot["bytes"] += nbytes
        tot["lb"] += lb_us
        tot["avg"] += avg
        tot["clean"] += clean_avg if clean else avg
        tot["calls"] += len(durs)
        tot["total"] += sum(durs) / 1e3
    if rows:
        rows.append(("**TOTAL (one call each)**", tot["calls"], tot["total"], tot["avg"], "-", tot["bytes"] / 1e6,
                     tot["lb"], _pct(tot["lb"], tot["avg"]),
                     sum(len(s.overlapped) for s in stats.values()), tot["clean"],
                     _pct(tot["lb"], tot["clean"]), _gbps(tot["bytes"], tot["avg"])))
    headers = ("kernel", "calls", "total ms", "avg us", "stream", "MB / call", "LB us", "eff",
               "comm-overlapped", "clean avg us", "clean eff", "achieved GB/s")
    out = [f"## mHC-lite kernels in the trace (T={T}, C={C}, n=4, {elem}-byte activations, "
           f"peak {peak_gbps:.0f} GB/s)\n"]
    if not rows:
        out.append("No mHC-lite kernel (" + ", ".join(KERNELS.values()) + ") appears in this trace.")
        return "\n".join(out)
    out.append(markdown_table(headers, rows))
    out.append("\nLB = bytes one call must move / peak bandwidth; eff = LB / avg (\"-\" for a zero average); "
               "clean = without the invocations that overlap a communication kernel (--comm-regex) on another "
               "stream.\n")
    flagged = [(s.name, e, c) for s in stats.values() for e, c in s.overlapped]
    if flagged:
        out.append(f"### Invocations overlapping communication ({len(flagged)})\n")
        listed = sorted(flagged, key=lambda t: t[1].ts)[:max_listed]
        out.append(markdown_table(("kernel", "start us", "dur us", "stream", "comm kernel", "comm stream"),
                                  [(f"`{n}`", e.ts, e.dur, e.stream, c.name, c.stream) for n, e, c in listed]))
        if len(flagged) > max_listed:
            out.append(f"\n... and {len(flagged) - max_listed} more")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mhc_trace", description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="torch.profiler Chrome trace (.json or .json.gz)")
    parser.add_argument("--peak-gbps", type=float, required=True,
                        help="the device's bandwidth roofline, GB/s (H100 SXM ~3350, H200 ~4800, or a measured copy)")
    parser.add_argument("--T", type=int, default=65536, help="tokens per call in the traced run")
    parser.add_argument("--C", type=int, default=2560, help="hidden size of the traced run")
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="bfloat16")
    parser.add_argument("--max-listed", type=int, default=20, help="overlapping invocations to list")
    parser.add_argument("--comm-regex", default=DEFAULT_COMM_REGEX,
                        help="kernel names (case-insensitive regular expression, searched anywhere in the name) "
                             "that count as communication when flagging overlaps; default: %(default)s")
    parser.add_argument("--out", help="also write the Markdown report to this file")
    args = parser.parse_args(argv)
    if args.peak_gbps <= 0 or args.T < 1 or args.C < 1:
        parser.error("--peak-gbps, --T and --C must be positive")
    try:
        re.compile(args.comm_regex)
    except re.error as e:
        parser.error(f"--comm-regex {args.comm_regex!r} is not a valid regular expression: {e}")
    import torch

    elem = torch.empty((), dtype=_DTYPES[args.dtype]).element_size()
    try:
        raw = load_trace(args.trace)
    except (OSError, ValueError) as e:
        parser.error(f"cannot read the trace: {e}")
    text = report(analyse(raw, comm_regex=args.comm_regex), T=args.T, C=args.C, elem=elem, peak_gbps=args.peak_gbps,
                  max_listed=args.max_listed)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
