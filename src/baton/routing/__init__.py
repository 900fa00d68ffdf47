"""Routing: pick the agent for a request before any agent spends a model call.

Tiers, first confident verdict wins: `Rules` (patterns) -> `Semantic` (embeddings over each
agent's examples, fitted thresholds) -> `LLMJudge` (a model chooses among the top candidates or
says unknown) -> the fallback (an agent or the human queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baton.routing.base import UNKNOWN, Labelled, Route, RouteDecision, Tier, TierVerdict
from baton.routing.fit_report import RouterFitReport
from baton.routing.judge import LLMJudge
from baton.routing.router import Router, routes_from_agents
from baton.routing.rules import Rules

if TYPE_CHECKING:
    from baton.routing.semantic import Semantic

__all__ = [
    "UNKNOWN",
    "LLMJudge",
    "Labelled",
    "Route",
    "RouteDecision",
    "Router",
    "RouterFitReport",
    "Rules",
    "Semantic",
    "Tier",
    "TierVerdict",
    "routes_from_agents",
]


def __getattr__(name: str) -> Any:
    """`Semantic` is imported on first use (it brings numpy)."""
    if name == "Semantic":
        from baton.routing.semantic import Semantic

        return Semantic
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
