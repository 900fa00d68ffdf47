"""Escalation: a guard trip or a request for a person ends at the fallback.

The hand-over card carries the path, the reasons, the state and the last reply. A fallback
agent gets one turn (tools only: it may not pass the baton on); when it cannot finish, or the
fallback is the human queue, the card goes to the store's human queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.core.events import Escalated, EscalationCard
from baton.core.payload import HandoffPayload
from baton.runtime.outcomes import Tripped
from baton.runtime.plan import HUMAN
from baton.runtime.state import RunState, TurnState

if TYPE_CHECKING:
    from baton.runtime.kernel import Kernel


async def escalate(k: Kernel, r: RunState, reason: str, to_human: bool) -> TurnState | None:
    """Record the card; the fallback agent's turn, or None when the card went to the human
    queue. `to_human`: an agent (or the router) asked for a person, whatever the fallback."""
    holder = r.turn.agent if r.turn is not None else None
    card = EscalationCard(
        session_id=r.session.session_id,
        trace_id=r.trace_id,
        user_id=r.user_id,
        path=list(r.path),
        reasons=[reason],
        state=dict(r.session.state),
        last_user_message=r.message,
        last_reply=r.last_reply,
    )
    r.card = card
    fallback = HUMAN if to_human else k.policy.fallback
    k.emit(r, Escalated(**r.base(holder), to=fallback, card=card))
    if fallback == HUMAN or fallback not in k.plans:
        await queue_once(k, r, card)
        return None
    payload = HandoffPayload(
        reason="escalation: " + reason,
        objective="Take over the user's request; the automated desk could not finish it.",
        state=dict(r.session.state),
        reply_to_user=r.last_reply,
        # state travels (filtered by `accepts`) in the payload, not in the card text
        constraints=[card.render(include_state=False)],
        trace_id=r.trace_id,
        session_id=r.session.session_id,
        user_id=r.user_id,
        source=holder or "router",
        target=fallback,
        hop=r.hop + 1,
        path=list(r.path),
        history_ref=r.session.session_id,
    )
    if k.cfg.redactor is not None:
        payload = k.cfg.redactor.redact_value(payload)
    r.path.append(fallback)
    r.turns += 1
    return TurnState(
        index=r.turns - 1,
        agent=fallback,
        incoming=payload,
        since=r.user_msg_id,
        reason=payload.reason,
        policy=k.policy_for(payload, fallback),
        fallback=True,
    )


async def to_queue(k: Kernel, r: RunState, why: Tripped | str) -> None:
    """The fallback agent could not finish: its card goes to the human queue."""
    assert r.card is not None
    reason = why.reason if isinstance(why, Tripped) else why
    fallback = r.turn.agent if r.turn is not None else k.policy.fallback
    # a new card: the one the `escalated` event carries stays as it was emitted
    reasons = [*r.card.reasons, f"fallback {fallback} could not finish: {reason}"]
    r.card = r.card.model_copy(update={"reasons": reasons})
    await queue_once(k, r, r.card)


async def queue_once(k: Kernel, r: RunState, card: EscalationCard) -> None:
    """Put the card in the human queue, unless this run already did (a run resumed after a
    crash between the queueing and its commit escalates again)."""
    for ticket in await k.cfg.store.list_human("open"):
        if ticket.card.trace_id == r.trace_id:
            return
    if k.cfg.redactor is not None:  # people read the queue: the stored card is redacted
        card = k.cfg.redactor.redact_value(card)
    await k.cfg.store.push_human(card)
