"""The `Rules` tier: regular expressions and keywords, deterministic, first tier (seed 004)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from baton.core.errors import ConfigError
from baton.routing.base import Route, TierVerdict


class Rules:
    """Route by pattern: `Rules({"billing": [r"\\binvoice\\b", "发票"], ...})`.

    Each pattern is a regular expression searched case-insensitively; plain words work as they
    are. Routes are tried in the order given; the first match wins with score 1.0. No match:
    the tier abstains and the next one decides.
    """

    name = "rules"

    def __init__(self, rules: Mapping[str, str | Sequence[str]]) -> None:
        self._compiled: list[tuple[str, re.Pattern[str]]] = []
        for route, patterns in rules.items():
            for p in [patterns] if isinstance(patterns, str) else patterns:
                try:
                    self._compiled.append((route, re.compile(p, re.IGNORECASE)))
                except re.error as exc:
                    raise ConfigError(
                        f"rule for {route!r}: {p!r} is not a valid regular expression ({exc}); "
                        "escape special characters with re.escape()"
                    ) from None
        self.routes = list(dict.fromkeys(r for r, _ in self._compiled))

    def bind(self, routes: Sequence[Route]) -> None:
        """Check that every rule names a known route."""
        known = {r.name for r in routes}
        unknown = [r for r in self.routes if r not in known]
        if unknown:
            raise ConfigError(
                f"Rules name unknown routes {unknown}; known routes: {', '.join(sorted(known))}"
            )

    async def decide(
        self,
        text: str,
        history: Sequence[Any] | None = None,
        context: dict[str, Any] | None = None,
        previous: Sequence[TierVerdict] = (),
    ) -> TierVerdict:
        """The first route whose pattern occurs in `text`, else an abstention."""
        t = time.perf_counter()
        for route, pattern in self._compiled:
            m = pattern.search(text)
            if m:
                return TierVerdict(
                    self.name,
                    route,
                    1.0,
                    [(route, 1.0)],
                    detail=f"pattern {pattern.pattern!r} matched {m.group(0)!r}",
                    latency_ms=(time.perf_counter() - t) * 1000,
                )
        return TierVerdict(
            self.name, None, detail="no rule matched", latency_ms=(time.perf_counter() - t) * 1000
        )
