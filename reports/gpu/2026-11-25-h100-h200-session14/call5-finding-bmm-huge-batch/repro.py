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
