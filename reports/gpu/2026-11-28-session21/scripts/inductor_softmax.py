"""Session 21: Inductor's generated Triton source and the launch configs its autotuner picked for softmax 8192x8192
fp32 (the seed row where the H100 has tritondiff 0.2% behind), as session 20's inductor_configs.py printed them for
nrm2 and rms_norm.  GPU only.

    PYTHONPATH=. python reports/gpu/2026-11-28-session21/scripts/inductor_softmax.py
"""
import torch
import torch._inductor.codecache as codecache


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(8192, 8192, device="cuda")
    compiled = torch.compile(lambda t: torch.softmax(t, -1))
    for _ in range(3):
        compiled(x)
    torch.cuda.synchronize()
    mods = getattr(codecache.PyCodeCache, "modules", None)
    mods = list(mods.values()) if isinstance(mods, dict) else list(mods or [])
    for mod in mods:
        for attr, obj in vars(mod).items():
            launchers = getattr(obj, "launchers", None)
            if not launchers:
                continue
            print(f"--- {attr}: chosen {[str(getattr(l, 'config', l)) for l in launchers]}")
            print(f"    candidates: {[str(c) for c in getattr(obj, 'configs', None) or []]}")
            for l in launchers:
                print("    launcher:", {k: getattr(l, k, None) for k in ("n_regs", "n_spills", "shared", "num_warps")})
            src = getattr(getattr(obj, "fn", None), "src", None)
            if src:
                print(src)


if __name__ == "__main__":
    main()
