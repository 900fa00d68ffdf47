"""Guards: the limits that keep every run finite (seeds 000 §3.3 and 002)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Guards(BaseModel):
    """Loop breakers, timeouts and the checks on what crosses a hand-off.

    A loop or budget trip ends the run as `escalated`, never as an exception. The hand-off
    checks (`grounded_ids`, `slot_provenance`, `entity_guard`) change the payload, record why
    (a `guard_tripped` or `state_updated` event) and let the hand-off go on."""

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
    slot_provenance: bool = Field(
        default=True,
        description="A hand-off state slot becomes a known fact (and a session state slot) "
        "only when its value came from the user's messages, a whole field of a tool's result "
        "or what was already known (a value found inside a tool's free text is not); any "
        "other slot is passed on as the source's unconfirmed claim "
        "(`HandoffPayload.unverified`) with an `unverified_slot` guard event.",
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
    max_payload_bytes: int = Field(
        default=8192,
        ge=0,
        description="Largest hand-off payload (the model's arguments, UTF-8 bytes) the kernel "
        "accepts; a larger one is refused with the reason; 0 turns the cap off.",
    )
    max_state_bytes: int = Field(
        default=1_048_576,
        ge=0,
        description="Largest graph state (UTF-8 bytes of its JSON) a run keeps at a super-step "
        "boundary; a node's update or an input that makes it larger fails the run (or the "
        "call) with the reason, and the last snapshot stays; 0 turns the cap off.",
    )
    max_board_value_bytes: int = Field(
        default=65_536,
        ge=0,
        description="Largest blackboard entry (UTF-8 bytes of its value's JSON) a "
        "post_to_board may leave; a larger post is refused with the reason, which the model "
        "reads, and nothing is written; 0 turns the cap off.",
    )
    max_model_calls_per_run: int | None = Field(
        default=None, ge=1, description="Model calls (re-asks included) allowed in one run."
    )
    max_tokens_per_run: int | None = Field(
        default=None, ge=1, description="Input plus output tokens allowed in one run."
    )
    max_cost_per_run: float | None = Field(
        default=None,
        gt=0,
        description="Cost allowed in one run, in the currency of `token_prices` (which must "
        "price every model the team uses).",
    )
    approval_timeout_s: float | None = Field(
        default=86_400.0,
        gt=0,
        description="How long a call waits for a person's decision when its approval policy "
        "sets no `timeout_s` (24 h): past it the run escalates and the call never runs, so no "
        "checkpoint (with the secrets a paused run may hold) waits forever. None waits forever.",
    )
    token_prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Model name -> (price per 1,000 input tokens, price per 1,000 output "
        "tokens), for `max_cost_per_run`.",
    )

    @model_validator(mode="after")
    def _priced(self) -> Guards:
        if self.max_cost_per_run is not None and not self.token_prices:
            raise ValueError(
                "max_cost_per_run needs token_prices: {model name: (price per 1K input tokens, "
                "price per 1K output tokens)}"
            )
        return self

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """What a model call cost by `token_prices`; None when the model has no price."""
        price = self.token_prices.get(model)
        if price is None:
            return None
        return (input_tokens * price[0] + output_tokens * price[1]) / 1000


def check_budget(
    guards: Guards, model_calls: int, tokens: int, cost: float, starting: bool
) -> str | None:
    """The detail of the per-run budget a run has spent, or None.

    `starting`: a model call is about to start, and a budget used up to its limit leaves no
    room for it; otherwise a call just ended, and only going past a limit trips."""
    spent: list[tuple[str, float | int, float | int | None, str]] = [
        (
            "max_model_calls_per_run",
            model_calls,
            guards.max_model_calls_per_run,
            "model calls made",
        ),
        ("max_tokens_per_run", tokens, guards.max_tokens_per_run, "tokens used"),
        ("max_cost_per_run", cost, guards.max_cost_per_run, "spent"),
    ]
    for name, used, limit, what in spent:
        if limit is None or used < limit or (used == limit and not starting):
            continue
        full = "; no room for another model call" if used == limit else ""
        if isinstance(limit, float):
            return f"{name}: {used:,.4f} {what} of {limit:,.4f}{full}"
        return f"{name}: {used:,} {what} of {limit:,}{full}"
    return None


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
