"""Multi-intent requests: one message, two needs ("the invoice is wrong, and the keyboard is
broken"; "发票不对，而且东西坏了").

    split = await split_intents(router, "the invoice is wrong and the keyboard is broken")
    split.decision.target     # "billing": the first need's route
    split.pending             # [Intent(route="after_sales", text="the keyboard is broken")]

The request is cut at sentence ends and connectives (English and Chinese), each part is routed
with the router's own tiers (`Router.route`), and parts that no route takes with confidence
join their neighbour. When two or more routes take parts, the decision names the first need's
route and `pending` holds the others, in the order the user wrote them; otherwise the decision
is the router's decision for the whole request, exactly as `Router.route` makes it.
`Team(..., multi_intent=True)` routes every new conversation this way and hands the baton on
for each pending need once the holder answers (`baton.runtime.pending`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from baton.routing.base import RouteDecision, TierVerdict

if TYPE_CHECKING:
    from baton.routing.router import Router

MAX_PARTS = 6
"""A request cut into more parts than this is routed whole (a long message, not a list of
needs): every part costs a routing call."""

_ENDS = r"[;；。？！?!]+|\.(?=\s)"
"""Sentence ends (a full stop only before a space: `ORD-1.5` and `e.g.` stay whole)."""
_ZH = r"另外|而且|还有|并且|同时|顺便|此外|以及"
_EN = r"\b(?:and\s+also|as\s+well\s+as|in\s+addition|additionally|besides|also|plus|and)\b"
_CUT = re.compile(rf"(?P<end>{_ENDS})|[,，、]?\s*(?={_ZH}|{_EN})", re.IGNORECASE)
"""Where a request is cut: after a sentence end, before a connective (and its comma)."""
_LEAD = re.compile(rf"^(?:\s|[,，、;；:：]|{_ZH}|{_EN})+", re.IGNORECASE)
"""Connectives and punctuation that open a part (not part of the need)."""
_TOKENS = re.compile(r"[\u3400-\u9fff]|[^\W\d_]{2,}|\w*\d\w*")
"""What counts as a word: a Chinese character, a word of two letters or more, an id."""


@dataclass(frozen=True)
class Intent:
    """One need of a request: the route that owns it and the user's words for it."""

    route: str
    text: str

    def to_slot(self) -> dict[str, str]:
        """As the session state slot `pending_intents` keeps it."""
        return {"route": self.route, "text": self.text}


@dataclass
class IntentSplit:
    """What `split_intents` found: the decision to act on, and every need in order."""

    decision: RouteDecision
    """The router's decision: the first need's route when the request has several."""
    intents: list[Intent] = field(default_factory=list)
    """Every need in the user's order (two or more), or [] for a single-need request."""
    routed: list[RouteDecision] = field(default_factory=list)
    """Every `Router.route` decision made on the way: each part's, then the whole request's
    when it was routed whole (what a trace or a cost count needs: each may call the judge)."""

    @property
    def pending(self) -> list[Intent]:
        """The needs after the first: handed on once the first route's agent answers."""
        return self.intents[1:]


def split_request(text: str) -> list[str]:
    """`text` cut into the parts a request with several needs is made of, each without its
    leading connective ("and also", "另外", ...); a part of fewer than two words (or Chinese
    characters) joins the next part, or the one before at the end."""
    return [_clean(text[a:b]) for a, b in _spans(text)]


def _spans(text: str) -> list[tuple[int, int]]:
    cuts = [0]
    for m in _CUT.finditer(text):
        cut = m.end() if m.group("end") else m.start()
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(len(text))
    spans: list[tuple[int, int]] = []
    start = 0
    for end in cuts[1:]:
        if end <= start or len(_TOKENS.findall(_clean(text[start:end]))) < 2:
            continue  # too short: it joins the next part
        spans.append((start, end))
        start = end
    if start < len(text) and spans:
        spans[-1] = (spans[-1][0], len(text))  # a short tail joins the last part
    elif not spans and _clean(text):
        spans.append((0, len(text)))
    return spans


def _clean(part: str) -> str:
    return _LEAD.sub("", part).strip().rstrip(",，、;；")


async def split_intents(
    router: Router,
    text: str,
    history: Sequence[Any] | None = None,
    context: dict[str, Any] | None = None,
) -> IntentSplit:
    """Route `text` as one need or several (see the module docstring). Never raises for a
    tier misbehaving (`Router.route` does not)."""
    started = time.perf_counter()
    spans = _spans(text)
    decisions: list[RouteDecision] = []
    if 2 <= len(spans) <= MAX_PARTS:
        known = {r.name for r in router.routes}
        decisions = [await router.route(_clean(text[a:b]), history, context) for a, b in spans]
        routes = [d.target if _confident(d, known) else None for d in decisions]
        intents = _needs(text, spans, routes)
        if len(intents) >= 2:
            first = next(d for d, route in zip(decisions, routes, strict=True) if route)
            listed = "; ".join(f"{i.route} <- {i.text!r}" for i in intents)
            verdict = TierVerdict(
                "intents", intents[0].route, detail=f"{len(intents)} needs: {listed}"
            )
            decision = RouteDecision(
                target=intents[0].route,
                tier=first.tier,
                score=first.score,
                candidates=list(first.candidates),
                latency_ms=(time.perf_counter() - started) * 1000,
                verdicts=[*first.verdicts, verdict],
            )
            return IntentSplit(decision, intents, decisions)
    whole = await router.route(text, history, context)
    return IntentSplit(whole, [], [*decisions, whole])


def _confident(decision: RouteDecision, known: set[str]) -> bool:
    """A tier named a route (not the fallback, not `unknown`)."""
    return not decision.unknown and decision.target in known


def _needs(text: str, spans: list[tuple[int, int]], routes: list[str | None]) -> list[Intent]:
    """The needs of a cut request: neighbouring parts of one route make one need, a part no
    route took joins the need before it (the one after it, at the start), and the parts of a
    route that comes back later join its first need."""
    runs: list[list[Any]] = []  # [route, start, end]
    for (a, b), route in zip(spans, routes, strict=True):
        if runs and route in (None, runs[-1][0]):
            runs[-1][2] = b
        elif runs and runs[-1][0] is None:
            runs[-1][0], runs[-1][2] = route, b
        else:
            runs.append([route, a, b])
    texts: dict[str, list[str]] = {}
    for route, a, b in runs:
        if route is not None:
            texts.setdefault(route, []).append(_clean(text[a:b]))
    return [Intent(route, " … ".join(chunks)) for route, chunks in texts.items()]
