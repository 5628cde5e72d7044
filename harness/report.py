"""Reports of a findings store: Markdown, one self-contained HTML page, and JSON.

``write_report(store, out_dir)`` writes ``<name>.md``, ``<name>.html`` and
``<name>.json`` (``name`` = the store file's stem).  All three hold the same
facts, built once by :func:`build`:

* the campaigns (budget, time spent, status, seed);
* findings by class and by subject;
* examples per second over the campaigns' wall time and per worker (lane);
* per subject: examples, worker-seconds, examples/s per worker, and the coverage actually
  exercised -- shape buckets and value families with zero counts shown, so
  gaps are visible -- plus non-finite sprinkles, dtypes and layouts, and its passing
  examples by the oracle allowance they needed (:mod:`harness.coverage`);
* per finding: signature, count, first/last seen, the smallest case, its dump
  and replay command, and a picture of where the mismatches sit: a strip for
  each wrong output (flattened), shading the region the oracle located
  (tail block, head, everything, past 2^20) and marking the first wrong
  indices, with the 2^20 boundary drawn when the output is larger.

The HTML page has inline CSS and inline SVG only: no scripts, fonts or links.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import math
import os

from .api import VALUE_FAMILIES
from .case import SHAPE_BUCKETS, Case
from .coverage import ALLOWANCES, TENSOR_AXES
from .store import Store, plain_json

NONFINITE = ("none", "nan", "inf", "-inf", "mixed")
STRIP_PX = 640
STRIP_CELLS = 64
LIMIT = 1 << 20
ALLOWANCE_NOTE = ("none: within eager's error level everywhere; spread: passed once the truth's conditioning "
                  "was measured; tail: a few elements excused as the tail of an error no worse than eager's "
                  "(harness.coverage). A subject passing mostly on an allowance sits at the edge of eager's "
                  "accuracy.")
SKIP_NOTE = ("Examples not judged: the reference raised (outside the subject's domain), eager faulted on the "
             "device, or a huge example's call ran out of GPU memory or past grid axis 0 (harness.coverage). "
             "Each is an input the campaign did not test.")
STATE_WORDS = {"first_seen": "the first failing example (not shrunk yet)",
               "partial": "shrunk until the time budget ran out", "minimal": "shrunk"}


# ---------------------------------------------------------------------------------------------- data

def build(store_path: str) -> dict:
    """Everything the report shows, as JSON-able data."""
    with Store(store_path, create=False) as store:
        campaigns = [_campaign(c) for c in store.campaigns()]
        stats = store.stats()
        findings = [_finding(f, store.sightings(f["signature"])) for f in store.findings()]
        superseded = [{"signature": f["signature"], "superseded_by": f["superseded_by"],
                       "first_seen": _iso(f["first_seen"]), "dump": f["dump"]}
                      for f in store.findings(superseded=True)]
        path = store.path
    findings.sort(key=lambda f: (f["failure_class"], f["subject"], f["signature"]))
    by_class: dict[str, int] = {}
    by_subject: dict[str, dict[str, int]] = {}
    for f in findings:
        by_class[f["failure_class"]] = by_class.get(f["failure_class"], 0) + 1
        row = by_subject.setdefault(f["subject"], {})
        row[f["failure_class"]] = row.get(f["failure_class"], 0) + 1
    subjects = []
    for s in stats:
        cov = s["coverage"]
        subjects.append({
            "subject": s["subject"], "examples": s["examples"], "skipped": s["skipped"],
            "seconds": round(s["seconds"], 3),
            "examples_per_s": _rate(s["examples"], s["seconds"]),
            "findings": sum(by_subject.get(s["subject"], {}).values()),
            "coverage": {
                "shape": _ordered(cov.get("shape", {}), SHAPE_BUCKETS),
                "values": _ordered(cov.get("values", {}), VALUE_FAMILIES),
                "nonfinite": _ordered(cov.get("nonfinite", {}), NONFINITE),
                "dtype": dict(sorted(cov.get("dtype", {}).items())),
                "layout": dict(sorted(cov.get("layout", {}).items())),
            },
            "allowance": _ordered(cov.get("allowance", {}), ALLOWANCES),
            "skip_reasons": dict(sorted(cov.get("skipped", {}).items(), key=lambda kv: (-kv[1], kv[0]))),
        })
    examples = sum(s["examples"] for s in subjects)
    worker_s = sum(s["seconds"] for s in subjects)         # lanes run in parallel: this exceeds the wall time
    wall_s = sum(c["spent_s"] for c in campaigns)
    return {
        "store": path,
        "generated": _iso(_dt.datetime.now(_dt.timezone.utc).timestamp()),
        "totals": {"findings": len(findings), "sightings": sum(f["count"] for f in findings),
                   "subjects": len(subjects), "examples": examples,
                   "wall_seconds": round(wall_s, 3), "examples_per_wall_s": _rate(examples, wall_s),
                   "worker_seconds": round(worker_s, 3), "examples_per_worker_s": _rate(examples, worker_s)},
        "campaigns": campaigns,
        "by_class": dict(sorted(by_class.items())),
        "by_subject": {k: dict(sorted(v.items())) for k, v in sorted(by_subject.items())},
        "subjects": subjects,
        "findings": findings,
        "superseded": sorted(superseded, key=lambda f: f["signature"]),
    }


def _rate(examples: int, seconds: float) -> float:
    return round(examples / seconds, 3) if seconds > 0 else 0.0


def throughput(totals: dict) -> str:
    """The totals' examples per second, both ways: over the campaigns' wall time, and per worker (lane)."""
    t = totals
    return (f"{t['examples']} examples: {t['examples_per_wall_s']:.2f}/s over {t['wall_seconds']:.1f} s of campaign "
            f"wall time, {t['examples_per_worker_s']:.2f}/s per worker over {t['worker_seconds']:.1f} worker-seconds")


def _ordered(tally: dict, order: tuple) -> dict:
    out = {k: int(tally.get(k, 0)) for k in order}
    out.update({k: int(v) for k, v in sorted(tally.items()) if k not in out})
    return out


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _campaign(c) -> dict:
    return {"id": c.id, "status": c.status, "created": _iso(c.created), "budget_s": c.budget_s,
            "spent_s": round(c.spent_s, 1), "seed": c.seed, "workers": c.workers,
            "targets": c.options.get("targets", [])}


def _finding(f: dict, sightings: list) -> dict:
    try:
        case_text = Case.from_json(f["case"]).describe()
    except (KeyError, TypeError, ValueError):
        case_text = json.dumps(f["case"], sort_keys=True)
    return {
        "signature": f["signature"], "subject": f["subject"], "failure_class": f["failure_class"],
        "location": f["location"], "message": f["message"], "count": f["count"], "state": f["state"],
        "first_seen": _iso(f["first_seen"]), "last_seen": _iso(f["last_seen"]),
        "case": f["case"], "case_text": case_text, "dump": f["dump"],
        "replay": f"tritondiff replay {f['dump']}" if f["dump"] else None,
        "sources": [s for s, _ in sightings],
        "picture": mismatch_picture(f["details"], f["dump"]),
    }


def mismatch_picture(details: dict, dump: str | None) -> list[dict]:
    """Where the mismatches sit, per wrong output: shape, numel, flat first indices, region.

    Read from the finding's verdict details (the oracle's comparison); when the
    store has none, from the dump's summary.json.
    """
    comparison = (details or {}).get("comparison")
    if not comparison and dump:
        try:
            with open(os.path.join(dump, "summary.json")) as fh:
                comparison = json.load(fh).get("details", {}).get("comparison")
        except (OSError, ValueError):
            comparison = None
    out = []
    for o in (comparison or {}).get("outputs", []):
        if not o.get("failure_class"):
            continue
        shape = [int(d) for d in o.get("shape", [])]
        numel = int(o.get("numel", math.prod(shape)))
        flat = sorted({_flat_index(idx, shape) for idx in o.get("first_indices", [])})
        out.append({"output": o.get("index", 0), "shape": shape, "numel": numel,
                    "mismatches": int(o.get("mismatches", 0)), "location": o.get("location", "none"),
                    "where": o.get("where", ""), "first_flat_indices": [i for i in flat if 0 <= i < max(numel, 1)],
                    "region": _region(o.get("location", "none"), flat, numel)})
    return out


def _flat_index(idx, shape: list[int]) -> int:
    idx = list(idx) if isinstance(idx, (list, tuple)) else [int(idx)]
    flat = 0
    for i, d in zip(idx, shape):
        flat = flat * d + int(i)
    return flat


def _region(location: str, flat: list[int], numel: int) -> list[int] | None:
    """[start, end) of the shaded part of the strip, from the oracle's coarse location."""
    if numel <= 1 or location in ("all", "scalar"):
        return [0, max(numel, 1)]
    if not flat:
        return None
    if location in ("tail", "beyond_2^20"):
        return [flat[0], numel]
    if location == "head":
        return [0, flat[-1] + 1]
    return None


