"""compiler.models: the models suite's blocks run forward and backward in every precision mode, and handed
float64 inputs they are the truth of the same low-precision computation (parameters and inputs rounded
through the mode's dtype first)."""
import pytest
import torch

from tritondiff.compiler import models


def _inputs(model, sizes, g):
    ins = [torch.randint(0, sizes[i.ids_below], models.concrete(i.shape, sizes), generator=g) if i.ids_below
           else torch.randn(models.concrete(i.shape, sizes), generator=g) for i in model.inputs.values()]
    return ins, [torch.randn(s, generator=g) for s in models.output_shapes(model, sizes)]


def _small_sizes(model):
    """Small dims of ``model`` that satisfy its ``where`` (a seeded search)."""
    import inspect
    import random
    rng = random.Random(model.name)
    for _ in range(1000):
        sizes = {d: rng.randint(lo, min(hi, 8)) for d, (lo, hi) in model.dims.items()}
        if model.where is None or model.where(**{p: sizes[p] for p in inspect.signature(model.where).parameters}):
            return sizes
    raise AssertionError(f"no small dims satisfy {model.name}'s where")


def test_the_truth_holds_the_low_precision_parameters_and_inputs_in_float64():
    m = models.BY_NAME["nanogpt_block"]
    sizes = {"B": 1, "T": 4, "C": 8, "H": 2}
    low = models.module(m, sizes, 3, "bfloat16", torch.bfloat16, "cpu")
    high = models.module(m, sizes, 3, "bfloat16", torch.float64, "cpu")
    for (name, p), q in zip(low.named_parameters(), high.parameters()):
        assert q.dtype == torch.float64 and torch.equal(p.double(), q), name
    x = torch.randn(3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.equal(models.cast_input(x, "float16"), x.half().double())
    assert models.cast_input(x.float(), "float16").dtype == torch.float16


@pytest.mark.parametrize("mode", models.MODES)
def test_every_block_runs_forward_and_backward_and_its_truth_is_close(mode):
    g = torch.Generator().manual_seed(1)
    for m in models.SUITE:
        sizes = _small_sizes(m)
        ins, cots = _inputs(m, sizes, g)
        eager = models.run(m, sizes, mode, 0, ins, cots)
        truth = models.run(m, sizes, mode, 0, [t.double() if t.is_floating_point() else t for t in ins],
                           [c.double() for c in cots])
        assert len(eager) == len(truth)
        # against the block's largest value: a gradient that cancels to ~0 (a bias feeding a norm) carries the
        # rounding of the terms it cancelled
        scale = max(float(t.abs().max()) for t in truth if t.is_floating_point() and t.numel()) + 1e-3
        for i, (e, t) in enumerate(zip(eager, truth)):
            if not e.is_floating_point():
                continue
            assert t.dtype == torch.float64, (m.name, i)
            low = mode in ("bfloat16", "float16", "autocast")
            if mode != "autocast":
                assert e.dtype == models.compute_dtype(mode, torch.float32), (m.name, i)
            assert float((e.double() - t).abs().max()) <= (0.25 if low else 1e-3) * scale, (m.name, mode, i)


def test_an_unknown_mode_is_refused_with_the_modes_named():
    with pytest.raises(ValueError, match="float32, bfloat16, float16, autocast"):
        models.module(models.SUITE[0], {"B": 1, "T": 2, "C": 4, "H": 1}, 0, "int8", torch.float32, "cpu")
