"""Masking at rest: what the store keeps of a conversation has its secrets masked.

Events, payloads, cards and logs are redacted as they are made (`baton.runtime.redact`). The
transcript and the session's state slots are different: the live run needs the real text (a
password the user gives to the tool that resets it), so the run keeps it in memory and only
what is committed is masked: every message's text and tool-call arguments, and the session's
slots. The next run of the session reads the masked transcript. A run's checkpoint keeps the
live text while the run is unfinished (a resumed run needs it) and is deleted when it finishes.

`Team(mask_at_rest=False)` keeps the stored transcript and slots in clear, for a team that
must keep the exact text (and protects the store by other means).
"""

from __future__ import annotations

import dataclasses
import json

from baton.backends.base import SessionRecord
from baton.core.messages import Message, ToolCall
from baton.core.nesting import too_deep
from baton.runtime.redact import Redactor


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
    if too_deep(text):  # the parser refused it; it is never read back recursively
        return dataclasses.replace(call, arguments=masked)
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
