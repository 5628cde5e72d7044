"""The GPU benchmark helpers that run anywhere: kernels/benchmarks/ab_trees.sh, the probes' no-GPU exit, and
the mixed-order probe's hand-written kernels (run on the kernel device: the interpreter here)."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AB = os.path.join(ROOT, "kernels", "benchmarks", "ab_trees.sh")


def _ab(*args, cwd=None):
    return subprocess.run(["bash", AB, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_ab_trees_runs_the_command_in_each_tree_a_b_b_a(tmp_path):
    trees = {}
    for side in ("a", "b"):
        tree = tmp_path / f"tree_{side}"
        tree.mkdir()
        (tree / "which.txt").write_text(side.upper())
        trees[side] = tree
    out = tmp_path / "out"
    done = _ab(str(out), str(trees["a"]), str(trees["b"]), "--no-out", "--", "sh", "-c", 'cat which.txt; echo " $PYTHONPATH"')
    assert done.returncode == 0, done.stderr
    logs = sorted(os.listdir(out))
    assert logs == ["1-A.log", "2-B.log", "3-B.log", "4-A.log"]
    for log in logs:
        side = log[2]
        text = (out / log).read_text().split()
        assert text == [side, str(trees[side.lower()])]          # run inside its tree, its tree on PYTHONPATH


def test_ab_trees_passes_out_per_round_and_reports_a_failing_round(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    done = _ab(str(tmp_path / "out"), str(a), str(b), "--", "sh", "-c", 'echo "$@"; [ "$PWD" != "' + str(a) + '" ]', "sh")
    assert done.returncode == 0
    assert (tmp_path / "out" / "2-B.log").read_text().strip() == f"--out {tmp_path / 'out' / '2-B.md'}"
    assert "round 1 (A) exited 1" in done.stderr and "round 4 (A) exited 1" in done.stderr
    assert "(B) exited" not in done.stderr


@pytest.mark.parametrize("args", [[], ["out", "a"], ["out", "a", "b", "python"], ["out", "a", "b", "--no-out", "x"]])
def test_ab_trees_bad_usage_exits_2_with_the_usage(tmp_path, args):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    done = _ab(*args, cwd=tmp_path)
    assert done.returncode == 2 and ("usage:" in done.stderr or "expected -- before the command" in done.stderr)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit")
@pytest.mark.parametrize("module", ["kernels.benchmarks.tuned_host_probe", "kernels.benchmarks.ln_dx_probe",
                                    "kernels.benchmarks.mixed_order_probe"])
def test_the_probes_say_they_need_a_gpu_and_exit_0(module):
    done = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and "no CUDA device here" in done.stdout


@pytest.mark.parametrize("whole, ch, stages, group", [(True, 512, 1, 0), (False, 64, 1, 0), (False, 128, 2, 0),
                                                      (False, 64, 1, 4), (False, 128, 1, 2)])
def test_the_mixed_order_probe_kernels_compute_layer_norm_backward(whole, ch, stages, group):
    """Its shapes (a whole padded row, static chunks with a ragged last one, a pipelined row loop, row groups
    with the column sums in memory and a ragged last group) give the dx, dW and dB of layer norm on 37 rows
    of 300 (programs with a short last range of rows)."""
    from harness import device
    from kernels.benchmarks.mixed_order_probe import grouped_source, load, source
    dev = device.torch_device()
    g = torch.Generator().manual_seed(3)
    m, n, programs = 37, 300, 5
    x, dy = (torch.randn(m, n, generator=g).half().to(dev) for _ in range(2))
    w = torch.randn(n, generator=g).half().to(dev)
    xf = x.float()
    mean, rstd = xf.mean(1), torch.rsqrt(xf.var(1, unbiased=False) + 1e-5)
    xhat = (xf - mean[:, None]) * rstd[:, None]
    wdy = w.float() * dy.float()
    want_dx = (wdy - (xhat * (xhat * wdy).mean(1, keepdim=True) + wdy.mean(1, keepdim=True))) * rstd[:, None]
    rows = -(-m // programs)
    dx = torch.empty_like(x)
    dwp, dbp = torch.empty(programs, n, device=dev), torch.empty(programs, n, device=dev)
    load(grouped_source(group) if group else source(n, ch, whole, stages))[(programs,)](x, dy, w, mean, rstd, dx, dwp, dbp, m, ROWS=rows, N=n, CH=ch)
    torch.testing.assert_close(dx.float(), want_dx, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(dwp.sum(0), (dy.float() * xhat).sum(0), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dbp.sum(0), dy.float().sum(0), rtol=1e-4, atol=1e-4)


def test_interleaved_report_takes_each_cases_median_against_the_base_and_copy_bandwidth():
    from kernels.benchmarks import _timing
    times = {"hand a": [10.0, 12.0, 11.0], "inductor": [22.0, 20.0, 21.0]}
    text = _timing.interleaved_report(times, base="inductor", nbytes=11_000_000, copy_gbps=2000.0,
                                      checks={"hand a": "ok"}, digits=1)
    lines = text.splitlines()
    assert lines[0] == "copy bandwidth 2000 GB/s; 3 interleaved rounds, median of the rounds' medians"
    assert lines[2] == "| kernel | us | range | vs inductor | % copy BW | check |"
    # 11 MB in 11 us: 1000 GB/s, half of the copy's; in 21 us: 523.8 GB/s
    assert lines[4] == "| hand a | 11.0 | 10.0-12.0 | 1.9091 | 50.0% | ok |"
    assert lines[5] == "| inductor | 21.0 | 20.0-22.0 | 1.0000 | 26.2% |  |"
