"""harness.report / `tritondiff report`: Markdown, self-contained HTML and JSON of a findings store."""
from __future__ import annotations

import json
import os
import re

import pytest

from tritondiff.harness.cli import main
from tritondiff.harness.report import (
    build, mismatch_picture, render_html, render_markdown, svg_strip, text_strip, write_report
)
from tritondiff.harness.store import FindingRecord, Store

N = 4231


def _comparison(shape, first_indices, location, where, mismatches):
    numel = 1
    for d in shape:
        numel *= d
    return {"comparison": {"passed": False, "outputs": [
        {"index": 0, "failure_class": None, "shape": [3], "numel": 3, "first_indices": [], "location": "none"},
        {"index": 1, "failure_class": "mismatch", "shape": list(shape), "numel": numel, "mismatches": mismatches,
         "first_indices": first_indices, "location": location, "where": where}]}}


@pytest.fixture
def store_path(tmp_path):
    path = str(tmp_path / "nightly.db")
    case = {"dims": {"N": N}, "scalars": {}, "tensors": {"x": {
        "shape": [N], "dtype": "float16", "layout": "strided", "layout_param": 2, "values": "large_offset",
        "seed": 3, "nonfinite": "", "low": None, "high": None}}}
    with Store(path) as s:
        cid = s.create_campaign(options={"targets": ["kernels/x.py"]}, seed=5, budget_s=600, workers=2)
        s.heartbeat(cid, 601.5, "done")
        tail = FindingRecord("row_sum|mismatch|out1:tail", "row_sum", "mismatch", "out1:tail", "tail block wrong",
                             case, N, _comparison((N,), [[4096], [4100], [4230]], "tail",
                                                  "only the tail block (elements 4096..4230)", 135),
                             {"name": "row_sum"}, str(tmp_path / "dumps" / "row_sum"))
        s.record_finding(tail, source="campaign:1:task:1", state="minimal", now=1_700_000_000.0)
        s.record_finding(tail, source="campaign:1:task:2", now=1_700_000_100.0)
        crash = FindingRecord("wild|crash|crash", "wild", "crash", "crash", "worker killed by signal SIGSEGV",
                              {"dims": {}, "tensors": {}, "scalars": {"k": 1}}, 1, {}, {"name": "wild"}, None)
        s.record_finding(crash, source="campaign:1:task:3")
        raw = FindingRecord("row_sum|mismatch|out1:scattered", "row_sum", "mismatch", "out1:scattered", "raw", case,
                            N, {}, {"name": "row_sum"}, None)
        s.record_finding(raw, source="campaign:1:task:4")
        s.withdraw(raw.signature, source="campaign:1:task:4", into=tail.signature)
        s.add_stats("row_sum", examples=90, skipped=10, seconds=30.0,
                    coverage={"shape": {"<2^16": 60, "1": 30}, "values": {"large_offset": 20, "normal": 70},
                              "nonfinite": {"none": 80, "nan": 10}, "dtype": {"float16": 90},
                              "layout": {"strided": 90}, "allowance": {"none": 70, "tail": 8, "spread": 2},
                              "skipped": {"reference raised ValueError": 7, "out of GPU memory": 3}})
        s.add_stats("wild", examples=3, seconds=6.0, coverage={"shape": {"empty": 3}})
    return path


def test_build_summarises_findings_stats_and_campaigns(store_path):
    data = build(store_path)
    # 2 lanes: 36 worker-seconds of examples; the campaign's wall time (601.5 s) is a different clock
    assert data["totals"] == {"findings": 2, "sightings": 3, "subjects": 2, "examples": 93,
                              "wall_seconds": 601.5, "examples_per_wall_s": round(93 / 601.5, 3),
                              "worker_seconds": 36.0, "examples_per_worker_s": round(93 / 36, 3)}
    assert data["by_class"] == {"crash": 1, "mismatch": 1}
    assert data["by_subject"] == {"row_sum": {"mismatch": 1}, "wild": {"crash": 1}}
    (camp,) = data["campaigns"]
    assert (camp["status"], camp["spent_s"], camp["seed"], camp["targets"]) == ("done", 601.5, 5, ["kernels/x.py"])
    row = next(s for s in data["subjects"] if s["subject"] == "row_sum")
    assert row["examples_per_s"] == 3.0 and row["findings"] == 1
    # every shape bucket and value family is listed, the ones never drawn with 0
    assert row["coverage"]["shape"] == {"empty": 0, "1": 30, "<2^10": 0, "<2^16": 60, "<=2^20": 0, ">2^20": 0,
                                        ">=2^31-1": 0}
    assert row["coverage"]["values"]["large_offset"] == 20 and row["coverage"]["values"]["tiny"] == 0
    # passes by the oracle allowance they needed, every allowance listed; none counted where none was recorded
    assert row["allowance"] == {"none": 70, "spread": 2, "tail": 8, "spread+tail": 0}
    assert next(s for s in data["subjects"] if s["subject"] == "wild")["allowance"] == dict.fromkeys(
        ("none", "spread", "tail", "spread+tail"), 0)
    tail = next(f for f in data["findings"] if f["failure_class"] == "mismatch")
    assert tail["count"] == 2 and tail["sources"] == ["campaign:1:task:1", "campaign:1:task:2"]
    assert tail["case_text"] == f"x=float16[{N}]/strided large_offset"
    (pic,) = tail["picture"]                          # only the wrong output is pictured
    assert pic["output"] == 1 and pic["first_flat_indices"] == [4096, 4100, 4230] and pic["region"] == [4096, N]
    assert data["superseded"] == [{"signature": "row_sum|mismatch|out1:scattered", "first_seen": data["superseded"][0][
        "first_seen"], "superseded_by": "row_sum|mismatch|out1:tail", "dump": None}]
    crash = next(f for f in data["findings"] if f["failure_class"] == "crash")
    assert crash["picture"] == [] and crash["replay"] is None


