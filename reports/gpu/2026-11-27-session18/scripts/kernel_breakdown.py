"""Per-kernel GPU time of the wide suite's layer norm 2048x32768 fp16 fwd+bwd and column sum 8192x8192 under
tritondiff's defaults and under elements_per_warp=256 (call 3: 0.443 -> 0.402 ms and 0.092 -> 0.088 ms of GPU
time on an H100): which kernels the extra warps speed up.  Each kernel's line of the launch plan (strategy,
blocks, warps) is printed beside its time.  Run on a GPU: python reports/gpu/2026-11-27-session18/scripts/
kernel_breakdown.py"""
import re

import torch

import compiler
from compiler.benchmark import build, wide_workloads, _with_config
from kernels.benchmarks._timing import kernel_times


def main() -> None:
    print(torch.cuda.get_device_name(), torch.__version__)
    for w in wide_workloads():
        if not w.name.startswith(("layer_norm", "column sum")):
            continue
        for label, knobs in (("default", {}), ("e256", {"elements_per_warp": 256})):
            torch.manual_seed(0)
            inputs = w.make()
            fn = build(w, _with_config(knobs))
            fn(*inputs)
            torch.cuda.synchronize()
            plans = "\n".join(a.texts["plan"] for a in compiler.dump.recent_artifacts()[-2:])
            launches = {m.group(1): m.group(0) for m in re.finditer(r"launch (\w+) grid=.*", plans)}
            print(f"\n{w.name} [{label}]")
            for name, per_call, ms in kernel_times(lambda: fn(*inputs), iters=20):
                plan = launches.get(name) or next((line for k, line in launches.items() if k in name),
                                                  "(no plan line: ATen)")
                print(f"  {ms * 1e3:8.1f} us  x{per_call:g}  {name[:60]}\n      {plan[:230]}")


if __name__ == "__main__":
    main()