# ---------------------------------------------------------------------------------------------- pictures

def svg_strip(pic: dict) -> str:
    """An inline SVG strip of one wrong output: shaded region, first wrong indices, the 2^20 line."""
    n = max(pic["numel"], 1)

    def x(i: float) -> float:
        return round(STRIP_PX * i / n, 2)

    parts = [f'<svg class="strip" width="{STRIP_PX}" height="38" viewBox="0 -2 {STRIP_PX} 40" role="img" '
             f'aria-label="output {pic["output"]}: {html.escape(pic["where"])}">',
             f'<rect x="0" y="4" width="{STRIP_PX}" height="16" fill="#e6edf2" stroke="#9aa8b3"/>']
    if pic["region"]:
        a, b = pic["region"]
        parts.append(f'<rect class="region" x="{x(a)}" y="4" width="{max(1.5, x(b) - x(a))}" height="16" '
                     f'fill="#f2b8b5"/>')
    for i in pic["first_flat_indices"]:
        parts.append(f'<rect class="hit" x="{min(x(i), STRIP_PX - 2)}" y="2" width="{max(2.0, STRIP_PX / n)}" '
                     f'height="20" fill="#b22222"><title>element {i}</title></rect>')
    if n > LIMIT:
        parts.append(f'<line x1="{x(LIMIT)}" y1="0" x2="{x(LIMIT)}" y2="24" stroke="#333" stroke-dasharray="3,2"/>'
                     f'<text x="{x(LIMIT) + 2}" y="34" font-size="10">2^20</text>')
    parts.append(f'<text x="0" y="34" font-size="10">0</text>'
                 f'<text x="{STRIP_PX}" y="34" font-size="10" text-anchor="end">{n - 1}</text></svg>')
    return "".join(parts)


