"""Masking at rest: what the store keeps of a conversation has its secrets masked.

Events, payloads, cards and logs are redacted as they are made (`baton.runtime.redact`). The
transcript and the session's state slots are different: the live run needs the real text (a
password the user gives to the tool that resets it), so the run keeps it in memory and only
what is committed is masked: every message's text and tool-call arguments, and the session's
slots. The next run of the session reads the masked transcript.

A run's checkpoint keeps the live run while it is unfinished (a resumed run needs it) and is
deleted when it finishes. A store that seals checkpoints (`seals_checkpoints`: it was given
checkpoint keys, `baton.backends.sealing`) encrypts the live state; one that other processes
reach (`store.shared`) but cannot encrypt gets the state with its secrets masked
(`checkpoint_state`): messages, tool-call arguments and results, the pending calls'
arguments, the session's slots, payloads and cards. A pending call whose arguments lost a
value is marked (`PendingCall.masked`): loaded again, it is never run with the masked text,
but answered with `not_kept`, which tells the model to ask the user again.

`Team(mask_at_rest=False)` keeps the stored transcript, slots and checkpoints in clear, for a
team that must keep the exact text (and protects the store by other means).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TypeVar

from baton.backends.base import SessionRecord, Store
from baton.core.messages import Message, ToolCall
from baton.runtime.redact import Redactor
from baton.runtime.state import PendingCall, RunState, TurnState

V = TypeVar("V")


def masked_messages(red: Redactor, messages: list[Message]) -> list[Message]:
    """`messages` as the store keeps them (unchanged messages are the same objects)."""
    return [masked_message(red, m) for m in messages]


def masked_message(red: Redactor, m: Message) -> Message:
    """A copy of `m` with its text and tool-call arguments masked; `m` when nothing is."""
    content = red.redact_text(m.content) if m.content else m.content
    calls = m.tool_calls
    if calls:
        masked = [_masked_call(red, c) for c in calls]
        if any(a is not b for a, b in zip(masked, calls, strict=True)):
            calls = masked
    if content is m.content and calls is m.tool_calls:
        return m
    return dataclasses.replace(m, content=content, tool_calls=calls)


def _masked_call(red: Redactor, call: ToolCall) -> ToolCall:
    """Arguments are JSON: a value under a sensitive key (`"password": ...`, `"cvv": ...`) is
    replaced whole, and sensitive values anywhere in the text too."""
    text = call.arguments
    masked = red.redact_text(text)  # finds `"password": ...` too; clean text is returned as is
    if masked is text:
        return call
    try:
        args = json.loads(text)
    except ValueError:  # cut-off JSON from the model: keep it masked as text
        return dataclasses.replace(call, arguments=masked)
    clean = red.redact_value(args)
    if clean is args:
        return call
    return dataclasses.replace(call, arguments=json.dumps(clean, ensure_ascii=False))


def masked_session(red: Redactor, session: SessionRecord) -> SessionRecord:
    """The session as the store keeps it: `session` itself when its slots hold no secret,
    else a copy with them masked (the caller copies the new version back after the commit)."""
    state = red.redact_value(session.state)
    if state is session.state:
        return session
    out = dataclasses.replace(session)
    out.state = state
    return out


def checkpoint_state(mask: Redactor | None, store: Store, state: RunState) -> RunState:
    """The state a checkpoint hands `store`: `state` itself for a store in process memory, one
    that seals checkpoints, or with masking off; else a copy with its secrets masked."""
    if mask is None or not store.shared or getattr(store, "seals_checkpoints", False):
        return state
    return masked_state(mask, state)


def masked_state(red: Redactor, r: RunState) -> RunState:
    """A copy of `r` with its secrets masked (`r` is never changed; what holds none is
    shared)."""
    session = masked_session(red, r.session)
    incoming = _value(red, session.incoming)
    if incoming is not session.incoming:  # a hand-off's payload: its state may hold a secret
        session = dataclasses.replace(session) if session is r.session else session
        session.incoming = incoming
    turn = r.turn
    return dataclasses.replace(
        r,
        session=session,
        message=red.redact_text(r.message),
        messages=masked_messages(red, r.messages),
        last_reply=_text(red, r.last_reply),
        handoffs=[red.redact_value(p) for p in r.handoffs],
        card=_value(red, r.card),
        approval=_value(red, r.approval),
        interrupt=_value(red, r.interrupt),
        turn=None if turn is None else _masked_turn(red, turn),
    )


def _masked_turn(red: Redactor, t: TurnState) -> TurnState:
    return dataclasses.replace(
        t,
        incoming=_value(red, t.incoming),
        accepted=_value(red, t.accepted),
        view=masked_messages(red, t.view),
        scratch=masked_messages(red, t.scratch),
        calls=[_masked_pending(red, pc) for pc in t.calls],
    )


def _masked_pending(red: Redactor, pc: PendingCall) -> PendingCall:
    args = pc.args
    masked = _value(red, args)
    lost = list(pc.masked)
    if args is not None and masked is not args and pc.content is None and pc.sub is None:
        # the call may run when loaded again: it must know which values it does not have
        assert masked is not None
        lost += [k for k, v in args.items() if masked[k] is not v and k not in lost]
    return dataclasses.replace(
        pc,
        call=_masked_call(red, pc.call),
        args=masked,
        content=_text(red, pc.content),
        sub=None if pc.sub is None else masked_state(red, pc.sub),
        masked=lost,
    )


def _text(red: Redactor, text: str | None) -> str | None:
    return red.redact_text(text) if text else text


def _value(red: Redactor, value: V) -> V:
    if value is None:
        return value
    masked: V = red.redact_value(value)
    return masked


def not_kept(pc: PendingCall) -> str:
    """What the model reads for a call loaded from a masked checkpoint: why it did not run,
    and to ask the user again."""
    names = ", ".join(repr(n) for n in pc.masked)
    return (
        f"not executed: the value of {names} was a secret, and it was not kept while the run "
        "waited (the store keeps no secrets in clear); ask the user for it again, then call "
        f"{pc.call.name} again with it"
    )
