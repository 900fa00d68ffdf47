"""What a Baton hand-off and a run's outcome look like on the A2A wire (`a2a-sdk` types).

Both ends of Baton's A2A use this module: `RemoteAgent` (the client) writes a hand-off as a
message and reads the remote task back; `baton a2a serve` (the server) reads the message and
writes the run's outcome. Anything else that speaks A2A sees a plain conversation:

- the message (role user) has a **text part** — what the remote agent is asked, the user's
  words — and, when the baton is handed over, a **data part** whose media type is
  `HANDOFF_MEDIA_TYPE` holding the validated `HandoffPayload` as JSON;
- the message's metadata carries the W3C trace context (`traceparent`), so one trace spans
  both processes;
- the answer is the task: its state, its status message (the question of an `input-required`
  task, the error of a failed one) and its artifacts, whose text parts are the answer and
  whose data part of media type `RESULT_MEDIA_TYPE` is the Baton run's outcome (status,
  holder, path, state with secrets masked).

Everything read here is data from another system: a payload read back is validated but never
trusted (its state is the sender's claim), and nothing in a reply can move a baton, decide
an approval or change a budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from a2a.types import Artifact, Message, Part, Role, Task, TaskState
from google.protobuf import json_format, struct_pb2
from pydantic import ValidationError

from baton.core.errors import BatonError
from baton.core.payload import HandoffPayload
from baton.core.text import clean_text, clean_value

HANDOFF_MEDIA_TYPE = "application/vnd.baton.handoff+json"
"""Media type of the data part that carries a `HandoffPayload`."""
RESULT_MEDIA_TYPE = "application/vnd.baton.result+json"
"""Media type of the data part that carries a Baton run's outcome."""

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")

STATES: dict[int, str] = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
"""A2A task states by the names the protocol's documents use."""

TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
"""States after which a task takes no more messages."""


class WireError(BatonError):
    """An A2A message or task that does not have the shape this module reads."""


def to_value(data: Any) -> struct_pb2.Value:
    """JSON data as a protobuf `Value` (what a data part holds). Lone surrogates, which a
    model's JSON can carry and protobuf's UTF-8 cannot, become U+FFFD."""
    return json_format.ParseDict(clean_value(data), struct_pb2.Value())


def from_value(value: struct_pb2.Value) -> Any:
    """A protobuf `Value` as JSON data. Numbers come back as floats (protobuf has no int)."""
    return json_format.MessageToDict(value)


def metadata_of(message: Message | Task | Artifact | Part) -> dict[str, Any]:
    """A message's, task's, artifact's or part's metadata as a dict."""
    return json_format.MessageToDict(message.metadata) if message.HasField("metadata") else {}


def traceparent_of(trace_id: str) -> str | None:
    """A `traceparent` (new span id) for a run's W3C trace id; None for one that is not."""
    if re.fullmatch(r"[0-9a-f]{32}", trace_id) and set(trace_id) != {"0"}:
        import secrets

        return f"00-{trace_id}-{secrets.token_hex(8)}-01"
    return None


def trace_id_of(traceparent: Any) -> str | None:
    """The W3C trace id of a `traceparent` value, or None (absent or malformed: the run
    then starts a trace of its own)."""
    if not isinstance(traceparent, str):
        return None
    found = _TRACEPARENT.fullmatch(traceparent.strip())
    if found is None or set(found.group(1)) == {"0"} or set(found.group(2)) == {"0"}:
        return None
    return found.group(1)


