"""Context hand-over policies: how much of the conversation a receiving agent sees.

Whatever the policy, a receiver sees its own instructions, the rendered `HandoffPayload`, the
user's message it is answering and its own scratch. The policy decides what comes *before*
that message. Other agents' private scratch — their tool calls, raw tool outputs, re-asks and
reasoning — is never shown under any policy; `fetch_history` pulls earlier turns on demand.

- `structured` (default): nothing more; the payload carries the facts (seed 002's minimal payload).
- `recent(n)`: plus the last `n` user/assistant exchanges before it (default 3).
- `summary`: plus a model-made summary of the conversation so far, written at hand-off time by
  the source's model or the team's configured summariser.
- `full`: plus every user message and final reply of the session, for short tight chains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

PolicyKind = Literal["structured", "recent", "summary", "full"]


@dataclass(frozen=True, slots=True)
class ContextPolicy:
    """One context policy; build with `structured()`, `recent(n)`, `summary()` or `full()`."""

    kind: PolicyKind = "structured"
    n: int = 3
    """Exchanges shown by `recent`."""

    def __str__(self) -> str:
        return f"recent({self.n})" if self.kind == "recent" else self.kind


STRUCTURED = ContextPolicy("structured")
SUMMARY = ContextPolicy("summary")
FULL = ContextPolicy("full")


def structured() -> ContextPolicy:
    """Instructions + payload + the message being answered (the default)."""
    return STRUCTURED


def recent(n: int = 3) -> ContextPolicy:
    """`structured` plus the last `n` user/assistant exchanges."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"recent(n) needs a whole number n >= 1, got {n!r}")
    return ContextPolicy("recent", n)


def summary() -> ContextPolicy:
    """`structured` plus a model-made summary of the conversation so far."""
    return SUMMARY


def full() -> ContextPolicy:
    """`structured` plus every user message and final reply of the session."""
    return FULL


_RECENT = re.compile(r"^recent(?:\((\d+)\))?$")


def parse_policy(value: Any) -> ContextPolicy:
    """A policy from a `ContextPolicy` or its name: structured, recent, recent(5), summary, full."""
    if isinstance(value, ContextPolicy):
        return value
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if text in ("structured", "summary", "full"):
            return ContextPolicy(text)  # type: ignore[arg-type]
        m = _RECENT.match(text)
        if m:
            return recent(int(m.group(1)) if m.group(1) else 3)
    raise ValueError(
        f"unknown context policy {value!r}: use 'structured', 'recent', 'recent(n)', "
        "'summary' or 'full' (or baton.recent(n) ...)"
    )
