"""The HTML report: one self-contained file (inline CSS and SVG, no script, no external
asset) with the figures, the route confusion matrix, latency and token distributions and a
row per case. Every text from a run is escaped: it is shown, never interpreted."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from baton.evals.results import EvalReport

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#f3f3f3}.num{text-align:right}
.pass{color:#176117}.fail{color:#a31515;font-weight:600}
.diag{background:#e3f4e3}.off{background:#fbe3e3}
code{font-size:12px;background:#f6f6f6;padding:1px 3px}
.small{font-size:12px;color:#555}
"""


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _figures(report: EvalReport) -> str:
    s = report.summary
    rows = [
        ("route accuracy", f"{_pct(s.route_accuracy)} ({s.routed}/{s.route_checked})"),
        ("task success", f"{_pct(s.task_success)} ({s.succeeded}/{s.attempts})"),
        (
            "tool-call validity",
            f"{_pct(s.tool_call_validity)} "
            f"({s.tool_calls_emitted - s.tool_calls_invalid}/{s.tool_calls_emitted})",
        ),
        (f"pass^{s.repeat}", f"{_pct(s.pass_k_rate)} ({s.pass_k}/{s.cases})"),
        ("latency p50 / p95", f"{s.latency_p50_s:.3f} / {s.latency_p95_s:.3f} s"),
        ("tokens (in + out)", f"{s.input_tokens} + {s.output_tokens}"),
        ("model calls", str(s.model_calls)),
    ]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _confusion(report: EvalReport) -> str:
    matrix = report.confusion()
    if not matrix:
        return "<p>No case expects a route.</p>"
    actual = sorted({a for row in matrix.values() for a in row} | set(matrix))
    head = "".join(f"<th>{escape(a)}</th>" for a in actual)
    rows = []
    for exp in sorted(matrix):
        cells = []
        for a in actual:
            n = matrix[exp].get(a, 0)
            cls = "diag" if a == exp and n else ("off" if n else "")
            cells.append(f'<td class="num {cls}">{n or ""}</td>')
        rows.append(f"<tr><th>{escape(exp)}</th>{''.join(cells)}</tr>")
    return (
        '<table class="confusion"><tr><th>expected \\ actual</th>'
        f"{head}</tr>{''.join(rows)}</table>"
    )


def _bars(values: Sequence[float], unit: str, bins: int = 10) -> str:
    """A histogram of `values` as an inline SVG."""
    if not values:
        return "<p>No data.</p>"
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    top = max(counts)
    w, h, bw = 420, 120, 40
    rects = []
    for i, c in enumerate(counts):
        bh = (h - 20) * c / top if top else 0
        x = i * bw + 4
        label = f"{lo + i * width:.3g}-{lo + (i + 1) * width:.3g} {unit}: {c}"
        rects.append(
            f'<rect x="{x}" y="{h - 15 - bh:.1f}" width="{bw - 6}" height="{bh:.1f}" '
            f'fill="#4a7fb5"><title>{escape(label)}</title></rect>'
            f'<text x="{x + (bw - 6) / 2}" y="{h - 2}" font-size="10" '
            f'text-anchor="middle">{c}</text>'
        )
    caption = f"{lo:.3g} to {hi:.3g} {unit}, {len(values)} attempts, {bins} bins"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">'
        f"{''.join(rects)}</svg><div class='small'>{escape(caption)}</div>"
    )


def _cases(report: EvalReport) -> str:
    rows = []
    for r in report.results:
        for a in r.attempts:
            ok = a.passed
            checks = "<br>".join(
                f'<span class="{"pass" if c.passed else "fail"}">'
                f"{'✓' if c.passed else '✗'} {escape(c.check)}</span>: {escape(c.reason)}"
                for c in a.checks
            )
            if a.error:
                checks = f'<span class="fail">error: {escape(a.error)}</span><br>{checks}'
            rows.append(
                "<tr>"
                f"<td>{escape(r.id)}</td><td class='num'>{a.repeat}</td>"
                f"<td>{escape(r.split)}</td><td>{escape(', '.join(r.tags))}</td>"
                f"<td>{escape(r.request)}</td>"
                f"<td>{escape(r.expected_route or '')}</td><td>{escape(a.route)}</td>"
                f"<td>{escape(' → '.join(a.path))}</td><td>{escape(a.status)}</td>"
                f'<td class="{"pass" if ok else "fail"}">{"pass" if ok else "fail"}</td>'
                f"<td>{checks}</td>"
                f"<td class='num'>{a.latency_s:.3f}</td><td class='num'>{a.tokens}</td>"
                f"<td><code>{escape(a.trace)}</code></td>"
                "</tr>"
            )
    head = (
        "<tr><th>case</th><th>#</th><th>split</th><th>tags</th><th>request</th>"
        "<th>expected route</th><th>route</th><th>path</th><th>status</th><th>result</th>"
        "<th>checks</th><th>s</th><th>tokens</th><th>trace</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def to_html(report: EvalReport) -> str:
    """The report as one HTML document."""
    attempts = [a for r in report.results for a in r.attempts]
    meta = (
        f"spec <code>{escape(report.spec)}</code> · team <code>{escape(report.team)}</code> · "
        f"model {escape(report.model)} · split {escape(report.split)} · "
        f"{escape(report.date)}<br><code>{escape(report.command)}</code>"
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>baton eval · {escape(report.spec)}</title><style>{CSS}</style></head><body>"
        f"<h1>baton eval</h1><p class='small'>{meta}</p>"
        f"<h2>Figures</h2>{_figures(report)}"
        f"<h2>Route confusion matrix</h2>{_confusion(report)}"
        f"<h2>Latency per attempt</h2>{_bars([a.latency_s for a in attempts], 's')}"
        f"<h2>Tokens per attempt</h2>{_bars([float(a.tokens) for a in attempts], 'tokens')}"
        f"<h2>Cases</h2>{_cases(report)}"
        "</body></html>\n"
    )


def write_html(report: EvalReport, path: str | Path) -> Path:
    """Write the HTML report to `path` (its folder is created); the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(to_html(report), encoding="utf-8")
    return p
