"""base.timing: the interleaved benchmark report."""


def test_interleaved_report_takes_each_cases_median_against_the_base_and_copy_bandwidth():
    from tritondiff.base import timing as _timing
    times = {"hand a": [10.0, 12.0, 11.0], "inductor": [22.0, 20.0, 21.0]}
    text = _timing.interleaved_report(times, base="inductor", nbytes=11_000_000, copy_gbps=2000.0,
                                      checks={"hand a": "ok"}, digits=1)
    lines = text.splitlines()
    assert lines[0] == "copy bandwidth 2000 GB/s; 3 interleaved rounds, median of the rounds' medians"
    assert lines[2] == "| kernel | us | range | vs inductor | % copy BW | check |"
    # 11 MB in 11 us: 1000 GB/s, half of the copy's; in 21 us: 523.8 GB/s
    assert lines[4] == "| hand a | 11.0 | 10.0-12.0 | 1.9091 | 50.0% | ok |"
    assert lines[5] == "| inductor | 21.0 | 20.0-22.0 | 1.0000 | 26.2% |  |"
