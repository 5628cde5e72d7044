"""The bundled subjects: the project's own kernels (``kernels``) and codegen paths of its compiler
(``compiler``, ``compiler_gemm``), declared with the public API as a user declares theirs.
``tritondiff fuzz`` with no target runs them all (``harness.loader.BUNDLED_MODULES``)."""