def handoff_message(
    text: str,
    *,
    message_id: str,
    context_id: str,
    payload: HandoffPayload | None = None,
    task_id: str | None = None,
    trace_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    """The message that asks a remote agent: `text` (the user's words), the hand-off
    `payload` as a data part when the baton is handed over, and the trace context.

    `message_id` should be stable across retries of one request (the remote may use it to
    answer a repeated request once); `context_id` names the conversation, so later messages
    of the same session continue it; `task_id` continues a task waiting for input."""
    parts = [Part(text=clean_text(text))]
    if payload is not None:
        parts.append(Part(data=to_value(payload.model_dump()), media_type=HANDOFF_MEDIA_TYPE))
    meta = dict(metadata or {})
    if trace_id is not None and (traceparent := traceparent_of(trace_id)) is not None:
        meta["traceparent"] = traceparent
    return Message(
        message_id=message_id,
        context_id=context_id,
        task_id=task_id or "",
        role=Role.ROLE_USER,
        parts=parts,
        metadata=clean_value(meta) or None,
    )


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message as `baton a2a serve` reads it."""

    text: str
    """Its text parts, joined by blank lines."""
    payload: HandoffPayload | None
    """The hand-off it carries, validated; None when it carries none."""
    trace_id: str | None
    """The W3C trace id of its `traceparent` metadata, if it has a valid one."""
    data: list[Any] = field(default_factory=list)
    """Its other data parts, as JSON data."""


def read_message(message: Message) -> Incoming:
    """Read a message: its text, its hand-off payload and its trace. Raises `WireError`
    naming what is wrong when a hand-off part is not a valid `HandoffPayload`."""
    texts: list[str] = []
    payload: HandoffPayload | None = None
    data: list[Any] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            value = from_value(part.data)
            if part.media_type == HANDOFF_MEDIA_TYPE:
                if payload is not None:
                    raise WireError("the message carries two hand-off parts; send one")
                payload = _payload(value)
            else:
                data.append(value)
    meta = metadata_of(message)
    return Incoming(
        text="\n\n".join(t for t in texts if t.strip()),
        payload=payload,
        trace_id=trace_id_of(meta.get("traceparent")),
        data=data,
    )


def _payload(value: Any) -> HandoffPayload:
    if not isinstance(value, dict):
        raise WireError(
            f"the hand-off part ({HANDOFF_MEDIA_TYPE}) must hold a JSON object, got "
            f"{type(value).__name__}"
        )
    hop = value.get("hop")
    if isinstance(hop, float) and hop.is_integer():  # protobuf numbers are doubles
        value = {**value, "hop": int(hop)}
    try:
        return HandoffPayload.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise WireError(f"the hand-off part is not a valid HandoffPayload: {problems}") from None


def result_artifact(text: str, outcome: dict[str, Any], *, artifact_id: str) -> Artifact:
    """The artifact of a finished run: the answer's text and the run's outcome as data."""
    parts = [Part(text=clean_text(text))] if text else []
    parts.append(Part(data=to_value(outcome), media_type=RESULT_MEDIA_TYPE))
    return Artifact(artifact_id=artifact_id, name="answer", parts=parts)


@dataclass(frozen=True, slots=True)
class Reply:
    """A remote task as the client reads it."""

    state: str
    """The task's state (`STATES`' names: completed, input-required, failed, ...)."""
    text: str
    """The answer (the artifacts' text parts), or the status message's text (the question
    of an input-required task, the error of a failed one)."""
    task_id: str
    context_id: str
    outcome: dict[str, Any] = field(default_factory=dict)
    """The Baton run's outcome when the remote is a Baton team (`RESULT_MEDIA_TYPE`)."""
    data: list[Any] = field(default_factory=list)
    """The other data parts of its artifacts and status message."""


def read_task(task: Task) -> Reply:
    """Read a task: its state, the text to show and any data it returned."""
    texts: list[str] = []
    outcome: dict[str, Any] = {}
    data: list[Any] = []
    for artifact in task.artifacts:
        _read_parts(artifact.parts, texts, data, outcome)
    status_texts: list[str] = []
    if task.status.HasField("message"):
        _read_parts(task.status.message.parts, status_texts, data, outcome)
    state = STATES.get(task.status.state, "unknown")
    text = "\n\n".join(t for t in texts if t.strip())
    if not text or state != "completed":
        text = "\n\n".join(t for t in status_texts if t.strip()) or text
    return Reply(state, text, task.id, task.context_id, outcome, data)


def read_reply_message(message: Message) -> Reply:
    """A remote that answers with a message instead of a task: a completed reply."""
    texts: list[str] = []
    outcome: dict[str, Any] = {}
    data: list[Any] = []
    _read_parts(message.parts, texts, data, outcome)
    text = "\n\n".join(t for t in texts if t.strip())
    return Reply("completed", text, message.task_id, message.context_id, outcome, data)


def _read_parts(parts: Any, texts: list[str], data: list[Any], outcome: dict[str, Any]) -> None:
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            value = from_value(part.data)
            if part.media_type == RESULT_MEDIA_TYPE and isinstance(value, dict):
                outcome.update(value)
            else:
                data.append(value)
