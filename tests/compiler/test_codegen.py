"""codegen: the generated source of each kind of kernel -- every reduction strategy and synchronisation form, the
mixed-order kernel over a whole row and over chunks with its next rows prefetched, a scan, a scatter and a gather --
against golden files (tests/compiler/golden; EXPECTTEST_ACCEPT=1 rewrites them), each also run and compared with
eager.  A change to the code generator shows here as a diff of the kernels it writes."""
import pytest
import torch
import torch.nn.functional as F

from tritondiff import compiler
from tests.compiler.util import assert_golden, check, kernel_sources, seeded_randn


def _ln_fwd_bwd(x, w, b, dy):
    y = F.layer_norm(x, (x.shape[-1],), w, b)
    return (y,) + torch.autograd.grad(y, (x, w, b), dy)


def _ln_args(rows: int, cols: int) -> tuple:
    return (seeded_randn(rows, cols, seed=1).requires_grad_(), seeded_randn(cols, seed=2).requires_grad_(),
            seeded_randn(cols, seed=3).requires_grad_(), seeded_randn(rows, cols, seed=4))


def _sum_max(x):
    return x.sum(), x.amax()


def _cases() -> dict:
    ids = torch.tensor([3, 0, 7, 3, 3, 1, 6])
    return {
        # reductions over one long axis: partials and a final kernel; the last program finishing through a fence;
        # through tagged partials
        "split_final": (_sum_max, (seeded_randn(4099, seed=5),),
                        dict(reduction_strategy="split", rblock=128, split_count=4, split_last_program_final=False)),
        "split_fence": (_sum_max, (seeded_randn(4099, seed=5),),
                        dict(reduction_strategy="split", rblock=128, split_count=4, split_last_program_sync="fence")),
        "split_tagged": (_sum_max, (seeded_randn(4099, seed=5),),
                         dict(reduction_strategy="split", rblock=128, split_count=4, split_last_program_sync="tagged")),
        # layer norm's backward: dx and dW / dB in one pass over the rows, a row in one block or in chunks
        "mixed_order_row": (_ln_fwd_bwd, _ln_args(64, 16), {}),
        "mixed_order_chunks_prefetch": (_ln_fwd_bwd, _ln_args(64, 130),      # two programs of four row steps
                                        dict(mixed_order_prefetch="all", xblock=8, sm_count=2)),
        "looped_layer_norm": (_ln_fwd_bwd, _ln_args(9, 41), dict(reduction_strategy="looped", rblock=16)),
        "scan_looped": (lambda x: torch.cumsum(x, -1), (seeded_randn(9, 41, seed=6),),
                        dict(reduction_strategy="looped", rblock=16)),
        "scatter_add": (lambda w, v: w.index_put((ids,), v, accumulate=True),
                        (seeded_randn(8, 5, seed=7), seeded_randn(7, 5, seed=8)), {}),
        "gather_embedding": (lambda w, x: F.embedding(ids, w) * x, (seeded_randn(8, 5, seed=9),
                                                                  seeded_randn(7, 5, seed=10)), {}),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_the_generated_kernels_match_their_golden_source(name):
    fn, args, knobs = _cases()[name]
    sources = []
    with compiler.config.patch(**knobs):
        compiler.dump.clear()
        check(fn, *args, rtol=1e-4, atol=1e-4)
        for artifacts in compiler.dump.recent_artifacts():
            sources += kernel_sources(artifacts.texts["triton"])
    assert sources and ("_nx = tl.load(" in "\n".join(sources)) == name.endswith("prefetch")
    assert_golden(f"{name}.py", "\n".join(sources))
