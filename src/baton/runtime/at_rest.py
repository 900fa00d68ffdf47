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
arguments, the session's slots, payloads and cards. A turn decided in code (a conductor's:
graphs, pipelines, debates) keeps its calls and their results as they are, since it replays
them to decide again. A pending call whose arguments lost a value is marked
(`PendingCall.masked`); that call, and any call an argument of which is a mask as a whole (a
model copying `[REDACTED:password]` from a masked conversation), is never run with the
masked text (`lost_arguments`), but answered with `not_kept`, which tells the model to ask the
user again.

`Team(mask_at_rest=False)` keeps the stored transcript, slots and checkpoints in clear, for a
team that must keep the exact text (and protects the store by other means).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from baton.backends.base import SessionRecord, Store
from baton.core.messages import Message, ToolCall
from baton.core.nesting import too_deep
from baton.runtime.redact import Redactor
from baton.runtime.state import PendingCall, RunState, TurnState

if TYPE_CHECKING:
    from baton.runtime.plan import AgentPlan

V = TypeVar("V")


def masked_messages(red: Redactor, messages: list[Message]) -> list[Message]:
    """`messages` as the store keeps them (unchanged messages are the same objects)."""
    return [masked_message(red, m) for m in messages]


def masked_message(red: Redactor, message: Message) -> Message:
    """A copy of `message` with its text and tool-call arguments masked; `message` itself
    when nothing is."""
    content = red.redact_text(message.content) if message.content else message.content
    calls = message.tool_calls
    if calls:
        masked = [_masked_call(red, c) for c in calls]
        if any(a is not b for a, b in zip(masked, calls, strict=True)):
            calls = masked
    if content is message.content and calls is message.tool_calls:
        return message
    return dataclasses.replace(message, content=content, tool_calls=calls)


def _masked_call(red: Redactor, call: ToolCall) -> ToolCall:
    """Arguments are JSON: a value under a sensitive key (`"password": ...`, `"cvv": ...`) is
    replaced whole, and sensitive values anywhere in the text too."""
    text = call.arguments
    masked = red.redact_text(text)  # finds `"password": ...` too; clean text is returned as is
    as_text = call if masked is text else dataclasses.replace(call, arguments=masked)
    if masked is text and "\\" not in text:
        return call  # (a JSON escape, `"\\b..."`, can hide a value from the text rules)
    if too_deep(text):  # the parser refused it; it is never read back recursively
        return as_text
    try:
        args = json.loads(text)
    except ValueError:  # cut-off JSON from the model: keep it masked as text
        return as_text
    clean = red.redact_value(args)
    if clean is args:
        return as_text
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


def checkpoint_state(
    mask: Redactor | None, store: Store, state: RunState, plans: Mapping[str, AgentPlan]
) -> RunState:
    """The state a checkpoint hands `store`: `state` itself for a store in process memory, one
    that seals checkpoints, or with masking off; else a copy with its secrets masked (`plans`
    say which turns a conductor replays)."""
    if mask is None or not store.shared or getattr(store, "seals_checkpoints", False):
        return state
    return masked_state(mask, state, plans)


def masked_state(
    red: Redactor, run: RunState, plans: Mapping[str, AgentPlan] | None = None
) -> RunState:
    """A copy of `run` with its secrets masked (`run` is never changed; what holds none is
    shared). The calls and results of a turn whose plan in `plans` has a conductor are kept
    as they are: the conductor replays them."""
    session = masked_session(red, run.session)
    incoming = _value(red, session.incoming)
    if incoming is not session.incoming:  # a hand-off's payload: its state may hold a secret
        session = dataclasses.replace(session) if session is run.session else session
        session.incoming = incoming
    turn = run.turn
    return dataclasses.replace(
        run,
        session=session,
        message=red.redact_text(run.message),
        messages=_masked_run_messages(red, run),
        last_reply=_text(red, run.last_reply),
        handoffs=[red.redact_value(p) for p in run.handoffs],
        card=_value(red, run.card),
        approval=_value(red, run.approval),
        interrupt=_value(red, run.interrupt),
        turn=None if turn is None else _masked_turn(red, turn, plans),
    )


def _masked_run_messages(red: Redactor, run: RunState) -> list[Message]:
    """`run.messages` masked, each message once per run (`RunState.masked`): a run's
    messages never change once recorded, and masking all of them at every checkpoint made a
    long run's checkpoints cost more with every step."""
    done, messages = run.masked, run.messages
    n = len(done)
    if n > len(messages) or (n and done[-1][0] is not messages[n - 1]):
        done.clear()  # (another list of messages: a loaded run's, restored)
        n = 0
    done.extend((m, masked_message(red, m)) for m in messages[n:])
    return list(map(itemgetter(1), done))