def text_strip(pic: dict) -> str:
    """The same picture in characters: '#' shaded region, 'X' a first wrong index, '|' the 2^20 line."""
    n = max(pic["numel"], 1)
    cells = min(STRIP_CELLS, n)
    strip = ["."] * cells

    def cell(i: int) -> int:
        return min(cells - 1, i * cells // n)

    if pic["region"]:
        a, b = pic["region"]
        for c in range(cell(a), cell(max(a, b - 1)) + 1):
            strip[c] = "#"
    if n > LIMIT:
        strip[cell(LIMIT)] = "|"
    for i in pic["first_flat_indices"]:
        strip[cell(i)] = "X"
    return "".join(strip)


# ---------------------------------------------------------------------------------------------- Markdown

def render_markdown(data: dict) -> str:
    t = data["totals"]
    lines = ["# tritondiff report", "",
             f"Store `{data['store']}`, generated {data['generated']}.", "",
             f"**{t['findings']} finding(s)** ({t['sightings']} sighting(s)) over {t['subjects']} subject(s); "
             f"{throughput(t)}.", ""]
    if data["campaigns"]:
        lines += ["## Campaigns", "", "| id | status | created | budget s | spent s | seed | lanes | targets |",
                  "|---|---|---|---|---|---|---|---|"]
        for c in data["campaigns"]:
            lines.append(f"| {c['id']} | {c['status']} | {c['created']} | {c['budget_s']:.0f} | {c['spent_s']:.0f} | "
                         f"{c['seed']} | {c['workers']} | {_md(', '.join(c['targets']) or '(bundled)')} |")
        lines.append("")
    lines += ["## Findings by class", ""]
    if data["by_class"]:
        lines += ["| class | findings |", "|---|---|"] + [f"| {k} | {v} |" for k, v in data["by_class"].items()]
    else:
        lines.append("No findings.")
    lines.append("")
    if data["by_subject"]:
        classes = sorted(data["by_class"])
        lines += ["## Findings by subject", "", "| subject | " + " | ".join(classes) + " |",
                  "|---|" + "---|" * len(classes)]
        for subj, row in data["by_subject"].items():
            lines.append(f"| {_md(subj)} | " + " | ".join(str(row.get(c, 0)) for c in classes) + " |")
        lines.append("")
    lines += ["## Subjects", "", "Seconds are worker-seconds: the time lanes spent on the subject.", "",
              "| subject | examples | skipped | worker s | examples/s per worker | findings |",
              "|---|---|---|---|---|---|"]
    for s in data["subjects"]:
        lines.append(f"| {_md(s['subject'])} | {s['examples']} | {s['skipped']} | {s['seconds']:.1f} | "
                     f"{s['examples_per_s']:.2f} | {s['findings']} |")
    lines += ["", "### Coverage exercised", ""]
    for axis in TENSOR_AXES:
        keys = _axis_keys(data["subjects"], axis)
        if not keys:
            continue
        lines += [f"**{axis}**", "", "| subject | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
        for s in data["subjects"]:
            lines.append(f"| {_md(s['subject'])} | " + " | ".join(str(s["coverage"][axis].get(k, 0)) for k in keys)
                         + " |")
        lines.append("")
    if _allowances_recorded(data):
        lines += ["### Passing examples by the oracle allowance they needed", "", ALLOWANCE_NOTE, "",
                  "| subject | " + " | ".join(ALLOWANCES) + " |", "|---|" + "---|" * len(ALLOWANCES)]
        lines += [f"| {_md(s['subject'])} | " + " | ".join(str(s["allowance"][k]) for k in ALLOWANCES) + " |"
                  for s in data["subjects"]]
        lines.append("")
    skipped = _skip_rows(data)
    if skipped:
        lines += ["### Skipped examples, by reason", "", SKIP_NOTE, "", "| subject | reason | examples |",
                  "|---|---|---|"]
        lines += [f"| {_md(subj)} | {_md(why)} | {k} |" for subj, why, k in skipped]
        lines.append("")
    if data["findings"]:
        lines += ["## Findings", ""]
    for f in data["findings"]:
        lines += [f"### `{f['signature']}`", "",
                  f"- class **{f['failure_class']}**, subject `{f['subject']}`, seen {f['count']} time(s) "
                  f"(first {f['first_seen']}, last {f['last_seen']})",
                  f"- message: {_md(f['message'])}",
                  f"- case, {STATE_WORDS.get(f['state'], f['state'])}: `{f['case_text']}`",
                  f"- dump: `{f['dump'] or '-'}`" + (f"; replay: `{f['replay']}`" if f["replay"] else "")]
        for pic in f["picture"]:
            lines.append(f"- output {pic['output']} {pic['shape']}: {pic['mismatches']} of {pic['numel']} wrong, "
                         f"{_md(pic['where'])}: `{text_strip(pic)}`")
        if not f["picture"]:
            lines.append(f"- no element-wise picture ({f['failure_class']})")
        lines.append("")
    if data["superseded"]:
        lines += ["## First sightings that shrank into another signature", "",
                  "| first seen as | shrank into | first seen |", "|---|---|---|"]
        lines += [f"| `{_md(f['signature'])}` | `{_md(f['superseded_by'])}` | {f['first_seen']} |"
                  for f in data["superseded"]]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _skip_rows(data: dict) -> list[list]:
    """(subject, reason, examples) of every skipped example's reason, most frequent first per subject."""
    return [[s["subject"], why, k] for s in data["subjects"] for why, k in s.get("skip_reasons", {}).items()]


def _allowances_recorded(data: dict) -> bool:
    """Did any subject record its passes by allowance (stores from before harness.coverage did not)?"""
    return any(sum(s["allowance"].values()) for s in data["subjects"])


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _axis_keys(subjects: list[dict], axis: str) -> list[str]:
    keys: list[str] = []
    for s in subjects:
        for k in s["coverage"][axis]:
            if k not in keys:
                keys.append(k)
    return keys


# ---------------------------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:72em;color:#1d2329}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #d5dde3}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #d5dde3;padding:.2em .55em;text-align:right}
th{background:#f1f4f6}td:first-child,th:first-child{text-align:left}
.zero{color:#b22222;background:#fdf0ef}.finding{border:1px solid #d5dde3;border-radius:6px;padding:.4em 1em;
margin:1em 0}code{background:#f1f4f6;padding:0 .25em;border-radius:3px}.strip{display:block;margin:.3em 0}
.cls{font-weight:600}
"""


def render_html(data: dict) -> str:
    e = html.escape
    t = data["totals"]
    out = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>tritondiff report</title>",
           f"<style>{_CSS}</style></head><body>", "<h1>tritondiff report</h1>",
           f"<p>Store <code>{e(data['store'])}</code>, generated {e(data['generated'])}.</p>",
           f"<p><b>{t['findings']} finding(s)</b> ({t['sightings']} sighting(s)) over {t['subjects']} subject(s); "
           f"{e(throughput(t))}.</p>"]
    if data["campaigns"]:
        out.append(_table(["id", "status", "created", "budget s", "spent s", "seed", "lanes", "targets"],
                          [[c["id"], c["status"], c["created"], f"{c['budget_s']:.0f}", f"{c['spent_s']:.0f}",
                            c["seed"], c["workers"], ", ".join(c["targets"]) or "(bundled)"]
                           for c in data["campaigns"]], title="Campaigns"))
    out.append("<h2>Findings by class</h2>")
    out.append(_table(["class", "findings"], [[k, v] for k, v in data["by_class"].items()])
               if data["by_class"] else "<p>No findings.</p>")
    if data["by_subject"]:
        classes = sorted(data["by_class"])
        out.append(_table(["subject"] + classes, [[s] + [row.get(c, 0) for c in classes]
                                                 for s, row in data["by_subject"].items()],
                          title="Findings by subject"))
    out.append(_table(["subject", "examples", "skipped", "worker s", "examples/s per worker", "findings"],
                      [[s["subject"], s["examples"], s["skipped"], f"{s['seconds']:.1f}",
                        f"{s['examples_per_s']:.2f}", s["findings"]] for s in data["subjects"]], title="Subjects"))
    out.append("<h2>Coverage exercised</h2><p>Counts of tensors drawn per category; "
               "<span class=\"zero\">0</span> marks a category never exercised.</p>")
    for axis in TENSOR_AXES:
        keys = _axis_keys(data["subjects"], axis)
        if keys:
            out.append(f"<h3>{e(axis)}</h3>" + _table(["subject"] + keys, [[s["subject"]] + [
                s["coverage"][axis].get(k, 0) for k in keys] for s in data["subjects"]], zero_marks=True))
    if _allowances_recorded(data):
        out.append(f"<h3>Passing examples by the oracle allowance they needed</h3><p>{e(ALLOWANCE_NOTE)}</p>"
                   + _table(["subject"] + list(ALLOWANCES), [[s["subject"]] + [s["allowance"][k] for k in ALLOWANCES]
                                                            for s in data["subjects"]]))
    skipped = _skip_rows(data)
    if skipped:
        out.append(f"<h3>Skipped examples, by reason</h3><p>{e(SKIP_NOTE)}</p>"
                   + _table(["subject", "reason", "examples"], skipped))
    if data["findings"]:
        out.append("<h2>Findings</h2>")
    for f in data["findings"]:
        out.append(f"<div class=\"finding\" id=\"{e(f['signature'])}\"><h3><code>{e(f['signature'])}</code></h3>")
        out.append(f"<p><span class=\"cls\">{e(f['failure_class'])}</span> in <code>{e(f['subject'])}</code>, seen "
                   f"{f['count']} time(s) (first {e(str(f['first_seen']))}, last {e(str(f['last_seen']))})</p>"
                   f"<p>{e(f['message'])}</p><p>Case, {e(STATE_WORDS.get(f['state'], f['state']))}: "
                   f"<code>{e(f['case_text'])}</code></p>")
        if f["dump"]:
            out.append(f"<p>Dump <code>{e(f['dump'])}</code>; replay with <code>{e(f['replay'])}</code></p>")
        for pic in f["picture"]:
            out.append(f"<p>Output {pic['output']} {e(str(pic['shape']))}: {pic['mismatches']} of {pic['numel']} "
                       f"element(s) wrong, {e(pic['where'])}</p>" + svg_strip(pic))
        if not f["picture"]:
            out.append(f"<p>No element-wise picture for a {e(f['failure_class'])} finding.</p>")
        out.append("</div>")
    if data["superseded"]:
        out.append(_table(["first seen as", "shrank into", "first seen"],
                          [[f["signature"], f["superseded_by"], f["first_seen"]] for f in data["superseded"]],
                          title="First sightings that shrank into another signature"))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _table(head: list, rows: list[list], *, title: str | None = None, zero_marks: bool = False) -> str:
    e = html.escape
    cells = ["<table><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in head) + "</tr>"]
    for row in rows:
        tds = []
        for i, v in enumerate(row):
            cls = ' class="zero"' if zero_marks and i > 0 and v == 0 else ""
            tds.append(f"<td{cls}>{e(str(v))}</td>")
        cells.append("<tr>" + "".join(tds) + "</tr>")
    cells.append("</table>")
    return (f"<h2>{e(title)}</h2>" if title else "") + "".join(cells)


# ---------------------------------------------------------------------------------------------- files

def write_report(store_path: str, out_dir: str = "reports") -> dict[str, str]:
    """Write the Markdown, HTML and JSON reports of ``store_path`` into ``out_dir``; returns their paths."""
    data = build(store_path)
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(store_path))[0] or "findings"
    paths = {"markdown": os.path.join(out_dir, f"{stem}.md"), "html": os.path.join(out_dir, f"{stem}.html"),
             "json": os.path.join(out_dir, f"{stem}.json")}
    with open(paths["markdown"], "w") as fh:
        fh.write(render_markdown(data))
    with open(paths["html"], "w") as fh:
        fh.write(render_html(data))
    with open(paths["json"], "w") as fh:
        json.dump(plain_json(data), fh, indent=1, allow_nan=False)  # key order is the report order
    return paths
