"""The JSON report: an `EvalReport` written and read back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from baton.core.errors import EvalError
from baton.evals.results import EvalReport


def to_json(report: EvalReport) -> str:
    """The report as indented JSON, with every figure (ratios included)."""
    doc = report.model_dump(mode="json")
    doc["metrics"] = report.summary.metrics()
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def write_json(report: EvalReport, path: str | Path) -> Path:
    """Write the report to `path` (its folder is created); the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(to_json(report), encoding="utf-8")
    return p


def read_json(path: str | Path) -> EvalReport:
    """The report in the JSON file `path`; `EvalError` when it is not one."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalError(f"cannot read the report {p}: {exc}") from None
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            doc.pop("metrics", None)  # derived from the summary, written for readers
        return EvalReport.model_validate(doc)
    except (ValueError, ValidationError) as exc:
        raise EvalError(f"{p} is not a `baton eval --json` report: {exc}") from None
