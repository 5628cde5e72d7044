"""The base layer every other package builds on: where kernels run (``device``), CUDA's launch
limits (``limits``), the typed config (``config``), the root of the exception hierarchy (``exc``)
and GPU timing (``timing``).  It imports nothing of the rest of tritondiff."""
