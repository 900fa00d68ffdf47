"""The desk behind a router: rules -> semantic -> LLM judge -> human, no triage agent.

    baton route examples.desk.routed:team "我的订单 ORD-202608-17 到哪了？"

Routing costs ~2 ms when the rules or the semantic tier are sure, and one short, constrained
judge call when they are not — instead of a full triage turn for every new conversation.
"""

from __future__ import annotations

import os
from typing import Any

from baton import Team
from baton.routing import Labelled, LLMJudge, Router, Rules, Semantic

from .data import DeskDB
from .policy import scripted_desk_model
from .team import Desk, build_agents

RULES = {"tech_support": [r"\bsrv-[a-z]{2}-\d{3}\b", "服务器"]}
"""Deterministic first tier: server ids and the word for server go to tech support."""

FIT = [
    Labelled("where can I download my invoice", "billing"),
    Labelled("how much was I charged for my order", "billing"),
    Labelled("我要退款", "billing"),
    Labelled("发票什么时候开", "billing"),
    Labelled("when will my parcel arrive", "orders"),
    Labelled("has my order shipped yet", "orders"),
    Labelled("我的订单到哪了", "orders"),
    Labelled("the item I got is broken", "after_sales"),
    Labelled("I want to send this back", "after_sales"),
    Labelled("我要退货", "after_sales"),
    Labelled("my server is not responding", "tech_support"),
    Labelled("what's the weather like tomorrow", None, "oos"),
    Labelled("tell me a joke", None, "oos"),
    Labelled("who won the football match", None, "oos"),
]
"""A few labelled queries the semantic tier's thresholds are fitted on."""


def build_routed_desk(model: Any = "local", **team_kwargs: Any) -> Desk:
    """The desk's specialists fronted by a fitted router (triage is not needed)."""
    db = DeskDB()
    agents = [a for a in build_agents(db) if a.name != "triage"]
    router = Router([Rules(RULES), Semantic(), LLMJudge(model)], fallback="human")
    team = Team(agents, entry=router, model=model, **team_kwargs)
    router.fit(FIT, judge=False)  # too few labelled queries to measure the judge on
    return Desk(team, db)


def _model() -> Any:
    choice = os.environ.get("BATON_MODEL") or "local"
    return scripted_desk_model() if choice == "scripted" else choice


team = build_routed_desk(_model()).team
"""The routed desk on `BATON_MODEL` (default: the embedded model)."""
