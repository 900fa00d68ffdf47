"""The desk's tech support as a team of its own, for `baton a2a serve` in the cross-process
desk test: the desk's `tech_support` agent and tools on the desk's scripted policy."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from baton import Guards, Team  # noqa: E402
from baton.desk.data import DeskDB  # noqa: E402
from baton.desk.policy import scripted_desk_model  # noqa: E402
from baton.desk.team import build_agents  # noqa: E402

DB = DeskDB()
tech_support = next(a for a in build_agents(DB) if a.name == "tech_support")
team = Team(
    [tech_support],
    entry="tech_support",
    guards=Guards(max_hops=4, max_visits=2),
    fallback="human",
    model=scripted_desk_model(),
)
