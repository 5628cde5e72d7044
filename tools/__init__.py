"""Developer tools run from the repo root (``python -m tools.<name>``): the plan snapshot, the GPU
self-check, the OpInfo sweep and the split-reduction stress runners."""
