"""Control state: what the kernel acts on, kept apart from the session's business slots.

`SessionRecord.state` holds business slots (order ids, amounts, tiers) that hand-offs, tools
and the entity guard write, each with where its value came from. `SessionRecord.control` is
the kernel's own namespace, written only here and in `baton.runtime.pending`:

- `pending_intents`: the user's needs still to hand on, from the router's own split of the
  request (`[{"route", "text"}]`);
- `provenance`: slot name -> where its value came from (`SlotSource`);
- `guardrails`: the names of the guardrails in force, which only grow while the baton moves.

No hand-off payload, tool call, extractor or user text can write either: they write `state`,
and `state` is never read as control. Text shaped like a pending need in a tool result is
just text.

Provenance decides what is a *verified* fact: a value the kernel or a tool put there (a
tool's declared `records` argument of a call that succeeded, or a field of a tool's
structured result). The user's own words are facts of the conversation, shown as known facts,
but not verified: approval policies (`requires_approval=lambda args, state: ...`) see only
verified slots, so a user (or a page a tool fetched) that writes `refund_limit: 99999`,
`role=admin` or `approved_by_human=true` changes no decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from baton.backends.base import SessionRecord

PENDING = "pending_intents"
"""The control slot of the user's needs still to hand on (`baton.runtime.pending`)."""
PROVENANCE = "provenance"
"""The control slot of where each business slot's value came from."""
GUARDRAILS = "guardrails"
"""The control slot of the guardrails in force in the session (`baton.runtime.guardrails`):
the baton keeps them from one message to the next while it stays with its holder."""
SUMMARY = "session_summary"
"""Not a control slot: the session's notes of the turns before the loaded window
(`baton.runtime.rolling`), data kept in the same kernel-written record so every store keeps
them; no decision reads them."""
RESERVED = frozenset({PENDING, PROVENANCE, GUARDRAILS, SUMMARY})
"""Names no business slot may take (so no slot can pass for a control slot in a view)."""

SlotSource = Literal["kernel", "tool", "user"]
"""Where a slot's value came from: the kernel; a tool (a declared `records` argument of a
call that succeeded, or a field of its structured result); the user's own words."""
VERIFIED: frozenset[str] = frozenset({"kernel", "tool"})
"""Sources whose slots approval policies and conditions see."""


def pending_needs(session: SessionRecord) -> list[dict[str, str]]:
    """The needs waiting in the session (`[{"route", "text"}]`, in order; malformed ones
    skipped)."""
    value = session.control.get(PENDING)
    if not isinstance(value, list):
        return []
    return [
        {"route": str(n["route"]), "text": str(n["text"])}
        for n in value
        if isinstance(n, dict) and n.get("route") and str(n.get("text") or "").strip()
    ]


def provenance(session: SessionRecord) -> dict[str, str]:
    """Slot name -> `SlotSource` of every slot whose source is known."""
    value = session.control.get(PROVENANCE)
    return value if isinstance(value, dict) else {}


def record_sources(session: SessionRecord, sources: Mapping[str, SlotSource | None]) -> None:
    """Note where the slots just written came from (the kernel's write, after `state`); None:
    from nowhere verified (a slot whose value changed loses the source it had)."""
    if not sources:
        return
    known = session.control.get(PROVENANCE)
    if not isinstance(known, dict):
        known = session.control[PROVENANCE] = {}
    for slot, source in sources.items():
        if source is None:
            known.pop(slot, None)
        else:
            known[slot] = source
    if not known:
        del session.control[PROVENANCE]


def verified_state(session: SessionRecord) -> dict[str, Any]:
    """The slots the kernel or a tool put in the session (what approval policies read)."""
    sources = provenance(session)
    return {k: v for k, v in session.state.items() if sources.get(k) in VERIFIED}
