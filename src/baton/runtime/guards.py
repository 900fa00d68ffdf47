"""Guards: the limits that keep every run finite (seeds 000 §3.3 and 002)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field


class Guards(BaseModel):
    """Loop breakers and timeouts. A trip ends the run as `escalated`, never as an exception."""

    # defer_build: pydantic builds the validator on first use, not during `import baton`
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    max_hops: int = Field(default=5, ge=0, description="Hand-offs allowed in one run.")
    max_visits: int = Field(default=2, ge=1, description="Times one agent may appear in a path.")
    ping_pong: bool = Field(
        default=True,
        description="Trip when the baton goes round: the same hand-off (source -> target) "
        "twice in one run, as in A-B-A-B or A-B-C-A-B.",
    )
    lock_window_s: float = Field(
        default=30.0, ge=0, description="Identical hand-offs inside this window are dropped."
    )
    model_timeout_s: float = Field(default=120.0, gt=0, description="Limit for one model call.")
    tool_timeout_s: float = Field(default=30.0, gt=0, description="Limit for one tool call.")
    grounded_ids: bool = Field(
        default=True,
        description="Refuse id-like tool arguments (and drop hand-off state slots) that appear "
        "nowhere in what the agent was shown: no invented order ids.",
    )
    entity_guard: bool = Field(
        default=True,
        description="Before a hand-off leaves, merge ids and entities the user gave (order ids, "
        "emails, phone numbers, amounts ...) that are missing from its state.",
    )
    reroute_after_refusals: int = Field(
        default=2,
        ge=0,
        description="After this many receivers hand the request straight back (no tool called) "
        "in one run, re-route it through the team's router or fallback; 0 turns it off.",
    )


def check_handoff(guards: Guards, path: Sequence[str], target: str, hop: int) -> str | None:
    """The name and detail of the guard a hand-off to `target` would trip, or None.

    `path` is the run's path so far (the source last); `hop` the hop number the hand-off
    would get (1 for the first).
    """
    if hop > guards.max_hops:
        return f"max_hops: hand-off {hop} would exceed max_hops={guards.max_hops}"
    visits = sum(1 for a in path if a == target)
    if visits >= guards.max_visits:
        return (
            f"max_visits: {target} already held the baton {visits} time(s) in this run "
            f"(max_visits={guards.max_visits})"
        )
    if guards.ping_pong:
        full = [*path, target]
        if is_ping_pong(full):
            tail = " -> ".join(full[-4:])
            return f"ping_pong: the baton is bouncing ({tail})"
        loop = cycle(full)
        if loop:
            return f"cycle: the baton goes round ({' -> '.join(loop)})"
    return None


def is_ping_pong(path: Sequence[str]) -> bool:
    """True when the path ends in A-B-A-B with A != B."""
    if len(path) < 4:
        return False
    a, b, c, d = path[-4:]
    return a == c and b == d and a != b


def cycle(path: Sequence[str]) -> list[str]:
    """The repeated loop when the path's last hand-off (its last two agents) was already
    made earlier in it, e.g. A-B-C-A-B -> [A, B, C, A, B]; else []. A-B-A-B is `is_ping_pong`."""
    if len(path) < 3:
        return []
    edge = (path[-2], path[-1])
    for i in range(len(path) - 2):
        if (path[i], path[i + 1]) == edge:
            return list(path[i:])
    return []
