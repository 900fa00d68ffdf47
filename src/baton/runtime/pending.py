"""Pending intents: the user's other needs, handed on once the holder answers.

A request with several needs ("the invoice is wrong, and the keyboard is broken") goes to the
first need's agent (`Team(multi_intent=True)`, `baton.routing.intents`); the others wait, in
the user's order, in the session state slot `pending_intents` (`[{"route", "text"}]`), so a
checkpoint and the session keep them. The holder reads them in its view (answer only your
part). When it answers, the kernel hands the baton on to the next one: a normal, recorded
hand-off (reason "pending intent", objective: the need in the user's words, the answer the
user already got in `reply_to_user`, the needs after it in `constraints`) that the loop guards
check like any other; a trip escalates like any trip. An answer that asks the user something
(it ends in a question mark) does not hand on: the needs wait in the session until the holder
answers without asking. A need of the agent that answers counts as served.

The hand-on is the router's decision carried out, not the holder's: the holder's `handoffs`
list and its hand-off approvals do not apply, as they do not to the router's first pick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.core.events import StateUpdated
from baton.runtime.context import PENDING, pending_needs
from baton.runtime.guards import check_handoff
from baton.runtime.handoffs import recorded, summarised, validated, with_entities
from baton.runtime.outcomes import Answered, HandedOff, Tripped, TurnOutcome

if TYPE_CHECKING:
    from baton.runtime.runner import Runner
    from baton.runtime.state import RunState

REASON = "pending intent"
"""The reason of the kernel's hand-on to a pending need."""


def set_pending(
    k: Runner,
    r: RunState,
    needs: list[dict[str, str]],
    agent: str | None,
    source: str,
    cause: str | None = None,
) -> None:
    """Write the slot (removed when `needs` is empty) and record it as a `state_updated`."""
    state = r.session.state
    if needs:
        if state.get(PENDING) == needs:
            return
        state[PENDING] = needs
    elif PENDING in state:
        del state[PENDING]
    else:
        return
    k.emit(r, StateUpdated(**r.base(agent), slots={PENDING: needs}, source=source, cause=cause))


def asks_user(text: str) -> bool:
    """The answer ends in a question to the user (the holder is not done yet)."""
    return text.rstrip().endswith(("?", "？"))


async def hand_on(k: Runner, r: RunState, answered: Answered) -> TurnOutcome:
    """After the holder's answer: the answer itself when no need waits (or it asks the user
    something), else the hand-off to the next need's agent, or the trip a loop guard made."""
    t = r.turn
    assert t is not None
    waiting = pending_needs(r.session.state)
    if not waiting:
        return answered
    # the holder's own needs are served by its answer; an agent the team lacks takes none
    left = [n for n in waiting if n["route"] != t.agent and n["route"] in k.plans]
    if not left or asks_user(answered.text):
        set_pending(k, r, left, t.agent, REASON)
        return answered
    need, rest = left[0], left[1:]
    guard = check_handoff(k.cfg.guards, r.path, need["route"], r.hop + 1)
    if guard is not None:
        set_pending(k, r, [], t.agent, REASON)
        names = "; ".join(f"{n['route']}: {n['text']!r}" for n in left)
        detail = f"{guard} (the user's other needs were not handed on: {names})"
        k.trip(r, t.agent, guard.split(":", 1)[0], detail)
        return Tripped(detail)
    args = {
        "reason": REASON,
        "objective": need["text"],
        "completed_steps": [f"{t.agent} answered the user's other request"],
        "constraints": [f"leave this to {n['route']} (it follows you): {n['text']}" for n in rest],
        "reply_to_user": answered.text or None,
    }
    payload = validated(r, t.agent, need["route"], args)
    payload, added = with_entities(k, r, payload)
    payload = await summarised(k, r, k.plans[t.agent], t, payload)
    # the state changes after the step's last await, as everywhere in the kernel
    set_pending(k, r, rest, t.agent, REASON)
    return HandedOff(recorded(k, r, t.agent, payload, added))
