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


async def escalate(kernel: Kernel, run: RunState, reason: str, to_human: bool) -> TurnState | None:
    """Record the card; the fallback agent's turn, or None when the card went to the human
    queue. `to_human`: an agent (or the router) asked for a person, whatever the fallback."""
    holder = run.turn.agent if run.turn is not None else None
    card = EscalationCard(
        session_id=run.session.session_id,
        trace_id=run.trace_id,
        user_id=run.user_id,
        path=list(run.path),
        reasons=[reason],
        state=dict(run.session.state),
        last_user_message=run.message,
        last_reply=run.last_reply,
    )
    run.card = card
    fallback = HUMAN if to_human else kernel.policy.fallback
    kernel.emit(run, Escalated(**run.base(holder), to=fallback, card=card))
    if fallback == HUMAN or fallback not in kernel.plans:
        await queue_once(kernel, run, card)
        return None
    payload = HandoffPayload(
        reason="escalation: " + reason,
        objective="Take over the user's request; the automated desk could not finish it.",
        state=dict(run.session.state),
        reply_to_user=run.last_reply,
        # state travels (filtered by `accepts`) in the payload, not in the card text
        constraints=[card.render(include_state=False)],
        trace_id=run.trace_id,
        session_id=run.session.session_id,
        user_id=run.user_id,
        source=holder or "router",
        target=fallback,
        hop=run.hop + 1,
        path=list(run.path),
        history_ref=run.session.session_id,
        citations=list(run.citations),
    )
    if kernel.cfg.redactor is not None:
        payload = kernel.cfg.redactor.redact_value(payload)
    run.path.append(fallback)
    run.turns += 1
    return TurnState(
        index=run.turns - 1,
        agent=fallback,
        incoming=payload,
        since=run.user_msg_id,
        reason=payload.reason,
        policy=kernel.policy_for(payload, fallback),
        fallback=True,
    )


async def to_queue(kernel: Kernel, run: RunState, why: Tripped | str) -> None:
    """The fallback agent could not finish: its card goes to the human queue."""
    assert run.card is not None
    reason = why.reason if isinstance(why, Tripped) else why
    fallback = run.turn.agent if run.turn is not None else kernel.policy.fallback
    # a new card: the one the `escalated` event carries stays as it was emitted
    reasons = [*run.card.reasons, f"fallback {fallback} could not finish: {reason}"]
    run.card = run.card.model_copy(update={"reasons": reasons})
    await queue_once(kernel, run, run.card)


async def queue_once(kernel: Kernel, run: RunState, card: EscalationCard) -> None:
    """Put the card in the human queue, unless this run already did (a run resumed after a
    crash between the queueing and its commit escalates again)."""
    for ticket in await kernel.cfg.store.list_human("open"):
        if ticket.card.trace_id == run.trace_id:
            return
    if kernel.cfg.redactor is not None:  # people read the queue: the stored card is redacted
        card = kernel.cfg.redactor.redact_value(card)
    await kernel.cfg.store.push_human(card)
