"""Pending intents: the user's other needs, handed on once the holder answers.

A request with several needs ("the invoice is wrong, and the keyboard is broken") goes to the
first need's agent (`Team(multi_intent=True)`, `baton.routing.intents`); the others wait, in
the user's order, in the session's control slot `pending_intents` (`[{"route", "text"}]`,
`baton.runtime.control`), so a checkpoint and the session keep them. Only the router's own
split of a new request writes the slot, and only with routes the router has: no hand-off
state, tool result or text the user types can add a need or name its route. The holder reads
the needs in its view (answer only your part).

When it answers, the kernel hands the baton on to the next need: a call of its own (`kernel`
on the `PendingCall`, dispatched by kind, never by name) that goes through exactly the steps
of any hand-off the holder makes (`baton.runtime.handoffs.accept`): the holder must list the
need's agent in its `handoffs`, its `approve_handoffs` gate pauses the run for a person, the
loop guards and the duplicate lock apply. The hand-off is recorded with reason "pending
intent", objective the need in the user's words, the answer the user already got in
`reply_to_user`, the needs after it in `constraints`. An answer that asks the user something
(it ends in a question mark) does not hand on: the needs wait in the session until the holder
answers without asking. A need of the agent that answers counts as served. A need the holder
may not hand on (not among its hand-offs, refused by a person, stopped by a guard) escalates
with every waiting need on the card, so a person takes them up.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from baton.core.events import StateUpdated
from baton.core.messages import ToolCall
from baton.handoff import handoff_tool_name
from baton.runtime.calls import run_calls
from baton.runtime.control import PENDING, pending_needs
from baton.runtime.handoffs import accept
from baton.runtime.outcomes import Answered, HandedOff, Paused, TurnOutcome
from baton.runtime.state import PendingCall

if TYPE_CHECKING:
    from baton.runtime.calls import Handled
    from baton.runtime.kernel import Call, Kernel
    from baton.runtime.state import RunState, TurnState

REASON = "pending intent"
"""The reason of the kernel's hand-on to a pending need."""
KIND = "hand_on"
"""The call kind of the kernel's hand-on (one of `Runner.kinds`)."""


def set_pending(
    kernel: Kernel,
    run: RunState,
    needs: list[dict[str, str]],
    agent: str | None,
    source: str,
    cause: str | None = None,
) -> None:
    """Write the control slot (removed when `needs` is empty) and record it as a
    `state_updated`."""
    control = run.session.control
    if needs:
        if control.get(PENDING) == needs:
            return
        control[PENDING] = needs
    elif PENDING in control:
        del control[PENDING]
    else:
        return
    kernel.emit(
        run, StateUpdated(**run.base(agent), slots={PENDING: needs}, source=source, cause=cause)
    )


def asks_user(text: str) -> bool:
    """The answer ends in a question to the user (the holder is not done yet)."""
    return text.rstrip().endswith(("?", "？"))


def _left(kernel: Kernel, run: RunState, holder: str) -> list[dict[str, str]]:
    """The needs still to hand on: the holder's own are served by its answer; a route the
    router no longer has, or the team no longer runs, takes none."""
    router = kernel.policy.router
    routes = {route.name for route in router.routes} if router is not None else set()
    return [
        n
        for n in pending_needs(run.session)
        if n["route"] != holder and n["route"] in routes and n["route"] in kernel.plans
    ]


async def hand_on(kernel: Kernel, run: RunState, answered: Answered) -> TurnOutcome:
    """After the holder's answer: the answer itself when no need waits (or it asks the user
    something), else the kernel's hand-off to the next need's agent, as any hand-off goes: a
    `HandedOff`, a pause for approval, or a trip."""
    turn = run.turn
    assert turn is not None
    if run.parent is not None or not kernel.policy.multi_intent or not pending_needs(run.session):
        return answered  # (a worker's sub-run never hands on the user's needs)
    left = _left(kernel, run, turn.agent)
    if not left or asks_user(answered.text):
        set_pending(kernel, run, left, turn.agent, REASON)
        return answered
    turn.calls = [_call(run, turn, left, answered.text)]
    ended = await run_calls(kernel, run, kernel.plans[turn.agent], turn)
    assert ended is not None  # `hand_on_call` ends the turn whatever happens
    return ended


def _call(run: RunState, turn: TurnState, left: list[dict[str, str]], reply: str) -> PendingCall:
    """The kernel's hand-off call to the first of `left`, with its idempotency key."""
    need, rest = left[0], left[1:]
    args = {
        "reason": REASON,
        "objective": need["text"],
        "completed_steps": [f"{turn.agent} answered the user's other request"],
        "constraints": [f"leave this to {n['route']} (it follows you): {n['text']}" for n in rest],
        "reply_to_user": reply or None,
    }
    key = f"{run.run_id}:{turn.index}:{turn.steps}"
    turn.steps += 1
    call = ToolCall(
        id=f"hand_on_{key}",
        name=handoff_tool_name(need["route"]),
        arguments=json.dumps(args, ensure_ascii=False),
    )
    return PendingCall(call, args, None, key=key, kernel=True)


async def hand_on_call(kernel: Kernel, call: Call) -> Handled:
    """The kernel's hand-on: `accept`'s steps; whatever stops it escalates with the needs."""
    run, turn, target = call.run, call.turn, call.entry.target
    assert target is not None
    waiting = _left(kernel, run, turn.agent)
    names = "; ".join(f"{n['route']}: {n['text']!r}" for n in waiting)
    note = f"the user's other needs were not handed on: {names}"
    handled = await accept(kernel, call, target, back=False, note=note)
    if isinstance(handled, Paused):
        return handled
    content, effect = handled
    rest = [n for n in waiting if n["route"] != target]
    if isinstance(effect, HandedOff):
        set_pending(kernel, run, rest, turn.agent, REASON)
    else:  # a person takes them all up: the card names them
        set_pending(kernel, run, [], turn.agent, REASON)
    return content, effect
