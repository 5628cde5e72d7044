#!/usr/bin/env python
"""Standalone repro of a tritondiff finding: torch and triton alone, the kernel file beside it.

A dump holds this file as ``standalone.py``, the subject's file as ``kernel.py``, the inputs as
``inputs.pt`` and ``standalone.json`` (which subject, its tolerance).  Run it where tritondiff is not
installed: ``@subject`` / ``tensor`` / ``constant`` then resolve to stand-ins that keep the function and
its reference.  It runs the kernel and the reference (in the inputs' dtype, and in float64) on the saved
inputs -- same shapes, strides and storage offsets -- and prints the worst elements of each output: the
index, the candidate, eager, the float64 truth, and the inputs' values there when an input has the
output's shape.

Its verdict is a simplified oracle: an element is off when its error against the float64 truth is more
than the subject's multiplier times eager's largest error on that output (plus two ulps of the truth), or
when it is NaN/inf where neither eager nor the truth is.  It also names each input the call modified
that the subject does not declare written.  ``repro.py`` (tritondiff installed) gives the harness's exact
verdict and replays the other hazard hunters (autotune state, uninitialised reads), which this file does not.

    python standalone.py                # CUDA when available, else the Triton interpreter on CPU
    python standalone.py --device cpu   # force the interpreter

Exit status: 1 while an output is off or an input the subject does not declare written is modified, 3 when
the call raises, 0 when none of these happens, 2 when the kernel file cannot be loaded.

The harness imports :func:`worst_elements` from here too (``tritondiff replay`` prints the same table).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
#: Rows of the worst-elements table per output.
WORST = 8


def _stand_ins() -> types.ModuleType:
    """A ``tritondiff`` module whose ``subject`` keeps the function and its reference (and nothing else)."""
    mod = types.ModuleType("tritondiff")

    class Subject:
        def __init__(self, fn, reference, upcast):
            self.fn, self.reference, self.upcast, self.name = fn, reference, upcast, fn.__name__

        def __call__(self, *args, **kwargs):
            return self.fn(*args, **kwargs)

    def subject(reference=None, upcast=None, **_declaration):
        return lambda fn: Subject(fn, reference, upcast)

    mod.subject = subject
    mod.tensor = mod.constant = mod.dim = lambda *args, **kwargs: None
    mod.harness = mod                         # `from tritondiff.harness import subject` (the pack modules)
    return mod


def load_subject(kernel_path: str, attribute: str):
    """The subject object named ``attribute`` in ``kernel_path``: anything with ``fn`` and ``reference`` (and
    ``upcast``, the inputs of the float64 truth run, where the inputs describe tensors rather than hold them)."""
    try:
        import tritondiff  # noqa: F401
    except ImportError:
        sys.modules["tritondiff"] = sys.modules["tritondiff.harness"] = _stand_ins()
    sys.path.insert(0, os.path.dirname(os.path.abspath(kernel_path)))
    spec = importlib.util.spec_from_file_location("tritondiff_standalone_kernel", kernel_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, attribute)


def to_device(x, device):
    """A copy of ``x`` on ``device`` with its shape, strides and storage offset (the whole storage is copied,
    also on the device ``x`` is on: a call that writes its inputs leaves ``x`` as saved)."""
    import torch

    if not isinstance(x, torch.Tensor):
        return x
    storage = x.untyped_storage()
    flat = torch.empty(0, dtype=x.dtype).set_(storage, 0, (storage.nbytes() // x.element_size(),))
    return flat.to(device, copy=True).as_strided(x.shape, x.stride(), x.storage_offset())


def changed_inputs(before: dict, after: dict, declared=()) -> list[str]:
    """Lines naming each tensor input the call changed (NaN kept as NaN is no change) that is not in
    ``declared`` (the inputs the subject writes on purpose)."""
    import torch

    lines = []
    for name, old in before.items():
        new = after.get(name)
        if name in declared or not isinstance(old, torch.Tensor) or not isinstance(new, torch.Tensor):
            continue
        old, new = old.cpu(), new.detach().cpu()
        same = old == new
        if old.is_floating_point():
            same |= old.isnan() & new.isnan()
        if not bool(same.all()):
            lines.append(f"input {name!r} was modified by the call: {int((~same).sum())} of {old.numel()} "
                         "element(s) changed")
    return lines


def _flatten(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


def worst_elements(candidate, eager, truth, inputs: dict, *, multiplier: float = 3.0, worst: int = WORST):
    """(lines of a table of the worst elements of each floating output, whether any output is off)."""
    import torch

    lines, off_any = [], False
    for i, (c, e, t) in enumerate(zip(_flatten(candidate), _flatten(eager), _flatten(truth))):
        if not (isinstance(c, torch.Tensor) and isinstance(e, torch.Tensor) and isinstance(t, torch.Tensor)):
            continue
        if c.shape != e.shape or c.dtype != e.dtype or not c.numel():
            lines.append(f"output {i}: shape {tuple(c.shape)}, dtype {c.dtype}; reference {tuple(e.shape)}, {e.dtype}")
            off_any |= c.shape != e.shape or c.dtype != e.dtype
            continue
        c64, e64, t64 = (v.detach().cpu().double() for v in (c, e, t.to(e.dtype) if not e.is_floating_point() else t))
        err, eager_err = (c64 - t64).abs(), (e64 - t64).abs()
        finite = torch.isfinite(c64) & torch.isfinite(t64)
        level = float(torch.where(torch.isfinite(eager_err), eager_err, 0).max())
        ulp = torch.finfo(e.dtype).eps if e.is_floating_point() else 0.0
        bound = multiplier * level + 2 * ulp * t64.abs()
        nonfinite = (_status(c64) != _status(t64)) & (_status(c64) != _status(e64))
        off = nonfinite | (finite & (err > bound))
        score = torch.where(nonfinite, torch.inf, torch.where(finite, err, 0.0))
        largest = float(err[finite].max()) if finite.any() else 0.0
        lines.append(f"output {i} {str(e.dtype).replace('torch.', '')}{list(e.shape)}: {int(off.sum())} of "
                     f"{e.numel()} element(s) off; candidate's largest error {largest:.3g}, eager's {level:.3g}")
        shaped = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor) and v.shape == e.shape}
        header = ["index", "candidate", "eager", "float64 truth", "error", *shaped]
        rows = []
        order = score.flatten().argsort(descending=True)
        shown = order[score.flatten()[order] > 0][:worst].tolist() or order[:3].tolist()   # the differing ones
        for flat in shown:
            index = tuple(int(v) for v in torch.unravel_index(torch.tensor(flat), e.shape)) if e.dim() else ()
            values = (c64[index], e64[index], t64[index])
            rows.append([str(index), *(f"{float(v):.7g}" for v in values), f"{float(err[index]):.3g}",
                         *(f"{float(v[index]):.7g}" for v in shaped.values())])
        widths = [max(len(r[j]) for r in [header, *rows]) for j in range(len(header))]
        lines += ["  " + "  ".join(h.rjust(w) for h, w in zip(row, widths)) for row in [header, *rows]]
        off_any |= bool(off.any())
    return lines, off_any


def _status(v):
    """0 finite, 1 NaN, +-2 +-inf, per element."""
    import torch

    return torch.where(torch.isnan(v), 1, torch.where(torch.isinf(v), 2 * torch.sign(v), 0))


def _upcast(value):
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().double()
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = parser.parse_args()
    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"        # before the kernel file imports triton
    with open(os.path.join(HERE, "standalone.json")) as f:
        meta = json.load(f)
    try:
        subj = load_subject(os.path.join(HERE, meta["kernel"]), meta["attribute"])
    except Exception as e:  # noqa: BLE001 - one line: the kernel file is the user's
        print(f"{meta['kernel']}: cannot load {meta['attribute']!r}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    saved = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=True)
    values = {**saved["tensors"], **saved["scalars"]}

    def fresh(convert=lambda v: v):
        return {k: convert(to_device(v, device) if isinstance(v, torch.Tensor) else v)
                for k, v in values.items()}

    print(f"{meta['subject']} on {device}: {meta.get('finding', '')}")
    given = fresh()
    try:
        candidate = subj.fn(**given)
    except Exception as e:  # noqa: BLE001 - the kernel's own error is the finding for a crash
        traceback.print_exc()
        print(f"REPRODUCES: the call raised {type(e).__name__}")
        return 3
    mutated = changed_inputs(fresh(), given, meta.get("mutates", ()))
    eager = subj.reference(**fresh())
    upcast = getattr(subj, "upcast", None)
    try:
        inputs = fresh(_upcast)
        truth = subj.reference(**(upcast(inputs) if upcast else inputs))
    except Exception:  # noqa: BLE001 - a reference without a float64 path: eager is the best arbiter
        truth = eager
    lines, off = worst_elements(candidate, eager, truth, values, multiplier=meta.get("multiplier", 3.0))
    print("\n".join(lines + mutated))
    if off or mutated:
        print("REPRODUCES: " + " and ".join(["an output is off"] * off + ["an input was modified"] * bool(mutated)))
        return 1
    print("no output is off and no input modified (repro.py gives the harness's verdict)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