def test_text_strip_marks_region_first_indices_and_limit():
    pic = {"numel": N, "region": [4096, N], "first_flat_indices": [4096, 4230]}
    strip = text_strip(pic)
    assert len(strip) == 64
    first_cell = 4096 * 64 // N                       # 61: cells 61..63 hold elements 4096..4230
    assert strip[:first_cell] == "." * first_cell
    assert strip[first_cell:] == "X#X"                # shaded tail, first and last wrong element marked
    big = {"numel": 3 << 20, "region": [1 << 20, 3 << 20], "first_flat_indices": [1 << 20]}
    strip = text_strip(big)
    assert strip[21] == "X" and strip[:21] == "." * 21 and set(strip[22:]) == {"#"}


def test_svg_strip_positions():
    pic = {"output": 0, "numel": 2 << 20, "region": [1 << 20, 2 << 20], "first_flat_indices": [(1 << 20) + 5],
           "where": "only past flat element 1,048,576"}
    svg = svg_strip(pic)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert re.search(r'class="region" x="320.0" y="4" width="320.0"', svg)
    assert 'stroke-dasharray' in svg and ">2^20<" in svg          # the Triton block-limit line
    assert re.search(r'class="hit" x="320.0', svg)


def test_markdown_html_json_files(store_path, tmp_path):
    out = tmp_path / "rep"
    paths = write_report(store_path, str(out))
    assert paths == {"markdown": str(out / "nightly.md"), "html": str(out / "nightly.html"),
                     "json": str(out / "nightly.json")}
    md = open(paths["markdown"]).read()
    assert "| crash | 1 |" in md and "| mismatch | 1 |" in md
    assert "| row_sum | 90 | 10 | 30.0 | 3.00 | 1 |" in md
    assert "| subject | examples | skipped | worker s | examples/s per worker | findings |" in md
    rates = ("93 examples: 0.15/s over 601.5 s of campaign wall time, 2.58/s per worker over 36.0 "
             "worker-seconds")
    assert rates in md
    assert "`" + text_strip({"numel": N, "region": [4096, N], "first_flat_indices": [4096, 4100, 4230]}) + "`" in md
    assert "no element-wise picture (crash)" in md
    assert r"| `row_sum\|mismatch\|out1:scattered` | `row_sum\|mismatch\|out1:tail` |" in md
    assert "### Passing examples by the oracle allowance they needed" in md
    assert "| subject | none | spread | tail | spread+tail |" in md and "| row_sum | 70 | 2 | 8 | 0 |" in md
    reasons = md.split("### Skipped examples, by reason", 1)[1]
    assert reasons.index("| row_sum | reference raised ValueError | 7 |") < reasons.index(
        "| row_sum | out of GPU memory | 3 |") and "| wild |" not in reasons.split("##", 1)[0]
    page = open(paths["html"]).read()
    assert page.startswith("<!doctype html>") and page.count("<svg") == 1
    for external in ("<script", "<link", "src=", "http://", "https://", "@import", "url("):
        assert external not in page                  # self-contained: inline CSS and SVG only
    assert 'class="zero"' in page                    # coverage gaps are highlighted
    assert rates in page and "<th>examples/s per worker</th>" in page
    assert "Passing examples by the oracle allowance they needed" in page and "<th>spread+tail</th>" in page
    data = json.loads(open(paths["json"]).read(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert data["by_class"] == {"crash": 1, "mismatch": 1}
    assert render_markdown(data) == md                 # the JSON holds everything the pages show
    assert render_html(data).count("<svg") == 1


def test_picture_falls_back_to_the_dump_summary(tmp_path):
    dump = tmp_path / "d"
    dump.mkdir()
    (dump / "summary.json").write_text(json.dumps({"details": _comparison((2, 8), [[1, 7]], "rows", "row 1", 1)}))
    (pic,) = mismatch_picture({}, str(dump))
    assert pic["first_flat_indices"] == [15] and pic["region"] is None and pic["numel"] == 16
    assert mismatch_picture({}, str(tmp_path / "missing")) == []


def test_report_cli_default_location_is_beside_the_store_not_the_working_folder(store_path, tmp_path, monkeypatch,
                                                                                capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)                       # a checkout whose reports/ folder is tracked
    assert main(["report", store_path]) == 0
    assert sorted(os.listdir(tmp_path / "nightly-report")) == ["nightly.html", "nightly.json", "nightly.md"]
    assert os.listdir(work) == []
    assert "nightly-report/nightly.html" in capsys.readouterr().out
