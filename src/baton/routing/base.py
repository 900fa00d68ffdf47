"""Routing data: routes, tier verdicts, decisions and the `Tier` protocol.

A route is data (a name, example utterances, what it owns and refuses); a tier is a decision
function over routes; a decision is a value that can be logged, tested and replayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

UNKNOWN = "unknown"
"""What a tier or the router answers when no route owns the request."""


@dataclass(frozen=True)
class Route:
    """A destination: an agent name, its example utterances, what it owns and refuses."""

    name: str
    utterances: tuple[str, ...] = ()
    description: str = ""
    not_for: str = ""


@dataclass(frozen=True)
class Labelled:
    """A labelled query for fitting and evaluation; `label=None` means it must be unknown."""

    text: str
    label: str | None
    kind: str = "in"
    """`in` (label is a route), `oos` (out of scope) or `near` (a neighbour that is no route)."""


@dataclass
class TierVerdict:
    """What one tier concluded.

    `target` is a route name when the tier is confident, `UNKNOWN` when it is confident that no
    route owns the request, and None when it abstains (the next tier decides).
    """

    tier: str
    target: str | None
    score: float | None = None
    candidates: list[tuple[str, float]] = field(default_factory=list)
    """Routes ranked best first with their scores (for the next tier and for traces)."""
    detail: str = ""
    latency_ms: float = 0.0
    proposal: str | None = None
    """With `target` None: the route this tier would pick, left to the tiers after it to
    review (a `Semantic` tier's accepted route scored under its `review_below`, or leading the
    runner-up by less than its `review_margin`). When no later tier decides, the router takes
    it; a later tier's `UNKNOWN` overrides it."""

    def summary(self) -> str:
        """One line: `tier: target score (detail)`."""
        what = self.target or (f"proposes {self.proposal}" if self.proposal else "abstains")
        score = f" {self.score:.2f}" if self.score is not None else ""
        return f"{self.tier}: {what}{score}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class RouteDecision:
    """The router's final answer for one query."""

    target: str
    """A route (agent) name, or the fallback (an agent name or `human`)."""
    tier: str
    """rules, semantic, llm, fallback — the tier that decided."""
    score: float | None = None
    candidates: list[str] = field(default_factory=list)
    latency_ms: float = 0.0
    verdicts: list[TierVerdict] = field(default_factory=list)
    """Every tier's verdict, in order (the trace of the decision)."""

    @property
    def unknown(self) -> bool:
        """True when no tier picked a route and the fallback took it."""
        return self.tier == "fallback"


@runtime_checkable
class Tier(Protocol):
    """One routing tier. `bind` gives it the routes; `decide` judges one query."""

    name: str

    def bind(self, routes: Sequence[Route]) -> None:
        """Prepare for these routes (e.g. encode their utterances); called again on change."""
        ...

    async def decide(
        self,
        text: str,
        history: Sequence[Any] | None,
        context: dict[str, Any] | None,
        previous: Sequence[TierVerdict],
    ) -> TierVerdict:
        """Judge `text`; `previous` holds the verdicts of the tiers before this one."""
        ...
