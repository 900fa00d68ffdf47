"""`benchmarks/desk_routing_triage.py`: the desk's triage agent scored like a router.

Runs on the desk's rule-based scripted policy (no language model): it checks the harness
(first hand-off read, escalations as unknown, the figures and `--json`), not triage's accuracy.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "desk_routing_triage.py"
SPEC = ROOT / "benchmarks" / "desk_routing" / "desk-routes.json"


@pytest.fixture
def triage(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the repo on sys.path
    spec = importlib.util.spec_from_file_location("desk_routing_triage_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_answer_maps_hand_offs_and_escalations(triage: ModuleType) -> None:
    assert triage.answer("billing") == "billing"
    for other in ("human", "(answered itself)", "(escalated by a guard)"):
        assert triage.answer(other) == "unknown"


def test_scripted_run_prints_the_figures_and_writes_json(
    triage: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "triage.json"
    args = ["--spec", str(SPEC), "--limit", "6", "--model", "scripted", "--json", str(out)]
    assert triage.main(args) == 0
    printed = capsys.readouterr().out
    assert "| overall accuracy |" in printed and "| language | overall |" in printed
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["half"] == "test" and len(doc["queries"]) == 6
    assert doc["report"]["n"] == 6 and doc["report"]["by_lang"]
    assert set(doc["report"]["tiers"]) <= {"triage", "abstain"}
    assert all(q["answer"] in (*triage.ROUTES, "unknown") for q in doc["queries"])
