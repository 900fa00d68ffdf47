"""Interrupted runs (`baton.core.interrupt`): the card a call's `interrupt(value)` leaves, and
the answer that lets the call run again.

`request_interrupt` pauses the turn on the call that raised `GraphInterrupt` (the call stays
open, like one waiting for approval); `give_answer` checks a resume against the card and adds
the person's answer to the call's `resumes`, which the call reads back on its next run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from baton.core.errors import InterruptError
from baton.core.events import InterruptRaised, InterruptResumed
from baton.core.ids import new_id
from baton.core.interrupt import GraphInterrupt, InterruptCard
from baton.core.nesting import MAX_JSON_DEPTH, value_too_deep
from baton.core.text import clean_value
from baton.runtime.approval import find_call
from baton.runtime.outcomes import Paused
from baton.runtime.state import PendingCall, RunState, TurnState

if TYPE_CHECKING:
    from baton.runtime.kernel import Kernel


def request_interrupt(
    kernel: Kernel,
    run: RunState,
    turn: TurnState,
    pending: PendingCall,
    name: str,
    raised: GraphInterrupt,
) -> Paused:
    """Pause the run on `pending` with a new interrupt card (one card per run: a second pause of
    parallel calls is asked again when the run resumes)."""
    value = _json_value(raised.value)
    card = InterruptCard(
        id=new_id("int_"),
        session_id=run.session.session_id,
        run_id=run.root.run_id,
        trace_id=run.trace_id,
        agent=turn.agent,
        call_id=pending.call.id,
        name=name,
        value=value,
        index=raised.index,
    )
    root = run.root
    if root.approval is None and root.interrupt is None:
        root.interrupt = card
    kernel.emit(run, InterruptRaised(**run.base(turn.agent), card=card))
    return Paused(card)


def give_answer(kernel: Kernel, run: RunState, value: Any, interrupt_id: str | None = None) -> str:
    """Record the person's answer to the run's interrupt on its waiting call; returns the
    interrupt's id. Raises `InterruptError` (changing nothing) when the run waits for no
    interrupt, for another one than `interrupt_id`, or `value` is not JSON."""
    card, turn = run.interrupt, run.turn
    sid = run.session.session_id
    if card is None or turn is None:
        raise InterruptError(f"session {sid!r} is not waiting for an answer to an interrupt")
    if interrupt_id is not None and interrupt_id != card.id:
        raise InterruptError(
            f"session {sid!r} waits for an answer to interrupt {card.id}, not {interrupt_id!r}"
        )
    pending = find_call(turn, card.call_id)
    if pending is None:
        raise InterruptError(
            f"interrupt {card.id} names call {card.call_id}, which the interrupted turn does "
            "not hold; the checkpoint is inconsistent: discard the run"
        )
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InterruptError(
            f"the answer to interrupt {card.id} must be JSON (text, numbers, lists, dicts): {exc}"
        ) from None
    except RecursionError:
        too_deep = True
    else:
        too_deep = value_too_deep(value)
    if too_deep:
        raise InterruptError(
            f"the answer to interrupt {card.id} nests more than {MAX_JSON_DEPTH} levels deep; "
            "send a flatter value"
        )
    if len(pending.resumes) != card.index:  # an older answer was lost: never misalign them
        raise InterruptError(
            f"interrupt {card.id} is the call's interrupt #{card.index} but the call holds "
            f"{len(pending.resumes)} answers; the checkpoint is inconsistent: discard the run"
        )
    pending.resumes.append(clean_value(value))
    run.interrupt = None
    kernel.emit(run, InterruptResumed(**run.base(card.agent), interrupt_id=card.id, name=card.name))
    return card.id


def _json_value(value: Any) -> Any:
    """The interrupt's value as JSON data (anything else is shown as its text)."""
    try:
        data = json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False, default=str))
    except (TypeError, ValueError):
        data = repr(value)
    return clean_value(data)
