"""Session 20: Inductor's generated Triton source and the launch configs its autotuner picked, for the seed
rows where the H200 has tritondiff behind (nrm2 2^28, rms_norm 8192x8192).  GPU only.

    PYTHONPATH=. python reports/gpu/2026-11-27-session20/scripts/inductor_configs.py
"""
import inspect

import torch
import torch._inductor.codecache as codecache

from compiler import workloads


def main() -> None:
    torch.manual_seed(0)
    x28 = torch.randn(2 ** 28, device="cuda")
    x = torch.randn(8192, 8192, device="cuda")
    w = torch.randn(8192, device="cuda")
    seen = set()
    for name, fn, args in (("nrm2 2^28", workloads.nrm2, (x28,)), ("rms_norm 8192x8192", workloads.rms_norm, (x, w))):
        compiled = torch.compile(fn)
        for _ in range(3):
            compiled(*args)
        torch.cuda.synchronize()
        mods = getattr(codecache.PyCodeCache, "modules", None)
        mods = list(mods.values()) if isinstance(mods, dict) else list(mods or [])
        print(f"===== {name}: {len(mods)} modules in the code cache")
        for mod in mods:
            if id(mod) in seen:
                continue
            seen.add(id(mod))
            for attr, obj in vars(mod).items():
                launchers = getattr(obj, "launchers", None)
                if not launchers:
                    continue
                fn_src = getattr(getattr(obj, "fn", None), "src", None)
                print(f"--- {attr}: chosen {[str(getattr(l, 'config', l)) for l in launchers]}")
                print(f"    candidates: {[str(c) for c in getattr(obj, 'configs', None) or []]}")
                if fn_src:
                    print(fn_src)


if __name__ == "__main__":
    main()
