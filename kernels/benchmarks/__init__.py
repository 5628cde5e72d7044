"""GPU benchmarks of the hand-written kernels (print a notice and exit on CPU)."""
