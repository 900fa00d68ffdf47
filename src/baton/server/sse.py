"""Server-sent events: the wire format, and the response that carries them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

from baton.core.events import Event

MEDIA_TYPE = "text/event-stream"

EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event: `event` names it, `data` is one line of JSON.",
    "properties": {
        "event": {"type": "string", "description": "The event's type, `result`, `error` or `end`."},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "id": {"type": "string", "description": "The event's id (session event streams)."},
    },
    "required": ["event", "data"],
}
"""The OpenAPI schema of each message of an event stream."""

PING = b": ping\n\n"
"""A keep-alive comment (clients ignore it; proxies see traffic)."""

PING_S = 15.0
"""Seconds of silence after which a stream sends `PING`."""


def message(event: str, data: Any, *, id: str | None = None) -> bytes:
    """One SSE message: `id:` (optional), `event:`, one `data:` line of JSON, a blank line.
    JSON text never holds a raw newline, so `data` is always one line."""
    head = f"id: {_field(id)}\n" if id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{head}event: {_field(event)}\ndata: {body}\n\n".encode()


def event_message(event: Event, *, with_id: bool = False) -> bytes:
    """The SSE message of a Baton event: its `type` as the name, its JSON as the data."""
    return message(event.type, event.model_dump(mode="json"), id=event.id if with_id else None)


def _field(value: str) -> str:
    """A value safe on an SSE field line (no line breaks)."""
    return value.replace("\r", " ").replace("\n", " ")


def stream(messages: AsyncIterator[bytes]) -> StreamingResponse:
    """The HTTP response of an SSE stream (not cached, not buffered by proxies)."""
    return StreamingResponse(
        messages,
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
