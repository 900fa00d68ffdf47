"""Cards: what a notification says, built from a committed event and redacted before it
leaves.

Four kinds: `approval` (a run waits for a person's decision: the `ApprovalCard`),
`escalation` (a run was handed to a person: the `EscalationCard`, the hand-over card),
`failed_run` (a run ended `failed`) and `guard_alert` (one guard tripped `GuardRate.trips`
times within `GuardRate.window_s`). A card is plain data; channels (`baton.notify.channels`)
only format it.

Secrets never leave: the dict values (arguments, state) go through the redactor's key and
value rules, and every text of the card through its value rules, before a channel sees it.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from baton.core.events import ApprovalRequested, Escalated, Event, GuardTripped, RunFinished
from baton.runtime.redact import Redactor

__all__ = ["Card", "CardField", "CardKind", "CardLink", "GuardRate", "card_for"]

CardKind = Literal["approval", "escalation", "failed_run", "guard_alert"]
"""What a card is about."""

_FIELD_CHARS = 600
"""A field's value is cut to this many characters (chat channels cap message sizes)."""


class CardField(BaseModel):
    """One labelled line of a card."""

    label: str
    value: str


class CardLink(BaseModel):
    """A button or link on a card (e.g. a signed approve link)."""

    label: str
    url: str


class Card(BaseModel):
    """A notification, channel-neutral: title, summary, labelled fields, links."""

    kind: CardKind
    title: str
    summary: str = ""
    fields: list[CardField] = Field(default_factory=list)
    links: list[CardLink] = Field(default_factory=list)
    session_id: str
    trace_id: str
    run_id: str
    event_id: str
    """The committed event the card was made from (the outbox item's id)."""
    ts: float
    """When the event happened (seconds since the epoch)."""
    approval_id: str | None = None
    """The approval the card asks about (kind `approval`)."""
    required_roles: list[str] = Field(default_factory=list)
    """Roles allowed to decide (kind `approval`; empty: anyone)."""

    def markdown(self) -> str:
        """The card as Markdown (the subset Slack, WeCom and DingTalk all render)."""
        lines = [f"**{self.title}**"]
        if self.summary:
            lines.append(self.summary)
        lines += [f"> **{f.label}**: {f.value}" for f in self.fields]
        lines += [f"[{link.label}]({link.url})" for link in self.links]
        lines.append(f"session `{self.session_id}` · trace `{self.trace_id}`")
        return "\n\n".join(lines)

    def text(self) -> str:
        """The card as plain text."""
        lines = [self.title]
        if self.summary:
            lines.append(self.summary)
        lines += [f"{f.label}: {f.value}" for f in self.fields]
        lines += [f"{link.label}: {link.url}" for link in self.links]
        lines.append(f"session {self.session_id} · trace {self.trace_id}")
        return "\n".join(lines)


class GuardRate(BaseModel):
    """When guard trips become an alert: the trip that is the `trips`-th of its guard within
    the trailing `window_s` seconds raises one (a steady stream alerts about once per
    `trips` trips, an isolated trip never)."""

    trips: int = Field(default=3, ge=1)
    window_s: float = Field(default=600.0, gt=0)


def _clip(text: str) -> str:
    return text if len(text) <= _FIELD_CHARS else text[: _FIELD_CHARS - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def card_for(
    event: Event, redactor: Redactor, *, trips: int = 1, rate: GuardRate | None = None
) -> Card:
    """The card of a notifiable event, redacted with `redactor`. `trips` is how many trips
    of the event's guard fell in the rate window (kind `guard_alert`). Raises ValueError for
    an event that is not notifiable."""
    base: dict[str, Any] = {
        "session_id": event.session_id,
        "trace_id": event.trace_id,
        "run_id": event.run_id,
        "event_id": event.id,
        "ts": event.ts,
    }
    fields: list[tuple[str, Any]]
    if isinstance(event, ApprovalRequested):
        c = event.card
        what = f"tool {c.tool}" if c.kind == "tool" else f"hand-off to {c.target}"
        base.update(approval_id=c.id, required_roles=list(c.required_roles))
        kind: CardKind = "approval"
        title = f"Approval needed: {c.agent} wants {what}"
        summary = c.reason
        fields = [
            ("Arguments", redactor.redact_value(c.arguments)),
            ("State", redactor.redact_value(c.state)),
            ("Approvers", ", ".join(c.required_roles) or "anyone"),
            ("Sign-offs needed", str(c.needed)),
            ("Approval", c.id),
        ]
        if c.timeout_s is not None:
            fields.append(("Escalates after", f"{c.timeout_s:g}s"))
    elif isinstance(event, Escalated):
        e = event.card
        kind, title = "escalation", f"Escalated to {event.to}"
        summary = "; ".join(e.reasons)
        fields = [
            ("Path", " → ".join(e.path)),
            ("State", redactor.redact_value(e.state)),
            ("User said", e.last_user_message),
            ("Last reply", e.last_reply or "(none)"),
            ("User", e.user_id or "(unknown)"),
        ]
    elif isinstance(event, RunFinished) and event.status == "failed":
        kind, title = "failed_run", "Run failed"
        summary = event.error or "(no error recorded)"
        fields = [("Path", " → ".join(event.path)), ("Output", event.output or "(none)")]
    elif isinstance(event, GuardTripped):
        rule = rate or GuardRate()
        kind = "guard_alert"
        title = f"Guard {event.guard} tripped {trips} times in {rule.window_s:g}s"
        summary = event.detail
        fields = [("Agent", event.agent or "(none)"), ("Hop", str(event.hop))]
    else:
        raise ValueError(f"no card for a {event.type} event: it is not a notifiable event")
    rendered = [
        {
            "label": label,
            "value": _clip(redactor.redact_text(v if isinstance(v, str) else _json(v))),
        }
        for label, v in fields
    ]
    return Card(
        kind=kind,
        title=redactor.redact_text(title),
        summary=_clip(redactor.redact_text(summary)),
        fields=[CardField(**f) for f in rendered],
        **base,
    )