def _masked_turn(
    red: Redactor, turn: TurnState, plans: Mapping[str, AgentPlan] | None
) -> TurnState:
    plan = plans.get(turn.agent) if plans is not None else None
    if plan is not None and plan.conductor is not None and not turn.fallback:
        # the conductor decides again from these calls and results: they must stay exact
        scratch, calls = turn.scratch, [_masked_sub(red, pc, plans) for pc in turn.calls]
    else:
        scratch = masked_messages(red, turn.scratch)
        calls = [_masked_pending(red, pc, plans) for pc in turn.calls]
    return dataclasses.replace(
        turn,
        incoming=_value(red, turn.incoming),
        accepted=_value(red, turn.accepted),
        view=masked_messages(red, turn.view),
        scratch=scratch,
        calls=calls,
    )


def _masked_sub(
    red: Redactor, pending: PendingCall, plans: Mapping[str, AgentPlan] | None
) -> PendingCall:
    """`pending` as it is, but the sub-run it delegated to (an agent's own turns) masked."""
    if pending.sub is None:
        return pending
    return dataclasses.replace(pending, sub=masked_state(red, pending.sub, plans))


def _masked_pending(
    red: Redactor, pending: PendingCall, plans: Mapping[str, AgentPlan] | None
) -> PendingCall:
    args = pending.args
    masked = _value(red, args)
    lost = list(pending.masked)
    if args is not None and masked is not args and pending.content is None and pending.sub is None:
        # the call may run when loaded again: it must know which values it does not have
        assert masked is not None
        lost += [k for k, v in args.items() if masked[k] is not v and k not in lost]
    return dataclasses.replace(
        pending,
        call=_masked_call(red, pending.call),
        args=masked,
        content=_text(red, pending.content),
        sub=None if pending.sub is None else masked_state(red, pending.sub, plans),
        masked=lost,
    )


def _text(red: Redactor, text: str | None) -> str | None:
    return red.redact_text(text) if text else text


def _value(red: Redactor, value: V) -> V:
    if value is None:
        return value
    masked: V = red.redact_value(value)
    return masked


def lost_arguments(red: Redactor | None, pending: PendingCall) -> list[str]:
    """The arguments of `pending` that hold a mask instead of their value: those a checkpoint
    masked (`PendingCall.masked`), and those whose whole value, or a whole string in it, is
    one of `red`'s masks (a text that merely quotes a mask, a note about the conversation,
    is an argument like any other). Empty for a call that may run."""
    lost = list(pending.masked)
    if red is not None and pending.args and _may_hold_mask(red.replacement, pending.call.arguments):
        rx = _mask_rx(red.replacement)
        lost += [k for k, v in pending.args.items() if k not in lost and _is_mask(rx, v)]
    return lost


def _may_hold_mask(replacement: str, arguments: str) -> bool:
    """False when the arguments' JSON text cannot hold a mask of this `replacement`: it lacks
    the text every mask starts with (most calls: decided without walking the arguments)."""
    head = _plain_head(replacement)
    return head is None or head in arguments


@lru_cache(maxsize=8)
def _plain_head(replacement: str) -> str | None:
    """What every mask starts with, when any JSON text writes it as it is (printable ASCII
    without a quote, a backslash or a slash, which a JSON writer may escape); None when the
    arguments must always be walked (no head, or one that may be written escaped)."""
    head = replacement.partition("{name}")[0]
    plain = head.isascii() and head.isprintable() and not any(c in head for c in '"\\/')
    return head if head and plain else None


@lru_cache(maxsize=8)
def _mask_rx(replacement: str) -> re.Pattern[str]:
    """What a whole mask of a redactor with this `replacement` looks like."""
    head, named, tail = replacement.partition("{name}")
    if not named:
        return re.compile(re.escape(replacement))
    return re.compile(rf"{re.escape(head)}\S{{1,64}}?{re.escape(tail)}")


def _is_mask(rx: re.Pattern[str], value: Any) -> bool:
    if isinstance(value, str):
        return rx.fullmatch(value.strip()) is not None
    if isinstance(value, dict):
        return any(_is_mask(rx, v) for v in value.values())
    if isinstance(value, list):
        return any(_is_mask(rx, v) for v in value)
    return False


def not_kept(pending: PendingCall, lost: list[str]) -> str:
    """What the model reads for a call whose arguments `lost` hold masks: why it did not run,
    and to ask the user again."""
    names = ", ".join(repr(n) for n in lost)
    return (
        f"not executed: the value given for {names} is a mask, not the secret itself: secrets "
        "are not kept in the stored conversation, nor while a run waits; ask the user for it "
        f"again, then call {pending.call.name} again with it"
    )
