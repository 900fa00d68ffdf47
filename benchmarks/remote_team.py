"""The one-agent team `benchmarks/remote_calls.py` serves with `baton a2a serve
remote_team:team`: a technician on a zero-latency scripted model, the same as the local
receiver it is compared with."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from baton import Agent, ScriptedModel, Team

ANSWER = "Done: srv-bj-001 restarted."


def technician() -> Agent:
    """The receiver of the hand-off (local in one row, served over A2A in the other)."""
    return Agent(name="tech", description="Restarts servers.")


team = Team([technician()], entry="tech", model=ScriptedModel(lambda _: ScriptedModel.say(ANSWER)))
