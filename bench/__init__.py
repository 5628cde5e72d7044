"""GPU benchmarks (run from the repo root: ``python -m bench.<name>``; each prints a notice and exits
on a machine without a GPU).  Their figures are published under ``reports/``."""
